//! `contactlab jacobians`: the transition Jacobians of one step at a scene's settled state,
//! written as JSON for inspection in NumPy (and as the Rust reference the Python bindings are
//! checked against, bit for bit: JSON numbers round-trip `f64` exactly).
//!
//! The step is the raw dynamics, `x+ = F(x, u)`, with `u` the torque the scene's controller
//! applied in the last settling step, held; it starts cold (no warm start), as the CITO knots do.

use anyhow::{Context, Result};
use contactlab::diff::{transition_jacobians, Sensitivity, TransitionWorkspace};
use contactlab::io::write_atomic;
use contactlab::scene::Scene;
use contactlab::sim::StepWorkspace;
use nalgebra::DMatrix;
use std::path::Path;

fn rows(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    (0..m.nrows()).map(|i| m.row(i).iter().copied().collect()).collect()
}

pub fn run(scene: &Path, settle: f64, sensitivity: &str, out: &Path) -> Result<()> {
    let sens: Sensitivity = sensitivity.parse().map_err(|e| anyhow::anyhow!("--sensitivity: {e}"))?;
    let scene = Scene::load(scene)?;
    let sim = scene.settled(settle)?;
    let m = &*sim.model;
    let mut ws = StepWorkspace::new(m);
    let mut tw = TransitionWorkspace::new(m);
    let (mut a, mut b) = (DMatrix::zeros(2 * m.nv, 2 * m.nv), DMatrix::zeros(2 * m.nv, m.nu));
    let zeros = vec![0.0; m.nv];
    let info = transition_jacobians(
        m,
        &sim.terrain,
        &sim.settings,
        &mut ws,
        &mut tw,
        (sim.q.as_slice(), sim.v.as_slice(), sim.u.as_slice(), &zeros),
        sens,
        &mut a,
        &mut b,
    );
    let json = serde_json::json!({
        "scene": scene.file.name,
        "settle_s": settle,
        "t": sim.t,
        "sensitivity": sens.to_string(),
        "status": format!("{:?}", info.status),
        "step_status": format!("{:?}", info.step.status),
        "q": sim.q.as_slice(),
        "v": sim.v.as_slice(),
        "u": sim.u.as_slice(),
        "A": rows(&a),
        "B": rows(&b),
    });
    write_atomic(out, serde_json::to_string_pretty(&json)?.as_bytes())
        .with_context(|| format!("{}: cannot write", out.display()))?;
    println!(
        "{}: A {}x{}, B {}x{} ({}, {:?}) at t = {:.3} s; wrote {}",
        scene.file.name,
        a.nrows(),
        a.ncols(),
        b.nrows(),
        b.ncols(),
        sens,
        info.status,
        sim.t,
        out.display()
    );
    Ok(())
}
