//! The `contactlab` command line (binary only): argument parsing and one module per command
//! family. The library computes; these modules read files, print and write results.

pub mod check_dynamics;
pub mod contactnets;
pub mod gradcheck;
pub mod jacobians;
pub mod learn;
pub mod optimize;
pub mod simulate;
pub mod view;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

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
    View(view::ViewArgs),
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
        /// Solve from this many seeded perturbations of the settled stance (joint offsets, base
        /// twist) per sensitivity, the same starts for each, and write DIR/starts.md and
        /// DIR/starts.json (mean and spread) instead of the single-run files.
        #[arg(long)]
        starts: Option<usize>,
        /// Seed of the first perturbed start (start k uses seed + k).
        #[arg(long, default_value_t = 0)]
        seed: u64,
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
        /// exact, signorini or relaxed; defaults to the scene's (with --pull-sweep: all three).
        #[arg(long)]
        sensitivity: Option<String>,
        /// Pull sweep instead of the scene's pulls: forces FROM:TO:STEP (N), e.g. 20:200:20, each
        /// held 0.3 s from 0.5 s after control takes over, applied from the same settled start to
        /// MPC with each sensitivity and to the scene's own joint PD. Writes DIR/pull_sweep.md,
        /// pull_sweep.csv and pull_sweep.json (needs --out).
        #[arg(long, value_name = "FROM:TO:STEP")]
        pull_sweep: Option<String>,
        /// Directions of the sweep's pulls: lateral (+y), forward (+x), comma-separated.
        #[arg(long, default_value = "lateral,forward")]
        directions: String,
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
        /// Simulated-step budget (default: the scene's learn.bptt.steps, 100000 unless set, for
        /// bptt; 1000000 for ppo).
        #[arg(long)]
        steps: Option<usize>,
        /// BPTT's contact sensitivity: exact, signorini or relaxed (default: the scene's).
        #[arg(long)]
        sensitivity: Option<String>,
        /// Adam learning rate (default: the scene's learn.bptt.lr, 1e-3 unless set, for bptt;
        /// 3e-4 for ppo).
        #[arg(long)]
        lr: Option<f64>,
        /// BPTT rollouts per iteration (default: the scene's learn.bptt.batch, 16 unless set).
        #[arg(long)]
        batch: Option<usize>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Several seeds of BPTT (relaxed, exact) and PPO on the scene's `learn` task; writes
    /// DIR/comparison.md, DIR/comparison.json and DIR/learning.png (runs in DIR/<learner>/seed<S>/
    /// are reused when their summary.json exists, unless --retrain).
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
        /// Simulated-step budget of each BPTT run (default: the scene's learn.bptt.steps).
        #[arg(long)]
        bptt_steps: Option<usize>,
        /// Simulated-step budget of each PPO run.
        #[arg(long, default_value_t = 1_000_000)]
        ppo_steps: usize,
        /// Train every run again, even one whose summary.json exists (scripts/reproduce does).
        #[arg(long)]
        retrain: bool,
        #[arg(long)]
        out: PathBuf,
    },
    /// ContactNets: learn the contact geometry of a tossed cube from trajectories.
    Contactnets {
        #[command(subcommand)]
        command: ContactnetsCommand,
    },
    /// Transition Jacobians A = dx+/dx and B = dx+/du (tangent space) of one step of the raw
    /// dynamics at the scene's state after --settle seconds under its controller (u: the torque
    /// of the last settling step, held; a cold step), with one contact sensitivity. Writes FILE
    /// (JSON: q, v, u, A, B, statuses)
    Jacobians {
        /// Scene file, e.g. scenes/quadruped_stand.ron.
        scene: PathBuf,
        /// Seconds under the scene's controller before the step (pulls removed).
        #[arg(long, default_value_t = 0.5)]
        settle: f64,
        /// exact, signorini(kappa=..), relaxed(kappa=.., delta=..); bare names take the defaults.
        #[arg(long, default_value = "relaxed")]
        sensitivity: String,
        /// Output JSON file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Compare M, nle, rnea, aba, foot positions and foot Jacobians with reference values
    /// (Pinocchio fixtures in ../shared/fixtures/rbd/), exiting non-zero above the tolerance.
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
pub enum ContactnetsCommand {
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

/// Parses the command line and runs the command.
pub fn run() -> Result<()> {
    let cli = Cli::parse();
    // The app installs Bevy's log subscriber; the headless commands use ours.
    if !matches!(cli.command, None | Some(Command::View(_))) {
        tracing_subscriber::fmt().with_writer(std::io::stderr).with_target(false).init();
    }
    match cli.command {
        // No subcommand: the app with `view`'s defaults.
        None => view::view(view::ViewArgs::parse_from(["contactlab"])),
        Some(Command::View(args)) => view::view(args),
        Some(Command::Simulate { scene, duration, out }) => simulate::simulate(scene, duration, out),
        Some(Command::Jacobians { scene, settle, sensitivity, out }) => {
            jacobians::run(&scene, settle, &sensitivity, &out)
        }
        Some(Command::CheckDynamics { urdf, fixture, tolerance }) => check_dynamics::check(urdf, fixture, tolerance),
        Some(Command::Cito { scene, sensitivity, iterations, kappa, delta, starts: Some(n), seed, out }) => {
            optimize::cito_starts(&scene, sensitivity, iterations, kappa, delta, n, seed, &out)
        }
        Some(Command::Cito { scene, sensitivity, iterations, kappa, delta, starts: None, out, .. }) => {
            optimize::cito(&scene, sensitivity, iterations, kappa, delta, &out)
        }
        Some(Command::Mpc { scene, iterations, sensitivity, pull_sweep: Some(forces), directions, out, .. }) => {
            optimize::mpc_pull_sweep(&scene, iterations, sensitivity, &forces, &directions, out.as_deref())
        }
        Some(Command::Mpc { scene, duration, iterations, sensitivity, pull_sweep: None, out, .. }) => {
            optimize::mpc(&scene, duration, iterations, sensitivity, out.as_deref())
        }
        Some(Command::Contactnets { command }) => contactnets::contactnets(command),
        Some(Command::Train { algorithm, scene, seed, steps, sensitivity, lr, batch, out }) => {
            learn::train(&algorithm, &scene, seed, steps, sensitivity, lr, batch, &out)
        }
        Some(Command::CompareLearning { scene, seeds, algorithms, bptt_steps, ppo_steps, retrain, out }) => {
            learn::compare(&scene, &seeds, &algorithms, bptt_steps, ppo_steps, retrain, &out)
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
            let o = contactlab::diff::sweep::SweepOverrides {
                param,
                from,
                to,
                points,
                horizon,
                sigma,
                samples,
                kappa,
                delta,
                sensitivities: Some(contactlab::diff::SensitivityKind::parse_list(&sensitivity)?),
                threads,
            };
            gradcheck::command(&scene, &o, &out)
        }
    }
}

/// A comma-separated list of values of a flag.
pub fn list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>> {
    s.split(',').map(|x| x.trim().parse::<T>().map_err(|_| anyhow::anyhow!("--{what}: cannot parse `{x}`"))).collect()
}
