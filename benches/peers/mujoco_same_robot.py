"""ContactLab against MuJoCo (and Pinocchio's rigid-body algorithms) on the same robots, in the
same run (issue 21). `scripts/bench-peers` runs ContactLab's criterion benches first and then
this script, which reads their medians from `CARGO_TARGET_DIR/criterion` and writes
`OUT/peers.json`, `OUT/scaling.json` and `OUT/scaling.png`.

Models (the same URDFs, through benches/peers/mjmodels.py):
- the quadruped standing on its four feet under a joint PD (kp 80, kd 6, posture thigh 0.8,
  calf -1.6; MuJoCo: position servos with kv, the implicitfast integrator), flat ground mu 0.8,
  h = 2 ms, settled for 3 s;
- the legged family (4, 6, 8, 10 legs; 18, 24, 30, 36 DoF) the same way;
- the plate on k = 1, 4, 8, 16, 32 contact points, settled for 1 s.

MuJoCo's times: `mj_step` through `mujoco.rollout` on one thread (no Python call per step),
`mjd_transitionFD` forward and centered (eps 1e-6), and 64 rollouts of 0.5 s on 1 and 2 threads.
Pinocchio (if installed, `pip install pin`): rnea, crba, aba and the ABA derivatives on the same
URDF, each called from Python (its binding's per-call cost included). ContactLab's times are
criterion medians; the physics differ (hard contact by an interior-point solve against MuJoCo's
soft convex contact), so this compares the cost of simulating the same robot in the same state.

    python3 benches/peers/mujoco_same_robot.py --criterion target/criterion --out docs/results/perf
"""

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import mjmodels  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
KP, KD = 80.0, 6.0
LEGS = [4, 6, 8, 10]
CONTACTS = [1, 4, 8, 16, 32]


def posture(name):
    return 0.8 if name.endswith("_thigh_joint") else -1.6 if name.endswith("_calf_joint") else 0.0


def ours(criterion, *path):
    """ContactLab's criterion median (us) of benchmark `path`, or None if it did not run."""
    f = pathlib.Path(criterion, *map(str, path), "new", "estimates.json")
    if not f.exists():
        return None
    return json.loads(f.read_text())["median"]["point_estimate"] / 1e3


def best_of(fn, repeats=7):
    """Median wall time of `fn()` over `repeats` calls (s)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def standing(mujoco, urdf_text):
    m = mjmodels.floating(mujoco, urdf_text, pd=(KP, KD))
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    d.qpos[2] = 0.33
    for j in range(1, m.njnt):
        d.qpos[m.jnt_qposadr[j]] = posture(m.joint(j).name)
    for a in range(m.nu):
        d.ctrl[a] = posture(m.joint(m.actuator_trnid[a, 0]).name)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    return m, d


def settled_plate(mujoco, k):
    m = mjmodels.plate(mujoco, mjmodels.plate_points(k))
    d = mujoco.MjData(m)
    for _ in range(500):
        mujoco.mj_step(m, d)
    return m, d


def mj_times(mujoco, m, d, steps=2000, rollouts=False):
    """Per-step time through a one-thread rollout, the transitionFD times, and the contacts."""
    import mujoco.rollout as mr

    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.zeros(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d, state, spec)
    ctrl = np.tile(d.ctrl.copy(), (1, steps, 1))
    one = [mujoco.MjData(m)]
    step = best_of(lambda: mr.rollout(m, one, state[None, :], ctrl)) / steps
    nx, nu = 2 * m.nv + m.na, m.nu
    a, b = np.zeros((nx, nx)), np.zeros((nx, nu))
    work = mujoco.MjData(m)
    mujoco.mj_setState(m, work, state, spec)
    work.ctrl[:] = d.ctrl

    def fd(centered):
        return lambda: [mujoco.mjd_transitionFD(m, work, 1e-6, centered, a, b, None, None) for _ in range(20)]

    out = {
        "nv": int(m.nv),
        "contacts": int(d.ncon),
        "mj_step_us": 1e6 * step,
        "mjd_transitionFD_forward_us": 1e6 * best_of(fd(0)) / 20,
        "mjd_transitionFD_centered_us": 1e6 * best_of(fd(1)) / 20,
    }
    if rollouts:
        out.update(rollout_rates(mujoco, m, d, state))
    return out


def rollout_rates(mujoco, m, d, state):
    """Steps per second of 64 rollouts of 250 steps from `state` (full physics) with small
    pushes, under `d`'s controls, on 1 and 2 threads."""
    import mujoco.rollout as mr

    n, t = 64, 250
    starts = np.tile(state, (n, 1))
    starts[:, 1 + m.nq] += 1e-3 * np.arange(n)  # the same small pushes as benches/scaling.rs
    controls = np.tile(d.ctrl.copy(), (n, t, 1))
    out = {}
    for threads in (1, 2):
        datas = [mujoco.MjData(m) for _ in range(threads)]
        s = best_of(lambda: mr.rollout(m, datas, starts, controls), repeats=5)
        out[f"rollouts_64x250_{threads}_threads_steps_per_s"] = n * t / s
    return out


def pinocchio_times(urdf_path):
    try:
        import pinocchio as pin
    except ImportError:
        return None
    model = pin.buildModelFromUrdf(str(urdf_path), pin.JointModelFreeFlyer())
    data = model.createData()
    rng = np.random.default_rng(0)
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
    v, a, tau = (rng.uniform(-1, 1, model.nv) for _ in range(3))
    calls = 20000

    def per_call(fn):
        return 1e6 * best_of(lambda: [fn() for _ in range(calls)], repeats=5) / calls

    return {
        "version": pin.__version__,
        "rnea_us": per_call(lambda: pin.rnea(model, data, q, v, a)),
        "crba_us": per_call(lambda: pin.crba(model, data, q)),
        "aba_us": per_call(lambda: pin.aba(model, data, q, v, tau)),
        "rnea_derivatives_us": per_call(lambda: pin.computeRNEADerivatives(model, data, q, v, a)),
        "aba_derivatives_us": per_call(lambda: pin.computeABADerivatives(model, data, q, v, tau)),
        "note": "called from Python: each time includes the binding's per-call cost",
    }


def stamp():
    def git(*a):
        try:
            return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True, check=True).stdout.strip()
        except Exception:
            return "unknown"

    cpu = next(
        (l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
        platform.processor(),
    ) if os.path.exists("/proc/cpuinfo") else platform.processor()
    return {
        "git_revision": git("rev-parse", "HEAD"),
        "host": platform.node(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
    }


def write(path, value):
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


def plot(scaling, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, xlabel in [(axes[0], "contacts", "active contacts (plate, 6 DoF)"), (axes[1], "dof", "degrees of freedom (legged family)")]:
        rows = scaling[key]
        x = [r["x"] for r in rows]
        for series, label, style in [
            ("contactlab_step_us", "ContactLab step", "o-"),
            ("contactlab_jacobians_relaxed_us", "ContactLab A, B (relaxed)", "s-"),
            ("mj_step_us", "MuJoCo mj_step", "o--"),
            ("mjd_transitionFD_forward_us", "MuJoCo transitionFD (forward)", "s--"),
        ]:
            y = [r.get(series) for r in rows]
            if all(v is not None for v in y):
                ax.plot(x, y, style, label=label)
        ax.set_xscale("log" if key == "contacts" else "linear")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("microseconds (median)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Cost against contacts and DoF, same models, same run")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--criterion", default=str(ROOT / "target/criterion"))
    p.add_argument("--out", default=str(ROOT / "docs/results/perf"))
    args = p.parse_args()
    import mujoco

    import contactlab as cl

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    c = args.criterion
    m, d = standing(mujoco, cl.builtin_urdf("quadruped"))
    mj = mj_times(mujoco, m, d, rollouts=True)
    our = {
        "step_us": ours(c, "quadruped", "step_standing_4_contacts"),
        "jacobians_relaxed_us": ours(c, "quadruped_transition", "analytic_relaxed"),
        "jacobians_exact_us": ours(c, "quadruped_transition", "analytic_exact"),
        "fd_transition_us": ours(c, "quadruped_transition", "baseline_fd_transition"),
        "ddp_iteration_30_knots_us": ours(c, "ddp_iteration_quadruped_30_knots"),
        "ddp_iteration_30_knots_2_threads_us": ours(c, "ddp_iteration_quadruped_30_knots_2_threads"),
        "rnea_us": ours(c, "quadruped", "rnea"),
        "crba_us": ours(c, "quadruped", "crba"),
        "aba_us": ours(c, "quadruped", "aba"),
        "rnea_derivatives_us": ours(c, "quadruped_derivatives", "rnea_derivatives"),
        "aba_derivatives_us": ours(c, "quadruped_derivatives", "aba_derivatives"),
    }
    for threads in (1, 2):
        t = ours(c, "batch_rollouts_64x250", "threads", threads)
        our[f"rollouts_64x250_{threads}_threads_steps_per_s"] = None if t is None else 64 * 250 / (t * 1e-6)

    def ratio(a, b):
        return None if a is None or b is None else a / b

    r1, r2 = our["rollouts_64x250_1_threads_steps_per_s"], our["rollouts_64x250_2_threads_steps_per_s"]
    ratios = {
        "step_ours_over_mj_step": ratio(our["step_us"], mj["mj_step_us"]),
        "jacobians_relaxed_over_our_step": ratio(our["jacobians_relaxed_us"], our["step_us"]),
        "mjd_transitionFD_forward_over_our_jacobians_relaxed": ratio(mj["mjd_transitionFD_forward_us"], our["jacobians_relaxed_us"]),
        "ddp_iteration_30_knots_ms": None if our["ddp_iteration_30_knots_us"] is None else our["ddp_iteration_30_knots_us"] / 1e3,
        "ddp_iteration_30_knots_2_threads_ms": None
        if our["ddp_iteration_30_knots_2_threads_us"] is None
        else our["ddp_iteration_30_knots_2_threads_us"] / 1e3,
        "our_rollouts_2_threads_over_1": ratio(r2, r1),
        "mujoco_rollouts_2_threads_over_1": ratio(mj["rollouts_64x250_2_threads_steps_per_s"], mj["rollouts_64x250_1_threads_steps_per_s"]),
    }
    peers = {
        "robot": "contactlab_quadruped standing on 4 feet under a joint PD, flat ground mu 0.8, h = 2 ms",
        "contactlab": our,
        "mujoco": {"version": mujoco.__version__, **mj},
        "pinocchio": pinocchio_times(ROOT / "assets/robots/quadruped.urdf"),
        "ratios": ratios,
        "machine": stamp(),
    }
    scaling = {"contacts": [], "dof": [], "machine": peers["machine"]}
    for k in CONTACTS:
        row = {"x": k, **mj_times(mujoco, *settled_plate(mujoco, k))}
        row["contactlab_step_us"] = ours(c, "scaling_contacts", "step", k)
        row["contactlab_jacobians_relaxed_us"] = ours(c, "scaling_contacts", "jacobians_relaxed", k)
        scaling["contacts"].append(row)
    for legs in LEGS:
        mm, dd = standing(mujoco, cl.builtin_urdf(f"legged{legs}"))
        row = {"x": 6 + 3 * legs, "legs": legs, **mj_times(mujoco, mm, dd)}
        row["contactlab_step_us"] = ours(c, "scaling_dof", "step", 6 + 3 * legs)
        row["contactlab_jacobians_relaxed_us"] = ours(c, "scaling_dof", "jacobians_relaxed", 6 + 3 * legs)
        scaling["dof"].append(row)
    write(out / "peers.json", peers)
    write(out / "scaling.json", scaling)
    plot(scaling, out / "scaling.png")
    print(json.dumps({"ratios": ratios, "contactlab": our, "mujoco": peers["mujoco"]}, indent=2))


if __name__ == "__main__":
    main()
