"""The quadruped dropped flat from a range of heights with a downward velocity: the derivative
of the base's vertical velocity after one step with respect to its height, d v_z+ / d z, with
the exact and the relaxed sensitivity and by central differences, across the height at which the
feet touch down within the step. The exact derivative jumps where contact begins (it sees only
the contacts of the realized mode); the relaxed one anticipates the touchdown.

    python3 python/examples/jacobians_touchdown.py [out.png]
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
    stand = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron").settled(1.0)
    model, q0, u = stand.model, stand.q, stand.u
    nv = model.nv
    heights = np.linspace(-0.004, 0.006, 81)  # base height relative to the standing one (m)
    rows = {"exact": [], "relaxed": [], "central differences": []}
    for dz in heights:
        q = q0.copy()
        q[2] += dz
        v = np.zeros(nv)
        v[2] = -0.5  # falling at 0.5 m/s: 1 mm per 2 ms step
        sim = cl.Simulation(model, q=q, v=v)
        sim.control = u
        # Row nv + 2 of A is d v_z+; column 2 is the base's z in the tangent space (world z for
        # a level base).
        a, _, _ = cl.transition_jacobians(sim, sensitivity="exact")
        rows["exact"].append(a[nv + 2, 2])
        a, _, _ = cl.transition_jacobians(sim, sensitivity="relaxed", kappa=1e-3, delta=1e-2)
        rows["relaxed"].append(a[nv + 2, 2])
        a, _, _ = cl.fd_transition(sim, eps=1e-6)
        rows["central differences"].append(a[nv + 2, 2])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, values in rows.items():
        ax.plot(1e3 * heights, values, label=name, lw=2 if name != "central differences" else 1)
    ax.set_xlabel("base height relative to the stance (mm)")
    ax.set_ylabel("d v_z+ / d z (1/s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "jacobians_touchdown.png")
