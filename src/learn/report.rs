//! `contactlab train` and `contactlab compare-learning`: set-up from a scene, the files they
//! write (all atomically) and the comparison table and plot.
//!
//! `train ALGO SCENE --out DIR` writes `DIR/progress.csv` (one row per iteration: iteration,
//! simulated steps, wall time, evaluation return, batch return, loss, gradient norm, failed
//! rollouts, fallback steps), `DIR/checkpoint.json` (the policy, every tenth of the run),
//! `DIR/policy.json` (the final policy) and `DIR/summary.json` (`final_return`, `sim_steps`,
//! `seconds`, `target_return`, `steps_to_target`, ...). `compare-learning` runs several seeds of
//! each learner into `DIR/<algorithm>/seed<S>/` (a run whose `summary.json` exists is reused),
//! then writes `DIR/comparison.md`, `DIR/comparison.json` and `DIR/learning.png`. On a walk
//! task it first evaluates every run's final policy (`DIR/<algorithm>/seed<S>/walk.json`,
//! [`super::gait::evaluate_walk`] at [`WALK_EVAL_SPEED`] for [`WALK_EVAL_SECONDS`]) and the table
//! is [`walk_table`]'s.

use super::bptt::{train_bptt, BpttSettings, IterLog, TrainResult};
use super::ppo::{train_ppo, PpoSettings};
use super::task::Task;
use crate::diff::Sensitivity;
use crate::io::write_atomic;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Which learner.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Algorithm {
    Bptt(Sensitivity),
    Ppo,
}

impl Algorithm {
    pub fn name(&self) -> String {
        match self {
            Algorithm::Bptt(s) => format!("bptt-{}", s.name()),
            Algorithm::Ppo => "ppo".into(),
        }
    }

    /// `bptt` (the task's sensitivity), `bptt-exact`, `bptt-signorini`, `bptt-relaxed` or `ppo`.
    pub fn parse(name: &str, task: &Task) -> Result<Algorithm> {
        let (k, d) = (task.spec.kappa, task.spec.delta);
        Ok(match name {
            "ppo" => Algorithm::Ppo,
            "bptt" => Algorithm::Bptt(task.spec.sensitivity()),
            n => match n.strip_prefix("bptt-") {
                Some(s) => Algorithm::Bptt(s.parse::<crate::diff::SensitivityKind>()?.with(k, d)),
                None => {
                    bail!("unknown algorithm `{name}`: expected bptt, bptt-exact, bptt-signorini, bptt-relaxed or ppo")
                }
            },
        })
    }
}

/// `DIR/summary.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainSummary {
    pub algorithm: String,
    pub scene: String,
    pub task: String,
    pub seed: u64,
    /// Mean return of the final policy on the evaluation episodes.
    pub final_return: f64,
    /// Simulated training steps and wall-clock seconds of the run.
    pub sim_steps: usize,
    pub seconds: f64,
    pub iterations: usize,
    pub status: String,
    pub initial_return: f64,
    pub best_return: f64,
    /// The task's target return (`learn::task`: the scene's PD toward the inverse-kinematics targets of each command).
    pub target_return: f64,
    /// First evaluation that reached the target: simulated steps and seconds (None: never).
    pub steps_to_target: Option<usize>,
    pub seconds_to_target: Option<f64>,
    pub failed_rollouts: usize,
    pub fallback_steps: usize,
    pub eval_episodes: usize,
    pub episode_steps: usize,
}

/// Trains `algo` on `task` with a simulated-step budget, writing the run's files into `dir`.
/// `progress` shows a bar on stderr.
/// `lr` overrides the learner's default learning rate, `batch` BPTT's rollouts per iteration.
pub fn run_train(
    task: &Task,
    algo: Algorithm,
    seed: u64,
    steps: usize,
    lr: Option<f64>,
    batch: Option<usize>,
    dir: &Path,
    progress: bool,
) -> Result<TrainSummary> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let target = task.reference_return(&task.eval_episodes());
    let cancel = AtomicBool::new(false);
    let bar = if progress { ProgressBar::new(steps as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} sim steps  {elapsed} < {eta}  {msg}").expect("template"),
    );
    let mut csv = String::from(
        "iteration,sim_steps,wall_s,eval_return,train_return,loss,grad_norm,failed_rollouts,fallback_steps\n",
    );
    let checkpoint = dir.join("checkpoint.json");
    let every = (steps / 10).max(1);
    let mut next_checkpoint = every;
    let mut io_error: Option<std::io::Error> = None;
    let mut on_iter = |l: &IterLog, p: &super::Policy| {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{}",
            l.iteration,
            l.sim_steps,
            l.wall_s,
            l.eval_return,
            l.train_return,
            l.loss,
            l.grad_norm,
            l.failed_rollouts,
            l.fallback_steps
        );
        bar.set_position(l.sim_steps as u64);
        if l.eval_return.is_finite() {
            bar.set_message(format!("return {:.3} (target {:.3})", l.eval_return, target));
        }
        if l.sim_steps >= next_checkpoint {
            next_checkpoint += every;
            if let Err(e) = p.save(&checkpoint) {
                io_error.get_or_insert(e);
            }
        }
    };
    let (r, config) = learn(task, algo, seed, steps, lr, batch, &cancel, &mut on_iter)?;
    bar.finish_and_clear();
    if let Some(e) = io_error {
        return Err(e).with_context(|| format!("{}: cannot write", checkpoint.display()));
    }
    let summary = summarize(task, algo, seed, &r, target);
    let mut policy = r.policy.clone();
    policy.info = serde_json::json!({
        "command": train_command(task, algo, seed, steps, lr, batch),
        "config": config,
        "summary": &summary,
    });
    policy.save(&dir.join("policy.json")).with_context(|| format!("{}: cannot write", dir.display()))?;
    write_atomic(&dir.join("progress.csv"), csv.as_bytes())?;
    write_atomic(&dir.join("summary.json"), serde_json::to_string_pretty(&summary)?.as_bytes())?;
    Ok(summary)
}

fn algo_cli(a: Algorithm) -> String {
    match a {
        Algorithm::Ppo => "ppo".into(),
        Algorithm::Bptt(s) => format!("bptt --sensitivity {}", s.name()),
    }
}

/// The `contactlab train` command line of a run (recorded in the policies it writes).
pub fn train_command(
    task: &Task,
    algo: Algorithm,
    seed: u64,
    steps: usize,
    lr: Option<f64>,
    batch: Option<usize>,
) -> String {
    format!(
        "contactlab train {} scenes/{}.ron --seed {seed} --steps {steps}{}",
        algo_cli(algo),
        task.scene,
        lr.map(|l| format!(" --lr {l}")).unwrap_or_default()
            + &batch.map(|b| format!(" --batch {b}")).unwrap_or_default()
    )
}

/// Simulated training steps when none are given: BPTT reaches the stand task's target in about
/// 44 000; PPO gets a million.
pub const DEFAULT_BPTT_STEPS: usize = 100_000;
pub const DEFAULT_PPO_STEPS: usize = 1_000_000;

/// Trains `algo` on `task` with the learner's default configuration for the task, overridden
/// by `seed`, `steps` and, when given, `lr` and `batch` (BPTT only); `on_iter` sees every
/// iteration. Returns the result and the configuration used (JSON).
#[allow(clippy::too_many_arguments)]
pub fn learn(
    task: &Task,
    algo: Algorithm,
    seed: u64,
    steps: usize,
    lr: Option<f64>,
    batch: Option<usize>,
    cancel: &AtomicBool,
    on_iter: impl FnMut(&IterLog, &super::Policy),
) -> Result<(TrainResult, serde_json::Value)> {
    Ok(match algo {
        Algorithm::Bptt(s) => {
            let mut cfg = BpttSettings::for_task(task);
            cfg.seed = seed;
            cfg.sim_steps = steps;
            cfg.sensitivity = s;
            cfg.lr = lr.unwrap_or(cfg.lr);
            cfg.batch = batch.unwrap_or(cfg.batch);
            let r = train_bptt(task, &cfg, cancel, on_iter);
            (r, serde_json::to_value(&cfg)?)
        }
        Algorithm::Ppo => {
            let mut cfg = PpoSettings::for_task(task);
            cfg.seed = seed;
            cfg.sim_steps = steps;
            cfg.lr = lr.unwrap_or(cfg.lr);
            let r = train_ppo(task, &cfg, cancel, on_iter);
            (r, serde_json::to_value(&cfg)?)
        }
    })
}

fn summarize(task: &Task, algo: Algorithm, seed: u64, r: &TrainResult, target: f64) -> TrainSummary {
    let evals: Vec<&IterLog> = r.logs.iter().filter(|l| l.eval_return.is_finite()).collect();
    let reach = evals.iter().find(|l| l.eval_return >= target);
    TrainSummary {
        algorithm: algo.name(),
        scene: task.scene.clone(),
        task: task.spec.task.clone(),
        seed,
        final_return: r.final_return,
        sim_steps: r.sim_steps,
        seconds: r.seconds,
        iterations: r.logs.len().saturating_sub(1),
        status: format!("{:?}", r.status),
        initial_return: evals.first().map_or(f64::NAN, |l| l.eval_return),
        best_return: evals.iter().map(|l| l.eval_return).fold(f64::NEG_INFINITY, f64::max),
        target_return: target,
        steps_to_target: reach.map(|l| l.sim_steps),
        seconds_to_target: reach.map(|l| l.wall_s),
        failed_rollouts: r.logs.iter().map(|l| l.failed_rollouts).sum(),
        fallback_steps: r.logs.iter().map(|l| l.fallback_steps).sum(),
        eval_episodes: super::task::EVAL_EPISODES,
        episode_steps: task.steps,
    }
}

/// One learning curve read back from a run directory.
#[derive(Clone, Debug)]
pub struct Curve {
    pub algorithm: String,
    pub seed: u64,
    /// (simulated steps, wall s, evaluation return) per evaluated iteration.
    pub points: Vec<(f64, f64, f64)>,
    pub summary: TrainSummary,
    /// `dir/walk.json` when present (walk task).
    pub walk: Option<super::gait::WalkEvaluation>,
}

/// Reads `dir/progress.csv` and `dir/summary.json`.
pub fn read_curve(dir: &Path) -> Result<Curve> {
    let summary: TrainSummary = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.json"))
            .with_context(|| format!("{}: summary.json", dir.display()))?,
    )?;
    let text = std::fs::read_to_string(dir.join("progress.csv"))
        .with_context(|| format!("{}: progress.csv", dir.display()))?;
    let mut points = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<f64> = line.split(',').map(|x| x.parse().unwrap_or(f64::NAN)).collect();
        if f.len() >= 4 && f[3].is_finite() {
            points.push((f[1], f[2], f[3]));
        }
    }
    let walk = match std::fs::read_to_string(dir.join("walk.json")) {
        Ok(t) => Some(serde_json::from_str(&t).with_context(|| format!("{}: walk.json", dir.display()))?),
        Err(_) => None,
    };
    Ok(Curve { algorithm: summary.algorithm.clone(), seed: summary.seed, points, summary, walk })
}

/// Settings of `compare-learning`.
#[derive(Clone, Debug)]
pub struct CompareSettings {
    pub seeds: Vec<u64>,
    pub algorithms: Vec<String>,
    /// Simulated-step budgets of the BPTT runs and the PPO runs.
    pub bptt_steps: usize,
    pub ppo_steps: usize,
    /// Train every run, even one whose `summary.json` already exists (otherwise it is reused).
    pub retrain: bool,
}

/// One row of the comparison table.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub algorithm: String,
    pub seeds: usize,
    pub final_return_mean: f64,
    pub final_return_std: f64,
    pub sim_steps: usize,
    pub seconds_mean: f64,
    /// Median over seeds of the first simulated steps / seconds at which the evaluation
    /// return reached PPO's final mean return (None if fewer than half the seeds reached it).
    pub steps_to_ppo_final: Option<f64>,
    pub seconds_to_ppo_final: Option<f64>,
    /// PPO's simulated steps per run (what it used to reach its final return) divided by
    /// this learner's `steps_to_ppo_final`; the same for wall time.
    pub step_ratio_vs_ppo: Option<f64>,
    pub time_ratio_vs_ppo: Option<f64>,
    pub seeds_reaching_target: usize,
    /// Median over seeds of the first simulated steps / seconds at which the evaluation return
    /// reached 90 % of the way from the mean initial return to the best learner's mean final
    /// return (`CompareLevels::ninety`; None if fewer than half the seeds reached it).
    pub steps_to_90: Option<f64>,
    pub seconds_to_90: Option<f64>,
    /// Walk task: the walking evaluations of the seeds' final policies.
    pub walk: Option<WalkRow>,
}

/// The walking evaluation of a learner's seeds ([`super::gait::evaluate_walk`]).
#[derive(Clone, Debug, Serialize)]
pub struct WalkRow {
    /// Seeds whose final policy walks (success) and the walking episodes per seed.
    pub seeds_walking: usize,
    pub walking_episodes: Vec<usize>,
    /// Means over seeds: relative speed tracking error, duty factor per foot, trot synchrony,
    /// cost of transport (and its std over seeds), pushed episodes survived.
    pub speed_error_mean: f64,
    pub speed_mean: f64,
    pub feet: Vec<String>,
    pub duty_mean: Vec<f64>,
    pub trot_sync_mean: f64,
    pub cost_of_transport_mean: f64,
    pub cost_of_transport_std: f64,
    pub pushed_survived_mean: f64,
    pub pushed_episodes: usize,
}

/// The levels of the comparison: mean initial return over every run, the best learner's mean
/// final return and 90 % of the way from the first to the second.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CompareLevels {
    pub initial_mean: f64,
    pub best_final_mean: f64,
    pub ninety: f64,
}

/// Commanded speed (m/s) and horizon (s) of the walking evaluation in `compare-learning`.
pub const WALK_EVAL_SPEED: f64 = 0.4;
pub const WALK_EVAL_SECONDS: f64 = 2.0;

fn mean_std(x: &[f64]) -> (f64, f64) {
    let n = x.len().max(1) as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, v.sqrt())
}

/// Median of a non-empty sample (the mean of the middle two for an even count).
pub fn median(mut x: Vec<f64>) -> f64 {
    x.sort_by(|a, b| a.total_cmp(b));
    let n = x.len();
    if n % 2 == 1 {
        x[n / 2]
    } else {
        0.5 * (x[n / 2 - 1] + x[n / 2])
    }
}

/// First (steps, seconds) of a curve at or above `level`.
fn first_reach(c: &Curve, level: f64) -> Option<(f64, f64)> {
    c.points.iter().find(|p| p.2 >= level).map(|p| (p.0, p.1))
}

/// The levels of [`CompareLevels`] from curves.
pub fn compare_levels(curves: &[Curve]) -> CompareLevels {
    let names = learner_names(curves);
    let initial = curves.iter().filter_map(|c| c.points.first().map(|p| p.2)).collect::<Vec<_>>();
    let initial_mean = mean_std(&initial).0;
    let best_final_mean = names
        .iter()
        .map(|n| {
            mean_std(&curves.iter().filter(|c| &c.algorithm == n).map(|c| c.summary.final_return).collect::<Vec<_>>()).0
        })
        .fold(f64::NEG_INFINITY, f64::max);
    CompareLevels { initial_mean, best_final_mean, ninety: initial_mean + 0.9 * (best_final_mean - initial_mean) }
}

fn learner_names(curves: &[Curve]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for c in curves {
        if !names.contains(&c.algorithm) {
            names.push(c.algorithm.clone());
        }
    }
    names
}

fn walk_row(cs: &[&Curve]) -> Option<WalkRow> {
    let w: Vec<&super::gait::WalkEvaluation> = cs.iter().filter_map(|c| c.walk.as_ref()).collect();
    if w.is_empty() || w.len() != cs.len() {
        return None;
    }
    let n = w.len() as f64;
    let nf = w[0].feet.len();
    let (cot_mean, cot_std) =
        mean_std(&w.iter().map(|e| e.cost_of_transport).filter(|c| c.is_finite()).collect::<Vec<_>>());
    Some(WalkRow {
        seeds_walking: w.iter().filter(|e| e.walks).count(),
        walking_episodes: w.iter().map(|e| e.walking).collect(),
        speed_error_mean: w.iter().map(|e| e.speed_error_mean).sum::<f64>() / n,
        speed_mean: w.iter().map(|e| e.speed_mean).sum::<f64>() / n,
        feet: w[0].feet.clone(),
        duty_mean: (0..nf).map(|k| w.iter().map(|e| e.duty_mean[k]).sum::<f64>() / n).collect(),
        trot_sync_mean: w.iter().map(|e| e.trot_sync).sum::<f64>() / n,
        cost_of_transport_mean: cot_mean,
        cost_of_transport_std: cot_std,
        pushed_survived_mean: w.iter().map(|e| e.pushed.survived as f64).sum::<f64>() / n,
        pushed_episodes: w[0].pushed.episodes,
    })
}

/// The comparison table from curves (grouped by algorithm).
pub fn compare_rows(curves: &[Curve]) -> Vec<CompareRow> {
    let names = learner_names(curves);
    let ninety = compare_levels(curves).ninety;
    let ppo: Vec<&Curve> = curves.iter().filter(|c| c.algorithm == "ppo").collect();
    let ppo_final =
        (!ppo.is_empty()).then(|| mean_std(&ppo.iter().map(|c| c.summary.final_return).collect::<Vec<_>>()).0);
    let reach_median = |cs: &[&Curve], level: f64| -> (Option<f64>, Option<f64>) {
        let r: Vec<(f64, f64)> = cs.iter().filter_map(|c| first_reach(c, level)).collect();
        if 2 * r.len() < cs.len() || r.is_empty() {
            return (None, None);
        }
        // Seeds that never reach count as infinitely slow in the median.
        let mut s: Vec<f64> = r.iter().map(|x| x.0).collect();
        let mut w: Vec<f64> = r.iter().map(|x| x.1).collect();
        s.resize(cs.len(), f64::INFINITY);
        w.resize(cs.len(), f64::INFINITY);
        (Some(median(s)), Some(median(w)))
    };
    let ppo_steps = ppo.iter().map(|c| c.summary.sim_steps).max().map(|s| s as f64);
    let ppo_secs = (!ppo.is_empty()).then(|| mean_std(&ppo.iter().map(|c| c.summary.seconds).collect::<Vec<_>>()).0);
    names
        .iter()
        .map(|n| {
            let cs: Vec<&Curve> = curves.iter().filter(|c| &c.algorithm == n).collect();
            let (m, s) = mean_std(&cs.iter().map(|c| c.summary.final_return).collect::<Vec<_>>());
            let (steps, secs) = ppo_final.map_or((None, None), |l| reach_median(&cs, l));
            let (steps90, secs90) = reach_median(&cs, ninety);
            CompareRow {
                algorithm: n.clone(),
                seeds: cs.len(),
                final_return_mean: m,
                final_return_std: s,
                sim_steps: cs.iter().map(|c| c.summary.sim_steps).max().unwrap_or(0),
                seconds_mean: mean_std(&cs.iter().map(|c| c.summary.seconds).collect::<Vec<_>>()).0,
                steps_to_ppo_final: steps.filter(|x| x.is_finite()),
                seconds_to_ppo_final: secs.filter(|x| x.is_finite()),
                step_ratio_vs_ppo: match (ppo_steps, steps) {
                    (Some(p), Some(b)) if b.is_finite() && b > 0.0 => Some(p / b),
                    _ => None,
                },
                time_ratio_vs_ppo: match (ppo_secs, secs) {
                    (Some(p), Some(b)) if b.is_finite() && b > 0.0 => Some(p / b),
                    _ => None,
                },
                seeds_reaching_target: cs.iter().filter(|c| c.summary.steps_to_target.is_some()).count(),
                steps_to_90: steps90.filter(|x| x.is_finite()),
                seconds_to_90: secs90.filter(|x| x.is_finite()),
                walk: walk_row(&cs),
            }
        })
        .collect()
}

/// Markdown table of [`compare_rows`] on the walk task (every row has its walking evaluation).
pub fn walk_table(rows: &[CompareRow], levels: &CompareLevels) -> String {
    let mut s = String::new();
    let f = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
    let _ = writeln!(
        s,
        "90 % level: mean initial return {:.3} + 0.9 (best learner's mean final return {:.3} - it) = {:.3}. \
         Walking: {:.1} m/s commanded for {:.0} s on the 24 evaluation episodes; an episode walks when its speed is \
         within {:.0} % of the command, every foot lifts >= {:.0} cm in every gait cycle and every duty factor is in \
         [{}, {}]; a seed succeeds when >= {:.0} % of its episodes walk. Pushed: 24 episodes, one push each \
         (learn_stand's ranges), survived = no failed step and no trunk contact.\n",
        levels.initial_mean,
        levels.best_final_mean,
        levels.ninety,
        WALK_EVAL_SPEED,
        WALK_EVAL_SECONDS,
        100.0 * super::gait::WALK_TOLERANCE,
        100.0 * super::gait::WALK_MIN_LIFT,
        super::gait::WALK_DUTY[0],
        super::gait::WALK_DUTY[1],
        100.0 * super::gait::WALK_SUCCESS_FRACTION,
    );
    let feet = rows.iter().find_map(|r| r.walk.as_ref()).map(|w| w.feet.join(" ")).unwrap_or_default();
    let _ = writeln!(
        s,
        "| learner | seeds | sim steps per run | wall time per run (s) | steps to 90 % (median) | time to 90 % (s, median) | final return (mean ± std) | success (seeds walking) | walking episodes per seed (of 24) | speed at 0.4 m/s (mean) | speed error (mean) | duty ({feet}) | trot synchrony | cost of transport (mean ± std) | pushed episodes survived (mean of 24) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|");
    for r in rows {
        let Some(w) = &r.walk else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {} | {} | {:.3} ± {:.3} | {}/{} | {} | {:.3} | {:.1} % | {} | {:.2} | {:.2} ± {:.2} | {:.1} |",
            r.algorithm,
            r.seeds,
            r.sim_steps,
            r.seconds_mean,
            f(r.steps_to_90, 0),
            f(r.seconds_to_90, 1),
            r.final_return_mean,
            r.final_return_std,
            w.seeds_walking,
            r.seeds,
            w.walking_episodes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
            w.speed_mean,
            100.0 * w.speed_error_mean,
            w.duty_mean.iter().map(|d| format!("{d:.2}")).collect::<Vec<_>>().join(" "),
            w.trot_sync_mean,
            w.cost_of_transport_mean,
            w.cost_of_transport_std,
            w.pushed_survived_mean,
        );
    }
    s
}

/// Markdown table of [`compare_rows`].
pub fn compare_table(rows: &[CompareRow], target: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "target return (reference: scene PD toward the commanded pose's inverse-kinematics targets): {target:.3}\n"
    );
    let _ = writeln!(
        s,
        "| learner | seeds | final return (mean ± std) | sim steps per run | wall time per run (s) | steps to PPO's final mean return (median) | time to it (s, median) | PPO's steps / these | PPO's time / this | seeds reaching target |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let f = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |v| format!("{v:.p$}"));
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.3} ± {:.3} | {} | {:.1} | {} | {} | {} | {} | {}/{} |",
            r.algorithm,
            r.seeds,
            r.final_return_mean,
            r.final_return_std,
            r.sim_steps,
            r.seconds_mean,
            f(r.steps_to_ppo_final, 0),
            f(r.seconds_to_ppo_final, 1),
            f(r.step_ratio_vs_ppo, 1),
            f(r.time_ratio_vs_ppo, 1),
            r.seeds_reaching_target,
            r.seeds
        );
    }
    s
}

/// Runs (or, unless `retrain`, reuses) every seed of every learner and writes the comparison
/// files.
pub fn compare(task: &Task, s: &CompareSettings, out: &Path) -> Result<(Vec<CompareRow>, String)> {
    let mut curves = Vec::new();
    for name in &s.algorithms {
        let algo = Algorithm::parse(name, task)?;
        for &seed in &s.seeds {
            let dir: PathBuf = out.join(algo.name()).join(format!("seed{seed}"));
            let train = s.retrain || !dir.join("summary.json").exists();
            if train {
                let steps = if algo == Algorithm::Ppo { s.ppo_steps } else { s.bptt_steps };
                eprintln!("{} seed {seed}: {steps} simulated steps -> {}", algo.name(), dir.display());
                let r = run_train(task, algo, seed, steps, None, None, &dir, true)?;
                eprintln!("  final return {:.3} (target {:.3}) in {:.1} s", r.final_return, r.target_return, r.seconds);
            }
            if task.kind == super::task::TaskKind::Walk && (train || !dir.join("walk.json").exists()) {
                let policy = super::Policy::load(&dir.join("policy.json"))
                    .with_context(|| format!("{}: policy.json", dir.display()))?;
                let w = super::gait::evaluate_walk(
                    task,
                    Some(&policy),
                    WALK_EVAL_SPEED,
                    WALK_EVAL_SECONDS,
                    &super::PushSettings::default(),
                );
                eprintln!("  walking: {}/{} episodes at {WALK_EVAL_SPEED} m/s", w.walking, w.episodes);
                write_atomic(&dir.join("walk.json"), serde_json::to_string_pretty(&w)?.as_bytes())?;
            }
            curves.push(read_curve(&dir)?);
        }
    }
    let target = curves.first().map_or(f64::NAN, |c| c.summary.target_return);
    let rows = compare_rows(&curves);
    let levels = compare_levels(&curves);
    let table = if task.kind == super::task::TaskKind::Walk {
        walk_table(&rows, &levels)
    } else {
        compare_table(&rows, target)
    };
    write_atomic(&out.join("comparison.md"), table.as_bytes())?;
    let mut json = serde_json::json!({"target_return": target, "levels": levels, "rows": rows, "runs": curves.iter().map(|c| &c.summary).collect::<Vec<_>>()});
    if curves.iter().any(|c| c.walk.is_some()) {
        json["walk"] = curves
            .iter()
            .map(|c| serde_json::json!({"algorithm": c.algorithm, "seed": c.seed, "walk": c.walk}))
            .collect::<Vec<_>>()
            .into();
    }
    write_atomic(&out.join("comparison.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    // The stand task's target (the scene's PD told the inverse kinematics) means nothing for
    // walking: the walk plot has none.
    let plot_target = if task.kind == super::task::TaskKind::Walk { f64::NAN } else { target };
    crate::io::write_atomic_with(&out.join("learning.png"), |tmp| learning_png(&curves, plot_target, tmp))?;
    Ok((rows, table))
}

fn colour(name: &str) -> plotters::style::RGBColor {
    use plotters::style::RGBColor;
    match name {
        "bptt-exact" => RGBColor(214, 39, 40),
        "bptt-signorini" => RGBColor(255, 127, 14),
        "bptt-relaxed" => RGBColor(31, 119, 180),
        _ => RGBColor(44, 160, 44),
    }
}

/// Piecewise-linear value of a curve at `x` (by coordinate `k` of its points), None outside.
fn interp(points: &[(f64, f64, f64)], k: usize, x: f64) -> Option<f64> {
    let key = |p: &(f64, f64, f64)| if k == 0 { p.0 } else { p.1 };
    let first = points.first()?;
    if x < key(first) {
        return None;
    }
    for w in points.windows(2) {
        let (a, b) = (key(&w[0]), key(&w[1]));
        if x >= a && x <= b {
            let s = if b > a { (x - a) / (b - a) } else { 0.0 };
            return Some(w[0].2 + s * (w[1].2 - w[0].2));
        }
    }
    None
}

/// Return against simulated steps (log axis) and against wall-clock time: per learner the
/// mean over seeds (line) and the range over seeds (band), the target return dashed.
pub fn learning_png(curves: &[Curve], target: f64, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    crate::plot::fonts();
    let root = BitMapBackend::new(path, (1500, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(750);
    let mut names: Vec<String> = Vec::new();
    for c in curves {
        if !names.contains(&c.algorithm) {
            names.push(c.algorithm.clone());
        }
    }
    // The relaxed curve last (on top): on a task without contact transitions it lies on the
    // exact one.
    names.sort_by_key(|n| n == "bptt-relaxed");
    let all = curves.iter().flat_map(|c| c.points.iter());
    let (mut ylo, mut yhi) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut xmax0, mut xmax1, mut xmin0, mut xmin1) = (1.0f64, 1e-3f64, f64::INFINITY, f64::INFINITY);
    for p in all {
        ylo = ylo.min(p.2);
        yhi = yhi.max(p.2);
        xmax0 = xmax0.max(p.0);
        xmax1 = xmax1.max(p.1);
        if p.0 > 0.0 {
            xmin0 = xmin0.min(p.0);
        }
        if p.1 > 0.0 {
            xmin1 = xmin1.min(p.1);
        }
    }
    if target.is_finite() {
        ylo = ylo.min(target);
        yhi = yhi.max(target);
    }
    if !ylo.is_finite() {
        (ylo, yhi) = (-1.0, 0.0);
    }
    let pad = 0.05 * (yhi - ylo).max(1e-6);
    let (ylo, yhi) = (ylo - pad, yhi + pad);
    let xmin0 = if xmin0.is_finite() { xmin0 } else { 1.0 };
    let xmin1 = if xmin1.is_finite() { xmin1 } else { 1e-2 };
    for (k, area) in [(0usize, &left), (1usize, &right)] {
        let (x0, x1, label) = if k == 0 {
            (xmin0 * 0.9, xmax0 * 1.1, "simulated steps")
        } else {
            (xmin1 * 0.9, xmax1 * 1.1, "wall-clock time (s)")
        };
        let mut chart = ChartBuilder::on(area)
            .caption(format!("return against {label}"), ("sans-serif", 24))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d((x0..x1).log_scale(), ylo..yhi)?;
        chart
            .configure_mesh()
            .x_desc(label)
            .y_desc("evaluation return")
            .x_label_formatter(&|x| if k == 0 { format!("{x:.0e}") } else { format!("{x}") })
            .label_style(("sans-serif", 15))
            .draw()?;
        if target.is_finite() {
            chart
                .draw_series(DashedLineSeries::new(vec![(x0, target), (x1, target)], 8, 5, BLACK.stroke_width(1)))?
                .label("target (reference PD with inverse kinematics)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
        }
        for name in &names {
            let cs: Vec<&Curve> = curves.iter().filter(|c| &c.algorithm == name).collect();
            let c = colour(name);
            // Grid: log-spaced over the range every seed covers.
            let lo = cs
                .iter()
                .filter_map(|c| c.points.iter().map(|p| if k == 0 { p.0 } else { p.1 }).find(|x| *x > 0.0))
                .fold(0.0f64, f64::max);
            let hi = cs
                .iter()
                .filter_map(|c| c.points.last().map(|p| if k == 0 { p.0 } else { p.1 }))
                .fold(f64::INFINITY, f64::min);
            if !(lo > 0.0 && hi > lo) {
                continue;
            }
            let grid: Vec<f64> = (0..=120).map(|i| lo * (hi / lo).powf(i as f64 / 120.0)).collect();
            let mut mean = Vec::new();
            let mut band_hi = Vec::new();
            let mut band_lo = Vec::new();
            for &x in &grid {
                let ys: Vec<f64> = cs.iter().filter_map(|c| interp(&c.points, k, x)).collect();
                if ys.len() == cs.len() && !ys.is_empty() {
                    let m = ys.iter().sum::<f64>() / ys.len() as f64;
                    mean.push((x, m));
                    band_hi.push((x, ys.iter().copied().fold(f64::NEG_INFINITY, f64::max)));
                    band_lo.push((x, ys.iter().copied().fold(f64::INFINITY, f64::min)));
                }
            }
            let poly: Vec<(f64, f64)> = band_hi.iter().copied().chain(band_lo.iter().rev().copied()).collect();
            if poly.len() > 2 {
                chart.draw_series(std::iter::once(Polygon::new(poly, c.mix(0.18).filled())))?;
            }
            let width = if name == "bptt-relaxed" { 2 } else { 4 };
            chart
                .draw_series(LineSeries::new(mean, c.stroke_width(width)))?
                .label(format!("{name} (mean of {} seeds, band: min-max)", cs.len()))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(width)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
