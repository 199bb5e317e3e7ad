//! `contactlab gradcheck`: a gradient-quality sweep of a scene (DESIGN 4) written as
//! `DIR/sweep.csv`, `DIR/sweep.png` and `DIR/summary.json` (all atomically).
//!
//! The sweep's defaults come from the scene's `gradcheck` section; flags override them. The
//! forward solver is tightened to a tolerance of at most `1e-10` for the sweep, so that the
//! local finite differences (step `1e-4` of the range) resolve the cost and not the solver's
//! stopping point.

use crate::diff::sweep::{run_sweep, SweepResult, SweepSpec};
use crate::diff::{Cost, PointCost, Sensitivity};
use crate::io::write_atomic;
use crate::scene::{resolve_param, GradcheckSpec, Scene};
use crate::sim::Simulation;
use anyhow::{bail, Context, Result};
use nalgebra::Vector3;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize};

/// Command-line overrides of a scene's sweep.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub param: Option<String>,
    pub from: Option<f64>,
    pub to: Option<f64>,
    pub points: Option<usize>,
    pub horizon: Option<f64>,
    pub sigma: Option<f64>,
    pub samples: Option<usize>,
    pub kappa: Option<f64>,
    pub delta: Option<f64>,
    /// `all`, or a comma-separated subset of `exact`, `signorini`, `relaxed`.
    pub sensitivity: Option<String>,
    pub threads: Option<usize>,
}

/// Tolerance cap of the forward solver during sweeps (module docs).
const SWEEP_TOLERANCE: f64 = 1e-10;

/// The sweep of `scene` with `o` applied, and the simulation it starts from.
pub fn build_spec(scene: &Scene, o: &Overrides) -> Result<(SweepSpec, Simulation)> {
    // The objective lives only in the scene file, so a sweep needs the section.
    let Some(g) = scene.file.gradcheck.clone() else {
        bail!("{}: the scene has no `gradcheck` section (it defines the objective of the sweep)", scene.path.display());
    };
    spec_from_state(&scene.file.name, &g, o, scene.simulation())
        .with_context(|| format!("{}: gradcheck", scene.path.display()))
}

/// The sweep `g` (with `o` applied) from the state of `sim`: settles for `g.settle` without
/// the pulls, then restarts the pulls' clock, so the sweep starts at `t = 0`. The app uses it
/// to sweep from whatever state is on screen.
pub fn spec_from_state(
    name: &str,
    g: &GradcheckSpec,
    o: &Overrides,
    mut sim: Simulation,
) -> Result<(SweepSpec, Simulation)> {
    let model = &*sim.model.clone();
    let param_name = o.param.clone().unwrap_or(g.param.clone());
    let param = resolve_param(model, &sim.pulls, &param_name).map_err(anyhow::Error::msg)?;
    let (from, to) = (o.from.unwrap_or(g.from), o.to.unwrap_or(g.to));
    if !(from.is_finite() && to.is_finite() && to > from) {
        bail!("--from {from} --to {to}: need finite values with from < to");
    }
    let points = o.points.unwrap_or(g.points);
    let horizon = o.horizon.unwrap_or(g.horizon);
    if !(horizon > 0.0 && horizon.is_finite()) {
        bail!("--horizon {horizon}: must be positive");
    }
    let sigma = o.sigma.or(g.sigma).unwrap_or(0.05 * (to - from));
    let (kappa, delta) = (o.kappa.unwrap_or(g.kappa), o.delta.unwrap_or(g.delta));
    let which = o.sensitivity.clone().unwrap_or_else(|| "all".into());
    let mut sensitivities = Vec::new();
    for name in which.split(',').map(str::trim) {
        match name {
            "all" => {
                sensitivities.push(("exact".to_string(), Sensitivity::Exact));
                sensitivities.push(("signorini".to_string(), Sensitivity::SignoriniRelaxed { kappa }));
                sensitivities.push(("relaxed".to_string(), Sensitivity::Relaxed { kappa, delta }));
            }
            "exact" => sensitivities.push((name.into(), Sensitivity::Exact)),
            "signorini" => sensitivities.push((name.into(), Sensitivity::SignoriniRelaxed { kappa })),
            "relaxed" => sensitivities.push((name.into(), Sensitivity::Relaxed { kappa, delta })),
            other => bail!("--sensitivity {other}: expected all, exact, signorini or relaxed"),
        }
    }
    let mut cost = Cost::zero(model);
    cost.terminal = 1.0;
    for t in &g.objective {
        let (body, placement) = model
            .resolve_body_or_frame(&t.body)
            .with_context(|| format!("gradcheck.objective: no link or frame `{}`", t.body))?;
        cost.points.push(PointCost {
            body,
            point: placement.act_point(&Vector3::from(t.point)),
            target: Vector3::from(t.target),
            weight: Vector3::from(t.weight),
            linear: Vector3::from(t.linear),
            linear_velocity: Vector3::from(t.linear_velocity),
        });
    }
    let watch = g
        .watch
        .iter()
        .map(|w| model.contact_points.iter().position(|c| &c.name == w).with_context(|| format!("no contact `{w}`")))
        .collect::<Result<Vec<_>>>()?;
    sim.settings.solver.tolerance = sim.settings.solver.tolerance.min(SWEEP_TOLERANCE);
    sim.settings.solver.kappa_target = sim.settings.solver.kappa_target.min(sim.settings.solver.tolerance);
    sim.settings.solver.max_iterations = sim.settings.solver.max_iterations.max(100);
    // Settling runs without the scene's pulls: they belong to the sweep.
    let pulls = std::mem::take(&mut sim.pulls);
    let settle = (g.settle / sim.settings.dt).round() as usize;
    for k in 0..settle {
        let info = sim.step();
        if !info.status.advanced() {
            bail!("settling failed at step {k}: {:?}", info.status);
        }
    }
    // The pulls' schedule is relative to the sweep's start.
    sim.pulls = pulls;
    sim.t = 0.0;
    let steps = (horizon / sim.settings.dt).round().max(1.0) as usize;
    let spec = SweepSpec {
        name: name.to_string(),
        param,
        param_name,
        from,
        to,
        points,
        steps,
        cost,
        sigma,
        samples: o.samples.unwrap_or(g.samples),
        fd_step: 1e-4 * (to - from),
        sensitivities,
        watch,
        threads: o.threads.unwrap_or(2),
        seed: 1,
    };
    Ok((spec, sim))
}

/// Runs the sweep and writes the three outputs into `dir` (created if needed).
pub fn run(scene: &Scene, o: &Overrides, dir: &Path) -> Result<SweepResult> {
    let (spec, sim) = build_spec(scene, o)?;
    let cancel = AtomicBool::new(false);
    let progress = AtomicUsize::new(0);
    let result = run_sweep(&sim, &spec, &cancel, &progress)?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create the output directory", dir.display()))?;
    write_atomic(&dir.join("sweep.csv"), csv(&result).as_bytes())?;
    write_atomic(&dir.join("summary.json"), summary_json(&result).as_bytes())?;
    let png = dir.join("sweep.png");
    let tmp = dir.join(".sweep.tmp.png");
    crate::plot::sweep_png(&result, &tmp)
        .map_err(|e| anyhow::anyhow!("{}: cannot draw the plot: {e}", png.display()))?;
    std::fs::rename(&tmp, &png).with_context(|| format!("{}: cannot write", png.display()))?;
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
