//! Gradient-quality sweeps (DESIGN 4): a scalar objective `f(s)` of a scalar parameter `s`
//! swept across a contact transition, with `df/ds` from each contact sensitivity (the adjoint
//! of [`rollout_gradient`]) next to two truths measured on the forward (hard) simulator:
//!
//! - **local truth:** the central difference `(f(s + e) - f(s - e)) / 2e` with a small `e`
//!   (`fd_step`, relative to the sweep range); a mode change inside the stencil is flagged;
//! - **smoothed truth:** the derivative of `f_sigma(s) = E[f(s + sigma eps)]`, `eps ~ N(0, 1)`,
//!   estimated from antithetic pairs `y_i = (f(s + sigma eps_i) - f(s - sigma eps_i)) / 2 sigma`
//!   by Stein's identity `f_sigma'(s) = E[y eps]`, self-normalized ([`stein_slope`]), with its
//!   standard error. The same `eps_i` are used at every point (common random numbers), so
//!   the curve is smooth in `s` and differences between points are not sampling noise.
//!
//! Summaries per sensitivity, over the sweep points, against the smoothed truth `g*`:
//! cosine similarity `<g, g*> / (|g| |g*|)`, relative error `|g - g*| / |g*|`, and sign agreement:
//! the fraction of points with `|g*_k| > 2 se_k` and `|g*_k| > 1e-6 max |g*|` (a significantly
//! nonzero truth) where `sign(g_k) = sign(g*_k)` and `g_k` is not zero (below `1e-6 max |g*|`:
//! no sign at all).
//!
//! The realized mode strip records, per point and watched contact, the mode at the last step
//! of the rollout at `s`, and whether the watched contact touched at any step.

use super::rollout::{apply_param, rollout_cost, rollout_gradient, Cost, Param, PointCost, RolloutError};
use super::sensitivity::{Sensitivity, SensitivityKind};
use crate::contact::ContactMode;
use crate::sim::Simulation;
use crate::validate::{Checker, SettingsError};
use nalgebra::Vector3;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A terminal objective term on a body point's world position `p` and velocity `pdot`:
/// `0.5 sum_a weight_a (p_a - target_a)^2 + linear . p + linear_velocity . pdot`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveTerm {
    /// Link or frame name.
    pub body: String,
    /// In the link or frame (m).
    #[serde(default = "zero3", deserialize_with = "crate::validate::finite3")]
    pub point: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "crate::validate::finite3")]
    pub linear: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "crate::validate::finite3")]
    pub weight: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "crate::validate::finite3")]
    pub target: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "crate::validate::finite3")]
    pub linear_velocity: [f64; 3],
}

fn default_points() -> usize {
    41
}
fn default_samples() -> usize {
    24
}
fn zero3() -> [f64; 3] {
    [0.0; 3]
}

/// A gradient-quality sweep as a user writes it (a scene's `gradcheck` section is this struct,
/// field for field); [`SweepSpec::from_state`] resolves it against a simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSettings {
    /// Parameter name, resolved by [`Param::resolve`]: `base_x`, `base_y`, `base_z` (initial base position offset, m), `pull:N` (force
    /// magnitude of pull N, N) or `torque:JOINTS` (a torque offset, N m, on the actuated joints
    /// matching a comma-separated list of names or `*suffix` patterns).
    pub param: String,
    #[serde(deserialize_with = "crate::validate::finite")]
    pub from: f64,
    #[serde(deserialize_with = "crate::validate::finite")]
    pub to: f64,
    #[serde(default = "default_points")]
    pub points: usize,
    /// Rollout length (s).
    #[serde(deserialize_with = "crate::validate::positive")]
    pub horizon: f64,
    /// Terminal objective terms, summed.
    pub objective: Vec<ObjectiveTerm>,
    /// Smoothing scale of the smoothed truth (parameter units); default 5 % of the range.
    #[serde(default, deserialize_with = "crate::validate::positive_opt")]
    pub sigma: Option<f64>,
    /// Antithetic sample pairs of the smoothed truth.
    #[serde(default = "default_samples")]
    pub samples: usize,
    /// Contact names shown in the mode strip.
    #[serde(default)]
    pub watch: Vec<String>,
    /// Simulated time before the sweep starts (s): the sweep's state is the scene's initial
    /// state advanced this long (a settled stance), with the parameter applied there.
    #[serde(default, deserialize_with = "crate::validate::non_negative")]
    pub settle: f64,
    /// Relaxation of the two relaxed sensitivities (N s m/s) and the normal shift (m/s).
    #[serde(default = "super::sensitivity::default_kappa", deserialize_with = "crate::validate::positive")]
    pub kappa: f64,
    #[serde(default = "super::sensitivity::default_delta", deserialize_with = "crate::validate::non_negative")]
    pub delta: f64,
}

impl SweepSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        let mut c = Checker::new("SweepSettings");
        c.finite("from", self.from)
            .finite("to", self.to)
            .check(self.to > self.from, "to", || format!("{} must exceed from = {}", self.to, self.from))
            .count("points", self.points, 2, 100_000)
            .positive("horizon", self.horizon)
            .count("samples", self.samples, 1, 100_000)
            .non_negative("settle", self.settle)
            .positive("kappa", self.kappa)
            .non_negative("delta", self.delta);
        if let Some(sigma) = self.sigma {
            c.positive("sigma", sigma);
        }
        for (i, t) in self.objective.iter().enumerate() {
            c.all_finite(&format!("objective[{i}].point"), &t.point)
                .all_finite(&format!("objective[{i}].linear"), &t.linear)
                .all_finite(&format!("objective[{i}].weight"), &t.weight)
                .all_finite(&format!("objective[{i}].target"), &t.target)
                .all_finite(&format!("objective[{i}].linear_velocity"), &t.linear_velocity);
        }
        c.finish()
    }
}

/// Overrides of a sweep's settings for one run (command-line flags, the app's panel).
#[derive(Clone, Debug, Default)]
pub struct SweepOverrides {
    pub param: Option<String>,
    pub from: Option<f64>,
    pub to: Option<f64>,
    pub points: Option<usize>,
    pub horizon: Option<f64>,
    pub sigma: Option<f64>,
    pub samples: Option<usize>,
    pub kappa: Option<f64>,
    pub delta: Option<f64>,
    /// The families to compare [all three], each with the sweep's `kappa` and `delta`.
    pub sensitivities: Option<Vec<SensitivityKind>>,
    /// Worker threads \[2\].
    pub threads: Option<usize>,
}

impl SweepOverrides {
    /// `settings` with the overrides applied.
    pub fn apply(&self, settings: &SweepSettings) -> SweepSettings {
        let mut g = settings.clone();
        if let Some(p) = &self.param {
            g.param = p.clone();
        }
        g.from = self.from.unwrap_or(g.from);
        g.to = self.to.unwrap_or(g.to);
        g.points = self.points.unwrap_or(g.points);
        g.horizon = self.horizon.unwrap_or(g.horizon);
        g.sigma = self.sigma.or(g.sigma);
        g.samples = self.samples.unwrap_or(g.samples);
        g.kappa = self.kappa.unwrap_or(g.kappa);
        g.delta = self.delta.unwrap_or(g.delta);
        g
    }
}

/// Tolerance cap of the forward solver during sweeps: the local finite differences (step
/// `1e-4` of the range) must resolve the cost and not the solver's stopping point.
pub const SWEEP_TOLERANCE: f64 = 1e-10;

impl SweepSpec {
    /// The sweep `settings` (with `o` applied) from the state of `sim`: settles for
    /// `settle` seconds without the pulls, then restarts the pulls' clock, so the sweep starts
    /// at `t = 0`; the forward solver is tightened to [`SWEEP_TOLERANCE`]. `name` labels the
    /// result. The app uses it to sweep from whatever state is on screen.
    pub fn from_state(
        name: &str,
        settings: &SweepSettings,
        o: &SweepOverrides,
        mut sim: Simulation,
    ) -> Result<(SweepSpec, Simulation), SweepError> {
        let g = o.apply(settings);
        g.validate().map_err(|e| SweepError::Invalid(e.to_string()))?;
        let model = &*sim.model.clone();
        let param = Param::resolve(model, &sim.pulls, &g.param).map_err(SweepError::Invalid)?;
        let (from, to) = (g.from, g.to);
        let sigma = g.sigma.unwrap_or(0.05 * (to - from));
        let kinds = o.sensitivities.clone().unwrap_or_else(|| SensitivityKind::ALL.to_vec());
        let sensitivities = kinds.iter().map(|k| (k.name().to_string(), k.with(g.kappa, g.delta))).collect();
        let mut cost = Cost::zero(model);
        cost.terminal = 1.0;
        for (i, t) in g.objective.iter().enumerate() {
            let (body, placement) = model
                .resolve_body_or_frame(&t.body)
                .ok_or_else(|| SweepError::Invalid(format!("objective[{i}].body: no link or frame `{}`", t.body)))?;
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
            .map(|w| {
                model
                    .contact_points
                    .iter()
                    .position(|c| &c.name == w)
                    .ok_or_else(|| SweepError::Invalid(format!("watch: no contact `{w}`")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        sim.settings.solver.tolerance = sim.settings.solver.tolerance.min(SWEEP_TOLERANCE);
        sim.settings.solver.kappa_target = sim.settings.solver.kappa_target.min(sim.settings.solver.tolerance);
        sim.settings.solver.max_iterations = sim.settings.solver.max_iterations.max(100);
        // Settling runs without the pulls: they belong to the sweep.
        let pulls = std::mem::take(&mut sim.pulls);
        sim.settle(g.settle).map_err(|e| SweepError::Invalid(format!("settling failed: {e}")))?;
        // The pulls' schedule is relative to the sweep's start.
        sim.pulls = pulls;
        sim.t = 0.0;
        let steps = (g.horizon / sim.settings.dt).round().max(1.0) as usize;
        let spec = SweepSpec {
            name: name.to_string(),
            param,
            param_name: g.param.clone(),
            from,
            to,
            points: g.points,
            steps,
            cost,
            sigma,
            samples: g.samples,
            fd_step: 1e-4 * (to - from),
            sensitivities,
            watch,
            threads: o.threads.unwrap_or(2),
            seed: 1,
        };
        Ok((spec, sim))
    }
}

/// What to sweep and how to measure it, resolved against a model.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    /// Name of the sweep (reported).
    pub name: String,
    /// The parameter and its name as given by the user.
    pub param: Param,
    pub param_name: String,
    pub from: f64,
    pub to: f64,
    pub points: usize,
    /// Rollout length (steps).
    pub steps: usize,
    pub cost: Cost,
    /// Smoothing scale of the smoothed truth (parameter units).
    pub sigma: f64,
    /// Antithetic pairs of the smoothed truth.
    pub samples: usize,
    /// Step of the local finite difference (parameter units).
    pub fd_step: f64,
    /// Sensitivities to compare, with their report names.
    pub sensitivities: Vec<(String, Sensitivity)>,
    /// Contact candidates (indices into `model.contact_points`) of the mode strip.
    pub watch: Vec<usize>,
    /// Worker threads (points are split between them).
    pub threads: usize,
    /// Seed of the smoothing samples.
    pub seed: u64,
}

/// One sweep point.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    pub s: f64,
    pub f: f64,
    /// Local finite-difference truth and whether the modes differ between its two rollouts.
    pub fd: f64,
    pub fd_mode_change: bool,
    /// Smoothed truth and its standard error.
    pub smoothed: f64,
    pub smoothed_se: f64,
    /// `df/ds` per sensitivity (same order as the spec); NaN where it failed (see `errors`).
    pub grads: Vec<f64>,
    pub errors: Vec<Option<String>>,
    /// Mode of each watched contact at the last step, and whether it ever touched.
    pub final_modes: Vec<ContactMode>,
    pub touched: Vec<bool>,
}

/// Summary of one sensitivity against the smoothed truth (module docs).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub cosine: f64,
    pub rel_error: f64,
    pub sign_agreement: f64,
}

/// A finished sweep.
#[derive(Clone, Debug)]
pub struct SweepResult {
    pub spec_name: String,
    pub param_name: String,
    pub sensitivity_names: Vec<String>,
    pub watch_names: Vec<String>,
    pub sigma: f64,
    pub points: Vec<SweepPoint>,
    pub summaries: Vec<Summary>,
}

/// Why a sweep stopped.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("sweep cancelled")]
    Cancelled,
    #[error("invalid sweep: {0}")]
    Invalid(String),
    #[error("forward rollout failed at s = {s}: {source}")]
    Forward { s: f64, source: RolloutError },
}

impl SweepSpec {
    fn validate(&self, sim: &Simulation) -> Result<(), SweepError> {
        let bad = |m: &str| Err(SweepError::Invalid(m.to_string()));
        if !(self.from.is_finite() && self.to.is_finite() && self.to > self.from) {
            return bad("`from` and `to` must be finite with from < to");
        }
        if self.points < 2 {
            return bad("at least 2 points");
        }
        if self.steps == 0 {
            return bad("the horizon must be at least one step");
        }
        if !(self.sigma > 0.0 && self.sigma.is_finite() && self.fd_step > 0.0 && self.fd_step.is_finite()) {
            return bad("sigma and the finite-difference step must be positive");
        }
        if self.samples == 0 {
            return bad("at least one smoothing sample");
        }
        if self.watch.iter().any(|&i| i >= sim.model.contact_points.len()) {
            return bad("a watched contact does not exist");
        }
        for (name, s) in &self.sensitivities {
            let ok = match *s {
                Sensitivity::Exact => true,
                Sensitivity::SignoriniRelaxed { kappa } => kappa > 0.0 && kappa.is_finite(),
                Sensitivity::Relaxed { kappa, delta } => {
                    kappa > 0.0 && kappa.is_finite() && delta >= 0.0 && delta.is_finite()
                }
            };
            if !ok {
                return Err(SweepError::Invalid(format!("{name}: kappa must be > 0 and delta >= 0, both finite")));
            }
        }
        let mut probe = sim.clone();
        apply_param(&mut probe, &self.param, self.from)
            .map_err(|e| SweepError::Invalid(format!("{}: {e}", self.param_name)))?;
        Ok(())
    }

    /// The sweep's parameter values.
    pub fn values(&self) -> Vec<f64> {
        (0..self.points).map(|k| self.from + (self.to - self.from) * k as f64 / (self.points - 1) as f64).collect()
    }
}

/// Standard normal samples by Box-Muller (seeded, reproducible).
fn normals(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random::<f64>();
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        })
        .collect()
}

/// `f(s)` on the forward simulator; with `modes`, the realized modes of every step.
fn objective(
    sim: &Simulation,
    spec: &SweepSpec,
    s: f64,
    modes: Option<&mut Vec<Vec<ContactMode>>>,
) -> Result<f64, SweepError> {
    let mut x = sim.clone();
    apply_param(&mut x, &spec.param, s).map_err(|source| SweepError::Forward { s, source })?;
    rollout_cost(&x, &spec.cost, spec.steps, modes).map(|(f, _)| f).map_err(|source| SweepError::Forward { s, source })
}

/// Runs the sweep from the state of `sim` (its parameter at value 0 plus `s`). `progress`
/// counts finished points; `cancel` stops between rollouts.
pub fn run_sweep(
    sim: &Simulation,
    spec: &SweepSpec,
    cancel: &AtomicBool,
    progress: &AtomicUsize,
) -> Result<SweepResult, SweepError> {
    spec.validate(sim)?;
    let eps = normals(spec.seed, spec.samples);
    let values = spec.values();
    let threads = spec.threads.clamp(1, spec.points);
    let mut slots: Vec<Option<Result<SweepPoint, SweepError>>> = Vec::new();
    slots.resize_with(values.len(), || None);
    std::thread::scope(|scope| {
        let chunks: Vec<Vec<(usize, f64)>> =
            (0..threads).map(|t| values.iter().copied().enumerate().skip(t).step_by(threads).collect()).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let eps = &eps;
                scope.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|(k, s)| {
                            let r = sweep_point(sim, spec, eps, s, cancel);
                            progress.fetch_add(1, Ordering::Relaxed);
                            (k, r)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (k, r) in h.join().expect("sweep worker panicked") {
                slots[k] = Some(r);
            }
        }
    });
    let mut points = Vec::with_capacity(values.len());
    for slot in slots {
        points.push(slot.expect("every point is computed")?);
    }
    let summaries = (0..spec.sensitivities.len()).map(|i| summarize(&points, i)).collect();
    Ok(SweepResult {
        spec_name: spec.name.clone(),
        param_name: spec.param_name.clone(),
        sensitivity_names: spec.sensitivities.iter().map(|(n, _)| n.clone()).collect(),
        watch_names: spec.watch.iter().map(|&i| sim.model.contact_points[i].name.clone()).collect(),
        sigma: spec.sigma,
        points,
        summaries,
    })
}

fn sweep_point(
    sim: &Simulation,
    spec: &SweepSpec,
    eps: &[f64],
    s: f64,
    cancel: &AtomicBool,
) -> Result<SweepPoint, SweepError> {
    let check = || if cancel.load(Ordering::Relaxed) { Err(SweepError::Cancelled) } else { Ok(()) };
    check()?;
    let mut x = sim.clone();
    apply_param(&mut x, &spec.param, s).map_err(|source| SweepError::Forward { s, source })?;
    let mut grads = Vec::new();
    let mut errors = Vec::new();
    let mut modes: Option<Vec<Vec<ContactMode>>> = None;
    let mut f = f64::NAN;
    for (_, sensitivity) in &spec.sensitivities {
        check()?;
        match rollout_gradient(&x, &spec.cost, spec.steps, Some(&spec.param), *sensitivity) {
            Ok(g) => {
                f = g.cost;
                grads.push(g.grad_param);
                errors.push(None);
                modes.get_or_insert(g.modes);
            }
            Err(e) => {
                grads.push(f64::NAN);
                errors.push(Some(e.to_string()));
            }
        }
    }
    if !f.is_finite() {
        f = objective(sim, spec, s, None)?;
    }
    check()?;
    // Local truth, with the mode sequences of both sides compared.
    let side = |d: f64| -> Result<(f64, Vec<Vec<ContactMode>>), SweepError> {
        let mut seq = Vec::with_capacity(spec.steps);
        Ok((objective(sim, spec, s + d, Some(&mut seq))?, seq))
    };
    let (fp, mp) = side(spec.fd_step)?;
    let (fm, mm) = side(-spec.fd_step)?;
    let fd = (fp - fm) / (2.0 * spec.fd_step);
    let fd_mode_change = mp != mm;
    // Smoothed truth: y_i = (f(s + sigma e_i) - f(s - sigma e_i)) / 2 sigma regressed on e_i
    // through the origin (module docs).
    let mut ys = Vec::with_capacity(eps.len());
    for &e in eps {
        check()?;
        let a = objective(sim, spec, s + spec.sigma * e, None)?;
        let b = objective(sim, spec, s - spec.sigma * e, None)?;
        ys.push((a - b) / (2.0 * spec.sigma));
    }
    let (smoothed, smoothed_se) = stein_slope(eps, &ys);
    let modes = modes.unwrap_or(mp);
    let final_modes = spec.watch.iter().map(|&i| modes.last().map_or(ContactMode::Separated, |m| m[i])).collect();
    let touched =
        spec.watch.iter().map(|&i| modes.iter().any(|m| m[i] != ContactMode::Separated)).collect::<Vec<bool>>();
    Ok(SweepPoint { s, f, fd, fd_mode_change, smoothed, smoothed_se, grads, errors, final_modes, touched })
}

/// Self-normalized Stein estimate of `f_sigma'(s)` from antithetic pairs: the least-squares
/// slope of `y_i` on `e_i` through the origin, `sum y_i e_i / sum e_i^2`, and its standard
/// error `sqrt(sum r_i^2 / (N - 1) / sum e_i^2)` from the residuals `r_i = y_i - slope e_i`.
/// Since `E[y e] = sigma^-1 E[f(s + sigma e) e] = f_sigma'(s)` and `E[e^2] = 1` this estimates
/// the smoothed derivative; dividing by the sample `sum e_i^2` instead of `N` makes it exact
/// for affine `f` (the plain mean `sum y_i e_i / N` carries the noise of `sum e_i^2 / N` in
/// every estimate, about 30 % at 24 samples).
pub fn stein_slope(eps: &[f64], ys: &[f64]) -> (f64, f64) {
    let see: f64 = eps.iter().map(|e| e * e).sum();
    let slope = eps.iter().zip(ys).map(|(e, y)| e * y).sum::<f64>() / see;
    let n = eps.len() as f64;
    let rss: f64 = eps.iter().zip(ys).map(|(e, y)| (y - slope * e).powi(2)).sum();
    let se = if eps.len() > 1 { (rss / (n - 1.0) / see).sqrt() } else { f64::INFINITY };
    (slope, se)
}

/// Summary of sensitivity `i` over the points (module docs). Failed points count as zero.
pub fn summarize(points: &[SweepPoint], i: usize) -> Summary {
    let g: Vec<f64> = points.iter().map(|p| if p.grads[i].is_finite() { p.grads[i] } else { 0.0 }).collect();
    let t: Vec<f64> = points.iter().map(|p| p.smoothed).collect();
    let dot: f64 = g.iter().zip(&t).map(|(a, b)| a * b).sum();
    let (ng, nt) = (g.iter().map(|a| a * a).sum::<f64>().sqrt(), t.iter().map(|a| a * a).sum::<f64>().sqrt());
    let cosine = if ng > 0.0 && nt > 0.0 { dot / (ng * nt) } else { 0.0 };
    let diff = g.iter().zip(&t).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    let rel_error = if nt > 0.0 { diff / nt } else { f64::INFINITY };
    // A value within 1e-6 of the truth's scale carries no sign. A gradient there does not agree;
    // a truth there is not counted, however small its standard error: where the objective does
    // not move (a box that sticks) it is rounding noise, whose sign changes with the solver's
    // stopping point (common random numbers make its standard error as small as itself).
    let zero = 1e-6 * t.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let significant: Vec<usize> =
        (0..points.len()).filter(|&k| t[k].abs() > 2.0 * points[k].smoothed_se && t[k].abs() > zero).collect();
    let agree = significant.iter().filter(|&&k| g[k].abs() > zero && g[k].signum() == t[k].signum()).count();
    let sign_agreement = if significant.is_empty() { f64::NAN } else { agree as f64 / significant.len() as f64 };
    Summary { cosine, rel_error, sign_agreement }
}
