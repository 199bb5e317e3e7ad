"""ContactLab against MuJoCo in paired rounds (issue 21): the headline ratios of
`mujoco_same_robot.py`, each measured ROUNDS times with both simulators timed back to back.

This machine's clock drifts by up to a third within minutes (a bench run three minutes after
another moved rows by 35 %), so a ratio of ContactLab's criterion medians to MuJoCo's times
taken minutes later can be off by as much. Here every round times ContactLab
(`examples/peer_rounds.rs`: the standing quadruped's step, its relaxed and exact transition
Jacobians, 64 rollouts of 0.5 s on 1 and 2 threads and one DDP iteration on 1 and 2 threads,
each the median of several blocks) and
MuJoCo on the same robot (`mj_step` through a one-thread rollout, `mjd_transitionFD` forward,
the same 64 rollouts on 1 and 2 threads) within a few seconds, alternating which goes first, and
forms the ratios within the round. The file keeps every round and, per ratio, the median and
range over the rounds and how many rounds met the issue's target, and the same for the DDP
iteration's time against its target of 1.5 ms.

    python3 benches/peers/paired_rounds.py --bin target/release/examples/peer_rounds \
        --out docs/results/perf/paired.json [--rounds 15]
"""

import argparse
import json
import pathlib
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import mujoco_same_robot as peers  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Ratio name: (numerator, denominator, target, whether the ratio must be at most the target).
RATIOS = {
    "step_ours_over_mj_step": (("ours", "step_us"), ("mujoco", "mj_step_us"), 0.5, True),
    "jacobians_relaxed_over_our_step": (("ours", "jacobians_relaxed_us"), ("ours", "step_us"), 3.0, True),
    "mjd_transitionFD_forward_over_our_jacobians_relaxed": (
        ("mujoco", "mjd_transitionFD_forward_us"),
        ("ours", "jacobians_relaxed_us"),
        20.0,
        False,
    ),
    "our_rollouts_2_threads_over_1": (
        ("ours", "rollouts_64x250_2_threads_steps_per_s"),
        ("ours", "rollouts_64x250_1_threads_steps_per_s"),
        1.8,
        False,
    ),
    "mujoco_rollouts_2_threads_over_1": (
        ("mujoco", "rollouts_64x250_2_threads_steps_per_s"),
        ("mujoco", "rollouts_64x250_1_threads_steps_per_s"),
        None,
        False,
    ),
}

# Times of ours with an upper target (`examples/peer_rounds.rs`: one DDP iteration of
# `examples/ddp_profile.rs` on 1 and 2 threads, ms): name: (key, target); a round meets it
# below the target.
TIMES = {
    "ddp_iteration_1_thread_ms": ("ddp_iteration_1_threads_ms", 1.5),
    "ddp_iteration_2_threads_ms": ("ddp_iteration_2_threads_ms", 1.5),
}


def mujoco_round(mujoco, m, d):
    """MuJoCo's times of one round (medians of a few repeats, as `mj_times`)."""
    import mujoco.rollout as mr

    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.zeros(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d, state, spec)
    steps = 2000
    ctrl = np.tile(d.ctrl.copy(), (1, steps, 1))
    one = [mujoco.MjData(m)]
    out = {"mj_step_us": 1e6 * peers.best_of(lambda: mr.rollout(m, one, state[None, :], ctrl), repeats=5) / steps}
    nx, nu = 2 * m.nv + m.na, m.nu
    a, b = np.zeros((nx, nx)), np.zeros((nx, nu))
    work = mujoco.MjData(m)
    mujoco.mj_setState(m, work, state, spec)
    work.ctrl[:] = d.ctrl
    fd = lambda: [mujoco.mjd_transitionFD(m, work, 1e-6, 0, a, b, None, None) for _ in range(20)]  # noqa: E731
    out["mjd_transitionFD_forward_us"] = 1e6 * peers.best_of(fd, repeats=5) / 20
    out.update(peers.rollout_rates(mujoco, m, d, state))
    return out


def ours_round(binary):
    return json.loads(subprocess.run([binary], capture_output=True, text=True, check=True).stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True, help="the built examples/peer_rounds binary")
    p.add_argument("--out", default=str(ROOT / "docs/results/perf/paired.json"))
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()
    import mujoco

    m, d = peers.standing(mujoco, (ROOT / "assets/robots/quadruped.urdf").read_text())
    rounds = []
    for r in range(args.rounds):
        if r % 2 == 0:
            ours = ours_round(args.bin)
            theirs = mujoco_round(mujoco, m, d)
        else:
            theirs = mujoco_round(mujoco, m, d)
            ours = ours_round(args.bin)
        row = {"ours": ours, "mujoco": theirs, "ours_first": r % 2 == 0}
        row["ratios"] = {k: row[n[0]][n[1]] / row[dd[0]][dd[1]] for k, (n, dd, _, _) in RATIOS.items()}
        rounds.append(row)
        print(f"round {r}: " + ", ".join(f"{k} {v:.3f}" for k, v in row["ratios"].items()), file=sys.stderr)
    summary = {}
    for k, (_, _, target, at_most) in RATIOS.items():
        v = [row["ratios"][k] for row in rounds]
        entry = {"median": float(np.median(v)), "min": float(min(v)), "max": float(max(v)), "target": target}
        if target is not None:
            entry["target_is_upper_bound"] = at_most
            entry["rounds_meeting_target"] = sum((x <= target) if at_most else (x >= target) for x in v)
        summary[k] = entry
    targets = {}
    for k, (key, target) in TIMES.items():
        v = [row["ours"][key] for row in rounds]
        targets[k] = {
            "median": float(np.median(v)),
            "min": float(min(v)),
            "max": float(max(v)),
            "target_below": target,
            "rounds_meeting_target": sum(x < target for x in v),
        }
    times = {}
    for side in ("ours", "mujoco"):
        for key in rounds[0][side]:
            v = [row[side][key] for row in rounds]
            times[f"{side}.{key}"] = {"median": float(np.median(v)), "min": float(min(v)), "max": float(max(v))}
    result = {
        "robot": "contactlab_quadruped standing on 4 feet under a joint PD, flat ground mu 0.8, h = 2 ms",
        "mujoco_version": mujoco.__version__,
        "rounds": args.rounds,
        "ratios": summary,
        "targets": targets,
        "times": times,
        "per_round": rounds,
        "machine": peers.stamp(),
    }
    peers.write(pathlib.Path(args.out), result)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
