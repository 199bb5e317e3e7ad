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
//! the fraction of points with `|g*_k| > 2 se_k` (a significantly nonzero truth) where
//! `sign(g_k) = sign(g*_k)` and `g_k` is not zero (below `1e-6 max |g*|`: no sign at all).
//!
//! The realized mode strip records, per point and watched contact, the mode at the last step
//! of the rollout at `s`, and whether the watched contact touched at any step.

use super::rollout::{apply_param, rollout_cost, rollout_gradient, Cost, Param, RolloutError};
use super::transition::Sensitivity;
use crate::contact::ContactMode;
use crate::sim::Simulation;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What to sweep and how to measure it.
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
    let significant: Vec<usize> = (0..points.len()).filter(|&k| t[k].abs() > 2.0 * points[k].smoothed_se).collect();
    // A gradient within 1e-6 of the truth's scale carries no sign: it does not agree.
    let zero = 1e-6 * t.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let agree = significant.iter().filter(|&&k| g[k].abs() > zero && g[k].signum() == t[k].signum()).count();
    let sign_agreement = if significant.is_empty() { f64::NAN } else { agree as f64 / significant.len() as f64 };
    Summary { cosine, rel_error, sign_agreement }
}
