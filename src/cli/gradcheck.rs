//! `contactlab gradcheck`: a gradient-quality sweep of a scene (DESIGN 4) written as
//! `DIR/sweep.csv`, `DIR/sweep.png` and `DIR/summary.json` (all atomically).
//!
//! The sweep's defaults come from the scene's `gradcheck` section; flags override them
//! ([`SweepOverrides`]); the library's [`contactlab::diff::sweep`] does the work.

use anyhow::{Context, Result};
use contactlab::diff::sweep::{run_sweep, SweepOverrides, SweepResult};
use contactlab::io::{write_atomic, write_atomic_with};
use contactlab::plot;
use contactlab::scene::Scene;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize};

/// Runs the sweep and writes the three outputs into `dir` (created if needed).
pub fn run(scene: &Scene, o: &SweepOverrides, dir: &Path) -> Result<SweepResult> {
    let (spec, sim) = scene.sweep(o)?;
    let cancel = AtomicBool::new(false);
    let progress = AtomicUsize::new(0);
    let result = run_sweep(&sim, &spec, &cancel, &progress)?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create the output directory", dir.display()))?;
    write_atomic(&dir.join("sweep.csv"), csv(&result).as_bytes())?;
    write_atomic(&dir.join("summary.json"), summary_json(&result).as_bytes())?;
    write_atomic_with(&dir.join("sweep.png"), |tmp| plot::sweep_png(&result, tmp))?;
    Ok(result)
}

/// One row per sweep point.
pub fn csv(r: &SweepResult) -> String {
    let mut out = String::from("s,f,fd,fd_mode_change,smoothed,smoothed_se");
    for n in &r.sensitivity_names {
        out += &format!(",{n}");
    }
    for w in &r.watch_names {
        out += &format!(",mode_{w},touched_{w}");
    }
    out.push('\n');
    for p in &r.points {
        out += &format!("{},{},{},{},{},{}", p.s, p.f, p.fd, p.fd_mode_change as u8, p.smoothed, p.smoothed_se);
        for g in &p.grads {
            out += &format!(",{g}");
        }
        for (m, t) in p.final_modes.iter().zip(&p.touched) {
            out += &format!(",{m:?},{}", *t as u8);
        }
        out.push('\n');
    }
    out
}

/// `{"sweep": .., "param": .., "sigma": .., "points": .., "sensitivities": {name: {cosine,
/// rel_error, sign_agreement}}}`.
pub fn summary_json(r: &SweepResult) -> String {
    let mut sens = serde_json::Map::new();
    for (n, s) in r.sensitivity_names.iter().zip(&r.summaries) {
        sens.insert(n.clone(), serde_json::to_value(s).expect("plain numbers serialize"));
    }
    let v = serde_json::json!({
        "sweep": r.spec_name,
        "param": r.param_name,
        "sigma": r.sigma,
        "points": r.points.len(),
        "sensitivities": sens,
    });
    serde_json::to_string_pretty(&v).expect("json") + "\n"
}

/// A plain-text table of the summaries.
pub fn table(r: &SweepResult) -> String {
    let mut out = format!("{} (param {}, sigma {:.3e})\n", r.spec_name, r.param_name, r.sigma);
    out += "sensitivity   cosine   rel_error   sign_agreement\n";
    for (n, s) in r.sensitivity_names.iter().zip(&r.summaries) {
        out += &format!("{n:<12} {:>7.4} {:>11.4} {:>16.3}\n", s.cosine, s.rel_error, s.sign_agreement);
    }
    out
}

/// `contactlab gradcheck`.
pub fn command(scene: &Path, o: &SweepOverrides, out: &Path) -> Result<()> {
    let sc = Scene::load(scene)?;
    let started = std::time::Instant::now();
    let r = run(&sc, o, out)?;
    print!("{}", table(&r));
    println!("wrote {}/sweep.csv, sweep.png, summary.json in {:.1} s", out.display(), started.elapsed().as_secs_f64());
    Ok(())
}
