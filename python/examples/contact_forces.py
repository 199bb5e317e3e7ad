"""Settle the quadruped of scenes/quadruped_stand.ron and plot each foot's normal impulse and
gap over the first second (the touchdown and the settling).

    python3 python/examples/contact_forces.py [out.png]
"""

import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import contactlab as cl  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main(out):
    sim = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron").simulation()
    names = sim.model.contact_names[:4]
    t, impulse, gap = [], [], []
    for _ in range(500):
        status = sim.step()
        if status not in ("Ok", "SolverNotConverged"):
            raise RuntimeError(f"step failed at t = {sim.t:.3f} s: {status}")
        c = sim.contacts()
        t.append(sim.t)
        impulse.append(c["impulse"][:4, 0] / sim.dt)  # N s per step -> mean force (N)
        gap.append(c["gap"][:4])
    impulse, gap = np.array(impulse), np.array(gap)
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    for i, n in enumerate(names):
        ax1.plot(t, impulse[:, i], label=n)
        ax2.plot(t, 1e3 * gap[:, i], label=n)
    ax1.set_ylabel("normal force (N)")
    ax2.set_ylabel("gap (mm)")
    ax2.set_xlabel("t (s)")
    ax1.legend()
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}; final normal forces {np.round(impulse[-1], 1)} N, total weight "
          f"{impulse[-1].sum():.1f} N")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "contact_forces.png")
