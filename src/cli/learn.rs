//! `contactlab train` and `contactlab compare-learning`: policy learning on a scene's `learn`
//! task ([`contactlab::learn`]).

use super::list;
use anyhow::{bail, Context, Result};
use contactlab::learn::report::DEFAULT_PPO_STEPS;
use contactlab::learn::report::{compare as compare_learners, run_train, Algorithm, CompareSettings};
use contactlab::scene::Scene;
use std::path::Path;

pub fn train(
    algorithm: &str,
    scene: &Path,
    seed: u64,
    steps: Option<usize>,
    sensitivity: Option<String>,
    lr: Option<f64>,
    batch: Option<usize>,
    out: &Path,
) -> Result<()> {
    let sc = Scene::load(scene)?;
    let task = sc.task(sc.learn_settings()?)?;
    let algo = match (algorithm, sensitivity) {
        ("bptt", Some(s)) => Algorithm::parse(&format!("bptt-{s}"), &task)?,
        ("bptt" | "ppo", None) => Algorithm::parse(algorithm, &task)?,
        ("ppo", Some(_)) => bail!("--sensitivity applies to bptt only"),
        (a, _) => bail!("unknown learner `{a}`: expected bptt or ppo"),
    };
    let steps = steps.unwrap_or(if algo == Algorithm::Ppo { DEFAULT_PPO_STEPS } else { task.spec.bptt.steps });
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
    let s = run_train(&task, algo, seed, steps, lr, batch, out, true)?;
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

pub fn compare(
    scene: &Path,
    seeds: &str,
    algorithms: &str,
    bptt_steps: Option<usize>,
    ppo_steps: usize,
    retrain: bool,
    out: &Path,
) -> Result<()> {
    let sc = Scene::load(scene)?;
    let task = sc.task(sc.learn_settings()?)?;
    let bptt_steps = bptt_steps.unwrap_or(task.spec.bptt.steps);
    let settings = CompareSettings {
        seeds: list(seeds, "seeds")?,
        algorithms: algorithms.split(',').map(|s| s.trim().to_string()).collect(),
        bptt_steps,
        ppo_steps,
        retrain,
    };
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let (_, table) = compare_learners(&task, &settings, out)?;
    print!("{table}");
    println!("wrote {}/comparison.md, comparison.json, learning.png", out.display());
    Ok(())
}
