"""The Python package against the Rust library it wraps: errors that name the file and field,
the simulation driven from Python, transition Jacobians against central differences of
Simulation.step, batch rollouts equal to single ones, and the GIL released while they run."""

import json
import pathlib
import threading
import time

import numpy as np
import pytest

import contactlab as cl

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


def test_models_and_their_errors():
    m = cl.Model.builtin("quadruped")
    assert (m.nq, m.nv, m.nu) == (19, 18, 12)
    assert m.contact_names[:4] == ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
    assert m.neutral().shape == (19,)
    with pytest.raises(ValueError, match="unknown builtin"):
        cl.Model.builtin("dog")
    go1 = cl.Model.from_urdf(SHARED / "fixtures/rbd/urdf/go1.urdf")
    assert go1.nv == 18
    with pytest.raises(ValueError, match="no_such.urdf"):
        cl.Model.from_urdf(ROOT / "no_such.urdf")


def test_a_bad_scene_names_the_file_and_the_field(tmp_path):
    text = (ROOT / "scenes/quadruped_stand.ron").read_text().replace("dt: 0.002", "dt: -1.0")
    bad = tmp_path / "bad_scene.ron"
    bad.write_text(text)
    with pytest.raises(ValueError) as e:
        cl.Scene.load(bad)
    assert "bad_scene.ron" in str(e.value) and "dt" in str(e.value)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "dt: -1.0" in l)
    assert f":{line}:" in str(e.value), str(e.value)


def stance():
    """The quadruped settled on its four feet under its scene's PD, and the torque that PD
    applied in its last step."""
    sim = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron").settled(1.0)
    return sim.model, sim.q, sim.v, sim.u


def test_the_scene_simulation_steps_and_reports_its_contacts():
    sim = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron").simulation()
    q0, v0 = sim.q, sim.v
    assert sim.step_n(500) == 500
    assert abs(sim.t - 1.0) < 1e-9
    c = sim.contacts()
    k = len(sim.model.contact_names)
    assert c["gap"].shape == (k,) and c["impulse"].shape == (k, 3) and len(c["mode"]) == k
    feet = c["impulse"][:4, 0]
    assert np.all(feet > 0), feet  # standing: every foot carries weight
    assert c["mode"][:4] == ["Sticking"] * 4
    sim.reset()
    assert sim.t == 0.0 and np.array_equal(sim.q, q0) and np.array_equal(sim.v, v0)


def central_difference(sim, q, v, u, which, eps):
    """d v+ / d(which) by central differences of Simulation.step from Python; `which` is
    "u" or "v" (both plain vectors, so no tangent-space arithmetic is needed)."""
    n = len(u) if which == "u" else len(v)
    cols = []
    for j in range(n):
        out = []
        for s in (+1.0, -1.0):
            du = np.zeros(n)
            du[j] = s * eps
            sim.q = q  # the setters forget the warm start: a cold step, as the Jacobians take
            sim.v = v + du if which == "v" else v
            sim.control = u + du if which == "u" else u
            assert sim.step() == "Ok"
            out.append(sim.v)
        cols.append((out[0] - out[1]) / (2 * eps))
    return np.array(cols).T


def test_exact_jacobians_match_central_differences_in_stance():
    model, q, v, u = stance()
    sim = cl.Simulation(model, q=q, v=v)
    sim.control = u
    a, b, info = cl.transition_jacobians(sim, sensitivity="exact")
    nv = model.nv
    assert info["status"] == "Ok" and a.shape == (2 * nv, 2 * nv) and b.shape == (2 * nv, model.nu)
    fd_b = central_difference(sim, q, v, u, "u", 1e-6)
    fd_a = central_difference(sim, q, v, u, "v", 1e-7)
    scale_b, scale_a = np.abs(fd_b).max(), np.abs(fd_a).max()
    assert np.abs(b[nv:, :] - fd_b).max() < 1e-4 * scale_b
    assert np.abs(a[nv:, nv:] - fd_a).max() < 1e-4 * scale_a
    # The whole of A and B (base rotation included, through the tangent space) against the
    # library's own central differences.
    fa_full, fb_full, status = cl.fd_transition(sim)
    assert status == "Ok"
    assert np.abs(a - fa_full).max() < 1e-4 * np.abs(fa_full).max()
    assert np.abs(b - fb_full).max() < 1e-4 * np.abs(fb_full).max()
    # The relaxed sensitivity is a different (smoothed) derivative, not a copy of the exact one.
    ar, br, _ = cl.transition_jacobians(sim, sensitivity="relaxed", kappa=1e-2, delta=1e-2)
    assert np.abs(br - b).max() > 1e-3 * scale_b
    with pytest.raises(ValueError, match="unknown sensitivity"):
        cl.transition_jacobians(sim, sensitivity="smooth")


def perturbed_batch(seed, n, t):
    """`n` starts around the stance (velocity noise) and `t` steps of torques around its hold."""
    model, q, v, u = stance()
    rng = np.random.default_rng(seed)
    x0s = np.tile(np.concatenate([q, v]), (n, 1))
    x0s[:, model.nq :] += rng.uniform(-0.05, 0.05, (n, model.nv))
    us = u + rng.uniform(-2.0, 2.0, (n, t, model.nu))
    return model, q, v, u, x0s, us


def test_a_batch_rollout_equals_single_rollouts_and_python_stepping():
    n, t = 64, 25
    model, q, v, u, x0s, us = perturbed_batch(0, n, t)
    states, steps = cl.rollout(model, x0s, us)
    assert states.shape == (n, t + 1, model.nq + model.nv) and np.all(steps == t)
    for i in range(n):
        single, _ = cl.rollout(model, x0s[i : i + 1], us[i : i + 1])
        assert np.array_equal(single[0], states[i])
    # The same as stepping a Simulation from Python, cold at every step.
    sim = cl.Simulation(model)
    x = x0s[3]
    for k in range(t):
        sim.q, sim.v, sim.control = x[: model.nq], x[model.nq :], us[3, k]
        assert sim.step() == "Ok"
        x = np.concatenate([sim.q, sim.v])
        assert np.array_equal(x, states[3, k + 1])
    with pytest.raises(ValueError, match="us: expected shape"):
        cl.rollout(model, x0s, us[:, :, :5])


def test_the_gil_is_released_during_a_batch_rollout():
    model, q, v, u = stance()
    n, t = 4, 3000
    x0s = np.tile(np.concatenate([q, v]), (n, 1))
    us = np.tile(u, (n, t, 1))
    started, done = threading.Event(), threading.Event()
    window = {}

    def work():
        started.set()
        t0 = time.perf_counter()
        cl.rollout(model, x0s, us)
        window["rollout"] = (t0, time.perf_counter())
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    started.wait()
    stamps = []
    while not done.is_set():
        stamps.append(time.perf_counter())  # Python runs here only while the GIL is free
    worker.join()
    t0, t1 = window["rollout"]
    inside = [s for s in stamps if t0 <= s <= t1]
    gaps = np.diff([t0] + inside + [t1])
    # Held for the whole rollout, the main thread would stall for all of it (one gap of t1 - t0);
    # released, it runs throughout, with gaps of at most a few switch intervals.
    assert t1 - t0 > 0.05 and gaps.max() < 0.25 * (t1 - t0), (t1 - t0, gaps.max())


def test_the_gymnasium_env_passes_check_env_and_holds_the_stance_at_zero_action():
    pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    from contactlab.gym import QuadrupedEnv

    env = QuadrupedEnv(task="stand")
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape and obs.dtype == np.float64
    # Action zero is the scene's PD holding the nominal stance: the episode runs to its length.
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, _ = env.step(np.zeros(env.action_space.shape))
        assert np.isfinite(reward) and reward <= 0.0
        steps += 1
    assert truncated and not terminated and steps == env.max_episode_steps
    # A strided action is accepted like a packed one.
    env.reset(seed=3)
    packed = env.step(np.full(env.action_space.shape, 0.1))[0]
    env.reset(seed=3)
    strided = env.step(np.full(2 * env.action_space.shape[0], 0.1)[::2])[0]
    assert np.array_equal(packed, strided)
    # Seeds give episodes: the same seed the same start, another seed another.
    a, _ = env.reset(seed=1)
    b, _ = env.reset(seed=1)
    c, _ = env.reset(seed=2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="learn"):
        cl.TaskEnv(ROOT / "scenes/quadruped_stand.ron")


def test_cito_from_python_is_the_committed_rust_run_bit_for_bit():
    scene = cl.Scene.load(ROOT / "scenes/cito_raise.ron")
    settings = scene.cito_settings()
    assert settings["sensitivity"] == "relaxed" and settings["target_offset"] == [0.0, 0.0, 0.04]
    sim = scene.settled(settings["settle"])
    costs = []
    summary, xs, us = cl.cito.solve(sim, settings, callback=lambda it, cost: costs.append(cost))
    committed = json.loads((ROOT / "docs/results/cito/raise/relaxed/summary.json").read_text())
    for key in ["final_cost", "iterations", "pose_error_m", "pose_error_deg", "max_penetration_m"]:
        assert summary[key] == committed[key], key
    assert costs and all(b <= a for a, b in zip(costs, costs[1:]))
    knots = round(settings["horizon"] / settings["knot_dt"])
    assert xs.shape == (knots + 1, sim.model.nq + sim.model.nv) and us.shape == (knots, sim.model.nu)
    with pytest.raises(ValueError, match="CITO settings"):
        cl.cito.solve(sim, {"horizon_s": 0.3})


def test_closed_loop_mpc_from_python_is_the_committed_rust_run():
    scene = cl.Scene.load(ROOT / "scenes/mpc_pull.ron")
    summary, trace = scene.run_mpc()
    committed = json.loads((ROOT / "docs/results/mpc/mpc_pull/summary.json").read_text())
    for key in ["recovered", "recovery_time_s", "max_base_error_m", "final_base_error_m", "cycles"]:
        assert summary[key] == committed[key], key
    assert trace.shape[1] == 5 and abs(trace[-1, 0] - committed["duration_s"]) < 1e-9


def test_the_cma_example_trains_a_policy_better_than_the_pd_on_held_out_episodes(tmp_path):
    pytest.importorskip("cma")
    pytest.importorskip("matplotlib")
    import runpy

    module = runpy.run_path(str(ROOT / "python/examples/train_cma.py"))
    out = tmp_path / "cma.png"
    before, after = module["main"](str(out))
    assert after > before and out.stat().st_size > 10_000


def test_the_stable_baselines3_example_trains_through_the_env(tmp_path):
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("matplotlib")
    import runpy

    module = runpy.run_path(str(ROOT / "python/examples/train_sb3_ppo.py"))
    out = tmp_path / "ppo.png"
    zero, curve = module["main"](str(out), total_steps=4096, chunk=2048)
    assert len(curve) == 2 and np.all(np.isfinite(curve)) and np.isfinite(zero)
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize("example", ["contact_forces", "jacobians_touchdown", "cito_plan"])
def test_the_examples_run_and_write_their_plots(example, tmp_path):
    pytest.importorskip("matplotlib")
    import runpy

    module = runpy.run_path(str(ROOT / "python/examples" / f"{example}.py"))
    out = tmp_path / f"{example}.png"
    module["main"](str(out))
    assert out.stat().st_size > 10_000


def test_batch_jacobians_are_the_single_step_jacobians_along_the_same_rollouts():
    n, t = 8, 10
    model, q, v, u, x0s, us = perturbed_batch(1, n, t)
    states, a, b, steps = cl.rollout_jacobians(model, x0s, us, sensitivity="relaxed", kappa=1e-3, delta=1e-2)
    plain, _ = cl.rollout(model, x0s, us)
    assert np.array_equal(states, plain) and np.all(steps == t)
    nv = model.nv
    assert a.shape == (n, t, 2 * nv, 2 * nv) and b.shape == (n, t, 2 * nv, model.nu)
    for i, k in [(0, 0), (3, 4), (7, 9)]:
        sim = cl.Simulation(model, q=states[i, k, : model.nq], v=states[i, k, model.nq :])
        a1, b1, _ = cl.transition_jacobians(sim, u=us[i, k], sensitivity="relaxed", kappa=1e-3, delta=1e-2)
        assert np.array_equal(a[i, k], a1) and np.array_equal(b[i, k], b1)


def test_a_pull_from_python_pushes_the_robot():
    scene = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron")
    pushed, still = scene.settled(1.0), scene.settled(1.0)
    y0 = pushed.q[1]
    pushed.add_pull("trunk", np.array([0.0, 40.0, 0.0]), start=pushed.t, duration=0.2)
    assert pushed.step_n(250) == 250 and still.step_n(250) == 250
    assert pushed.q[1] - y0 > 0.005 and abs(still.q[1] - y0) < 1e-4
    with pytest.raises(ValueError, match="no body `hull`"):
        pushed.add_pull("hull", np.zeros(3), 0.0, 0.1)
    pushed.clear_pulls()


def contactlab_bin():
    """The Rust CLI (`scripts/test` sets CONTACTLAB_BIN to the one `cargo test` built; a local
    run falls back to target/debug). Required when CONTACTLAB_BIN is set."""
    import os

    given = os.environ.get("CONTACTLAB_BIN")
    if given:
        assert pathlib.Path(given).is_file(), f"CONTACTLAB_BIN={given} does not exist"
        return given
    local = ROOT / "target/debug/contactlab"
    if not local.is_file():
        pytest.skip("no contactlab binary (set CONTACTLAB_BIN)")
    return str(local)


def run_cli(*args):
    import subprocess

    done = subprocess.run([contactlab_bin(), *map(str, args)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    "scene,sensitivity,kwargs",
    [
        ("quadruped_stand", "exact", {}),
        ("quadruped_stand", "signorini(kappa=1e-3)", {"sensitivity": "signorini", "kappa": 1e-3}),
        ("quadruped_stand", "relaxed(kappa=1e-3, delta=1e-2)", {"sensitivity": "relaxed", "kappa": 1e-3, "delta": 1e-2}),
        ("box_incline", "relaxed", {"sensitivity": "relaxed"}),
    ],
)
def test_jacobians_from_python_equal_the_rust_cli_bit_for_bit(scene, sensitivity, kwargs, tmp_path):
    out = tmp_path / "J.json"
    run_cli("jacobians", f"scenes/{scene}.ron", "--settle", 0.3, "--sensitivity", sensitivity, "--out", out)
    ref = json.loads(out.read_text())
    sim = cl.Scene.load(ROOT / f"scenes/{scene}.ron").settled(0.3)
    assert np.array_equal(sim.q, ref["q"]) and np.array_equal(sim.v, ref["v"]) and np.array_equal(sim.u, ref["u"])
    kwargs.setdefault("sensitivity", "exact")
    a, b, info = cl.transition_jacobians(sim, u=sim.u, **kwargs)
    assert info["status"] == ref["status"] == "Ok"
    assert np.array_equal(a, np.array(ref["A"])) and np.array_equal(b, np.array(ref["B"]))


def test_urdf_contacts_can_be_chosen():
    urdf = SHARED / "fixtures/rbd/urdf/go1.urdf"
    default = cl.Model.from_urdf(urdf)
    assert len(default.contact_names) == 4 and all(n.endswith("foot") for n in default.contact_names)
    chosen = cl.Model.from_urdf(urdf, contacts=["FL_foot", {"frame": "trunk", "position": [0.2, 0.0, -0.05], "radius": 0.01}])
    assert chosen.contact_names == ["FL_foot", "trunk"]
    # The chosen trunk point touches the ground when the trunk is lowered onto it.
    q = chosen.neutral()
    q[2] = 0.04
    sim = cl.Simulation(chosen, q=q)
    sim.step()
    assert sim.contacts()["gap"][1] == pytest.approx(0.04 - 0.05 - 0.01, abs=1e-9)
    with pytest.raises(ValueError, match=r"contacts\[0\].frame: no link or frame named `paw`"):
        cl.Model.from_urdf(urdf, contacts=["paw"])
    with pytest.raises(ValueError, match=r"contacts\[0\]: unknown field `radius_m`"):
        cl.Model.from_urdf(urdf, contacts=[{"frame": "trunk", "radius_m": 0.01}])
    # No contact points at all: empty records of the right shapes.
    none = cl.Simulation(cl.Model.from_urdf(urdf, contacts=[]), q=q)
    none.step()
    assert none.contacts()["impulse"].shape == (0, 3) and none.contacts()["gap"].shape == (0,)


def stand_cost(sim):
    q0 = sim.q
    return {
        "running": 1.0,
        "terminal": 10.0,
        "w_v": 0.1 * np.ones(sim.model.nv),
        "w_u": 1e-4 * np.ones(sim.model.nu),
        "points": [{"body": "trunk", "target": q0[:3] + [0.05, 0.0, 0.02], "weight": [1.0, 1.0, 1.0]}],
    }


def test_rollout_gradients_match_central_differences_for_exact_and_not_for_a_strong_relaxation():
    sim = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron").settled(0.5)
    cost, steps = stand_cost(sim), 50
    m = sim.model
    j = m.actuated_joints.index("FL_calf_joint")
    exact = cl.rollout_gradient(sim, steps, cost, sensitivity="exact", param="torque:FL_calf_joint")
    relaxed = cl.rollout_gradient(sim, steps, cost, sensitivity="relaxed", kappa=1e-2, delta=1e-2, param="torque:FL_calf_joint")
    # The forward rollout does not depend on the sensitivity; its cost is the plain rollout's.
    assert exact["cost"] == relaxed["cost"] == cl.rollout_cost(sim, steps, cost)
    assert exact["grad_u"].shape == (steps, m.nu) and exact["modes"].shape == (steps, len(m.contact_names))
    assert np.all(exact["modes"][:, :4] == 1)  # four sticking feet
    # A constant torque offset is the sum of the per-step offsets.
    assert exact["grad_param"] == pytest.approx(exact["grad_u"][:, j].sum(), rel=1e-9)
    d, eps, c0 = np.zeros(m.nu), 1e-4, sim.control
    d[j] = 1.0
    sim.control = c0 + eps * d
    jp = cl.rollout_cost(sim, steps, cost)
    sim.control = c0 - eps * d
    jm = cl.rollout_cost(sim, steps, cost)
    sim.control = c0
    fd = (jp - jm) / (2 * eps)
    assert exact["grad_param"] == pytest.approx(fd, rel=1e-6)
    assert abs(relaxed["grad_param"] - fd) > 1e-3 * abs(fd)
    # The initial base position, through the parameter and through q directly.
    g = cl.rollout_gradient(sim, steps, cost, sensitivity="exact", param="base_x")
    q0 = sim.q
    for sign in (1, -1):
        q = q0.copy()
        q[0] += sign * 1e-5
        sim.q = q
        if sign == 1:
            jp = cl.rollout_cost(sim, steps, cost)
        else:
            jm = cl.rollout_cost(sim, steps, cost)
    sim.q = q0
    assert g["grad_param"] == pytest.approx((jp - jm) / 2e-5, rel=1e-6)
    with pytest.raises(ValueError, match=r"cost.points\[0\].body: .* no body `hull`"):
        cl.rollout_gradient(sim, steps, {"points": [{"body": "hull"}]})
    with pytest.raises(ValueError, match="cost: unknown field `w_x`"):
        cl.rollout_cost(sim, steps, {"w_x": 1.0})


def test_mpc_object_driven_from_python_is_the_committed_closed_loop_run():
    scene = cl.Scene.load(ROOT / "scenes/mpc_pull.ron")
    settings = scene.mpc_settings()
    committed = json.loads((ROOT / "docs/results/mpc/mpc_pull/summary.json").read_text())
    sim = scene.settled(settings["settle"])
    # The scene's pull, timed from the moment MPC takes over (as `contactlab mpc` does).
    sim.add_pull("trunk", np.array([0.0, 45.0, 0.0]), start=sim.t + 0.5, duration=0.3)
    mpc = cl.Mpc(settings)
    mpc.engage(sim)
    target = mpc.target[0]
    seen = []
    # The callback may read the controller and the simulation while the run goes on.
    result = mpc.run(
        sim, settings["duration"], callback=lambda c: seen.append((c["base_error_m"], mpc.knots, sim.t))
    )
    assert result["failed_step"] is None and result["failed_replans"] == 0
    assert len(seen) == len(result["cycles"]) == committed["cycles"] and seen[0][1] == mpc.knots
    assert np.linalg.norm(sim.q[:3] - target) == committed["final_base_error_m"]
    assert mpc.planned_states.shape == (mpc.knots + 1, sim.model.nq + sim.model.nv)
    # Step by step from the same start: the same run.
    again = scene.settled(settings["settle"])
    again.add_pull("trunk", np.array([0.0, 45.0, 0.0]), start=again.t + 0.5, duration=0.3)
    mpc2 = cl.Mpc(settings)
    mpc2.engage(again)
    for _ in range(500):
        status, _ = mpc2.step(again)
        assert status == "Ok"
    mpc.release(sim)

    def stop(cycle):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mpc2.run(again, 1.0, callback=stop)
    with pytest.raises(ValueError, match="unknown field"):
        cl.Mpc({"horizon_s": 0.3})


def test_contactnets_from_python_trains_the_model_the_cli_trains(tmp_path):
    from contactlab import contactnets as cn

    data = cn.TossDataset.load(SHARED / "data/cube_tosses")
    settings = {"method": "poly", "steps": 150, "batch": 16, "seed": 3, "threads": 2}
    out = tmp_path / "poly.json"
    run_cli("contactnets", "train", "--data", SHARED / "data/cube_tosses", "--method", "poly", "--tosses", 4,
            "--steps", 150, "--batch", 16, "--seed", 3, "--threads", 2, "--out", out)
    ref = cn.ContactModel.load(out)
    progress = []
    model, report = cn.train(data, 4, settings, callback=progress.append)
    assert np.array_equal(model.vertices, ref.vertices) and model.mu == ref.mu
    assert report["steps"] == 150 and progress and progress[-1] <= 150
    assert model.info["train_tosses"] == ref.info["train_tosses"]
    # Training moved the noisy initial vertices toward the cube's corners and lowered the loss.
    assert report["history"][-1][2] < report["history"][0][2]
    ev = cn.evaluate(model, data, tosses=[0, 1, 2])
    assert ev["tosses"] == 3 and ev["failed_rollouts"] == 0 and np.isfinite(ev["position_error_pct"])
    p, q, failure = model.rollout(data, 0)
    t, p_obs, *_ = data.toss(0)
    assert failure is None and p.shape == p_obs.shape and np.array_equal(p[0], p_obs[0])
    model.save(tmp_path / "again.json")
    assert np.array_equal(cn.ContactModel.load(tmp_path / "again.json").vertices, model.vertices)
    with pytest.raises(ValueError, match="unknown field `methd`"):
        cn.train(data, 4, {"methd": "poly"})
    with pytest.raises(RuntimeError, match="stop"):
        cn.train(data, 4, {"steps": 1_000_000, "patience": 1_000_000}, callback=lambda s: (_ for _ in ()).throw(RuntimeError("stop")))
    bad = tmp_path / "tosses"
    bad.mkdir()
    (bad / "toss_000.csv").write_text("t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz\n0.0,1,2,3,1,0,0,0,0,0,0,0,0,x\n")
    with pytest.raises(ValueError, match="toss_000.csv"):
        cn.TossDataset.load(bad)


def test_torch_step_is_the_simulator_step_and_its_gradient_is_the_exact_sensitivity():
    torch = pytest.importorskip("torch")
    from contactlab.torch import charts, step

    def qmul(a, b):
        (ax, ay, az, aw), (bx, by, bz, bw) = a, b
        return np.array(
            [
                aw * bx + bw * ax + ay * bz - az * by,
                aw * by + bw * ay + az * bx - ax * bz,
                aw * bz + bw * az + ax * by - ay * bx,
                aw * bw - ax * bx - ay * by - az * bz,
            ]
        )

    settled = cl.Scene.load(ROOT / "scenes/quadruped_stand.ron").settled(0.5)
    model, q, v, u = settled.model, settled.q, settled.v, settled.u
    # Yawed by 40 degrees (flat ground: still a stance), so the base frame is not the world's.
    q[3:7] = qmul([0.0, 0.0, np.sin(0.35), np.cos(0.35)], q[3:7])
    sim = cl.Simulation(model)
    fresh = cl.Simulation(model, q=q, v=v)
    fresh.control = u
    fresh.step()
    x = torch.tensor(np.r_[q, v], requires_grad=True)
    ut = torch.tensor(u, requires_grad=True)
    assert np.array_equal(step(sim, x, ut).detach().numpy(), np.r_[fresh.q, fresh.v])
    # A batch is its rows.
    batch = step(sim, torch.stack([x, x, x]).detach(), ut.detach())
    assert batch.shape == (3, model.nq + model.nv) and torch.equal(batch[1], step(sim, x, ut).detach())

    w = torch.tensor(np.random.default_rng(0).normal(size=model.nq + model.nv))
    horizon = 5

    def loss(x0, u0, sensitivity="exact", **kw):
        for _ in range(horizon):
            x0 = step(sim, x0, u0, sensitivity=sensitivity, **kw)
        return (w * x0).sum()

    loss(x, ut).backward()
    gx, gu = x.grad.numpy(), ut.grad.numpy()

    def f(qq, vv, uu):
        return float(loss(torch.tensor(np.r_[qq, vv]), torch.tensor(uu)))

    eps = 1e-6
    checks = []
    for j in [0, 2, 7]:
        d = np.zeros(model.nu)
        d[j] = eps
        checks.append((gu[j], (f(q, v, u + d) - f(q, v, u - d)) / (2 * eps)))
    for j in [0, 3, 10]:
        d = np.zeros(model.nv)
        d[j] = eps
        checks.append((gx[model.nq + j], (f(q, v + d, u) - f(q, v - d, u)) / (2 * eps)))
    for j in [0, 1, 2, 9]:  # base position and a joint angle: plain coordinates
        d = np.zeros(model.nq)
        d[j] = eps
        checks.append((gx[j], (f(q + d, v, u) - f(q - d, v, u)) / (2 * eps)))
    # The quaternion along a tangent direction: quat (x) exp(s theta).
    theta = np.array([0.3, -0.5, 0.2]) / np.linalg.norm([0.3, -0.5, 0.2])

    def turned(s):
        out = q.copy()
        out[3:7] = qmul(q[3:7], np.r_[np.sin(0.5 * s) * theta, np.cos(0.5 * s)])
        return out

    to_coords, _ = charts(q, model.nv)
    checks.append((gx[3:7] @ (to_coords[3:7, 3:6] @ theta), (f(turned(eps), v, u) - f(turned(-eps), v, u)) / (2 * eps)))
    # Off the unit sphere (as a gradient step on x leaves it): the step normalizes the
    # quaternion, and the gradient in coordinates must say so.
    scaled = q.copy()
    scaled[3:7] *= 1.3
    xs = torch.tensor(np.r_[scaled, v], requires_grad=True)
    loss(xs, torch.tensor(u)).backward()
    direction = np.random.default_rng(2).normal(size=4)
    d = np.zeros(model.nq)
    d[3:7] = 1e-6 * direction
    checks.append((xs.grad.numpy()[3:7] @ direction, (f(scaled + d, v, u) - f(scaled - d, v, u)) / 2e-6))
    for analytic, fd in checks:
        assert analytic == pytest.approx(fd, rel=1e-4, abs=1e-6)
    # A strong relaxation gives another gradient.
    x.grad, ut.grad = None, None
    loss(x, ut, "relaxed", kappa=1e-1, delta=1e-1).backward()
    assert np.abs(ut.grad.numpy() - gu).max() > 1e-2 * np.abs(gu).max()
