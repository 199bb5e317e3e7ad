//! Cosine similarity to the smoothed truth of the relaxed sensitivities over a grid of kappa
//! and delta, for one sweep scene (the smoothed truth is computed once for all of them).
//!
//! `cargo run --release --no-default-features --example sweep_kappa_grid -- scenes/sweep_box_push.ron [points] [samples]`

use contactlab::diff::sweep::run_sweep;
use contactlab::diff::sweep::SweepOverrides;
use contactlab::diff::Sensitivity;
use contactlab::scene::Scene;
use std::sync::atomic::{AtomicBool, AtomicUsize};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() >= 2, "usage: sweep_kappa_grid SCENE [points] [samples]");
    let scene = Scene::load(std::path::Path::new(&args[1]))?;
    let o = SweepOverrides {
        points: args.get(2).map(|s| s.parse()).transpose()?,
        samples: args.get(3).map(|s| s.parse()).transpose()?,
        ..Default::default()
    };
    let (mut spec, sim) = scene.sweep(&o)?;
    spec.sensitivities = vec![("exact".into(), Sensitivity::Exact)];
    for kappa in [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1] {
        spec.sensitivities.push((format!("signorini k={kappa:e}"), Sensitivity::SignoriniRelaxed { kappa }));
        for delta in [0.0, 1e-3, 1e-2, 1e-1] {
            spec.sensitivities
                .push((format!("relaxed k={kappa:e} d={delta:e}"), Sensitivity::Relaxed { kappa, delta }));
        }
    }
    let r = run_sweep(&sim, &spec, &AtomicBool::new(false), &AtomicUsize::new(0))?;
    for (n, s) in r.sensitivity_names.iter().zip(&r.summaries) {
        println!("{n:<32} cosine {:.4} rel_error {:.4} sign {:.3}", s.cosine, s.rel_error, s.sign_agreement);
    }
    Ok(())
}
