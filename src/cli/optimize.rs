//! `contactlab cito` and `contactlab mpc`: set-up from a scene, the files they write (all
//! atomically) and their tables.
//!
//! `cito` writes into `DIR` (or `DIR/<sensitivity>/` for `--sensitivity all`):
//! `trajectory.csv` (t, q, v, u per knot), `iterations.csv` (per DDP iteration: cost,
//! expected and actual improvement, mu, step, time), `schedule.csv` (per knot and foot: gap,
//! normal impulse, in contact), `summary.png` and `summary.json`. `--sensitivity all` also
//! writes `DIR/comparison.md` and `DIR/comparison.json`.

use anyhow::{Context, Result};
use contactlab::diff::{Sensitivity, SensitivityKind};
use contactlab::io::{write_atomic, write_atomic_with};
use contactlab::ocp::cito::{self, CitoProblem, CitoReport, CitoSettings, CitoSummary};
use contactlab::ocp::mpc::{run_closed_loop, MpcReport, MpcSettings};
use contactlab::ocp::starts::{perturbed, summarize, StartNoise, StartsRow};
use contactlab::scene::Scene;
use contactlab::sim::record::state_names;
use std::fmt::Write as _;
use std::path::Path;

/// The settings of each sensitivity of a `--sensitivity` value (`all`, or a comma-separated
/// list) with the scene's `cito` section, its kappa and delta (or the overrides) and iteration
/// limit (or the override).
pub fn cito_settings(
    scene: &Scene,
    which: &str,
    kappa: Option<f64>,
    delta: Option<f64>,
    iterations: Option<usize>,
) -> Result<Vec<CitoSettings>> {
    let mut base = scene.cito_settings()?;
    base.kappa = kappa.unwrap_or(base.kappa);
    base.delta = delta.unwrap_or(base.delta);
    base.iterations = iterations.unwrap_or(base.iterations);
    base.validate()?;
    let kinds = SensitivityKind::parse_list(which)?;
    Ok(kinds.into_iter().map(|k| CitoSettings { sensitivity: k, ..base.clone() }).collect())
}

/// Solves the scene's CITO task with `settings`, writes its files into `dir` and returns
/// the report. Progress goes to stderr.
pub fn run_cito(scene: &Scene, settings: &CitoSettings, dir: &Path) -> Result<CitoReport> {
    let problem = scene.cito_problem(settings)?;
    let sensitivity: Sensitivity = problem.sensitivity;
    let name = sensitivity.name();
    eprintln!("{}: {} knots of {} s, sensitivity {name}", scene.file.name, problem.knots, problem.settings.dt);
    let report = cito::solve(&problem, None, &mut |h| {
        eprintln!(
            "  {name} it {:>3}  cost {:.6e}  expected {:.2e}  actual {:.2e}  mu {:.0e}  step {}  {:.1} ms",
            h.iteration,
            h.cost,
            h.expected,
            h.actual,
            h.mu,
            h.alpha,
            1e3 * h.time
        )
    });
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    write_cito_files(scene, &problem, &report, dir)?;
    Ok(report)
}

fn write_cito_files(scene: &Scene, p: &CitoProblem, r: &CitoReport, dir: &Path) -> Result<()> {
    let m = &*p.model;
    let (q, v, u) = state_names(m);
    let mut csv = String::new();
    let _ = writeln!(csv, "t,{},{},{}", q.join(","), v.join(","), u.join(","));
    for (i, x) in r.xs.iter().enumerate() {
        let _ = write!(csv, "{}", i as f64 * p.settings.dt);
        for a in x {
            let _ = write!(csv, ",{a}");
        }
        match r.us.get(i) {
            Some(us) => us.iter().for_each(|a| {
                let _ = write!(csv, ",{a}");
            }),
            None => (0..m.nu).for_each(|_| csv.push(',')),
        }
        csv.push('\n');
    }
    write_atomic(&dir.join("trajectory.csv"), csv.as_bytes())?;

    let mut it = String::from("iteration,cost,expected,actual,mu,alpha,time_s\n");
    for h in &r.info.history {
        let _ = writeln!(it, "{},{},{},{},{},{},{}", h.iteration, h.cost, h.expected, h.actual, h.mu, h.alpha, h.time);
    }
    write_atomic(&dir.join("iterations.csv"), it.as_bytes())?;

    let mut sc = String::from("t");
    for f in &r.feet {
        let _ = write!(sc, ",{f}_gap,{f}_impulse_n,{f}_contact");
    }
    sc.push('\n');
    for k in &r.knots {
        let _ = write!(sc, "{}", k.t);
        for f in 0..r.feet.len() {
            let _ = write!(sc, ",{},{},{}", k.gap[f], k.impulse[f], k.contact[f] as u8);
        }
        sc.push('\n');
    }
    write_atomic(&dir.join("schedule.csv"), sc.as_bytes())?;

    let start = &p.x0;
    let target =
        [p.cost.base_position[0] - start[0], p.cost.base_position[1] - start[1], p.cost.base_position[2] - start[2]];
    write_atomic_with(&dir.join("summary.png"), |png| contactlab::ocp::cito_plot::cito_png(r, &target, png))?;
    let json = serde_json::to_string_pretty(&r.summary(&scene.file.name))?;
    write_atomic(&dir.join("summary.json"), json.as_bytes())?;
    Ok(())
}

/// One line per sensitivity: final cost, iterations, time, violations, repositioned feet.
pub fn comparison_table(rows: &[CitoSummary]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| sensitivity | status | final cost | iterations | time (s) | pose error (mm, deg) | max penetration (m) | max cone violation (N s) | feet repositioned | footfalls | fallback / unconverged Jacobians |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let feet = if r.feet_repositioned.is_empty() { "none".to_string() } else { r.feet_repositioned.join(", ") };
        let _ = writeln!(
            s,
            "| {} | {:?} | {:.5} | {} | {:.2} | {:.1}, {:.2} | {:.1e} | {:.1e} | {} | {} | {} / {} |",
            r.sensitivity,
            r.status,
            r.final_cost,
            r.iterations,
            r.solve_time_s,
            1e3 * r.pose_error_m,
            r.pose_error_deg,
            r.max_penetration_m,
            r.max_cone_violation,
            feet,
            footfall_text(&r.footfalls),
            r.fallback_jacobians,
            r.unconverged_jacobians
        );
    }
    // On a climb: where each foot stood last, under the table (flat-ground tables unchanged).
    let raised: Vec<String> = rows
        .iter()
        .filter_map(|r| Some(format!("{} {}", r.sensitivity, support_text(r.final_foot_support.as_ref()?))))
        .collect();
    if !raised.is_empty() {
        let _ = writeln!(s, "\nWhere each foot stood last (0 the ground, 1 the step): {}.", raised.join("; "));
    }
    s
}

/// `none`, or the feet that took steps with their counts (`FL_foot 1, RL_foot 1`).
pub fn footfall_text(f: &std::collections::BTreeMap<String, usize>) -> String {
    let steps: Vec<String> = f.iter().filter(|(_, &n)| n > 0).map(|(foot, n)| format!("{foot} {n}")).collect();
    if steps.is_empty() {
        "none".into()
    } else {
        steps.join(", ")
    }
}

/// Writes `comparison.md` and `comparison.json` into `dir`.
pub fn write_comparison(scene: &Scene, rows: &[CitoSummary], dir: &Path) -> Result<()> {
    let md =
        format!("# {}: CITO with each sensitivity from the same start\n\n{}", scene.file.name, comparison_table(rows));
    write_atomic(&dir.join("comparison.md"), md.as_bytes())?;
    write_atomic(&dir.join("comparison.json"), serde_json::to_string_pretty(rows)?.as_bytes())?;
    Ok(())
}

/// Runs the scene's MPC in closed loop and writes `summary.json`, `cycles.csv` (per replan:
/// time, status, iterations, cost, solve time, base error, kept plan, sampled start,
/// line-search trials) and `trace.csv` (per simulator step:
/// time, base position, base error, then the state `q`, `v` in `simulate`'s column names, so
/// the app opens it as a replay) into `dir`.
pub fn run_mpc(scene: &Scene, settings: &MpcSettings, dir: Option<&Path>) -> Result<MpcReport> {
    let mut last_print = -1.0;
    let sim = scene.settled(settings.settle)?;
    let r = run_closed_loop(&scene.file.name, sim, &scene.pulls, settings, None, &mut |c| {
        if c.t - last_print >= 0.25 - 1e-9 {
            last_print = c.t;
            eprintln!(
                "  t {:5.2} s  base error {:6.1} mm  solve {:5.2} ms  {:?}",
                c.t,
                1e3 * c.base_error_m,
                c.solve_ms,
                c.status
            );
        }
    })?;
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
        let mut cy = String::from(
            "t,status,iterations,cost,solve_ms,base_error_m,kept_previous,sampled_start,line_search_trials\n",
        );
        for c in &r.cycles {
            let sampled = c.sampled_start.map(|i| i.to_string()).unwrap_or_default();
            let _ = writeln!(
                cy,
                "{},{:?},{},{},{},{},{},{sampled},{}",
                c.t, c.status, c.iterations, c.cost, c.solve_ms, c.base_error_m, c.kept_previous, c.line_search_trials
            );
        }
        write_atomic(&dir.join("cycles.csv"), cy.as_bytes())?;
        let (qn, vn, _) = contactlab::sim::record::state_names(&scene.model);
        let mut tr = format!("t,base_x,base_y,base_z,base_error_m,{},{}\n", qn.join(","), vn.join(","));
        for ((t, p, e), (q, v)) in r.trace.iter().zip(&r.states) {
            let _ = write!(tr, "{t},{},{},{},{e}", p[0], p[1], p[2]);
            for x in q.iter().chain(v) {
                let _ = write!(tr, ",{x}");
            }
            tr.push('\n');
        }
        write_atomic(&dir.join("trace.csv"), tr.as_bytes())?;
        write_atomic(&dir.join("summary.json"), serde_json::to_string_pretty(&r.summary)?.as_bytes())?;
    }
    Ok(r)
}

/// `contactlab mpc --pull-sweep`: every pull of the sweep for MPC with each sensitivity (or the
/// one named) and for the scene's own controller, from the same settled start.
pub fn mpc_pull_sweep(
    scene: &Path,
    iterations: Option<usize>,
    sensitivity: Option<String>,
    forces: &str,
    directions: &str,
    out: Option<&Path>,
) -> Result<()> {
    use contactlab::ocp::pull_sweep::{
        largest_recovered, pull_sweep, PullDirection, PullSweepSettings, SweepController,
    };
    let out = out.context("--pull-sweep needs --out DIR")?;
    let sc = Scene::load(scene)?;
    let mut settings = sc.mpc_settings()?;
    if let Some(n) = iterations {
        settings.iterations = n.max(1);
    }
    let forces = PullSweepSettings::parse_forces(forces).map_err(|e| anyhow::anyhow!("--pull-sweep: {e}"))?;
    let directions = directions
        .split(',')
        .map(|d| d.parse::<PullDirection>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("--directions: {e}"))?;
    let sweep = PullSweepSettings { forces, directions, ..PullSweepSettings::default() };
    let kinds: Vec<SensitivityKind> = match sensitivity.as_deref() {
        None | Some("all") => vec![SensitivityKind::Exact, SensitivityKind::Signorini, SensitivityKind::Relaxed],
        Some(s) => vec![s.parse()?],
    };
    let mut controllers: Vec<SweepController> =
        kinds.iter().map(|k| SweepController::Mpc(k.with(settings.kappa, settings.delta))).collect();
    controllers.push(SweepController::Baseline);
    let start = sc.settled(settings.settle)?;
    let machine = contactlab::io::machine_stamp();
    let runs = pull_sweep(&start, &controllers, &settings, &sweep, None, &mut |o| {
        eprintln!(
            "  {:>8} {:>6.0} N  {:<16} {}  max {:6.1} mm  final {:6.1} mm  footfalls {}{}{}",
            o.direction.name(),
            o.force_n,
            o.controller,
            if o.recovered { "recovered" } else { "not recovered" },
            1e3 * o.max_base_error_m,
            1e3 * o.final_base_error_m,
            o.footfalls,
            if o.trunk_touched { ", trunk touched" } else { "" },
            if o.failed_replans > 0 { format!(", {} failed replans", o.failed_replans) } else { String::new() }
        )
    })?;
    let names: Vec<String> = controllers.iter().map(|c| c.name()).collect();
    let mut md = format!(
        "# {}: pull sweep ({} s pulls on the {} from {} s after control takes over; recovered = back within {} cm within {} s after the pull and still there {} s later, trunk never on the ground, no failed step; single runs from one settled start)\n\n",
        sc.file.name, sweep.duration, sweep.body, sweep.start, 100.0 * sweep.tolerance, sweep.recovery_time, sweep.hold
    );
    let mut summary = Vec::new();
    for &d in &sweep.directions {
        let _ = writeln!(md, "## {} pulls: recovered? (footfalls)\n", d.name());
        let _ = write!(md, "| controller |");
        for f in &sweep.forces {
            let _ = write!(md, " {f:.0} N |");
        }
        let _ = writeln!(md, " largest force recovered (N) | replan ms median / p95 / max | failed replans |");
        let _ = writeln!(md, "|---|{}---|---|---|", "---|".repeat(sweep.forces.len()));
        for name in &names {
            let these: Vec<_> = runs.iter().filter(|o| &o.controller == name && o.direction == d).collect();
            let _ = write!(md, "| {name} |");
            for o in &these {
                let _ = write!(md, " {} ({}) |", if o.recovered { "yes" } else { "no" }, o.footfalls);
            }
            let largest = largest_recovered(&runs, name, d);
            // NaN (no MPC runs) folds away: max(NaN, x) = x.
            let worst = these.iter().map(|o| o.solve_ms_max).fold(f64::NAN, f64::max);
            let med = |v: Vec<f64>| {
                let mut v = v;
                v.sort_by(f64::total_cmp);
                if v.is_empty() {
                    f64::NAN
                } else {
                    v[v.len() / 2]
                }
            };
            let (m50, m95) = (
                med(these.iter().map(|o| o.solve_ms_median).filter(|x| x.is_finite()).collect()),
                med(these.iter().map(|o| o.solve_ms_p95).filter(|x| x.is_finite()).collect()),
            );
            let timing = if m50.is_finite() { format!("{m50:.2} / {m95:.2} / {worst:.2}") } else { "-".into() };
            let failed: usize = these.iter().map(|o| o.failed_replans).sum();
            let _ = writeln!(md, " {largest:.0} | {timing} | {failed} |");
            summary.push(serde_json::json!({ "controller": name, "direction": d, "largest_recovered_n": largest, "failed_replans": failed }));
        }
        md.push('\n');
    }
    md.push_str("Replan times: the median over the runs of each run's median and p95, and the largest of all.\n");
    // What ended the runs that stopped at a failed step, per status.
    let mut ended: std::collections::BTreeMap<String, usize> = Default::default();
    for (status, _) in runs.iter().filter_map(|o| o.failed_step) {
        *ended.entry(format!("{status:?}")).or_default() += 1;
    }
    if !ended.is_empty() {
        let list: Vec<String> = ended.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let _ = writeln!(md, "\nRuns ended by a failed step, by the step's status: {}.", list.join(", "));
    }
    print!("{md}");
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let mut csv = String::from("direction,force_n,controller,recovered,recovery_time_s,max_base_error_m,final_base_error_m,footfalls,trunk_touched,joint_range_excess,failed_steps,failed_replans,solve_ms_median,solve_ms_p95,solve_ms_max\n");
    for o in &runs {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            o.direction.name(),
            o.force_n,
            o.controller,
            o.recovered,
            o.recovery_time_s.map(|t| t.to_string()).unwrap_or_default(),
            o.max_base_error_m,
            o.final_base_error_m,
            o.footfalls,
            o.trunk_touched,
            o.joint_range_excess,
            o.failed_steps,
            o.failed_replans,
            o.solve_ms_median,
            o.solve_ms_p95,
            o.solve_ms_max
        );
    }
    let json = serde_json::json!({
        "scene": sc.file.name, "machine": machine, "sweep": sweep, "mpc": settings,
        "largest_recovered": summary, "runs": runs,
    });
    write_atomic(&out.join("pull_sweep.md"), md.as_bytes())?;
    write_atomic(&out.join("pull_sweep.csv"), csv.as_bytes())?;
    write_atomic(&out.join("pull_sweep.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    println!("wrote {}/pull_sweep.md, pull_sweep.csv and pull_sweep.json", out.display());
    Ok(())
}

/// `contactlab cito`.
pub fn cito(
    scene: &Path,
    sensitivity: Option<String>,
    iterations: Option<usize>,
    kappa: Option<f64>,
    delta: Option<f64>,
    out: &Path,
) -> Result<()> {
    let sc = Scene::load(scene)?;
    let which = match sensitivity {
        Some(s) => s,
        None => sc.cito_settings()?.sensitivity.name().to_string(),
    };
    let list = cito_settings(&sc, &which, kappa, delta, iterations)?;
    let mut rows = Vec::new();
    for s in &list {
        let dir = if list.len() > 1 { out.join(s.sensitivity.name()) } else { out.to_path_buf() };
        let r = run_cito(&sc, s, &dir)?;
        rows.push(r.summary(&sc.file.name));
    }
    print!("{}", comparison_table(&rows));
    if list.len() > 1 {
        write_comparison(&sc, &rows, out)?;
        println!("wrote {}/comparison.md, comparison.json and one directory per sensitivity", out.display());
    } else {
        println!("wrote {}/trajectory.csv, iterations.csv, schedule.csv, summary.png, summary.json", out.display());
    }
    Ok(())
}

/// `contactlab cito --starts N`: every sensitivity from the same `n` perturbed starts
/// (`ocp::starts`); writes `starts.md` (mean and spread per sensitivity) and `starts.json` (those
/// rows and every run's summary) into `out`.
pub fn cito_starts(
    scene: &Path,
    sensitivity: Option<String>,
    iterations: Option<usize>,
    kappa: Option<f64>,
    delta: Option<f64>,
    n: usize,
    seed: u64,
    out: &Path,
) -> Result<()> {
    anyhow::ensure!((1..=1000).contains(&n), "--starts must be in 1..=1000, got {n}");
    let sc = Scene::load(scene)?;
    let which = sensitivity.unwrap_or_else(|| "all".into());
    let list = cito_settings(&sc, &which, kappa, delta, iterations)?;
    let noise = StartNoise::default();
    // Stamped before the runs: the load average is the machine's, not the runs' own.
    let machine = contactlab::io::machine_stamp();
    let mut initial = sc.simulation();
    initial.pulls.clear();
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    for settings in &list {
        let mut these = Vec::new();
        for k in 0..n as u64 {
            let start = perturbed(&initial, settings.settle, &noise, seed + k)?;
            let problem = CitoProblem::from_state(&start, settings)?;
            let r = cito::solve(&problem, None, &mut |_| {}).summary(&sc.file.name);
            eprintln!(
                "  {} start {k}: {:?}, cost {:.5}, {} iterations, {:.1} mm",
                r.sensitivity,
                r.status,
                r.final_cost,
                r.iterations,
                1e3 * r.pose_error_m
            );
            these.push(r);
        }
        rows.push(summarize(&these));
        runs.extend(these);
    }
    let table = starts_table(&rows);
    print!("{table}");
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let md = format!(
        "# {}: CITO from {n} perturbed starts (seeds {seed}..{}), the same for each sensitivity\n\n{table}",
        sc.file.name,
        seed + n as u64 - 1
    );
    write_atomic(&out.join("starts.md"), md.as_bytes())?;
    let json = serde_json::json!({ "scene": sc.file.name, "machine": machine, "seed": seed, "noise": noise, "rows": rows, "runs": runs });
    write_atomic(&out.join("starts.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    println!("wrote {}/starts.md and starts.json", out.display());
    Ok(())
}

/// One line per sensitivity: successes, final cost, pose error and iterations as mean ± std.
pub fn starts_table(rows: &[StartsRow]) -> String {
    let mut s = String::from(
        "| sensitivity | succeeded | final cost | pose error (mm) | iterations | time (s) | runs repositioning a foot | footfalls per foot (mean) | succeeded with 2+ footfalls per foot | fallback / unconverged Jacobians |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {}/{} | {:.4} ± {:.4} | {:.1} ± {:.1} | {:.1} ± {:.1} | {:.2} | {} | {} | {}/{} | {} / {} |",
            r.sensitivity,
            r.succeeded,
            r.starts,
            r.final_cost_mean,
            r.final_cost_std,
            r.pose_error_mm_mean,
            r.pose_error_mm_std,
            r.iterations_mean,
            r.iterations_std,
            r.solve_time_s_mean,
            r.repositioned_runs,
            r.footfalls_mean
                .iter()
                .map(|(f, n)| format!("{} {n:.1}", f.trim_end_matches("_foot")))
                .collect::<Vec<_>>()
                .join(", "),
            r.succeeded_stepping,
            r.starts,
            r.fallback_jacobians,
            r.unconverged_jacobians
        );
    }
    // A climb's criterion: a line under the table, so flat-ground tables keep their columns.
    let raised: Vec<String> =
        rows.iter().filter_map(|r| Some(format!("{} {}/{}", r.sensitivity, r.front_feet_raised?, r.starts))).collect();
    if !raised.is_empty() {
        let _ = writeln!(s, "\nRuns whose front feet both stood last on the step: {}.", raised.join(", "));
    }
    s
}

/// `FL 1, FR 1, RL 0, RR 0`: the primitive each touching foot stands on.
fn support_text(support: &std::collections::BTreeMap<String, usize>) -> String {
    support.iter().map(|(f, p)| format!("{} {p}", f.trim_end_matches("_foot"))).collect::<Vec<_>>().join(", ")
}

/// `contactlab mpc`.
pub fn mpc(
    scene: &Path,
    duration: Option<f64>,
    iterations: Option<usize>,
    sensitivity: Option<String>,
    out: Option<&Path>,
) -> Result<()> {
    let sc = Scene::load(scene)?;
    let mut settings = sc.mpc_settings()?;
    if let Some(d) = duration {
        if !(d.is_finite() && d > 0.0) {
            anyhow::bail!("--duration must be a positive number of seconds, got {d}");
        }
        settings.duration = d;
    }
    if let Some(n) = iterations {
        settings.iterations = n.max(1);
    }
    if let Some(s) = sensitivity {
        settings.sensitivity = s.parse()?;
    }
    let r = run_mpc(&sc, &settings, out)?;
    let s = &r.summary;
    println!(
        "{}: {} cycles of {} knots, {} iteration(s) each, sensitivity {}",
        s.scene, s.cycles, s.horizon_knots, s.iterations_per_cycle, s.sensitivity
    );
    println!(
        "base error: max {:.1} mm, final {:.1} mm; recovered: {}{}; a foot lifted: {}",
        1e3 * s.max_base_error_m,
        1e3 * s.final_base_error_m,
        s.recovered,
        s.recovery_time_s.map(|t| format!(" ({t:.2} s after the pull)")).unwrap_or_default(),
        s.stepped
    );
    println!(
        "solve: median {:.2} ms, p95 {:.2} ms, max {:.2} ms; {:.2}x real time; line-search trials per replan: \
         median {}, p95 {}, max {}",
        s.solve_ms_median,
        s.solve_ms_p95,
        s.solve_ms_max,
        s.realtime_factor,
        s.line_search_trials_median,
        s.line_search_trials_p95,
        s.line_search_trials_max
    );
    if let Some(o) = out {
        println!("wrote {}/summary.json, cycles.csv, trace.csv", o.display());
    }
    Ok(())
}
