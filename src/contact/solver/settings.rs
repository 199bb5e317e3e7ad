//! Settings of the forward contact solver (defaults and ranges on every field) and what a solve
//! reports: a [`Status`] and an [`Info`].

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Solver settings. Small and `Copy`; check with [`Settings::validate`]. Fields missing from a
/// scene file take their defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Convergence tolerance on the scaled residual (module docs). Default `1e-8`, range `(0, 1)`.
    pub tolerance: f64,
    /// Iteration limit (a cold restart after a failed warm start gets the same limit again).
    /// Default `60`, range `1..=10_000`.
    pub max_iterations: usize,
    /// Iteration budget of the globalized phase, which runs only when the Coulomb iteration
    /// (warm and cold) ends in `MaxIterations` or `LinearSolveFailed` (module docs,
    /// "Globalization"); `0` disables it. Default `3000`, range `0..=100_000`. Iterations are
    /// spent only on stalls; on 30 000 random problems of `tests/contact_solver_random.rs`
    /// (seed 17) a budget of 1200 left 267 stalled, 2000 left 179, 3000 left 150. The budget
    /// bounds the restarts and the fixed point; the mode enumeration that follows them has its
    /// own fixed limits (up to 300 mode sets from each guess; the guesses cost at most 10^6
    /// projected Gauss-Seidel sweeps, four plain fixed points of at most 200 convex solves and
    /// 20 000 iterations each, and a continuation of at most about 30 stages) and is off with
    /// the phase. A stalled solve can therefore take seconds with eight contacts
    /// (`docs/results/solver/random_problems*.json` record the phase's wall times).
    pub global_iterations: usize,
    /// Smallest central-path parameter the predictor-corrector targets, normalized units.
    /// Default `1e-10`, range `(0, tolerance]`.
    pub kappa_target: f64,
    /// Fraction-to-boundary `tau` of the step rule. Default `0.99`, range `(0, 1)`.
    pub fraction_to_boundary: f64,
    /// Diagonal regularization of the reduced Newton matrix, relative to `max_j G_jj`.
    /// Default `1e-13`, range `[0, 1e-3]`.
    pub regularization: f64,
    /// Complementarity (normalized) a warm start of the hard solve is centered at (a fixed-`kappa`
    /// central-path solve starts at its own `kappa` instead, where that is in range). Default
    /// `1e-6`, range `(0, 1]`.
    pub warm_start_mu: f64,
    /// Friction coefficients below this are raised to it (the cone must have an interior).
    /// Default `1e-6`, range `(0, 1e-2]`.
    pub friction_floor: f64,
    /// Mode threshold: `Separated` if `l_n` is at most this (N s), or if `w_n >= G_nn l_n`
    /// (module docs, *Realized modes*). Default `1e-9`, range `[0, inf)`.
    pub separated_impulse: f64,
    /// Mode threshold: `Sticking` if `||w_t||` is at most this (m/s). Default `1e-6`,
    /// range `[0, inf)`.
    pub sticking_velocity: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            tolerance: 1e-8,
            max_iterations: 60,
            global_iterations: 3000,
            kappa_target: 1e-10,
            fraction_to_boundary: 0.99,
            regularization: 1e-13,
            warm_start_mu: 1e-6,
            friction_floor: 1e-6,
            separated_impulse: 1e-9,
            sticking_velocity: 1e-6,
        }
    }
}

/// A setting outside its allowed range.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum SettingsError {
    /// The field `field` holds `value`, which is outside `allowed`.
    #[error("contact solver setting `{field}` = {value} is out of range; allowed: {allowed}")]
    OutOfRange {
        /// Name of the offending field.
        field: &'static str,
        /// Its value (as `f64`).
        value: f64,
        /// The allowed range, human readable.
        allowed: &'static str,
    },
}

/// Whether `mu0` is an allowed [`Settings::warm_start_mu`]: in `(0, 1]` (NaN is not).
pub fn valid_warm_start_mu(mu0: f64) -> bool {
    mu0 > 0.0 && mu0 <= 1.0
}

impl Settings {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), SettingsError> {
        fn check(field: &'static str, value: f64, ok: bool, allowed: &'static str) -> Result<(), SettingsError> {
            // `ok` is computed with comparisons that are false for NaN, so NaN is rejected too.
            if ok {
                Ok(())
            } else {
                Err(SettingsError::OutOfRange { field, value, allowed })
            }
        }
        let s = self;
        check("tolerance", s.tolerance, s.tolerance > 0.0 && s.tolerance < 1.0, "(0, 1)")?;
        check("max_iterations", s.max_iterations as f64, (1..=10_000).contains(&s.max_iterations), "1..=10000")?;
        check("global_iterations", s.global_iterations as f64, s.global_iterations <= 100_000, "0..=100000")?;
        check("kappa_target", s.kappa_target, s.kappa_target > 0.0 && s.kappa_target <= s.tolerance, "(0, tolerance]")?;
        check(
            "fraction_to_boundary",
            s.fraction_to_boundary,
            s.fraction_to_boundary > 0.0 && s.fraction_to_boundary < 1.0,
            "(0, 1)",
        )?;
        check("regularization", s.regularization, (0.0..=1e-3).contains(&s.regularization), "[0, 1e-3]")?;
        check("warm_start_mu", s.warm_start_mu, valid_warm_start_mu(s.warm_start_mu), "(0, 1]")?;
        check("friction_floor", s.friction_floor, s.friction_floor > 0.0 && s.friction_floor <= 1e-2, "(0, 1e-2]")?;
        check(
            "separated_impulse",
            s.separated_impulse,
            s.separated_impulse >= 0.0 && s.separated_impulse.is_finite(),
            "[0, inf)",
        )?;
        check(
            "sticking_velocity",
            s.sticking_velocity,
            s.sticking_velocity >= 0.0 && s.sticking_velocity.is_finite(),
            "[0, inf)",
        )
    }
}

/// How a solve ended. A solve never panics on bad numbers; it reports here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// The scaled residual reached the tolerance, or (where floating point cannot certify the
    /// tolerance: normalized impulses above about `1e3`) its rounding floor (module docs).
    Converged,
    /// The iteration limit was reached first (and the globalized phase, if enabled, did not
    /// converge either); the last iterate of the Coulomb iteration is returned, or the best
    /// iterate of the globalized phase if it ran.
    MaxIterations,
    /// NaN or infinity in the inputs or in an iterate.
    NonFinite,
    /// The reduced Newton matrix could not be factorized.
    LinearSolveFailed,
    /// Sizes do not match (`G` not `3k x 3k`, `k > max_contacts`, slice lengths), a negative
    /// friction coefficient, or settings that fail [`Settings::validate`].
    InvalidInput,
}

/// What a solve did. Impulses in N s, velocities in m/s; residuals are normalized (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// Outcome.
    pub status: Status,
    /// Newton iterations (including a cold restart after a failed warm start and the globalized
    /// phase, if it ran).
    pub iterations: usize,
    /// Scaled residual at the returned iterate.
    pub residual: f64,
    /// Scaled complementarity at the returned iterate (the `kappa = 0` measure).
    pub complementarity: f64,
    /// `min_i (mu_i l_n,i - ||l_t,i||)` at the returned iterate (N s).
    pub cone_margin: f64,
    /// Minimum of the cone margin over every iterate, the starting point included (N s).
    pub min_iterate_cone_margin: f64,
    /// Central-path parameter of the last step, in physical units (N s * m/s).
    pub kappa: f64,
    /// Whether the answer came from the warm start (false if none was given or it was rejected).
    pub warm_started: bool,
    /// Velocity scale `V` (m/s) of the normalization.
    pub velocity_scale: f64,
    /// Impulse scale `L` (N s) of the normalization.
    pub impulse_scale: f64,
}

impl Info {
    /// The report of a step that had no contact problem to solve.
    pub fn not_run() -> Self {
        Self {
            status: Status::Converged,
            iterations: 0,
            residual: 0.0,
            complementarity: 0.0,
            cone_margin: f64::INFINITY,
            min_iterate_cone_margin: f64::INFINITY,
            kappa: 0.0,
            warm_started: false,
            velocity_scale: 0.0,
            impulse_scale: 0.0,
        }
    }

    /// The report of a solve that stopped before its first iterate (bad input).
    pub(super) fn failed(status: Status) -> Self {
        Self {
            status,
            iterations: 0,
            residual: f64::INFINITY,
            complementarity: f64::INFINITY,
            cone_margin: f64::NAN,
            min_iterate_cone_margin: f64::NAN,
            kappa: f64::NAN,
            warm_started: false,
            velocity_scale: f64::NAN,
            impulse_scale: f64::NAN,
        }
    }
}
