#!/usr/bin/env python3
"""Rewrites the README's result tables from the committed result files (run after
scripts/reproduce): the CITO table (one run per task and sensitivity), the CITO table over
perturbed starts, and the two pull-sweep tables. The prose around them is not touched: read the
diff, and fix every number the prose quotes. tests/readme_results.rs checks the outcome."""
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

    for name, label in [("pull_sweep", "1 DDP iteration per replan"), ("pull_sweep_3it", "3 DDP iterations per replan")]:
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

    readme.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
