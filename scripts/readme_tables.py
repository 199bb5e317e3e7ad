#!/usr/bin/env python3
"""Rewrites the README's result tables from the committed result files (run after
scripts/reproduce): the CITO table (one run per task and sensitivity), the CITO table over
perturbed starts, the two pull-sweep tables, and the tables against MuJoCo (docs/results/perf: the run and its
paired rounds). The prose around them is not touched: read the
diff, and fix every number the prose quotes. tests/readme_results.rs checks the outcome."""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TASKS = ["raise", "lower", "shift", "roll", "pitch", "yaw", "far", "walk", "side", "turn", "climb"]


def rows(md, keep):
    return [l for l in md.read_text().splitlines() if l.startswith("| ") and keep(l)]


def replace_table(lines, header_start, new_rows):
    """Replaces the rows (after the header and its |---| line) of the table whose header starts
    with `header_start`; the header itself becomes the new header if new_rows[0] is one."""
    i = next((k for k, l in enumerate(lines) if l.startswith(header_start)), None)
    if i is None:
        sys.exit(f"README: no table starting with {header_start!r}")
    j = i + 2
    while j < len(lines) and lines[j].startswith("|"):
        j += 1
    return lines[:i] + new_rows + lines[j:]


def task_table(folder, md):
    """Header, separator and every task's rows of `folder/<task>/md`, the task name in front."""
    head = rows(folder / TASKS[0] / md, lambda l: l.startswith("| sensitivity"))[0]
    table = ["| task |" + head[1:], "|---" * head.count("|") + "|"]
    for t in TASKS:
        table += ["| " + t + " |" + r[1:] for r in rows(folder / t / md, lambda l: not l.startswith("| sensitivity"))]
    return table


def main():
    readme = ROOT / "README.md"
    lines = readme.read_text().splitlines()
    res = ROOT / "docs" / "results"

    for subdir, md, header in [("cito", "comparison.md", "| task | sensitivity | status |"),
                               ("cito_starts", "starts.md", "| task | sensitivity | succeeded |")]:
        lines = replace_table(lines, header, task_table(res / subdir, md))

    for name, label in [("pull_sweep", "1 DDP iteration per replan"), ("pull_sweep_3it", "3 DDP iterations per replan"),
                        ("pull_sweep_rotors", "3 DDP iterations per replan, rotor inertia"),
                        ("pull_sweep_step", "3 DDP iterations per replan, rotor inertia, step sampling"),
                        ("pull_sweep_step_fast", "3 DDP iterations per replan, rotor inertia, one sampled trot per replan")]:
        md = (res / "mpc" / name / "pull_sweep.md").read_text().splitlines()
        for direction in ["lateral", "forward"]:
            k = md.index(f"## {direction} pulls: recovered? (footfalls)")
            table = []
            for l in md[k + 2:]:
                if not l.startswith("|"):
                    break
                table.append(l)
            table[0] = table[0].replace("| controller |", f"| {direction}, {label} |", 1)
            lines = replace_table(lines, f"| {direction}, {label} |", table)

    peers = res / "perf" / "peers.json"
    if peers.exists():
        lines = replace_table(lines, "| measurement (same robot, same run) |", perf_table(json.loads(peers.read_text())))

    paired = res / "perf" / "paired.json"
    if paired.exists():
        lines = replace_table(lines, "| ratio, ", paired_table(json.loads(paired.read_text())))

    readme.write_text("\n".join(lines) + "\n")


# The paired rounds' ratios (benches/peers/paired_rounds.py): name, README label, format.
PAIRED = [
    ("step_ours_over_mj_step", "step, ContactLab over `mj_step`", "{:.2f}"),
    ("jacobians_relaxed_over_our_step", "relaxed Jacobians A, B over ContactLab's step", "{:.2f}"),
    ("mjd_transitionFD_forward_over_our_jacobians_relaxed",
     "`mjd_transitionFD` forward over ContactLab's relaxed Jacobians", "{:.1f}x"),
    ("our_rollouts_2_threads_over_1", "ContactLab's 64 rollouts, 2 threads over 1", "{:.2f}"),
    ("mujoco_rollouts_2_threads_over_1", "MuJoCo's 64 rollouts, 2 threads over 1", "{:.2f}"),
]

# The paired rounds' times with a target: name, README label.
PAIRED_TIMES = [
    ("ddp_iteration_1_thread_ms", "ContactLab's DDP iteration (30 knots), 1 thread"),
    ("ddp_iteration_2_threads_ms", "the same, 2 threads"),
]


def paired_table(p):
    """The README's table of the paired rounds (docs/results/perf/paired.json);
    tests/readme_results.rs formats the same rows."""
    n = p["rounds"]
    out = [f"| ratio, {n} paired rounds | median | range | rounds meeting the target | target |", "|---|---|---|---|---|"]
    for key, label, fmt in PAIRED:
        e = p["ratios"][key]
        if e["target"] is None:
            meet, target = "-", "-"
        else:
            meet = f"{e['rounds_meeting_target']}/{n}"
            target = ("<= " if e["target_is_upper_bound"] else ">= ") + fmt.format(e["target"])
        out.append(f"| {label} | {fmt.format(e['median'])} | {fmt.format(e['min'])} to {fmt.format(e['max'])} | {meet} | {target} |")
    for key, label in PAIRED_TIMES:
        e = p.get("targets", {}).get(key)
        if e is None:
            continue
        out.append(
            f"| {label} | {e['median']:.2f} ms | {e['min']:.2f} to {e['max']:.2f} ms "
            f"| {e['rounds_meeting_target']}/{n} | < {e['target_below']:.2f} ms |"
        )
    return out


def perf_table(p):
    """The README's table against MuJoCo from docs/results/perf/peers.json (issue 21's targets in
    the last column); tests/readme_results.rs formats the same cells."""
    c, m, r = p["contactlab"], p["mujoco"], p["ratios"]
    mj = f"MuJoCo {m['version']}"
    return [
        f"| measurement (same robot, same run) | ContactLab | {mj} | ratio | target |",
        "|---|---|---|---|---|",
        f"| step, quadruped standing on 4 feet | {c['step_us']:.2f} us | {m['mj_step_us']:.2f} us "
        f"| {r['step_ours_over_mj_step']:.2f} | <= 0.5 |",
        f"| transition Jacobians A, B (ContactLab: relaxed; MuJoCo: mjd_transitionFD forward) "
        f"| {c['jacobians_relaxed_us']:.1f} us | {m['mjd_transitionFD_forward_us']:.1f} us "
        f"| {r['mjd_transitionFD_forward_over_our_jacobians_relaxed']:.1f}x faster | >= 20x |",
        f"| transition Jacobians against one step of ContactLab | {r['jacobians_relaxed_over_our_step']:.2f} steps "
        f"| - | - | <= 3 steps |",
        f"| one DDP iteration, 30 knots | {r['ddp_iteration_30_knots_ms']:.2f} ms | - | - | < 1.5 ms |",
        f"| the same on 2 threads (knots differentiated behind the rollout, backward pass beside them, trials in pairs) | {r['ddp_iteration_30_knots_2_threads_ms']:.2f} ms "
        f"| - | - | < 1.5 ms |",
        f"| 64 rollouts of 0.5 s, steps/s on 1 thread | {c['rollouts_64x250_1_threads_steps_per_s']:.0f} "
        f"| {m['rollouts_64x250_1_threads_steps_per_s']:.0f} | - | - |",
        f"| the same on 2 threads | {c['rollouts_64x250_2_threads_steps_per_s']:.0f} "
        f"| {m['rollouts_64x250_2_threads_steps_per_s']:.0f} "
        f"| {r['our_rollouts_2_threads_over_1']:.2f} / {r['mujoco_rollouts_2_threads_over_1']:.2f} of 1 thread "
        f"| >= 1.8 |",
    ]


if __name__ == "__main__":
    main()
