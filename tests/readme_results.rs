//! The README's result tables agree with the committed result files they were copied from
//! (`docs/results/`), formatted as the commands print them. A number edited in one place and
//! not the other fails here.

use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// The README row of a CITO comparison, as `contactlab cito --sensitivity all` writes it in
/// `comparison.md`, with the task name in front.
fn cito_row(task: &str, r: &Value) -> String {
    let feet: Vec<&str> = r["feet_repositioned"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    let feet = if feet.is_empty() { "none".to_string() } else { feet.join(", ") };
    format!(
        "| {task} | {} | {} | {:.5} | {} | {:.2} | {:.1}, {:.2} | {:.1e} | {:.1e} | {} | {} | {} / {} |",
        r["sensitivity"].as_str().unwrap(),
        r["status"].as_str().unwrap(),
        f(r, "final_cost"),
        r["iterations"].as_u64().unwrap(),
        f(r, "solve_time_s"),
        1e3 * f(r, "pose_error_m"),
        f(r, "pose_error_deg"),
        f(r, "max_penetration_m"),
        f(r, "max_cone_violation"),
        feet,
        {
            let steps: Vec<String> = r["footfalls"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, n)| n.as_u64().unwrap() > 0)
                .map(|(foot, n)| format!("{foot} {n}"))
                .collect();
            if steps.is_empty() {
                "none".to_string()
            } else {
                steps.join(", ")
            }
        },
        r["fallback_jacobians"].as_u64().unwrap(),
        r["unconverged_jacobians"].as_u64().unwrap()
    )
}

/// The CITO tasks of the README's tables, in their order there: the six small base-pose tasks,
/// the far shift and the four locomotion tasks.
const CITO_TASKS: [&str; 11] =
    ["raise", "lower", "shift", "roll", "pitch", "yaw", "far", "walk", "side", "turn", "climb"];

#[test]
fn the_cito_table_is_the_committed_comparisons() {
    let readme = readme();
    let mut rows = 0;
    for task in CITO_TASKS {
        let file = root().join(format!("docs/results/cito/{task}/comparison.json"));
        let results = json(&file);
        let results = results.as_array().unwrap_or_else(|| panic!("{}: not a list", file.display()));
        assert_eq!(results.len(), 3, "{}: one row per sensitivity", file.display());
        for r in results {
            let row = cito_row(task, r);
            assert!(readme.lines().any(|l| l.trim() == row), "README lacks the row of {}:\n{row}", file.display());
            rows += 1;
        }
        // And no other row of this task.
        let prefix = format!("| {task} | ");
        // (The table over perturbed starts has rows of the same tasks, with fewer columns.)
        let in_readme = readme.lines().filter(|l| l.starts_with(&prefix) && l.split('|').count() == 14).count();
        assert_eq!(in_readme, 3, "README rows for {task}");
    }
    assert_eq!(rows, 3 * CITO_TASKS.len());
}

/// The check above is not vacuous: a changed digit is caught.
#[test]
fn a_changed_number_is_caught() {
    let file = root().join("docs/results/cito/raise/comparison.json");
    let mut r = json(&file)[0].clone();
    let row = cito_row("raise", &r);
    assert!(readme().lines().any(|l| l.trim() == row));
    r["final_cost"] = Value::from(f(&r, "final_cost") + 1e-4);
    assert!(!readme().lines().any(|l| l.trim() == cito_row("raise", &r)));
}

/// The gradient-quality table: each sweep's three rows, in the order exact, signorini, relaxed,
/// are the committed `summary.json`'s scores, and the bold mean row is their mean.
#[test]
fn the_sweep_table_is_the_committed_summaries() {
    let readme = readme();
    let mut means = [0.0; 3];
    let names = ["foot_touchdown", "box_push", "liftoff"];
    for (name, label) in
        names.iter().zip(["quadruped drop through touchdown", "box pushed", "front-left foot lift-off"])
    {
        let file = root().join(format!("docs/results/sweeps/{name}/summary.json"));
        let s = json(&file);
        let first = readme
            .lines()
            .position(|l| l.starts_with(&format!("| {label}")))
            .unwrap_or_else(|| panic!("README has no sweep row `{label}`"));
        let rows: Vec<&str> = readme.lines().skip(first).take(3).collect();
        for (i, (row, sens)) in rows.iter().zip(["exact", "signorini", "relaxed"]).enumerate() {
            let v = &s["sensitivities"][sens];
            let cells = format!(
                "| {sens} | {:.4} | {:.3} | {:.3} |",
                f(v, "cosine"),
                f(v, "rel_error"),
                f(v, "sign_agreement")
            );
            assert!(row.ends_with(&cells), "{}: README row\n{row}\nshould end with\n{cells}", file.display());
            means[i] += f(v, "cosine") / names.len() as f64;
        }
    }
    let mean_row = format!("**{:.4} / {:.4} / {:.4}**", means[0], means[1], means[2]);
    assert!(readme.contains(&mean_row), "README's mean row should read {mean_row}");
}

/// The MPC table's first row is the committed closed-loop run.
#[test]
fn the_mpc_rows_are_the_committed_runs() {
    for run in ["mpc_pull", "mpc_pull_rotors", "mpc_step_budget", "mpc_step_fast", "mpc_step_lean", "mpc_step_feedback"]
    {
        mpc_row_is_the_committed_run(run);
    }
}

fn mpc_row_is_the_committed_run(run: &str) {
    let s = json(&root().join(format!("docs/results/mpc/{run}/summary.json")));
    let cells = format!(
        " | {:.1} mm | {:.1} mm | {} | {:.1} / {:.1} / {:.1} ms | {:.2}x |",
        1e3 * f(&s, "max_base_error_m"),
        1e3 * f(&s, "final_base_error_m"),
        if s["recovered"].as_bool().unwrap() {
            format!("yes, {:.2} s after the pull", f(&s, "recovery_time_s"))
        } else {
            "no".into()
        },
        f(&s, "solve_ms_median"),
        f(&s, "solve_ms_p95"),
        f(&s, "solve_ms_max"),
        f(&s, "realtime_factor")
    );
    let row = readme()
        .lines()
        .find(|l| l.starts_with(&format!("| `docs/results/mpc/{run}/summary.json`")))
        .expect("README has the MPC row")
        .to_string();
    assert!(row.ends_with(&cells), "README row\n{row}\nshould end with\n{cells}");
}

/// Every table row of a committed report (written by the command beside the README's table)
/// stands in the README verbatim.
fn rows_in_readme(report: &str) -> usize {
    let text = std::fs::read_to_string(root().join(report)).unwrap();
    let readme = readme();
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| ") && !l.starts_with("|---")).collect();
    for row in &rows {
        assert!(readme.lines().any(|l| l.trim() == row.trim()), "README lacks this row of {report}:\n{row}");
    }
    rows.len()
}

/// The ContactNets sweep table: the README's rows are `docs/contactnets/sweep.md`'s, and that
/// table is the means of the runs in `sweep.json`.
#[test]
fn the_contactnets_table_is_the_committed_sweep() {
    use contactlab::learn::contactnets::sweep::{table, SweepRow};
    let v = json(&root().join("docs/contactnets/sweep.json"));
    // e2e has no vertices: its NaN vertex error is written as null.
    let mut raw = v["rows"].clone();
    for r in raw.as_array_mut().unwrap() {
        if r["vertex_error"].is_null() {
            r["vertex_error"] = Value::from(-1.0);
        }
    }
    let mut rows: Vec<SweepRow> = serde_json::from_value(raw).unwrap();
    for r in &mut rows {
        if r.vertex_error < 0.0 {
            r.vertex_error = f64::NAN;
        }
    }
    let md = std::fs::read_to_string(root().join("docs/contactnets/sweep.md")).unwrap();
    for line in table(&rows).lines() {
        assert!(md.lines().any(|l| l == line), "docs/contactnets/sweep.md lacks\n{line}");
    }
    assert!(rows_in_readme("docs/contactnets/sweep.md") >= 27);
}

/// The learning comparison table: the README's rows are `docs/learning/comparison.md`'s.
#[test]
fn the_learning_table_is_the_committed_comparison() {
    assert!(rows_in_readme("docs/learning/comparison.md") >= 4);
}

/// The CITO table over perturbed starts: each task's rows of `starts.md`, with the task name in
/// front, stand in the README.
#[test]
fn the_cito_starts_table_is_the_committed_runs() {
    let readme = readme();
    for task in CITO_TASKS {
        let file = root().join(format!("docs/results/cito_starts/{task}/starts.md"));
        let md = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let rows: Vec<String> = md
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| sensitivity"))
            .map(|l| format!("| {task} |{}", &l[1..]))
            .collect();
        assert_eq!(rows.len(), 3, "{}", file.display());
        for row in rows {
            assert!(readme.lines().any(|l| l == row), "README lacks the row of {}:\n{row}", file.display());
        }
        let runs = json(&file.with_file_name("starts.json"))["runs"].as_array().unwrap().len();
        assert_eq!(runs, 15, "{}: 5 starts x 3 sensitivities", file.display());
        // The climb's criterion (front feet on the step) is a line under its table.
        for line in md.lines().filter(|l| l.starts_with("Runs whose front feet")) {
            let quoted = format!("{task}: {line}");
            assert!(readme.lines().any(|l| l.contains(&quoted)), "README lacks `{quoted}`");
        }
        assert_eq!(task == "climb", md.contains("Runs whose front feet"), "{}", file.display());
    }
}

/// The pull-sweep tables: every controller row of each committed `pull_sweep.md` stands in the
/// README verbatim.
#[test]
fn the_pull_sweep_tables_are_the_committed_runs() {
    let readme = readme();
    for dir in ["pull_sweep", "pull_sweep_3it", "pull_sweep_rotors", "pull_sweep_step", "pull_sweep_step_fast"] {
        let file = root().join(format!("docs/results/mpc/{dir}/pull_sweep.md"));
        let md = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        // The line saying which step statuses ended runs is quoted after the file's name.
        let readme_words = readme.split_whitespace().collect::<Vec<_>>().join(" ");
        for line in md.lines().filter(|l| l.starts_with("Runs ended by a failed step")) {
            let quoted = format!("`{dir}`: {line}");
            assert!(readme_words.contains(&quoted), "README lacks `{quoted}`");
        }
        controller_rows_stand_in_readme(&readme, &file, &md, 8, "4 controllers x 2 directions");
        let runs = json(&file.with_file_name("pull_sweep.json"))["runs"].as_array().unwrap().len();
        assert_eq!(runs, 80, "{}: 10 forces x 2 directions x 4 controllers", file.display());
    }
}

/// Every controller row (`| MPC ...`, `| joint PD ...`) of the committed table `md` (read from
/// `file`), `count` of them, stands verbatim as a README line.
fn controller_rows_stand_in_readme(readme: &str, file: &Path, md: &str, count: usize, what: &str) {
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| MPC ") || l.starts_with("| joint PD ")).collect();
    assert_eq!(rows.len(), count, "{}: {what}", file.display());
    for row in rows {
        assert!(readme.lines().any(|l| l == row), "README lacks the row of {}:\n{row}", file.display());
    }
}

/// The rotor-inertia pulls from perturbed starts (`examples/pull_starts.rs`), without and with
/// step sampling (and with it from ten fresh starts; budgeted, from thirty): every controller
/// row of each committed `pull_starts.md` stands in the README, and the file holds every run.
#[test]
fn the_pull_starts_tables_are_the_committed_runs() {
    let readme = readme();
    for dir in [
        "pull_starts_rotors",
        "pull_starts_step",
        "pull_starts_step_fast",
        "pull_starts_step_fresh",
        "pull_starts_step_fast_fresh",
        "pull_starts_step_budget",
        "pull_starts_step_budget_fresh",
        "pull_starts_step_budget_seeds20",
        "pull_starts_step_fast_seeds20",
        "pull_starts_step_lean",
        "pull_starts_step_lean_fresh",
        "pull_starts_step_lean_seeds20",
        "pull_starts_step_lean_heldout",
        "pull_starts_step_feedback",
        "pull_starts_step_feedback_fresh",
        "pull_starts_step_feedback_seeds20",
        "pull_starts_step_feedback_heldout",
        "pull_starts_step_feedback_open_loop",
        "pull_starts_step_feedback_open_loop_fresh",
        "pull_starts_step_feedback_open_loop_seeds20",
        "pull_starts_step_feedback_open_loop_heldout",
    ] {
        let file = root().join(format!("docs/results/mpc/{dir}/pull_starts.md"));
        let md = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        controller_rows_stand_in_readme(&readme, &file, &md, 4, "4 controllers");
        let runs = json(&file.with_file_name("pull_starts.json"))["runs"].as_array().unwrap().len();
        assert_eq!(runs, 120, "{}: 10 starts x 3 forces x 4 controllers", file.display());
    }
}

/// The benchmark rows with a result file (`scripts/reproduce bench`).
#[test]
fn the_benchmark_rows_are_the_committed_medians() {
    let readme = readme();
    let b = json(&root().join("docs/results/bench/benches.json"));
    for (name, digits) in [
        ("ddp_iteration_quadruped_30_knots", 2),
        ("mpc_replan_1_iteration_30_knots", 2),
        ("mpc_replan_3_iteration_30_knots", 2),
        ("mpc_replan_3_iterations_30_knots_rotors", 2),
        ("mpc_replan_3_iterations_30_knots_rotors_step_sampling", 2),
        ("mpc_replan_3_iterations_30_knots_rotors_step_sampling_one_trot", 2),
        ("mpc_replan_3_iterations_30_knots_rotors_step_sampling_one_trot_budgeted", 2),
        ("mpc_replan_3_iterations_30_knots_rotors_step_sampling_one_trot_lean", 2),
        ("mpc_cycle_mpc_step_lean_replan_73", 2),
        ("mpc_cycle_mpc_step_lean_replan_121", 2),
        ("mpc_replan_2_iterations_30_knots_rotors_step_sampling_one_trot_feedback", 2),
        ("mpc_cycle_mpc_step_feedback_replan_109", 2),
        ("mpc_cycle_mpc_step_feedback_replan_178", 2),
        ("baseline_simulator_10ms_joint_pd_5_steps", 3),
    ] {
        let v = &b[name];
        let cell =
            format!("{:.digits$} / {:.digits$} ms", f(v, "median_ms"), f(v, "p95_of_sample_means_ms"), digits = digits);
        assert!(readme.contains(&cell), "README lacks {name}: {cell}");
    }
}

/// The instruction counts the README quotes (`scripts/reproduce instructions`), today's, the
/// previous runs' and those of the revisions before the last two rounds of speed-ups.
#[test]
fn the_instruction_counts_are_the_committed_runs() {
    let readme = readme();
    let has = |s: String| assert!(readme.contains(&s), "README lacks `{s}`");
    for file in [
        "instructions.json",
        "instructions_763e8c3.json",
        "instructions_7dea25d.json",
        "instructions_64cb821.json",
        "instructions_3a9e49f.json",
    ] {
        let b = json(&root().join("docs/results/bench").join(file));
        has(format!("{:.1}M", f(&b["one_trot_replan"], "per_replan") / 1e6));
        has(format!("{:.1}M", f(&b["closed_loop"], "per_cycle") / 1e6));
        has(format!("{:.1}M", f(&b["ddp_iteration"], "per_iteration") / 1e6));
    }
    for (file, workload) in [
        ("instructions.json", "closed_loop_budgeted"),
        ("instructions.json", "closed_loop_lean"),
        ("instructions.json", "closed_loop_feedback"),
        ("instructions_763e8c3.json", "closed_loop"),
        ("instructions_763e8c3.json", "closed_loop_budgeted"),
        ("instructions_763e8c3.json", "closed_loop_lean"),
        ("instructions_84c64d7.json", "closed_loop_lean"),
    ] {
        let w = &json(&root().join("docs/results/bench").join(file))[workload];
        has(format!("{:.1}M", f(w, "per_cycle") / 1e6));
    }
    let c = &json(&root().join("docs/results/bench/instructions.json"))["closed_loop"];
    has(format!(
        "median {}, p95 {}, max {}",
        f(c, "line_search_trials_median"),
        f(c, "line_search_trials_p95"),
        c["line_search_trials_max"].as_u64().unwrap()
    ));
}

/// The Python-and-MuJoCo benchmark table (`scripts/reproduce pybench`).
#[test]
fn the_python_benchmark_table_is_the_committed_run() {
    let readme = readme();
    let b = json(&root().join("docs/results/bench/python.json"));
    for (key, cell) in [
        ("contactlab_step_from_rust_us", format!("{:.1} us", f(&b, "contactlab_step_from_rust_us"))),
        ("contactlab_step_from_python_us", format!("{:.1} us", f(&b, "contactlab_step_from_python_us"))),
        ("mujoco_step_from_python_us", format!("{:.1} us", f(&b, "mujoco_step_from_python_us"))),
        ("contactlab_batch_steps_per_s", format!("{:.0} steps/s", f(&b, "contactlab_batch_steps_per_s"))),
        ("mujoco_batch_steps_per_s", format!("{:.0} steps/s", f(&b, "mujoco_batch_steps_per_s"))),
    ] {
        assert!(readme.contains(&format!("| {cell} |")), "README lacks {key}: {cell}");
    }
}

/// The table against MuJoCo (`scripts/bench-peers`, `docs/results/perf/peers.json`), cell by
/// cell as `scripts/readme_tables.py` writes it.
#[test]
fn the_peer_benchmark_table_is_the_committed_run() {
    let readme = readme();
    let p = json(&root().join("docs/results/perf/peers.json"));
    let (c, m, r) = (&p["contactlab"], &p["mujoco"], &p["ratios"]);
    for cell in [
        format!("| {:.2} us | {:.2} us | {:.2} |", f(c, "step_us"), f(m, "mj_step_us"), f(r, "step_ours_over_mj_step")),
        format!(
            "| {:.1} us | {:.1} us | {:.1}x faster |",
            f(c, "jacobians_relaxed_us"),
            f(m, "mjd_transitionFD_forward_us"),
            f(r, "mjd_transitionFD_forward_over_our_jacobians_relaxed")
        ),
        format!("| {:.2} steps |", f(r, "jacobians_relaxed_over_our_step")),
        format!("| {:.2} ms |", f(r, "ddp_iteration_30_knots_ms")),
        format!(
            "| the same on 2 threads (knots differentiated behind the rollout, backward pass beside them, trials in pairs) | {:.2} ms |",
            f(r, "ddp_iteration_30_knots_2_threads_ms")
        ),
        format!(
            "| {:.0} | {:.0} |",
            f(c, "rollouts_64x250_1_threads_steps_per_s"),
            f(m, "rollouts_64x250_1_threads_steps_per_s")
        ),
        format!(
            "| {:.2} / {:.2} of 1 thread |",
            f(r, "our_rollouts_2_threads_over_1"),
            f(r, "mujoco_rollouts_2_threads_over_1")
        ),
    ] {
        assert!(readme.contains(&cell), "README lacks {cell}");
    }
}

/// The paired rounds against MuJoCo (`benches/peers/paired_rounds.py`, run by
/// `scripts/bench-peers`, `docs/results/perf/paired.json`), row by row as
/// `scripts/readme_tables.py` writes them, and each row's count of rounds meeting its target
/// agrees with the rounds kept in the file.
#[test]
fn the_paired_rounds_table_is_the_committed_run() {
    let readme = readme();
    let p = json(&root().join("docs/results/perf/paired.json"));
    let n = p["rounds"].as_u64().unwrap();
    let rounds = p["per_round"].as_array().unwrap();
    assert_eq!(rounds.len() as u64, n);
    for (key, label, unit) in [
        ("step_ours_over_mj_step", "step, ContactLab over `mj_step`", 2),
        ("jacobians_relaxed_over_our_step", "relaxed Jacobians A, B over ContactLab's step", 2),
        (
            "mjd_transitionFD_forward_over_our_jacobians_relaxed",
            "`mjd_transitionFD` forward over ContactLab's relaxed Jacobians",
            1,
        ),
        ("our_rollouts_2_threads_over_1", "ContactLab's 64 rollouts, 2 threads over 1", 2),
        ("mujoco_rollouts_2_threads_over_1", "MuJoCo's 64 rollouts, 2 threads over 1", 2),
    ] {
        let e = &p["ratios"][key];
        let fmt = |x: f64| if unit == 1 { format!("{x:.1}x") } else { format!("{x:.2}") };
        let (meet, target) = match e["target"].as_f64() {
            None => ("-".to_string(), "-".to_string()),
            Some(t) => {
                let upper = e["target_is_upper_bound"].as_bool().unwrap();
                let counted = rounds
                    .iter()
                    .filter(|r| {
                        let x = f(&r["ratios"], key);
                        if upper {
                            x <= t
                        } else {
                            x >= t
                        }
                    })
                    .count() as u64;
                assert_eq!(e["rounds_meeting_target"].as_u64(), Some(counted), "{key}");
                (format!("{counted}/{n}"), format!("{} {}", if upper { "<=" } else { ">=" }, fmt(t)))
            }
        };
        let row = format!(
            "| {label} | {} | {} to {} | {meet} | {target} |",
            fmt(f(e, "median")),
            fmt(f(e, "min")),
            fmt(f(e, "max"))
        );
        assert!(readme.lines().any(|l| l.trim() == row), "README lacks the paired row\n{row}");
    }
    // The DDP iteration's times against their target (ours alone, in the same rounds).
    for (key, field, label) in [
        ("ddp_iteration_1_thread_ms", "ddp_iteration_1_threads_ms", "ContactLab's DDP iteration (30 knots), 1 thread"),
        ("ddp_iteration_2_threads_ms", "ddp_iteration_2_threads_ms", "the same, 2 threads"),
    ] {
        let e = &p["targets"][key];
        let t = f(e, "target_below");
        let counted = rounds.iter().filter(|r| f(&r["ours"], field) < t).count() as u64;
        assert_eq!(e["rounds_meeting_target"].as_u64(), Some(counted), "{key}");
        let row = format!(
            "| {label} | {:.2} ms | {:.2} to {:.2} ms | {counted}/{n} | < {t:.2} ms |",
            f(e, "median"),
            f(e, "min"),
            f(e, "max")
        );
        assert!(readme.lines().any(|l| l.trim() == row), "README lacks the paired row\n{row}");
    }
}

/// The instruction counts against MuJoCo (`scripts/reproduce perfcount`,
/// `docs/results/perf/instructions.json`), row by row.
/// The 21 paired rounds without the spinning between DDP sweeps (f851a9c, reverted), which the
/// README quotes against the rounds of the code as it stands.
#[test]
fn the_paired_rounds_without_spinning_are_the_committed_run() {
    let p = json(&root().join("docs/results/perf/paired_without_spinning.json"));
    assert!(p["machine"]["git_revision"].as_str().is_some_and(|r| r.starts_with("f851a9c")));
    let ddp = &p["targets"]["ddp_iteration_2_threads_ms"];
    let rounds = p["rounds"].as_u64().expect("rounds");
    let quoted = format!(
        "gave {:.2} ms ({}/{rounds} under 1.5 ms)",
        f(ddp, "median"),
        ddp["rounds_meeting_target"].as_u64().expect("rounds meeting")
    );
    let readme = readme().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(readme.contains(&quoted), "README lacks {quoted:?}");
}

#[test]
fn the_peer_instruction_counts_are_the_committed_run() {
    let readme = readme();
    let d = json(&root().join("docs/results/perf/instructions.json"));
    let (c, m, r) = (&d["contactlab"], &d["mujoco"], &d["ratios"]);
    let k = |x: f64| format!("{:.1}k", x / 1e3);
    for row in [
        format!(
            "| step, quadruped standing on 4 feet | {} | {} (`mj_step`) | {:.2} |",
            k(f(c, "step")),
            k(f(m, "mj_step")),
            f(r, "step_ours_over_mj_step")
        ),
        format!(
            "| transition Jacobians A, B (ContactLab: relaxed; MuJoCo: `mjd_transitionFD` forward) | {} | {} | {:.1}x fewer |",
            k(f(c, "jacobians_relaxed")),
            k(f(m, "mjd_transitionFD_forward")),
            f(r, "mjd_transitionFD_forward_over_our_jacobians_relaxed")
        ),
        format!("| the same, exact sensitivity | {} | - | - |", k(f(c, "jacobians_exact"))),
        format!(
            "| relaxed Jacobians against one step of ContactLab | {:.2} steps | - | - |",
            f(r, "jacobians_relaxed_over_our_step")
        ),
    ] {
        assert!(readme.lines().any(|l| l.trim() == row), "README lacks the instruction row\n{row}");
    }
    // The RNEA derivatives against Pinocchio's, quoted in the prose below the table.
    let p = &d["pinocchio"];
    let quoted = format!(
        "ours execute {} instructions per call against {} for Pinocchio {}'s `computeRNEADerivatives` on the same URDF, counted inside its C++ function rather than its Python binding ({:.2} of Pinocchio's;",
        k(f(c, "rnea_derivatives")),
        k(f(p, "computeRNEADerivatives")),
        p["version"].as_str().expect("pinocchio version"),
        f(r, "rnea_derivatives_ours_over_pinocchio")
    );
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&quoted), "README lacks {quoted:?}");
}

/// The time-profile table (`scripts/reproduce timeprofile`) is the committed run: every group's
/// row in both workloads, and the shares the text quotes (the lean loop's backward pass and its
/// LU solves).
#[test]
fn the_time_profile_table_is_the_committed_run() {
    let readme = readme();
    let d = json(&root().join("docs/results/perf/time_profile.json"));
    let (lean, ddp) = (&d["workloads"]["lean_closed_loop"], &d["workloads"]["ddp_iteration"]);
    let cell =
        |v: &Value| format!("{:.1} % ({:.1}-{:.1})", f(v, "percent_mean"), f(v, "percent_min"), f(v, "percent_max"));
    let groups = lean["groups"].as_object().expect("groups");
    assert!(groups.len() >= 8, "{} groups", groups.len());
    for (name, v) in groups {
        let row = format!("| {name} | {} | {} |", cell(v), cell(&ddp["groups"][name]));
        assert!(readme.lines().any(|l| l.trim() == row), "README lacks the time-profile row\n{row}");
    }
    let backward = f(&lean["groups"]["DDP backward pass (products, box QP, Cholesky)"], "percent_mean");
    let lu_solve = lean["top_symbols"]
        .as_array()
        .expect("top symbols")
        .iter()
        .find(|t| t["symbol"] == "contactlab::linalg::lu_solve")
        .map(|t| f(t, "percent_mean"))
        .expect("lu_solve among the top symbols");
    let text = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    for quoted in [format!("takes {backward:.1} % of its time"), format!("but {lu_solve:.1} % of the time")] {
        assert!(text.contains(&quoted), "README does not say \"{quoted}\"");
    }
}

/// The frame-cost table is the `*.frame_cost.json` files the screenshot commands wrote.
#[test]
fn the_frame_cost_table_is_the_committed_files() {
    let text = readme();
    let dir = root().join("docs/screenshots");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".frame_cost.json") else { continue };
        let v = json(&p);
        let row = format!(
            "| `{stem}.png` | {} | {:.2} | {:.2} | {:.2} |",
            v["frames"].as_u64().unwrap(),
            f(&v, "our_systems_ms_median"),
            f(&v, "our_systems_ms_p95"),
            f(&v, "our_systems_ms_max")
        );
        assert!(text.contains(&row), "README lacks the row {row}");
        n += 1;
    }
    assert!(n >= 8, "{n} frame-cost files");
}

/// The walk comparison (issue 18): the README's rows are the committed `comparison.md`s of the
/// reporting seeds, the tuning seeds and go1, and the numbers its text quotes are those files'.
#[test]
fn the_walk_tables_and_numbers_are_the_committed_results() {
    assert_eq!(rows_in_readme("docs/results/learning/walk/comparison.md"), 5);
    assert_eq!(rows_in_readme("docs/results/learning/walk_tuning/comparison.md"), 2);
    assert_eq!(rows_in_readme("docs/results/learning/walk_go1/comparison.md"), 2);
    let readme = readme();
    let dir = root().join("docs/results/learning/walk");
    let c = json(&dir.join("comparison.json"));
    let has = |s: String| assert!(readme.contains(&s), "README lacks `{s}`");
    has(format!("({:.3})", f(&c["levels"], "ninety")));
    has(format!("(it stands still, {:.1})", f(&c, "target_return")));
    let rows = c["rows"].as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["algorithm"] == name).unwrap();
    let (ppo, relaxed) = (row("ppo"), row("bptt-relaxed"));
    has(format!("{:.1}x sooner than PPO in simulated steps", f(ppo, "steps_to_90") / f(relaxed, "steps_to_90")));
    has(format!("{:.1}x sooner in\n  wall time", f(ppo, "seconds_to_90") / f(relaxed, "seconds_to_90")));
    has(format!("{:.1}x BPTT's samples", f(ppo, "sim_steps") / f(relaxed, "sim_steps")));
    // Per-run numbers.
    let walks = c["walk"].as_array().unwrap();
    let bptt: Vec<&Value> = walks.iter().filter(|w| w["algorithm"] != "ppo").map(|w| &w["walk"]).collect();
    let fold = |v: &[f64], min: bool| {
        v.iter()
            .copied()
            .fold(if min { f64::INFINITY } else { f64::NEG_INFINITY }, if min { f64::min } else { f64::max })
    };
    let lifts: Vec<f64> =
        bptt.iter().flat_map(|w| w["min_lift"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap())).collect();
    has(format!("at least {:.3} m in every cycle", fold(&lifts, true)));
    let duty: Vec<f64> =
        bptt.iter().flat_map(|w| w["duty_mean"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap())).collect();
    has(format!("duty factors {:.2}-{:.2}", fold(&duty, true), fold(&duty, false)));
    let slow: Vec<f64> = bptt.iter().filter(|w| w["walks"] == false).map(|w| f(w, "speed_mean")).collect();
    assert_eq!(slow.len(), 6, "seeds 1 and 2 of three sensitivities");
    has(format!("mean speed is {:.3}-{:.3} m/s", fold(&slow, true), fold(&slow, false)));
    let ppo_fail: Vec<&Value> =
        walks.iter().filter(|w| w["algorithm"] == "ppo" && w["walk"]["walks"] == false).collect();
    assert_eq!(ppo_fail.len(), 2, "seeds 0 and 1");
    let l: Vec<f64> = ppo_fail[1]["walk"]["min_lift"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    has(format!("smallest per-cycle lift\n  {:.4} m", fold(&l, true)));
    has(format!("seed 0 walks in {} of 24 episodes", ppo_fail[0]["walk"]["walking"]));
    let runs = c["runs"].as_array().unwrap();
    let secs = |ppo: bool| -> Vec<f64> {
        runs.iter().filter(|r| (r["algorithm"] == "ppo") == ppo).map(|r| f(r, "seconds")).collect()
    };
    let (b, p) = (secs(false), secs(true));
    has(format!("a BPTT run took {:.1}-{:.1} s", fold(&b, true), fold(&b, false)));
    has(format!("a PPO run {:.1}-{:.1} s", fold(&p, true), fold(&p, false)));
    let lost: Vec<f64> = runs
        .iter()
        .filter(|r| r["algorithm"] == "ppo")
        .map(|r| r["failed_rollouts"].as_u64().unwrap() as f64)
        .collect();
    has(format!("PPO lost {}-{} of its", fold(&lost, true), fold(&lost, false)));
    assert!(runs
        .iter()
        .filter(|r| r["algorithm"] != "ppo")
        .all(|r| r["failed_rollouts"] == 0 && r["fallback_steps"] == 0));
    has(format!("{:.3} m/s\nat 0.4 m/s commanded", f(&json(&dir.join("prior_summary.json")), "speed_mean")));
    // The gradient measurements.
    let g = json(&dir.join("gradients.json"));
    let ms = g["measurements"].as_array().unwrap();
    let stats: Vec<&Value> = ms.iter().flat_map(|m| m["stats"].as_array().unwrap()).collect();
    let contacts: Vec<&Value> = ms.iter().flat_map(|m| m["contacts"].as_array().unwrap()).collect();
    let cos = |s: &str| {
        let v: Vec<f64> = stats.iter().filter(|x| x["sensitivity"] == s).map(|x| f(x, "cosine_to_reference")).collect();
        fold(&v, true)
    };
    has(format!("at least {:.3}", cos("relaxed")));
    has(format!("(Signorini: {:.3})", cos("signorini")));
    let frac = |k: &str| contacts.iter().map(|c| f(c, k)).collect::<Vec<_>>();
    let (set, modes) = (frac("contact_change_fraction"), frac("mode_change_fraction"));
    has(format!("touches\n  down in {:.3}-{:.3} of the steps", fold(&set, true), fold(&set, false)));
    has(format!("in {:.3}-{:.3} of them", fold(&modes, true), fold(&modes, false)));
    let at = |policy: &str, s: &str, t: u64| -> &Value {
        let m = ms.iter().find(|m| m["policy"] == policy).unwrap();
        m["stats"].as_array().unwrap().iter().find(|x| x["sensitivity"] == s && x["rollout_steps"] == t).unwrap()
    };
    let mut ratios = Vec::new();
    for m in ms {
        for x in m["stats"].as_array().unwrap().iter().filter(|x| x["sensitivity"] == "relaxed") {
            let t = x["rollout_steps"].as_u64().unwrap();
            ratios.push(f(x, "variance") / f(at(m["policy"].as_str().unwrap(), "exact", t), "variance"));
        }
    }
    has(format!("{:.3}-{:.3} of the exact one's", fold(&ratios, true), fold(&ratios, false)));
    let (i50, t50) = (at("initial", "exact", 50), at("trained", "exact", 50));
    has(format!(
        "(batch gradient norm {:.3}, per-rollout spread\n  {:.2} at 50 steps",
        f(i50, "batch_gradient_norm"),
        f(i50, "variance").sqrt()
    ));
    has(format!("the batch gradient ({:.3} at 50 steps)", f(t50, "batch_gradient_norm")));
    has(format!(
        "(per-rollout spread {:.2}, so sqrt(variance / 32) =\n  {:.2}",
        f(t50, "variance").sqrt(),
        (f(t50, "variance") / 32.0).sqrt()
    ));
    // The smoothed-reference measurement: its table verbatim, and the counts the text quotes.
    assert_eq!(rows_in_readme("docs/results/learning/walk/smoothed_gradient.md"), 17);
    let sm = json(&dir.join("smoothed_gradient.json"));
    let policies = sm["policies"].as_array().unwrap();
    assert!(policies.iter().all(|p| p["lift_offs"] == 6 && p["touchdowns"] == 4));
    has("feet lift off 6\n  times and touch down 4 times".to_string());
    let relaxed_name = format!("relaxed(kappa={:e})", f(&sm, "kappa"));
    let closer_along_gradient: u64 = sm["summary"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["directions"] == "gradient" && f(r, "sigma_action") == 1e-2)
        .map(|r| {
            let s = r["sensitivities"].as_array().unwrap().iter().find(|s| s["sensitivity"] == relaxed_name.as_str());
            s.unwrap()["closer_than_exact"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(closer_along_gradient, 14, "relaxed closer than exact along every gradient direction at 1e-2");
    has("closer than exact in all 14 gradient directions".to_string());
    // go1.
    let go1 = json(&root().join("docs/results/learning/walk_go1/comparison.json"));
    let gr = go1["runs"].as_array().unwrap();
    let best: Vec<f64> = gr.iter().map(|r| f(r, "best_return")).collect();
    let fin: Vec<f64> = gr.iter().map(|r| f(r, "final_return")).collect();
    has(format!("(best\n{:.1} to {:.1}", fold(&best, true), fold(&best, false)));
    has(format!("(final {:.1} to {:.1})", fold(&fin, true), fold(&fin, false)));
}

/// The long walk run on tuning seed 100 the README quotes: its peak, its end and the gradient
/// spikes, from its committed `progress.csv` and `summary.json`.
#[test]
fn the_long_walk_run_numbers_are_the_committed_run() {
    let dir = root().join("docs/results/learning/walk_tuning/long_seed100");
    let text = std::fs::read_to_string(dir.join("progress.csv")).unwrap();
    let rows: Vec<Vec<f64>> =
        text.lines().skip(1).map(|l| l.split(',').map(|x| x.parse().unwrap_or(f64::NAN)).collect()).collect();
    let best = rows.iter().filter(|r| r[3].is_finite()).max_by(|a, b| a[3].total_cmp(&b[3])).unwrap();
    let spike = |lo: f64, hi: f64| rows.iter().filter(|r| r[1] >= lo && r[1] < hi).map(|r| r[6]).fold(0.0, f64::max);
    let s = json(&dir.join("summary.json"));
    let readme = readme();
    for needle in [
        format!("peaks at {:.3}\n  after {} steps", best[3], best[1]),
        format!("(-{:.3} at the end)", -f(&s, "final_return")),
        format!(
            "spikes to {:.1e} between 200 000 and\n  300 000 steps and to {:.1e} after",
            spike(2e5, 3e5),
            spike(3e5, 1e9)
        ),
    ] {
        assert!(readme.contains(&needle), "README lacks `{needle}`");
    }
}

/// `15032` as the README writes it: `15 032`.
fn spaced(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// The soak and random-problem paragraphs quote `docs/results/soak/soak.json` and
/// `docs/results/solver/random_problems.json`.
#[test]
fn the_soak_and_random_problem_numbers_are_the_committed_runs() {
    let readme = readme().split_whitespace().collect::<Vec<_>>().join(" ");
    let soak = json(&root().join("docs/results/soak/soak.json"));
    let classes = soak["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 4);
    let clean = classes.iter().all(|c| c["failed_steps"] == 0 && c["non_finite_states"] == 0);
    assert_eq!(readme.contains("no failed step and no non-finite state in any class"), clean);
    let pulled = classes.iter().find(|c| c["class"] == "quadruped, random pulls").unwrap();
    let quoted = format!("{} steps whose solver did not converge", pulled["not_converged_steps"]);
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
    let quoted = format!("max penetration {:.1e} m", pulled["max_penetration_m"].as_f64().unwrap());
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");

    let r = json(&root().join("docs/results/solver/random_problems.json"));
    let n = r["problems"].as_u64().unwrap();
    let failed = n - r["converged"].as_u64().unwrap();
    let quoted = format!("{} of {} do not converge", spaced(failed), spaced(n));
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
    let quoted = format!("{} ending in `MaxIterations`", spaced(r["max_iterations"].as_u64().unwrap()));
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
    let quoted = format!(
        "median {} iterations, p99 {}, max {}",
        r["iterations_median"], r["iterations_p99"], r["iterations_max"]
    );
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
    let phase = format!(
        "of the {} solves the globalized phase ran on, the median took {:.2} ms, the slowest {:.0} ms",
        r["globalized_solves"],
        f(&r, "globalized_ms_median"),
        f(&r, "globalized_ms_max_converged")
    );
    let quoted = match r["globalized_ms_max_stalled"].as_f64() {
        Some(ms) => format!("{phase}, the slowest that did not converge {ms:.0} ms"),
        None => format!("{phase} (all converged)"),
    };
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
    // The stalls per seed of the files in `dir`, quoted as "0 on seed 17, 0 on seed 18, ... and
    // 0 on seed 35": the other seeds, and the code before the last stage on the seeds first run
    // after it.
    let stalls = |dir: &str, seeds: std::ops::RangeInclusive<u64>| {
        let each: Vec<String> = seeds
            .map(|seed| {
                let r = json(&root().join(format!("{dir}/random_problems_seed{seed}.json")));
                assert_eq!(r["seed"], seed);
                assert_eq!(r["problems"], n);
                format!("{} on seed {seed}", r["problems"].as_u64().unwrap() - r["converged"].as_u64().unwrap())
            })
            .collect();
        format!("{} and {}", each[..each.len() - 1].join(", "), each[each.len() - 1])
    };
    for quoted in [stalls("docs/results/solver", 17..=35), stalls("docs/results/solver/before_alart_curnier", 26..=35)]
    {
        assert!(readme.contains(&quoted), "README lacks `{quoted}`");
    }
}

/// The README (*Robots*) says the simulator does not enforce joint position limits but that every
/// committed CITO trajectory and the committed MPC run stay inside the quadruped's URDF ranges:
/// every `q_<joint>` column of those CSV files, at every row, within `[lower, upper]`.
#[test]
fn committed_trajectories_stay_inside_the_joint_ranges() {
    let model = contactlab::model::builtin::quadruped().unwrap().model;
    let mut files: Vec<PathBuf> = Vec::new();
    for task in std::fs::read_dir(root().join("docs/results/cito")).unwrap() {
        let task = task.unwrap().path();
        for s in ["exact", "signorini", "relaxed"] {
            files.push(task.join(s).join("trajectory.csv"));
        }
    }
    files.push(root().join("docs/results/mpc/mpc_pull/trace.csv"));
    assert!(files.len() > 30, "expected the CITO tasks' trajectories, found {}", files.len());
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        // (column, joint name, lower, upper) of every joint column.
        let columns: Vec<(usize, &str, f64, f64)> = header
            .iter()
            .enumerate()
            .filter_map(|(c, h)| h.strip_prefix("q_").map(|name| (c, name)))
            .map(|(c, name)| {
                let j = model
                    .joints
                    .iter()
                    .find(|j| j.name == name)
                    .unwrap_or_else(|| panic!("{}: column q_{name} is not a quadruped joint", path.display()));
                (c, name, j.limits.lower, j.limits.upper)
            })
            .collect();
        assert_eq!(columns.len(), 12, "{}: expected the 12 joint columns", path.display());
        for (row, line) in lines.enumerate() {
            let cells: Vec<&str> = line.split(',').collect();
            for &(c, name, lo, hi) in &columns {
                let x: f64 = cells[c].parse().unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), row + 2));
                assert!((lo..=hi).contains(&x), "{}:{}: {name} = {x} is outside [{lo}, {hi}]", path.display(), row + 2);
            }
        }
    }
}

/// The README's *Joint ranges* paragraph: the recovered pull-sweep runs that leave a joint's
/// URDF range (by more than 0.01 rad), and the scene run's excursion, are the committed files'.
#[test]
fn the_joint_range_excursions_are_the_committed_runs() {
    let readme = readme().split_whitespace().collect::<Vec<_>>().join(" ");
    let mut outside = Vec::new();
    for name in ["pull_sweep", "pull_sweep_3it", "pull_sweep_rotors"] {
        let d = json(&root().join(format!("docs/results/mpc/{name}/pull_sweep.json")));
        for r in d["runs"].as_array().unwrap() {
            let excess = r["joint_range_excess"].as_f64().unwrap();
            if r["recovered"].as_bool().unwrap() && excess > 0.01 {
                outside.push((
                    name,
                    r["controller"].as_str().unwrap().to_string(),
                    r["force_n"].as_f64().unwrap(),
                    r["direction"].as_str().unwrap().to_string(),
                    excess,
                ));
            }
        }
    }
    assert_eq!(outside.len(), 1, "{outside:?}");
    let (name, controller, force, direction, excess) = &outside[0];
    assert_eq!((*name, controller.as_str()), ("pull_sweep_rotors", "MPC exact"));
    let quoted = format!("exact MPC at {force} N {direction} ({excess:.2} rad)");
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
    let s = json(&root().join("docs/results/mpc/mpc_pull_rotors/summary.json"));
    let quoted = format!("{:.1} rad beyond its range", f(&s, "joint_range_excess"));
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
}

/// The pull-starts counts the README quotes beside its table: recoveries at 80 N and 100 N that
/// keep every joint within 0.05 rad of its URDF range, per controller.
#[test]
fn the_pull_starts_recoveries_inside_the_joint_ranges_are_the_committed_runs() {
    let readme = readme().split_whitespace().collect::<Vec<_>>().join(" ");
    let d = json(&root().join("docs/results/mpc/pull_starts_rotors/pull_starts.json"));
    let starts = d["starts"].as_u64().unwrap();
    let count = |controller: &str, force: f64| {
        d["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["controller"] == controller
                    && r["force_n"].as_f64() == Some(force)
                    && r["recovered"] == true
                    && r["joint_range_excess"].as_f64().unwrap() <= 0.05
            })
            .count()
    };
    let pair = |c: &str| format!("{}/{starts} and {}/{starts}", count(c, 80.0), count(c, 100.0));
    let quoted =
        format!("recovers {}, exact {}, Signorini {}", pair("MPC relaxed"), pair("MPC exact"), pair("MPC signorini"));
    assert!(readme.contains(&quoted), "README lacks `{quoted}`");
}

/// The closed-loop replan times of the one-trot, budgeted, lean and feedback scenes, interleaved over
/// rounds (`scripts/realtime.py`, in `scripts/reproduce realtime`): one README row per scene.
#[test]
fn the_closed_loop_timing_table_is_the_committed_run() {
    let readme = readme();
    let r = json(&root().join("docs/results/mpc/realtime.json"));
    let rounds = r["rounds"].as_u64().unwrap();
    let ms = |e: &Value, key: &str| format!("{:.2} +- {:.2} ms", f(&e[key], "mean"), f(&e[key], "stdev"));
    for scene in ["mpc_step_fast", "mpc_step_budget", "mpc_step_lean", "mpc_step_feedback"] {
        let e = &r["scenes"][scene];
        let recovered = e["recovered"].as_array().unwrap().iter().filter(|x| x.as_bool() == Some(true)).count();
        let row = format!(
            "| `scenes/{scene}.ron` | {recovered}/{rounds} | {} | {} | {} | {} / {} |",
            ms(e, "solve_ms_median"),
            ms(e, "solve_ms_p95"),
            ms(e, "solve_ms_max"),
            f(e, "line_search_trials_median"),
            f(e, "line_search_trials_p95"),
        );
        assert!(readme.lines().any(|l| l.trim() == row), "README lacks the timing row\n{row}");
    }
}

/// The lean settings' ablation (`scripts/reproduce leanablation`): one README row per variant,
/// and its plain-lean exact row is the committed starts tables' exact count.
#[test]
fn the_lean_ablation_rows_are_the_committed_run() {
    let readme = readme();
    let a = json(&root().join("docs/results/mpc/lean_ablation.json"));
    for (name, e) in a["variants"].as_object().unwrap() {
        let row = format!("| {name} | {}/{} |", e["recovered"].as_u64().unwrap(), e["runs_total"].as_u64().unwrap());
        assert!(readme.lines().any(|l| l.trim() == row), "README lacks the ablation row\n{row}");
    }
    let tables: u64 = ["pull_starts_step_lean", "pull_starts_step_lean_fresh", "pull_starts_step_lean_seeds20"]
        .iter()
        .map(|d| {
            let runs = json(&root().join(format!("docs/results/mpc/{d}/pull_starts.json")));
            runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["controller"] == "MPC exact" && r["recovered"].as_bool() == Some(true))
                .count() as u64
        })
        .sum();
    assert_eq!(a["variants"]["exact, lean"]["recovered"].as_u64(), Some(tables));
}
