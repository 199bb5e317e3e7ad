//! The `contactlab` binary: the desktop app (behind the default `viewer` feature; no
//! subcommand opens it on the default scene) and headless subcommands.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use contactlab::check_dynamics;
use contactlab::model::urdf::{self, RootJoint};
use contactlab::scene::Scene;
use contactlab::sim::record::CsvRecorder;
use contactlab::sim::StepStatus;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "contactlab", version, about = "Hard-contact simulation and contact sensitivities for legged robots")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scene and write per-step state, contact impulses, modes and solver stats.
    Simulate {
        /// Scene file (RON), e.g. scenes/quadruped_stand.ron.
        scene: PathBuf,
        /// Simulated time (s); defaults to the scene's `duration`, else 1 s.
        #[arg(long)]
        duration: Option<f64>,
        /// Output CSV (written atomically).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare M, nle, rnea, aba, foot positions and foot Jacobians with reference values.
    /// Gradient-quality sweep (DESIGN 4): df/ds per contact sensitivity against the local and
    /// smoothed finite-difference truths, across a contact transition. Writes DIR/sweep.csv,
    /// DIR/sweep.png and DIR/summary.json. Defaults come from the scene's `gradcheck` section.
    Gradcheck {
        /// Scene file with a `gradcheck` section, e.g. scenes/sweep_foot_touchdown.ron.
        scene: PathBuf,
        /// base_x | base_y | base_z | pull:N | torque:JOINT[,JOINT] (names or *suffix).
        #[arg(long)]
        param: Option<String>,
        #[arg(long, allow_hyphen_values = true)]
        from: Option<f64>,
        #[arg(long, allow_hyphen_values = true)]
        to: Option<f64>,
        #[arg(long)]
        points: Option<usize>,
        /// all, or a comma-separated subset of exact, signorini, relaxed.
        #[arg(long, default_value = "all")]
        sensitivity: String,
        /// Relaxation kappa (N s m/s) of the relaxed sensitivities.
        #[arg(long)]
        kappa: Option<f64>,
        /// Normal shift delta (m/s) of the relaxed sensitivity.
        #[arg(long)]
        delta: Option<f64>,
        /// Smoothing scale of the smoothed truth (parameter units).
        #[arg(long)]
        sigma: Option<f64>,
        /// Antithetic sample pairs of the smoothed truth.
        #[arg(long)]
        samples: Option<usize>,
        /// Rollout length (s).
        #[arg(long)]
        horizon: Option<f64>,
        /// Worker threads.
        #[arg(long)]
        threads: Option<usize>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Open the desktop app on a scene (the default without a subcommand is
    /// scenes/quadruped_stand.ron). Needs the `viewer` feature (on by default).
    View {
        /// Scene file (RON).
        scene: Option<PathBuf>,
        /// Render `--frames` frames, save a screenshot of the window here and exit.
        #[arg(long)]
        screenshot: Option<PathBuf>,
        /// Frames to render before the screenshot.
        #[arg(long, default_value_t = 30)]
        frames: u32,
        /// Start a gradient-quality sweep from the initial state and show its plot (with
        /// --screenshot: wait for it before the screenshot).
        #[arg(long)]
        sweep: bool,
        /// Window size in logical pixels.
        #[arg(long, default_value_t = 1280)]
        width: u32,
        #[arg(long, default_value_t = 800)]
        height: u32,
        /// Open a tool window at start: control (CITO and MPC), policy (learned policies and
        /// training) or contactnets (learned contact geometry against real tosses). Repeatable.
        #[arg(long, value_parser = ["control", "policy", "contactnets"])]
        open: Vec<String>,
        /// Start each opened tool's main job at once (control: MPC if the scene has an `mpc`
        /// section, else CITO; policy: run the loaded policy; contactnets: replay the toss).
        #[arg(long)]
        start: bool,
        /// A policy file (JSON) for the policy window.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// A learned ContactNets model (JSON) and a toss CSV for the contactnets window.
        #[arg(long)]
        model: Option<PathBuf>,
        #[arg(long)]
        toss: Option<PathBuf>,
    },
    /// Contact-implicit trajectory optimization (DESIGN 5): DDP over the contact simulator
    /// toward the scene's `cito` base-pose target, no contact schedule. Writes
    /// DIR/trajectory.csv, iterations.csv, schedule.csv, summary.png and summary.json;
    /// `--sensitivity all` runs all three from the same start into DIR/<sensitivity>/ and writes
    /// DIR/comparison.md and DIR/comparison.json.
    Cito {
        /// Scene file with a `cito` section, e.g. scenes/cito_raise.ron.
        scene: PathBuf,
        /// exact, signorini, relaxed or all; defaults to the scene's.
        #[arg(long)]
        sensitivity: Option<String>,
        /// DDP iteration limit; defaults to the scene's.
        #[arg(long)]
        iterations: Option<usize>,
        /// Relaxation kappa (N s m/s) of the relaxed sensitivities.
        #[arg(long)]
        kappa: Option<f64>,
        /// Normal shift delta (m/s) of the relaxed sensitivity.
        #[arg(long)]
        delta: Option<f64>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Contact-implicit MPC in closed loop (DESIGN 5): replans the scene's `mpc` horizon every
    /// knot from the measured state while the simulator runs with the scene's pulls; reports
    /// tracking error, solve times and whether the base recovered. `--out DIR` writes
    /// DIR/summary.json, cycles.csv and trace.csv.
    Mpc {
        /// Scene file with an `mpc` section, e.g. scenes/mpc_pull.ron.
        scene: PathBuf,
        /// Closed-loop time (s); defaults to the scene's.
        #[arg(long)]
        duration: Option<f64>,
        /// DDP iterations per control period; defaults to the scene's.
        #[arg(long)]
        iterations: Option<usize>,
        /// exact, signorini or relaxed; defaults to the scene's.
        #[arg(long)]
        sensitivity: Option<String>,
        /// Output directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Policy learning (DESIGN 6): train a policy on the scene's `learn` task by BPTT through
    /// the contact simulator or by PPO. Writes DIR/progress.csv (return against simulated steps
    /// and wall time), DIR/checkpoint.json, DIR/policy.json and DIR/summary.json.
    Train {
        /// bptt | ppo.
        algorithm: String,
        /// Scene file with a `learn` section, e.g. scenes/learn_stand.ron.
        scene: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Simulated-step budget (default: 100000 for bptt, 1000000 for ppo).
        #[arg(long)]
        steps: Option<usize>,
        /// BPTT's contact sensitivity: exact, signorini or relaxed (default: the scene's).
        #[arg(long)]
        sensitivity: Option<String>,
        /// Adam learning rate (default: 1e-3 for bptt, 3e-4 for ppo).
        #[arg(long)]
        lr: Option<f64>,
        /// BPTT rollouts per iteration (default 16).
        #[arg(long)]
        batch: Option<usize>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Several seeds of BPTT (relaxed, exact) and PPO on the scene's `learn` task; writes
    /// DIR/comparison.md, DIR/comparison.json and DIR/learning.png (runs in DIR/<learner>/seed<S>/
    /// are reused when their summary.json exists).
    CompareLearning {
        /// Scene file with a `learn` section (default scenes/learn_stand.ron).
        #[arg(default_value = "scenes/learn_stand.ron")]
        scene: PathBuf,
        /// Comma-separated seeds.
        #[arg(long, default_value = "0,1,2")]
        seeds: String,
        /// Comma-separated learners.
        #[arg(long, default_value = "bptt-relaxed,bptt-exact,ppo")]
        algorithms: String,
        /// Simulated-step budget of each BPTT run.
        #[arg(long, default_value_t = 100_000)]
        bptt_steps: usize,
        /// Simulated-step budget of each PPO run.
        #[arg(long, default_value_t = 1_000_000)]
        ppo_steps: usize,
        #[arg(long)]
        out: PathBuf,
    },
    /// ContactNets (issue 7): learn the contact geometry of a tossed cube from trajectories.
    Contactnets {
        #[command(subcommand)]
        command: ContactnetsCommand,
    },
    CheckDynamics {
        /// URDF file; the root link becomes a free-flyer.
        #[arg(long)]
        urdf: PathBuf,
        /// Fixture JSON in the format of ../shared/fixtures/rbd/.
        #[arg(long)]
        fixture: PathBuf,
        /// Largest relative error accepted.
        #[arg(long, default_value_t = 1e-9)]
        tolerance: f64,
    },
}

#[derive(Subcommand)]
enum ContactnetsCommand {
    /// Train on the first N training tosses of DIR's seeded, duplicate-aware split; prints the
    /// rollout metrics on the test split and writes MODEL (JSON).
    Train {
        /// Folder of toss CSVs (with params.json), e.g. ../shared/data/cube_tosses.
        #[arg(long)]
        data: PathBuf,
        /// poly | deep | e2e.
        #[arg(long, default_value = "poly")]
        method: String,
        /// Number of training tosses.
        #[arg(long)]
        tosses: usize,
        /// Seed of the split, the initialization and the batches.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Maximum number of Adam steps.
        #[arg(long)]
        steps: Option<usize>,
        /// Transitions per Adam step.
        #[arg(long)]
        batch: Option<usize>,
        /// Learning rate (poly, deep; e2e uses --lr-e2e).
        #[arg(long)]
        lr: Option<f64>,
        #[arg(long)]
        lr_e2e: Option<f64>,
        /// Evaluations without improvement before stopping.
        #[arg(long)]
        patience: Option<usize>,
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Output model file (JSON, written atomically).
        #[arg(long)]
        out: PathBuf,
    },
    /// Roll out every toss CSV of a folder from its first frame and write the metrics (JSON).
    Eval {
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        data: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// Metrics against the number of training tosses per method and seed: writes DIR/sweep.json,
    /// DIR/sweep.md (table) and DIR/sweep.png.
    Sweep {
        #[arg(long)]
        data: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Comma-separated numbers of training tosses.
        #[arg(long, default_value = "1,4,16,64,256")]
        tosses: String,
        /// Comma-separated seeds.
        #[arg(long, default_value = "0,1")]
        seeds: String,
        /// Comma-separated methods.
        #[arg(long, default_value = "poly,deep,e2e")]
        methods: String,
        #[arg(long)]
        steps: Option<usize>,
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    // The app installs Bevy's log subscriber; the headless commands use ours.
    if !matches!(cli.command, None | Some(Command::View { .. })) {
        tracing_subscriber::fmt().with_writer(std::io::stderr).with_target(false).init();
    }
    match cli.command {
        None => view(ViewArgs {
            scene: None,
            screenshot: None,
            frames: 30,
            sweep: false,
            width: 1280,
            height: 800,
            open: vec![],
            start: false,
            policy: None,
            model: None,
            toss: None,
        }),
        Some(Command::View { scene, screenshot, frames, sweep, width, height, open, start, policy, model, toss }) => {
            view(ViewArgs { scene, screenshot, frames, sweep, width, height, open, start, policy, model, toss })
        }
        Some(Command::Simulate { scene, duration, out }) => simulate(scene, duration, out),
        Some(Command::CheckDynamics { urdf, fixture, tolerance }) => check(urdf, fixture, tolerance),
        Some(Command::Cito { scene, sensitivity, iterations, kappa, delta, out }) => {
            let sc = Scene::load(&scene)?;
            let which = match sensitivity {
                Some(s) => s,
                None => sc.file.cito.as_ref().map(|c| c.sensitivity.clone()).unwrap_or_else(|| "relaxed".into()),
            };
            let list = contactlab::optimize::sensitivities(&sc, &which, kappa, delta)?;
            let mut rows = Vec::new();
            for s in &list {
                let dir =
                    if list.len() > 1 { out.join(contactlab::ocp::cito::sensitivity_name(s)) } else { out.clone() };
                let r = contactlab::optimize::run_cito(&sc, *s, iterations, &dir)?;
                rows.push(r.summary(&sc.file.name));
            }
            print!("{}", contactlab::optimize::comparison_table(&rows));
            if list.len() > 1 {
                contactlab::optimize::write_comparison(&sc, &rows, &out)?;
                println!("wrote {}/comparison.md, comparison.json and one directory per sensitivity", out.display());
            } else {
                println!(
                    "wrote {}/trajectory.csv, iterations.csv, schedule.csv, summary.png, summary.json",
                    out.display()
                );
            }
            Ok(())
        }
        Some(Command::Mpc { scene, duration, iterations, sensitivity, out }) => {
            let sc = Scene::load(&scene)?;
            let Some(spec) = sc.file.mpc.clone() else {
                bail!("{}: the scene has no `mpc` section", scene.display());
            };
            if let Some(d) = duration {
                if !(d.is_finite() && d > 0.0) {
                    bail!("--duration must be a positive number of seconds, got {d}");
                }
            }
            let sens = match sensitivity {
                Some(s) => Some(
                    contactlab::ocp::cito::parse_sensitivity(&s, spec.kappa, spec.delta).map_err(anyhow::Error::msg)?,
                ),
                None => None,
            };
            let r = contactlab::optimize::run_mpc(&sc, duration, iterations, sens, out.as_deref())?;
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
                "solve: median {:.2} ms, p95 {:.2} ms, max {:.2} ms; {:.2}x real time",
                s.solve_ms_median, s.solve_ms_p95, s.solve_ms_max, s.realtime_factor
            );
            if let Some(o) = &out {
                println!("wrote {}/summary.json, cycles.csv, trace.csv", o.display());
            }
            Ok(())
        }
        Some(Command::Contactnets { command }) => contactnets(command),
        Some(Command::Train { algorithm, scene, seed, steps, sensitivity, lr, batch, out }) => {
            use contactlab::learn::report::{run_train, Algorithm};
            let sc = Scene::load(&scene)?;
            let task = contactlab::learn::Task::from_scene(&sc).map_err(anyhow::Error::msg)?;
            let algo = match (algorithm.as_str(), sensitivity) {
                ("bptt", Some(s)) => Algorithm::parse(&format!("bptt-{s}"), &task)?,
                ("bptt" | "ppo", None) => Algorithm::parse(&algorithm, &task)?,
                ("ppo", Some(_)) => bail!("--sensitivity applies to bptt only"),
                (a, _) => bail!("unknown learner `{a}`: expected bptt or ppo"),
            };
            let steps = steps.unwrap_or(if algo == Algorithm::Ppo {
                contactlab::learn::report::DEFAULT_PPO_STEPS
            } else {
                contactlab::learn::report::DEFAULT_BPTT_STEPS
            });
            if steps == 0 {
                bail!("--steps must be at least 1");
            }
            eprintln!(
                "{}: {} on `{}` ({} steps of {} s per episode), seed {seed}, {steps} simulated steps",
                sc.file.name,
                algo.name(),
                task.spec.task,
                task.steps,
                task.settings.dt
            );
            if lr.is_some_and(|l| !(l.is_finite() && l > 0.0)) {
                bail!("--lr must be a positive number");
            }
            if batch == Some(0) || (batch.is_some() && algo == Algorithm::Ppo) {
                bail!("--batch: a positive number of rollouts, for bptt only");
            }
            let s = run_train(&task, algo, seed, steps, lr, batch, &out, true)?;
            println!(
                "{}: final return {:.3} (initial {:.3}, target {:.3}{}) after {} simulated steps in {:.1} s",
                s.algorithm,
                s.final_return,
                s.initial_return,
                s.target_return,
                s.steps_to_target.map(|n| format!(", reached at {n} steps")).unwrap_or_default(),
                s.sim_steps,
                s.seconds
            );
            println!("wrote {}/progress.csv, checkpoint.json, policy.json, summary.json", out.display());
            Ok(())
        }
        Some(Command::CompareLearning { scene, seeds, algorithms, bptt_steps, ppo_steps, out }) => {
            let sc = Scene::load(&scene)?;
            let task = contactlab::learn::Task::from_scene(&sc).map_err(anyhow::Error::msg)?;
            let settings = contactlab::learn::report::CompareSettings {
                seeds: list(&seeds, "seeds")?,
                algorithms: algorithms.split(',').map(|s| s.trim().to_string()).collect(),
                bptt_steps,
                ppo_steps,
            };
            std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
            let (_, table) = contactlab::learn::report::compare(&task, &settings, &out)?;
            print!("{table}");
            println!("wrote {}/comparison.md, comparison.json, learning.png", out.display());
            Ok(())
        }
        Some(Command::Gradcheck {
            scene,
            param,
            from,
            to,
            points,
            sensitivity,
            kappa,
            delta,
            sigma,
            samples,
            horizon,
            threads,
            out,
        }) => {
            let sc = contactlab::scene::Scene::load(&scene)?;
            let o = contactlab::gradcheck::Overrides {
                param,
                from,
                to,
                points,
                horizon,
                sigma,
                samples,
                kappa,
                delta,
                sensitivity: Some(sensitivity),
                threads,
            };
            let started = std::time::Instant::now();
            let r = contactlab::gradcheck::run(&sc, &o, &out)?;
            print!("{}", contactlab::gradcheck::table(&r));
            println!(
                "wrote {}/sweep.csv, sweep.png, summary.json in {:.1} s",
                out.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}

struct ViewArgs {
    scene: Option<PathBuf>,
    screenshot: Option<PathBuf>,
    frames: u32,
    sweep: bool,
    width: u32,
    height: u32,
    open: Vec<String>,
    start: bool,
    policy: Option<PathBuf>,
    model: Option<PathBuf>,
    toss: Option<PathBuf>,
}

#[cfg(feature = "viewer")]
fn view(a: ViewArgs) -> Result<()> {
    contactlab::app::run(contactlab::app::ViewerOptions {
        scene: a.scene,
        screenshot: a.screenshot,
        frames: a.frames,
        sweep: a.sweep,
        width: a.width,
        height: a.height,
        open: a.open,
        start: a.start,
        policy: a.policy,
        model: a.model,
        toss: a.toss,
    })
}

#[cfg(not(feature = "viewer"))]
fn view(a: ViewArgs) -> Result<()> {
    // Say what was asked for, so a headless build's user knows which run they did not get.
    let ViewArgs { scene, screenshot, frames, sweep, width, height, open, start, policy, model, toss } = a;
    let _ = (screenshot, frames, sweep, width, height, open, start, policy, model, toss);
    bail!(
        "cannot open {}: this build has no desktop app (built without the `viewer` feature).\n\
         Headless: contactlab simulate scenes/quadruped_stand.ron --duration 2 --out run.csv\n\
         (contactlab --help lists every command)",
        scene.map_or_else(|| "the default scene".to_string(), |p| p.display().to_string())
    )
}

fn simulate(path: PathBuf, duration: Option<f64>, out: Option<PathBuf>) -> Result<()> {
    let scene = Scene::load(&path)?;
    for w in &scene.warnings {
        eprintln!("warning: {w}");
    }
    let duration = duration.or(scene.file.duration).unwrap_or(1.0);
    if !(duration.is_finite() && duration > 0.0) {
        bail!("--duration must be a positive number of seconds, got {duration}");
    }
    let mut sim = scene.simulation();
    let steps = (duration / scene.settings.dt).round() as u64;
    let mut rec = match &out {
        Some(p) => Some(CsvRecorder::create(p, &sim.model).with_context(|| format!("{}: cannot create", p.display()))?),
        None => None,
    };
    let bar = if steps >= 20_000 {
        let b = ProgressBar::new(steps);
        b.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {elapsed} < {eta}").expect("template"));
        b
    } else {
        ProgressBar::hidden()
    };
    let mut iterations = Vec::with_capacity(steps as usize);
    let (mut max_pen, mut not_converged, mut failure) = (0.0f64, 0usize, None);
    let start = Instant::now();
    for n in 0..steps {
        let info = sim.step();
        if !info.status.advanced() {
            failure = Some((n, info.status));
            break;
        }
        if info.status == StepStatus::SolverNotConverged {
            not_converged += 1;
        }
        iterations.push(info.solver.iterations);
        max_pen = max_pen.max(info.penetration);
        if let Some(r) = rec.as_mut() {
            r.record(&sim, &info)?;
        }
        if n % 1000 == 0 {
            bar.set_position(n);
        }
    }
    bar.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    if let Some(r) = rec {
        r.finish()?;
    }
    iterations.sort_unstable();
    let median = iterations.get(iterations.len() / 2).copied().unwrap_or(0);
    println!(
        "{}: {} steps of {} s ({:.3} s simulated) in {:.3} s wall ({:.1}x real time)",
        scene.file.name,
        iterations.len(),
        scene.settings.dt,
        sim.t,
        wall,
        sim.t / wall.max(1e-9)
    );
    println!(
        "solver: median {} Newton iterations, {} steps not converged; max penetration {:.2e} m",
        median, not_converged, max_pen
    );
    if let Some(p) = &out {
        println!("wrote {}", p.display());
    }
    if let Some((n, status)) = failure {
        bail!("step {n} (t = {:.4} s) failed: {status:?}; the state was not advanced", sim.t);
    }
    Ok(())
}

fn check(urdf_path: PathBuf, fixture: PathBuf, tolerance: f64) -> Result<()> {
    let loaded = urdf::load(&urdf_path, RootJoint::FreeFlyer)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let report = check_dynamics::check(&loaded.model, &fixture)?;
    println!("{} samples from {}", report.samples, fixture.display());
    println!("{:<12} {:>12}", "quantity", "max rel err");
    for (name, err) in &report.errors {
        println!("{name:<12} {err:>12.3e}");
    }
    println!("{:<12} {:>12.3e}", "aba(rnea(a))", report.aba_rnea_roundtrip);
    if report.max_error() > tolerance {
        bail!("max relative error {:.3e} exceeds {tolerance:e}", report.max_error());
    }
    println!("ok: all within {tolerance:e}");
    Ok(())
}

fn list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>> {
    s.split(',').map(|x| x.trim().parse::<T>().map_err(|_| anyhow::anyhow!("--{what}: cannot parse `{x}`"))).collect()
}

fn contactnets(command: ContactnetsCommand) -> Result<()> {
    use contactlab::learn::contactnets::{data, eval, model, sweep, train};
    match command {
        ContactnetsCommand::Train {
            data: dir,
            method,
            tosses,
            seed,
            steps,
            batch,
            lr,
            lr_e2e,
            patience,
            threads,
            out,
        } => {
            let method: model::Method = method.parse().map_err(|e: String| anyhow::anyhow!("--method: {e}"))?;
            let d = data::Dataset::load(&dir)?;
            let mut ts = train::TrainSettings { method, seed, threads, ..Default::default() };
            ts.steps = steps.unwrap_or(ts.steps);
            ts.batch = batch.unwrap_or(ts.batch);
            ts.lr = lr.unwrap_or(ts.lr);
            ts.lr_e2e = lr_e2e.unwrap_or(ts.lr_e2e);
            ts.patience = patience.unwrap_or(ts.patience);
            let run =
                train::train_on_split(&d, tosses, &ts, train::TrainMonitor::default()).map_err(anyhow::Error::msg)?;
            let (mut m, rep) = (run.model, run.report);
            let test: Vec<_> = run.split.test.iter().map(|&i| &d.tosses[i]).collect();
            let ev = eval::evaluate(&m, &test, threads);
            m.info["test"] = serde_json::json!({"tosses": ev.tosses, "position_error_pct": ev.position_error_pct,
                "angle_error_deg": ev.angle_error_deg, "penetration_pct": ev.penetration_pct});
            m.save(&out).with_context(|| format!("{}: cannot write", out.display()))?;
            println!(
                "{}: {} tosses ({} transitions), {} steps (best {} , valid loss {:.4e}) in {:.1} s; {} failed inner solves",
                method.name(),
                tosses,
                run.train_transitions,
                rep.steps,
                rep.best_step,
                rep.best_valid,
                rep.wall_seconds,
                rep.failed_solves
            );
            if method != model::Method::E2e {
                println!("mu {:.4}, max vertex error {:.4} half widths", m.mu, eval::vertex_error(&m));
            }
            println!(
                "test split ({} tosses): position {:.2} % width, angle {:.2} deg, penetration {:.3} % width",
                ev.tosses, ev.position_error_pct, ev.angle_error_deg, ev.penetration_pct
            );
            println!("wrote {}", out.display());
            Ok(())
        }
        ContactnetsCommand::Eval { model: path, data: dir, out, threads } => {
            let m = model::load(&path)?;
            let d = data::Dataset::load(&dir)?;
            let all: Vec<_> = d.tosses.iter().collect();
            let ev = eval::evaluate(&m, &all, threads);
            let text = serde_json::to_string_pretty(&ev)?;
            contactlab::io::write_atomic(&out, text.as_bytes())
                .with_context(|| format!("{}: cannot write", out.display()))?;
            println!(
                "{} tosses: position {:.2} % width, angle {:.2} deg, penetration {:.3} % width ({} rollouts failed)",
                ev.tosses, ev.position_error_pct, ev.angle_error_deg, ev.penetration_pct, ev.failed_rollouts
            );
            println!("wrote {}", out.display());
            Ok(())
        }
        ContactnetsCommand::Sweep { data: dir, out, tosses, seeds, methods, steps, threads } => {
            let d = data::Dataset::load(&dir)?;
            let mut s = sweep::SweepSettings {
                tosses: list(&tosses, "tosses")?,
                seeds: list(&seeds, "seeds")?,
                methods: list(&methods, "methods")?,
                ..Default::default()
            };
            s.train.threads = threads;
            if let Some(st) = steps {
                s.train.steps = st;
            }
            std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
            let started = Instant::now();
            let rows = sweep::run(&d, &s, |r| {
                println!(
                    "{:>4} {:>4} tosses seed {}: pos {:6.2} %  angle {:6.2} deg  pen {:6.3} %  vertex err {:.3}  mu {:.3}  {} steps {:.1} s",
                    r.method.name(),
                    r.tosses,
                    r.seed,
                    r.position_error_pct,
                    r.angle_error_deg,
                    r.penetration_pct,
                    r.vertex_error,
                    r.mu,
                    r.steps,
                    r.train_seconds
                );
            })
            .map_err(|e| anyhow::anyhow!(e))?;
            let json = serde_json::to_string_pretty(&serde_json::json!({"settings": s, "rows": rows}))?;
            contactlab::io::write_atomic(&out.join("sweep.json"), json.as_bytes())?;
            let table = sweep::table(&rows);
            contactlab::io::write_atomic(&out.join("sweep.md"), table.as_bytes())?;
            // plotters writes the PNG itself: render to a temporary name, then rename into place.
            let tmp = out.join(".sweep.png.tmp.png");
            sweep::png(&rows, &tmp).map_err(|e| anyhow::anyhow!("sweep.png: {e}"))?;
            std::fs::rename(&tmp, out.join("sweep.png"))?;
            print!("{table}");
            println!(
                "wrote {}/sweep.json, sweep.md, sweep.png in {:.1} s",
                out.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}
