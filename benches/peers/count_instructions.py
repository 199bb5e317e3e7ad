"""Instructions executed per call (valgrind's callgrind) of ContactLab's step and transition
Jacobians and of MuJoCo's `mj_step` and `mjd_transitionFD`, on the same standing quadruped as
`mujoco_same_robot.py` (issue 21), and of the RNEA derivatives, ours and Pinocchio's
`computeRNEADerivatives` on the same URDF. Unlike the wall clock of this shared machine, an instruction
count does not drift with the load: the same code on the same input executes the same
instructions. It is not time (instructions per cycle differ between codes), so it stands beside
the timed comparison, not in its place.

ContactLab: `examples/peer_rounds.rs --count N` runs N steps, then N relaxed and N exact
Jacobians, each batch in a function of its own, and callgrind counts one function per run
(`--toggle-collect`). MuJoCo: this script, run under callgrind as a worker, calls `mj_step` N
times from the settled state (restored before each call, outside the count), then
`mjd_transitionFD` forward N times, and callgrind counts inside `mj_step` or `mjd_transitionFD`
only (the Python loop around them is not counted); the settle's own `mj_step` calls are counted
in a run without the N calls and subtracted. Pinocchio (if installed, `pip install pin`): N calls
of `computeRNEADerivatives` at a random configuration, velocity and acceleration (seeded; the
count does not depend on the values), counted inside its C++ function
(`pinocchio::impl::computeRNEADerivatives`), not its Python binding; ours at the settled state
and its step's acceleration, forward kinematics included as in Pinocchio's.

    python3 benches/peers/count_instructions.py --bin target/release/examples/peer_rounds \
        --out docs/results/perf/instructions.json
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import mujoco_same_robot as peers  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
N = 200


PINOCCHIO_RNEA_DERIVATIVES = "*pinocchio::impl::computeRNEADerivatives<*"


def worker(kind, n):
    """Under callgrind: n calls of `mj_step`, `mjd_transitionFD` (forward, eps 1e-6) or
    Pinocchio's `computeRNEADerivatives`."""
    if kind == "computeRNEADerivatives":
        import pinocchio as pin

        model = pin.buildModelFromUrdf(str(ROOT / "assets/robots/quadruped.urdf"), pin.JointModelFreeFlyer())
        data = model.createData()
        np.random.seed(0)
        q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        v, a = np.random.randn(model.nv), np.random.randn(model.nv)
        for _ in range(n):
            pin.computeRNEADerivatives(model, data, q, v, a)
        return
    import mujoco

    m, d = peers.standing(mujoco, (ROOT / "assets/robots/quadruped.urdf").read_text())
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.zeros(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d, state, spec)
    nx = 2 * m.nv + m.na
    a, b = np.zeros((nx, nx)), np.zeros((nx, m.nu))
    for _ in range(n):
        mujoco.mj_setState(m, d, state, spec)
        if kind == "mj_step":
            mujoco.mj_step(m, d)
        else:
            mujoco.mjd_transitionFD(m, d, 1e-6, 0, a, b, None, None)


def callgrind(toggle, cmd):
    """Instructions callgrind collected inside `toggle` while running `cmd`."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg", f"--toggle-collect={toggle}", *cmd],
            capture_output=True,
            text=True,
            check=True,
        )
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", help="the built examples/peer_rounds binary")
    p.add_argument("--out", default=str(ROOT / "docs/results/perf/instructions.json"))
    p.add_argument("--worker", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return
    import mujoco

    ours = {
        name: callgrind(f"peer_rounds::{fn}", [args.bin, "--count", str(N)]) / N
        for name, fn in [
            ("step", "counted_steps"),
            ("jacobians_relaxed", "counted_relaxed"),
            ("jacobians_exact", "counted_exact"),
            ("rnea_derivatives", "counted_rnea_derivatives"),
        ]
    }
    # The worker's settle (1500 steps through `mj_step`) is counted too: a run with no calls
    # after it measures that, and the difference is the N calls.
    theirs = {
        kind: (
            callgrind(kind, [sys.executable, __file__, "--worker", kind, str(N)])
            - callgrind(kind, [sys.executable, __file__, "--worker", kind, "0"])
        )
        / N
        for kind in ["mj_step", "mjd_transitionFD"]
    }
    try:
        import pinocchio

        # Nothing before the N calls runs the counted function, so no run without them is
        # subtracted (MuJoCo's settle calls `mj_step`).
        kind = "computeRNEADerivatives"
        pin = {
            "version": pinocchio.__version__,
            kind: callgrind(PINOCCHIO_RNEA_DERIVATIVES, [sys.executable, __file__, "--worker", kind, str(N)]) / N,
        }
    except ImportError:
        pin = None
    result = {
        "robot": "contactlab_quadruped standing on 4 feet under a joint PD, flat ground mu 0.8, h = 2 ms",
        "tool": "valgrind --tool=callgrind (instructions executed per call)",
        "calls": N,
        "mujoco_version": mujoco.__version__,
        "contactlab": ours,
        "mujoco": {"mj_step": theirs["mj_step"], "mjd_transitionFD_forward": theirs["mjd_transitionFD"]},
        "pinocchio": pin,
        "ratios": {
            "step_ours_over_mj_step": ours["step"] / theirs["mj_step"],
            "jacobians_relaxed_over_our_step": ours["jacobians_relaxed"] / ours["step"],
            "mjd_transitionFD_forward_over_our_jacobians_relaxed": theirs["mjd_transitionFD"] / ours["jacobians_relaxed"],
            "rnea_derivatives_ours_over_pinocchio": None
            if pin is None
            else ours["rnea_derivatives"] / pin["computeRNEADerivatives"],
        },
        "machine": peers.stamp(),
    }
    peers.write(pathlib.Path(args.out), result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
