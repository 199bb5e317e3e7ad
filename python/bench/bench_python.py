"""Python against Rust, and ContactLab against MuJoCo, on the same robot in the same run.

The robot is ContactLab's quadruped (assets/robots/quadruped.urdf), settled on flat ground
(friction 0.8, 2 ms steps) under its scene's PD (scenes/quadruped_stand.ron). MuJoCo loads the
same URDF, made floating (a free joint on the trunk, with the trunk's inertia), with a floor of
the same friction, torque motors on the 12 joints and the same time step, from the same state.

Measured (medians over repeats, wall time, this machine as it is):
- ContactLab's step from Rust (Simulation.step_n: one Python call, n steps inside) and from
  Python (one Simulation.step() call per step): the difference is the binding's overhead;
- MuJoCo's mj_step called from Python per step;
- batch rollouts: 64 rollouts of 0.5 s (250 steps) under the torques that hold the stance,
  ContactLab's `rollout` (rayon on every core, GIL released) against `mujoco.rollout.rollout`
  with one MjData per core.

The two simulators do not compute the same thing (ContactLab: hard contact by an interior-point
solve per step; MuJoCo: soft contact, its default solver): this compares cost per step of
simulating the same robot doing the same thing, not the physics.

    python3 python/bench/bench_python.py docs/results/bench/python.json
"""

import json
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

import contactlab as cl

ROOT = pathlib.Path(__file__).resolve().parents[2]
URDF = ROOT / "assets/robots/quadruped.urdf"
N, T, REPEATS = 64, 250, 7


def timed(fn, repeats=REPEATS):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def mujoco_model(mujoco, friction, dt):
    """The URDF in MuJoCo, floating, with torque motors (benches/peers/mjmodels.py); MuJoCo's
    default Euler integrator, as this benchmark has always used."""
    sys.path.insert(0, str(ROOT / "benches/peers"))
    import mjmodels

    return mjmodels.floating(mujoco, URDF.read_text(), friction=friction, dt=dt, integrator="Euler")


def main(out):
    stand = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron").settled(1.0)
    model, q, v, u = stand.model, stand.q, stand.v, stand.u
    sim = cl.Simulation(model, q=q, v=v)
    sim.control = u
    steps = 2000

    def reset():
        sim.q, sim.v = q, v

    def rust_loop():
        reset()
        assert sim.step_n(steps) == steps

    def python_loop():
        reset()
        for _ in range(steps):
            sim.step()

    rust_step = timed(rust_loop) / steps
    python_step = timed(python_loop) / steps
    x0s = np.tile(np.concatenate([q, v]), (N, 1))
    us = np.tile(u, (N, T, 1))
    states, advanced = cl.rollout(model, x0s, us)
    assert np.all(advanced == T)
    batch = timed(lambda: cl.rollout(model, x0s, us))
    result = {
        "robot": "contactlab_quadruped (assets/robots/quadruped.urdf), standing, flat ground mu 0.8, dt 0.002 s",
        "contactlab_step_from_rust_us": 1e6 * rust_step,
        "contactlab_step_from_python_us": 1e6 * python_step,
        "python_overhead_per_step_us": 1e6 * (python_step - rust_step),
        "rollouts": N,
        "rollout_steps": T,
        "contactlab_batch_rollout_s": batch,
        "contactlab_batch_steps_per_s": N * T / batch,
        "contactlab_final_base_height_m": float(states[0, -1, 2]),
        "cores": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "python": platform.python_version(),
        "repeats": REPEATS,
    }
    try:
        import mujoco
        import mujoco.rollout
    except ImportError:
        mujoco = None
    if mujoco is not None:
        m = mujoco_model(mujoco, 0.8, 0.002)
        d = mujoco.MjData(m)
        names = [m.joint(j).name for j in range(1, m.njnt)]
        assert names == [n for n in names if n.endswith("_joint")] and len(names) == model.nu
        qpos = np.concatenate([q[:3], [q[6], q[3], q[4], q[5]], q[7:]])  # (x,y,z,w) -> (w,x,y,z)
        d.qpos[:], d.qvel[:] = qpos, 0.0
        d.ctrl[:] = u
        mujoco.mj_forward(m, d)
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        state0 = np.zeros(mujoco.mj_stateSize(m, spec))
        mujoco.mj_getState(m, d, state0, spec)

        def mj_loop():
            mujoco.mj_setState(m, d, state0, spec)
            for _ in range(steps):
                mujoco.mj_step(m, d)

        mj_step = timed(mj_loop) / steps
        datas = [mujoco.MjData(m) for _ in range(os.cpu_count())]
        controls = np.tile(u, (N, T, 1))
        initial = np.tile(state0, (N, 1))
        out_state, _ = mujoco.rollout.rollout(m, datas, initial, controls)
        mj_batch = timed(lambda: mujoco.rollout.rollout(m, datas, initial, controls))
        result.update({
            "mujoco": mujoco.__version__,
            "mujoco_step_from_python_us": 1e6 * mj_step,
            "mujoco_batch_rollout_s": mj_batch,
            "mujoco_batch_steps_per_s": N * T / mj_batch,
            "mujoco_final_base_height_m": float(out_state[0, -1, 1 + 2]),
        })
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    os.replace(tmp, out)
    print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "python_bench.json")
