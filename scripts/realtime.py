#!/usr/bin/env python3
"""Closed-loop replan times of the one-trot MPC scenes, interleaved.

    python3 scripts/realtime.py BIN OUT.json [ROUNDS]

Runs `BIN mpc SCENE` (each scene's own 3 s run through its 100 N lateral shove) for
scenes/mpc_step_fast.ron (one trot per replan), scenes/mpc_step_budget.ron (budgeted replans)
scenes/mpc_step_lean.ron (lean replans) and scenes/mpc_step_feedback.ron (feedback warm starts,
two iterations per replan), one after the other, ROUNDS times (default 5),
and writes each scene's per-round solve-time median, p95 and max (ms) with their mean and
spread over the rounds, against the 10 ms control period. The trajectories are the same every
round (the runs are deterministic); only the clock differs, so the spread is the machine's.
Run it with nothing else on the machine.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

SCENES = ["mpc_step_fast", "mpc_step_budget", "mpc_step_lean", "mpc_step_feedback"]


def main():
    binary, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    runs = {s: [] for s in SCENES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for scene in SCENES:
                d = os.path.join(tmp, f"{scene}_{r}")
                subprocess.run([binary, "mpc", f"scenes/{scene}.ron", "--out", d], check=True, capture_output=True)
                s = json.load(open(os.path.join(d, "summary.json")))
                runs[scene].append(s)
    result = {"rounds": rounds, "period_ms": 10.0, "scenes": {}}
    for scene, ss in runs.items():
        entry = {
            "recovered": [s["recovered"] for s in ss],
            "cycles": ss[0]["cycles"],
            "max_base_error_m": ss[0]["max_base_error_m"],
            "line_search_trials_median": ss[0]["line_search_trials_median"],
            "line_search_trials_p95": ss[0]["line_search_trials_p95"],
        }
        for key in ("solve_ms_median", "solve_ms_p95", "solve_ms_max"):
            xs = [s[key] for s in ss]
            entry[key] = {
                "rounds": xs,
                "mean": statistics.mean(xs),
                "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0,
                "min": min(xs),
                "max": max(xs),
            }
        result["scenes"][scene] = entry
    tmp_out = out + ".tmp"
    with open(tmp_out, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp_out, out)
    for scene, e in result["scenes"].items():
        print(f"{scene}: median {e['solve_ms_median']['mean']:.2f} +- {e['solve_ms_median']['stdev']:.2f} ms, "
              f"p95 {e['solve_ms_p95']['mean']:.2f} +- {e['solve_ms_p95']['stdev']:.2f} ms, "
              f"max {e['solve_ms_max']['mean']:.2f} ms")


if __name__ == "__main__":
    main()
