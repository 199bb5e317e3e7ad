//! `contactlab simulate`: step a scene and write one CSV row per step (atomically).

use anyhow::{bail, Context, Result};
use contactlab::scene::Scene;
use contactlab::sim::record::CsvRecorder;
use contactlab::sim::StepStatus;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;

pub fn simulate(path: PathBuf, duration: Option<f64>, out: Option<PathBuf>) -> Result<()> {
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
    // Newton iterations per step as a histogram (bounded by the solver's limit), so memory does
    // not grow with the run's length.
    let mut iterations = vec![0u64; sim.settings.solver.max_iterations + 1];
    let (mut max_pen, mut not_converged, mut failure, mut done) = (0.0f64, 0usize, None, 0u64);
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
        let bin = info.solver.iterations.min(iterations.len() - 1);
        iterations[bin] += 1;
        done += 1;
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
    let median = {
        let (mut seen, mut m) = (0u64, 0);
        for (k, &n) in iterations.iter().enumerate() {
            seen += n;
            if 2 * seen > done {
                m = k;
                break;
            }
        }
        m
    };
    println!(
        "{}: {} steps of {} s ({:.3} s simulated) in {:.3} s wall ({:.1}x real time)",
        scene.file.name,
        done,
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
