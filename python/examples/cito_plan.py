"""CITO from Python: the walk of scenes/cito_walk.ron (0.3 m in 1 s, no contact schedule) with
the relaxed sensitivity, the cost printed per iteration, the planned base x and the torque
norm plotted.

    python3 python/examples/cito_plan.py [out.png]
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
    scene = cl.Scene.load(ROOT / "scenes/cito_walk.ron")
    settings = scene.cito_settings()
    sim = scene.settled(settings["settle"])

    def progress(iteration, cost):
        if iteration % 20 == 0:
            print(f"  iteration {iteration:3d}  cost {cost:.3f}")

    summary, xs, us = cl.cito.solve(sim, settings, callback=progress)
    print(f"{summary['status']}: pose error {1e3 * summary['pose_error_m']:.1f} mm, "
          f"footfalls {summary['footfalls']}")
    t = np.arange(len(xs)) * settings["knot_dt"]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    ax1.plot(t, xs[:, 0] - xs[0, 0])
    ax1.axhline(settings["target_offset"][0], ls="--", c="k")
    ax1.set_ylabel("base x from the start (m)")
    ax2.plot(t, np.linalg.norm(us, axis=1).tolist() + [np.nan])
    ax2.set_ylabel("|torque| (N m)")
    ax2.set_xlabel("t (s)")
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cito_plan.png")
