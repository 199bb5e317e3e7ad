//! Forward contact solver: exact Coulomb friction (second-order cone) by a primal-dual
//! interior-point method on the cone complementarity problem.
//!
//! # Problem
//! For `k` contacts the step gives the Delassus matrix `G` (`3k x 3k`, symmetric positive
//! *semi*-definite), the free-contact term `b` (`3k`) and friction coefficients `mu` (`k`).
//! Per contact `i` the unknown impulse is `lambda_i = (l_n, l_t1, l_t2)` and the contact velocity
//! after the step is `w = G lambda + b`, `w_i = (w_n, w_t)`. The contact law is Signorini plus
//! Coulomb with maximal dissipation:
//!
//! ```text
//! 0 <= l_n  _|_  w_n >= 0
//! ||l_t|| <= mu l_n,   sliding: l_t = -mu l_n w_t / ||w_t||,   sticking: w_t = 0
//! ```
//!
//! (De Saxce & Feng: `lambda_i in K_mu`, `(w_n + mu ||w_t||, w_t) in K_mu^*`, complementary.)
//! The cone is the exact second-order cone, never a pyramid.
//!
//! # Formulation (Dojo's "nonlinear friction cone", Howell et al. 2022)
//! Per contact the unknowns are `gamma = l_n`, a normal-velocity slack `s`, `l_t` (2) and a scalar
//! `psi` (the dual of the friction cone). With `beta = (mu gamma, l_t)` and `eta = (psi, w_t)`,
//! both in the 3-D second-order cone `Q = {(x0, x1): x0 >= ||x1||}`, the relaxed system is
//!
//! ```text
//! s - w_n(lambda) = 0
//! gamma s         = kappa
//! beta o eta      = kappa e,     x o y = (x^T y, x0 y1 + y0 x1),  e = (1, 0, 0)
//! ```
//!
//! At `kappa = 0` this is exact Coulomb: `beta o eta = 0` with both in `Q` means either `w_t = 0`
//! (sticking, `psi = 0` when `beta` is interior) or `beta` and `eta` on opposite rays of the
//! cone boundary, `psi = ||w_t||` and `l_t = -mu gamma w_t / ||w_t||` (sliding).
//!
//! **Newton step.** Plain Newton on the relaxed system (no Nesterov-Todd scaling: the friction law
//! is not associated, so the system is not the KKT system of a conic program and NT scaling would
//! buy no symmetry). The step is reduced to `3k x 3k`: `ds` is eliminated with the slack equation
//! and `dpsi` with the Jordan-product equation, `d eta = Arw(beta)^-1 (-r3 - Arw(eta) d beta)`,
//! where `Arw(x) = [[x0, x1^T], [x1, x0 I]]` is the arrow matrix (`x o y = Arw(x) y`). The
//! reduced matrix is `G + blkdiag(Lambda_i) + rho I`, with `Lambda_i` row 0 = `(s/gamma, 0, 0)`
//! and rows 1-2 the last two rows of `Arw(beta)^-1 Arw(eta) diag(mu, 1, 1)`. It is not symmetric,
//! so it is factorized by a dense LU with partial pivoting into preallocated buffers. `rho` (the
//! `regularization` setting, relative to the largest diagonal entry of `G`) keeps the matrix
//! invertible when `G` is rank deficient and contacts are sticking (then `Lambda_i -> 0`).
//! The regularization only changes the search direction; every residual is evaluated exactly.
//!
//! **Centering.** Mehrotra predictor-corrector: an affine step (`kappa = 0`) predicts how far the
//! complementarity can drop; the corrector targets `kappa = max(sigma mu_c, kappa_target)` with
//! `sigma = (mu_aff / mu_c)^3`, `mu_c = sum_i (gamma_i s_i + beta_i^T eta_i) / (2k)`, and the
//! second-order terms `d gamma_aff d s_aff` and `d beta_aff o d eta_aff`. Both solves reuse one LU.
//! The step length is `min(1, tau alpha_max)` with `tau` the fraction-to-boundary (0.99) and
//! `alpha_max` the largest step keeping `gamma, s > 0` and `beta, eta` in the cone, so every
//! iterate satisfies `gamma > 0`, `s > 0`, `mu gamma > ||l_t||`, `psi > ||w_t||` strictly.
//! Because rounding (a cancelling cone determinant, `w` recomputed from `lambda`) could still
//! leave the interior, each new iterate is checked exactly as the next iteration evaluates it and
//! the step is halved until it passes. **Fast finish:** with `tau` fixed the last steps converge
//! only by a factor `1 - tau` each, so when the mean complementarity is below `1e-3` a step with
//! `tau = 1 - 1e-9` is tried first and kept only if it cuts the residual by `1e-3` (or lands below
//! `0.1 tolerance`); a warm-started standing solve then takes 2 iterations instead of 3.
//!
//! **Fixed kappa.** [`ContactSolver::solve_central_path`] solves the same system at a fixed
//! `kappa > 0` by pure Newton (no predictor), for relaxed sensitivities; the reduced Newton matrix
//! at the answer is available from [`ContactSolver::newton_matrix`].
//!
//! # Scaling and the residual
//! Everything is solved in normalized units so that tolerances are dimensionless and the iterates
//! do not depend on the units of the problem:
//!
//! ```text
//! V = max_i max(-b_n,i, ||b_t,i||)        (approach velocity; ||b||_inf if that is 0, 1 if b = 0)
//! g = max_j G_jj                          (1 if G has a zero diagonal)
//! L = V / g                               (impulse that stops V through the stiffest direction)
//! lambda~ = lambda / L,  w~ = w / V,  b~ = b / V,  G~ = G / g
//! ```
//!
//! `V` ignores large positive `b_n` on purpose: a foot far above the ground (`b_n = +500`) must not
//! loosen the tolerance of the feet that carry the robot. The reported residual is
//!
//! ```text
//! residual        = max(max_i |s~_i - w~_n,i|, complementarity)
//! complementarity = max_i max(gamma~_i s~_i, |beta~_i^T eta~_i|, ||mu gamma~_i w~_t,i + psi~_i l~_t,i||_inf)
//! ```
//!
//! i.e. the infinity norm of the `kappa = 0` residual in normalized units (for
//! [`ContactSolver::solve_central_path`] the complementarity terms are measured against `kappa`).
//! The solve is `Converged` when `residual <= tolerance` (default `1e-8`). The tangential part of
//! the Jordan product is included because `beta^T eta` alone only bounds the misalignment of
//! `l_t` and `-w_t` by its square root.
//!
//! # Warm start
//! A previous `lambda` is moved strictly inside the cone: `l_n` is raised so that
//! `l_n s >= mu0` and `||l_t||` is capped at `(1 - sqrt(mu0)) mu l_n`, then `s` and `psi` are set so
//! that every complementarity pair is about `mu0 = warm_start_mu` (normalized). A cold start is the
//! same construction from `lambda = 0` with `mu0 = 1`. If a warm-started solve does not converge
//! it is restarted cold (the iterations add up and `warm_started` is reported `false`).
//!
//! # Realized modes
//! [`classify`]: `Separated` if `l_n <= separated_impulse` (absolute, N s), else `Sticking` if
//! `||w_t|| <= sticking_velocity` (absolute, m/s), else `Sliding`. [`classify_all`] uses the
//! larger of the absolute threshold and `separated_impulse_rel` times the largest `l_n`.
//!
//! # References
//! - T. Howell, S. Le Cleac'h, J. Bruedigam, Z. Kolter, M. Schwager, Z. Manchester,
//!   "Dojo: A Differentiable Physics Engine for Robotics" (2022).
//! - M. Anitescu, "Optimization-based simulation of nonsmooth rigid multibody dynamics",
//!   Math. Program. 105 (2006).
//! - G. De Saxce, Z.-Q. Feng, "The bipotential method: a constructive approach to design the
//!   complete contact law with friction and improved numerical algorithms", Math. Comput.
//!   Model. 28 (1998).
//! - S. Mehrotra, "On the implementation of a primal-dual interior point method", SIAM J. Optim.
//!   2 (1992).

use nalgebra::DMatrixView;
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
    /// Smallest central-path parameter the predictor-corrector targets, normalized units.
    /// Default `1e-10`, range `(0, tolerance]`.
    pub kappa_target: f64,
    /// Fraction-to-boundary `tau` of the step rule. Default `0.99`, range `(0, 1)`.
    pub fraction_to_boundary: f64,
    /// Diagonal regularization of the reduced Newton matrix, relative to `max_j G_jj`.
    /// Default `1e-13`, range `[0, 1e-3]`.
    pub regularization: f64,
    /// Complementarity (normalized) a warm start is centered at. Default `1e-6`, range `(0, 1]`.
    pub warm_start_mu: f64,
    /// Friction coefficients below this are raised to it (the cone must have an interior).
    /// Default `1e-6`, range `(0, 1e-2]`.
    pub friction_floor: f64,
    /// Mode threshold: `Separated` if `l_n` is at most this (N s). Default `1e-9`, range `[0, inf)`.
    pub separated_impulse: f64,
    /// Mode threshold relative to the largest `l_n` (used by [`classify_all`]). Default `1e-6`,
    /// range `[0, 1)`.
    pub separated_impulse_rel: f64,
    /// Mode threshold: `Sticking` if `||w_t||` is at most this (m/s). Default `1e-6`,
    /// range `[0, inf)`.
    pub sticking_velocity: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            tolerance: 1e-8,
            max_iterations: 60,
            kappa_target: 1e-10,
            fraction_to_boundary: 0.99,
            regularization: 1e-13,
            warm_start_mu: 1e-6,
            friction_floor: 1e-6,
            separated_impulse: 1e-9,
            separated_impulse_rel: 1e-6,
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
        check("kappa_target", s.kappa_target, s.kappa_target > 0.0 && s.kappa_target <= s.tolerance, "(0, tolerance]")?;
        check(
            "fraction_to_boundary",
            s.fraction_to_boundary,
            s.fraction_to_boundary > 0.0 && s.fraction_to_boundary < 1.0,
            "(0, 1)",
        )?;
        check("regularization", s.regularization, (0.0..=1e-3).contains(&s.regularization), "[0, 1e-3]")?;
        check("warm_start_mu", s.warm_start_mu, s.warm_start_mu > 0.0 && s.warm_start_mu <= 1.0, "(0, 1]")?;
        check("friction_floor", s.friction_floor, s.friction_floor > 0.0 && s.friction_floor <= 1e-2, "(0, 1e-2]")?;
        check(
            "separated_impulse",
            s.separated_impulse,
            s.separated_impulse >= 0.0 && s.separated_impulse.is_finite(),
            "[0, inf)",
        )?;
        check(
            "separated_impulse_rel",
            s.separated_impulse_rel,
            (0.0..1.0).contains(&s.separated_impulse_rel),
            "[0, 1)",
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
    /// The scaled residual reached the tolerance.
    Converged,
    /// The iteration limit was reached first; the last iterate is returned.
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
    /// Newton iterations (including a cold restart after a failed warm start).
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

    fn failed(status: Status) -> Self {
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

/// Realized contact mode of one contact (thresholds in [`Settings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContactMode {
    /// No normal impulse.
    Separated,
    /// Pressing, no tangential velocity.
    Sticking,
    /// Pressing and sliding; the impulse lies on the cone boundary.
    Sliding,
}

/// Mode of one contact from its impulse `(l_n, l_t1, l_t2)` and velocity `(w_n, w_t1, w_t2)`,
/// with absolute thresholds. `mu` is part of the contact's data but the modes are defined by
/// the thresholds alone (a sliding impulse is on the cone boundary by construction).
pub fn classify(lambda_i: &[f64], w_i: &[f64], _mu: f64, settings: &Settings) -> ContactMode {
    classify_with(lambda_i, w_i, settings.separated_impulse, settings)
}

/// Modes of all contacts; `Separated` uses `max(separated_impulse, separated_impulse_rel *
/// max_i l_n,i)` so that it scales with the load.
pub fn classify_all(lambda: &[f64], w: &[f64], mu: &[f64], settings: &Settings, modes: &mut [ContactMode]) {
    let k = mu.len();
    let ln_max = (0..k).map(|i| lambda[3 * i]).fold(0.0_f64, f64::max);
    let eps_n = settings.separated_impulse.max(settings.separated_impulse_rel * ln_max);
    for i in 0..k {
        modes[i] = classify_with(&lambda[3 * i..3 * i + 3], &w[3 * i..3 * i + 3], eps_n, settings);
    }
}

fn classify_with(lambda_i: &[f64], w_i: &[f64], eps_n: f64, settings: &Settings) -> ContactMode {
    if lambda_i[0] <= eps_n {
        ContactMode::Separated
    } else if w_i[1].hypot(w_i[2]) <= settings.sticking_velocity {
        ContactMode::Sticking
    } else {
        ContactMode::Sliding
    }
}

/// A step shorter than this counts towards a stall.
const STALL_STEP: f64 = 1e-2;
/// Consecutive short steps that trigger a re-centering restart.
const STALL_COUNT: usize = 3;
/// Re-centering restarts allowed per run.
const MAX_RESTARTS: usize = 3;
/// Fraction to the boundary of a fast-finish step.
const TAU_MAX: f64 = 1.0 - 1e-9;
/// Mean complementarity (normalized) below which a fast-finish step is tried.
const FAST_FINISH_MU: f64 = 1e-3;
/// Residual reduction a fast-finish step must achieve, unless it lands below
/// `FAST_FINISH_TOL * tolerance` (a step that merely reaches the tolerance is not trusted: the
/// residual bounds the impulse error only loosely).
const FAST_FINISH_GAIN: f64 = 1e-3;
const FAST_FINISH_TOL: f64 = 0.1;
/// Halvings of a step that rounding pushed out of the cone interior.
const MAX_STEP_CUTS: usize = 60;

/// How the central-path parameter is chosen in a step.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Centering {
    /// Mehrotra predictor-corrector down to `kappa_target` (the hard solve).
    PredictorCorrector,
    /// Pure Newton on the system relaxed at this `kappa` (normalized units).
    Fixed(f64),
}

/// Preallocated workspace of the forward contact solver. All sizes are for `max_contacts`;
/// a solve with `k <= max_contacts` contacts uses the leading part. Normalized units inside.
#[derive(Clone, Debug)]
pub struct ContactSolver {
    max_contacts: usize,
    /// Number of contacts of the last solve.
    k: usize,
    /// Delassus matrix as given (3k x 3k, row-major, stride 3k).
    graw: Vec<f64>,
    /// Normalized Delassus matrix `G / g` (3k x 3k, row-major, stride 3k).
    gt: Vec<f64>,
    /// Reduced Newton matrix, overwritten by its LU factors (3k x 3k, row-major).
    lu: Vec<f64>,
    /// Row permutation of the LU (3k).
    piv: Vec<usize>,
    /// Normalized free-contact term (3k).
    bt: Vec<f64>,
    /// Friction coefficients after the floor (k).
    mu: Vec<f64>,
    /// Iterate: impulses (3k), contact velocities `G~ lambda~ + b~` (3k), slacks `s` (k), `psi` (k).
    lam: Vec<f64>,
    w: Vec<f64>,
    s: Vec<f64>,
    psi: Vec<f64>,
    /// The iterate before the step (for shortening a step).
    lam0: Vec<f64>,
    s0: Vec<f64>,
    psi0: Vec<f64>,
    /// Newton direction (same layout as the iterate).
    dlam: Vec<f64>,
    dw: Vec<f64>,
    ds: Vec<f64>,
    dpsi: Vec<f64>,
    /// Affine (predictor) direction, kept for Mehrotra's second-order correction.
    alam: Vec<f64>,
    aw: Vec<f64>,
    as_: Vec<f64>,
    apsi: Vec<f64>,
    /// Per contact Nesterov-Todd scaling `W` of the pair `(beta, eta)` (3x3 row-major, 9k).
    wnt: Vec<f64>,
    /// Per contact `W^-1` (9k).
    winv: Vec<f64>,
    /// Per contact scaled point `lambda_nt = W eta = W^-1 beta` (3k).
    lnt: Vec<f64>,
    /// Per contact `W^-2 diag(mu, 1, 1)` (9k): how `d eta` answers `d lambda_i`.
    tmat: Vec<f64>,
    /// First component of `W^-1 r_hat` per contact (k), for recovering `dpsi`.
    q0: Vec<f64>,
    /// Per contact `det(beta)`, `det(eta)` (2k) and `det(lambda_nt)` (k) of the current iterate.
    dets: Vec<f64>,
    detl: Vec<f64>,
    /// Velocity and impulse scales of the last solve.
    vscale: f64,
    lscale: f64,
    /// Regularization actually added (normalized).
    rho: f64,
}

impl ContactSolver {
    /// Allocates every buffer for up to `max_contacts` contacts.
    pub fn new(max_contacts: usize) -> Self {
        let n = 3 * max_contacts;
        let m = max_contacts;
        Self {
            max_contacts,
            k: 0,
            graw: vec![0.0; n * n],
            gt: vec![0.0; n * n],
            lu: vec![0.0; n * n],
            piv: vec![0; n],
            bt: vec![0.0; n],
            mu: vec![0.0; m],
            lam: vec![0.0; n],
            w: vec![0.0; n],
            s: vec![0.0; m],
            psi: vec![0.0; m],
            lam0: vec![0.0; n],
            s0: vec![0.0; m],
            psi0: vec![0.0; m],
            dlam: vec![0.0; n],
            dw: vec![0.0; n],
            ds: vec![0.0; m],
            dpsi: vec![0.0; m],
            alam: vec![0.0; n],
            aw: vec![0.0; n],
            as_: vec![0.0; m],
            apsi: vec![0.0; m],
            wnt: vec![0.0; 9 * m],
            winv: vec![0.0; 9 * m],
            lnt: vec![0.0; 3 * m],
            tmat: vec![0.0; 9 * m],
            q0: vec![0.0; m],
            dets: vec![0.0; 2 * m],
            detl: vec![0.0; m],
            vscale: 1.0,
            lscale: 1.0,
            rho: 0.0,
        }
    }

    /// Largest number of contacts a solve accepts.
    pub fn max_contacts(&self) -> usize {
        self.max_contacts
    }

    /// Solves the hard contact problem (exact Coulomb, `kappa -> kappa_target`).
    ///
    /// `g`: Delassus matrix, `3k x 3k`, contact-major ordering `(n, t1, t2)` per contact;
    /// `b`: free-contact term (`3k`); `mu`: friction coefficients (`k`); `warm`: optional previous
    /// impulses (`3k`). Writes the impulses to `lambda` (`3k`) and `w = G lambda + b` to `w` (`3k`).
    /// Allocation-free. On any status other than `Converged`/`MaxIterations` the outputs are
    /// left untouched.
    #[allow(clippy::too_many_arguments)] // the crate-wide call signature fixed by the design
    pub fn solve(
        &mut self,
        settings: &Settings,
        g: DMatrixView<'_, f64>,
        b: &[f64],
        mu: &[f64],
        warm: Option<&[f64]>,
        lambda: &mut [f64],
        w: &mut [f64],
    ) -> Info {
        self.run(settings, g, b, mu, warm, Centering::PredictorCorrector, lambda, w)
    }

    /// Solves the system relaxed on the central path at a fixed `kappa > 0` (physical units,
    /// N s * m/s): `gamma s = kappa`, `beta o eta = kappa e`. The residual measures the distance
    /// to that relaxed system. Afterwards [`ContactSolver::newton_matrix`] gives the reduced
    /// residual Jacobian at the answer. Arguments as in [`ContactSolver::solve`].
    #[allow(clippy::too_many_arguments)] // mirrors `solve` plus `kappa`
    pub fn solve_central_path(
        &mut self,
        settings: &Settings,
        g: DMatrixView<'_, f64>,
        b: &[f64],
        mu: &[f64],
        warm: Option<&[f64]>,
        kappa: f64,
        lambda: &mut [f64],
        w: &mut [f64],
    ) -> Info {
        if !(kappa > 0.0 && kappa.is_finite()) {
            return Info::failed(Status::InvalidInput);
        }
        // Physical kappa here; `run` normalizes it by V L once the scales are known.
        self.run(settings, g, b, mu, warm, Centering::Fixed(kappa), lambda, w)
    }

    /// Reduced Newton matrix `G~ + blkdiag(Lambda_i)` (no regularization) at the current iterate,
    /// in normalized units (`dw~/dlambda~`-shaped, `3k x 3k`, row-major) written into `out`
    /// (length at least `9k^2`). Physical: `d lambda = L * d lambda~` and `d w = V * d w~`.
    pub fn newton_matrix(&mut self, out: &mut [f64]) {
        self.assemble(0.0, false);
        let n = 3 * self.k;
        out[..n * n].copy_from_slice(&self.lu[..n * n]);
    }

    /// Velocity scale `V` and impulse scale `L` of the last solve.
    pub fn scales(&self) -> (f64, f64) {
        (self.vscale, self.lscale)
    }

    /// The slacks `s` (k) and friction duals `psi` (k) of the last iterate, normalized.
    pub fn slacks(&self) -> (&[f64], &[f64]) {
        (&self.s[..self.k], &self.psi[..self.k])
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        settings: &Settings,
        g: DMatrixView<'_, f64>,
        b: &[f64],
        mu: &[f64],
        warm: Option<&[f64]>,
        centering: Centering,
        lambda: &mut [f64],
        w: &mut [f64],
    ) -> Info {
        let n = g.nrows();
        let k = n / 3;
        let sizes_ok = n.is_multiple_of(3)
            && g.ncols() == n
            && k <= self.max_contacts
            && b.len() == n
            && mu.len() == k
            && lambda.len() == n
            && w.len() == n
            && warm.is_none_or(|x| x.len() == n);
        if !sizes_ok || settings.validate().is_err() {
            return Info::failed(Status::InvalidInput);
        }
        // Row-major copy (nalgebra's element iterator is slow for a 12 x 12 view).
        let mut finite = true;
        for c in 0..n {
            for r in 0..n {
                let x = g[(r, c)];
                finite &= x.is_finite();
                self.graw[r * n + c] = x;
            }
        }
        let finite = finite && b.iter().all(|x| x.is_finite()) && mu.iter().all(|x| x.is_finite());
        if !finite {
            return Info::failed(Status::NonFinite);
        }
        if mu.iter().any(|&m| m < 0.0) {
            return Info::failed(Status::InvalidInput);
        }
        self.k = k;
        let kappa_phys = match centering {
            Centering::Fixed(kappa) => kappa,
            Centering::PredictorCorrector => 0.0,
        };
        self.load(settings, b, mu, kappa_phys);
        let centering = match centering {
            Centering::Fixed(kappa) => Centering::Fixed(kappa / (self.vscale * self.lscale)),
            c => c,
        };

        // A non-finite warm start is ignored rather than fatal: it is a hint, not data.
        let warm = warm.filter(|x| x.iter().all(|v| v.is_finite()));
        let mut info = Info {
            status: Status::MaxIterations,
            iterations: 0,
            residual: f64::INFINITY,
            complementarity: f64::INFINITY,
            cone_margin: f64::INFINITY,
            min_iterate_cone_margin: f64::INFINITY,
            kappa: 0.0,
            warm_started: warm.is_some(),
            velocity_scale: self.vscale,
            impulse_scale: self.lscale,
        };
        if let Some(x) = warm {
            let inv_l = 1.0 / self.lscale;
            for (l, &x) in self.lam[..n].iter_mut().zip(x) {
                *l = x * inv_l;
            }
            self.initialize(settings.warm_start_mu);
            self.drive(settings, centering, &mut info);
            if matches!(info.status, Status::MaxIterations | Status::LinearSolveFailed) {
                info.warm_started = false;
            }
        }
        if !info.warm_started && info.status != Status::NonFinite {
            self.lam[..n].fill(0.0);
            self.initialize(1.0);
            self.drive(settings, centering, &mut info);
        }

        if matches!(info.status, Status::Converged | Status::MaxIterations) {
            for (o, &l) in lambda.iter_mut().zip(&self.lam[..n]) {
                *o = l * self.lscale;
            }
            // w from the physical data so that callers get exactly G lambda + b.
            for ((w, &b), row) in w.iter_mut().zip(b).zip(self.graw[..n * n].chunks_exact(n)) {
                let mut acc = b;
                for (&g, &l) in row.iter().zip(lambda.iter()) {
                    acc += g * l;
                }
                *w = acc;
            }
        }
        info
    }

    /// Normalizes the problem data (`G` already copied to `graw`); sets `V`, `L`. A fixed
    /// central-path `kappa` (physical) raises `V` to at least `sqrt(kappa g)`, where
    /// `gamma w = kappa` balances: with every contact separated `V` would otherwise be the
    /// `1e-9` floor and `kappa` enormous in normalized units.
    fn load(&mut self, settings: &Settings, b: &[f64], mu: &[f64], kappa: f64) {
        let k = self.k;
        let n = 3 * k;
        let mut v_app = 0.0_f64;
        let mut b_inf = 0.0_f64;
        for i in 0..k {
            let (bn, b1, b2) = (b[3 * i], b[3 * i + 1], b[3 * i + 2]);
            v_app = v_app.max(-bn).max(b1.hypot(b2));
            b_inf = b_inf.max(bn.abs()).max(b1.abs()).max(b2.abs());
        }
        // The floor keeps b~ below 1e9 when the approach velocity is negligible.
        let mut gmax = (0..n).map(|j| self.graw[j * n + j]).fold(0.0_f64, f64::max);
        if gmax <= 0.0 {
            gmax = 1.0;
        }
        let mut v = v_app.max(1e-9 * b_inf).max((kappa * gmax).sqrt());
        if v <= 0.0 {
            v = 1.0;
        }
        self.vscale = v;
        self.lscale = v / gmax;
        let inv_g = 1.0 / gmax;
        for (t, &x) in self.gt[..n * n].iter_mut().zip(&self.graw[..n * n]) {
            *t = x * inv_g;
        }
        let inv_v = 1.0 / v;
        for (t, &x) in self.bt[..n].iter_mut().zip(b) {
            *t = x * inv_v;
        }
        for (t, &m) in self.mu[..k].iter_mut().zip(mu) {
            *t = m.max(settings.friction_floor);
        }
        self.rho = settings.regularization;
    }

    /// Moves `lam` (raw, normalized) strictly inside the cones and sets `s`, `psi` so that every
    /// complementarity pair is about `mu0`.
    fn initialize(&mut self, mu0: f64) {
        let k = self.k;
        let root = mu0.sqrt();
        for i in 0..k {
            self.lam[3 * i] = self.lam[3 * i].max(0.0);
        }
        self.update_w();
        let shrink = 1.0 - root.min(0.5);
        for i in 0..k {
            let s0 = self.w[3 * i].max(0.0);
            let gam = self.lam[3 * i].max(mu0 / s0.max(root));
            self.lam[3 * i] = gam;
            let cap = shrink * self.mu[i] * gam;
            let nt = norm2(self.lam[3 * i + 1], self.lam[3 * i + 2]);
            if nt > cap {
                let f = cap / nt;
                self.lam[3 * i + 1] *= f;
                self.lam[3 * i + 2] *= f;
            }
        }
        self.update_w();
        for i in 0..k {
            let gam = self.lam[3 * i];
            self.s[i] = self.w[3 * i].max(mu0 / gam);
            self.psi[i] = norm2(self.w[3 * i + 1], self.w[3 * i + 2]) + mu0 / (self.mu[i] * gam);
        }
    }

    /// The driving loop: evaluate, test, step.
    fn drive(&mut self, settings: &Settings, centering: Centering, info: &mut Info) {
        let kappa_res = match centering {
            Centering::Fixed(kappa) => kappa,
            Centering::PredictorCorrector => 0.0,
        };
        let mut kappa = match centering {
            Centering::Fixed(kappa) => kappa,
            Centering::PredictorCorrector => self.mean_complementarity(),
        };
        let mut iter = 0;
        let mut short_steps = 0;
        let mut restarts = 0;
        loop {
            let (residual, comp, margin) = self.residual(kappa_res);
            info.residual = residual;
            info.complementarity = comp;
            info.cone_margin = margin * self.lscale;
            info.min_iterate_cone_margin = info.min_iterate_cone_margin.min(info.cone_margin);
            info.kappa = kappa * self.vscale * self.lscale;
            if !residual.is_finite() {
                info.status = Status::NonFinite;
                break;
            }
            if residual <= settings.tolerance {
                info.status = Status::Converged;
                break;
            }
            if iter == settings.max_iterations {
                info.status = Status::MaxIterations;
                break;
            }
            iter += 1;
            info.iterations += 1;
            match self.iterate(settings, centering, kappa_res, residual) {
                Ok((k, alpha)) => {
                    kappa = k;
                    short_steps = if alpha < STALL_STEP { short_steps + 1 } else { 0 };
                }
                Err(Status::LinearSolveFailed) if restarts < MAX_RESTARTS => {
                    short_steps = STALL_COUNT;
                }
                Err(status) => {
                    info.status = status;
                    break;
                }
            }
            // Jammed against a cone boundary (the non-associated friction law gives no descent
            // guarantee): keep the impulses, re-center the duals `s`, `psi` at a larger
            // complementarity and continue. Cheap, and it frees most stalls seen in tests.
            if short_steps >= STALL_COUNT && restarts < MAX_RESTARTS {
                restarts += 1;
                short_steps = 0;
                let mu0 = (10.0 * self.mean_complementarity()).clamp(1e-6, 1.0);
                self.initialize(mu0);
                kappa = self.mean_complementarity();
            }
        }
    }

    /// One Newton (or predictor-corrector) iteration from the current iterate, which it updates.
    /// Returns the central-path parameter targeted (normalized) and the step length.
    /// `residual` is the current residual (against `kappa_res`, as [`Self::residual`]).
    fn iterate(
        &mut self,
        settings: &Settings,
        centering: Centering,
        kappa_res: f64,
        residual: f64,
    ) -> Result<(f64, f64), Status> {
        let tolerance = settings.tolerance;
        let k = self.k;
        let n = 3 * k;
        self.assemble(self.rho, true);
        if !lu_factor(&mut self.lu[..n * n], n, &mut self.piv[..n]) {
            return Err(Status::LinearSolveFailed);
        }
        let mu_c = self.mean_complementarity();
        let kappa = match centering {
            Centering::Fixed(kappa) => {
                self.direction(kappa, false);
                kappa
            }
            Centering::PredictorCorrector => {
                self.direction(0.0, false);
                let alpha_aff = self.max_step().min(1.0);
                let mu_aff = self.mean_complementarity_after(alpha_aff);
                let sigma = (mu_aff / mu_c).clamp(0.0, 1.0).powi(3);
                let kappa = (sigma * mu_c).max(settings.kappa_target);
                self.alam[..n].copy_from_slice(&self.dlam[..n]);
                self.aw[..n].copy_from_slice(&self.dw[..n]);
                self.as_[..k].copy_from_slice(&self.ds[..k]);
                self.apsi[..k].copy_from_slice(&self.dpsi[..k]);
                self.direction(kappa, true);
                kappa
            }
        };
        let alpha_max = self.max_step();
        self.lam0[..n].copy_from_slice(&self.lam[..n]);
        self.s0[..k].copy_from_slice(&self.s[..k]);
        self.psi0[..k].copy_from_slice(&self.psi[..k]);
        // Fast finish: with the fraction to the boundary `tau` fixed, the last steps converge
        // only by a factor `1 - tau` each. Near the solution try `tau -> 1` first and keep that
        // step only if it cuts the residual far more than a `tau` step could.
        let tau = settings.fraction_to_boundary;
        if mu_c <= FAST_FINISH_MU && alpha_max * tau < 1.0 {
            let alpha = (TAU_MAX * alpha_max).min(1.0);
            self.take_step(alpha);
            if self.strictly_interior() {
                let (res, _, _) = self.residual(kappa_res);
                if res <= (FAST_FINISH_GAIN * residual).max(FAST_FINISH_TOL * tolerance) {
                    return Ok((kappa, alpha));
                }
            }
        }
        let mut alpha = (tau * alpha_max).min(1.0);
        for _ in 0..=MAX_STEP_CUTS {
            self.take_step(alpha);
            let finite = self.lam[..n].iter().chain(&self.s[..k]).chain(&self.psi[..k]).all(|x| x.is_finite());
            if !finite {
                return Err(Status::NonFinite);
            }
            // The step rule keeps the iterate inside in exact arithmetic; rounding (a cone
            // determinant that cancels, `w` recomputed from `lambda`) may not. Then shorten.
            if self.strictly_interior() {
                return Ok((kappa, alpha));
            }
            alpha *= 0.5;
        }
        // Not reached in practice: `alpha -> 0` returns to the (interior) previous iterate.
        self.take_step(0.0);
        Ok((kappa, 0.0))
    }

    /// Sets the iterate to the saved one plus `alpha` times the direction.
    fn take_step(&mut self, alpha: f64) {
        let k = self.k;
        let n = 3 * k;
        for ((l, &l0), d) in self.lam[..n].iter_mut().zip(&self.lam0[..n]).zip(&self.dlam[..n]) {
            *l = l0 + alpha * d;
        }
        for ((s, &s0), d) in self.s[..k].iter_mut().zip(&self.s0[..k]).zip(&self.ds[..k]) {
            *s = s0 + alpha * d;
        }
        for ((p, &p0), d) in self.psi[..k].iter_mut().zip(&self.psi0[..k]).zip(&self.dpsi[..k]) {
            *p = p0 + alpha * d;
        }
        // Recomputing w (rather than w += alpha dw) keeps it exactly G~ lambda~ + b~.
        self.update_w();
    }

    /// Whether `gamma, s > 0` and `beta, eta` are strictly inside the cone, as the next
    /// iteration computes them.
    fn strictly_interior(&self) -> bool {
        (0..self.k).all(|i| {
            let gam = self.lam[3 * i];
            let beta = [self.mu[i] * gam, self.lam[3 * i + 1], self.lam[3 * i + 2]];
            let eta = [self.psi[i], self.w[3 * i + 1], self.w[3 * i + 2]];
            gam > 0.0
                && self.s[i] > 0.0
                && beta[0] > 0.0
                && eta[0] > 0.0
                && soc_det(beta) >= f64::MIN_POSITIVE
                && soc_det(eta) >= f64::MIN_POSITIVE
        })
    }

    /// Writes `G~ + blkdiag(Lambda_i) + rho I` into `lu`. With `scaled`, `Lambda_i` uses the
    /// Nesterov-Todd scaling of `(beta, eta)` (the search direction) and the scaling is stored
    /// for [`Self::direction`] and [`Self::max_step`]; without, it is the plain Jacobian of the
    /// relaxed residual, rows 1-2 of `Arw(beta)^-1 Arw(eta) diag(mu, 1, 1)`.
    fn assemble(&mut self, rho: f64, scaled: bool) {
        let k = self.k;
        let n = 3 * k;
        self.lu[..n * n].copy_from_slice(&self.gt[..n * n]);
        for j in 0..n {
            self.lu[j * n + j] += rho;
        }
        for i in 0..k {
            let gam = self.lam[3 * i];
            let mu = self.mu[i];
            let beta = [mu * gam, self.lam[3 * i + 1], self.lam[3 * i + 2]];
            let eta = [self.psi[i], self.w[3 * i + 1], self.w[3 * i + 2]];
            let m = if scaled {
                let (db, de) = (soc_det(beta), soc_det(eta));
                let nt = nt_scaling(beta, eta, db, de);
                self.dets[2 * i] = db;
                self.dets[2 * i + 1] = de;
                self.detl[i] = nt.det_l;
                self.wnt[9 * i..9 * i + 9].copy_from_slice(&nt.w);
                self.winv[9 * i..9 * i + 9].copy_from_slice(&nt.winv);
                self.lnt[3 * i..3 * i + 3].copy_from_slice(&nt.l);
                mat3_mul(&nt.winv, &nt.winv)
            } else {
                mat3_mul(&arrow_inverse(beta), &arrow(eta))
            };
            let mut t = m;
            for r in 0..3 {
                t[3 * r] *= mu;
            }
            self.tmat[9 * i..9 * i + 9].copy_from_slice(&t);
            let row0 = 3 * i * n + 3 * i;
            self.lu[row0] += self.s[i] / gam;
            for r in 1..3 {
                let row = &mut self.lu[row0 + r * n..row0 + r * n + 3];
                for (x, &y) in row.iter_mut().zip(&t[3 * r..3 * r + 3]) {
                    *x += y;
                }
            }
        }
    }

    /// Newton direction for target `kappa`, with Mehrotra's second-order term if `corrector`.
    /// Needs the LU and the scaling of the current iterate (`assemble(_, true)`).
    ///
    /// Normal pair: `s dgamma + gamma ds = kappa - gamma s (- dgamma_a ds_a)`, `ds = dw_n - r1`.
    /// Cone pair (NT): `W^-1 dbeta + W deta = r_hat`,
    /// `r_hat = lambda_nt^-1 o (kappa e - lambda_nt o lambda_nt (- (W^-1 dbeta_a) o (W deta_a)))`
    /// `= -lambda_nt + kappa lambda_nt^-1 (- lambda_nt^-1 o c)`, with `Arw(lambda_nt)^-1` applied in
    /// closed form from the accurately computed `det(lambda_nt)`.
    fn direction(&mut self, kappa: f64, corrector: bool) {
        let k = self.k;
        let n = 3 * k;
        for i in 0..k {
            let gam = self.lam[3 * i];
            let mu = self.mu[i];
            let s = self.s[i];
            let r1 = s - self.w[3 * i];
            let mut r2 = gam * s - kappa;
            let l = [self.lnt[3 * i], self.lnt[3 * i + 1], self.lnt[3 * i + 2]];
            let inv_det = 1.0 / self.detl[i];
            let winv = &self.winv[9 * i..9 * i + 9];
            // Arw(l)^-1 (kappa e) = kappa (l0, -l1, -l2) / det(l).
            let kd = kappa * inv_det;
            let mut r_hat = [-l[0] + kd * l[0], -l[1] - kd * l[1], -l[2] - kd * l[2]];
            if corrector {
                r2 += self.alam[3 * i] * self.as_[i];
                let dbeta = [mu * self.alam[3 * i], self.alam[3 * i + 1], self.alam[3 * i + 2]];
                let deta = [self.apsi[i], self.aw[3 * i + 1], self.aw[3 * i + 2]];
                let c = jordan(mat3_vec(winv, dbeta), mat3_vec(&self.wnt[9 * i..9 * i + 9], deta));
                let x = arrow_solve(l, inv_det, c);
                for (r, x) in r_hat.iter_mut().zip(x) {
                    *r -= x;
                }
            }
            let q = mat3_vec(winv, r_hat);
            self.dlam[3 * i] = r1 - r2 / gam;
            self.dlam[3 * i + 1] = q[1];
            self.dlam[3 * i + 2] = q[2];
            self.q0[i] = q[0];
        }
        lu_solve(&self.lu[..n * n], n, &self.piv[..n], &mut self.dlam[..n]);
        mat_vec(&self.gt[..n * n], n, &self.dlam[..n], &mut self.dw[..n]);
        for i in 0..k {
            self.ds[i] = self.dw[3 * i] + self.w[3 * i] - self.s[i];
            let t = &self.tmat[9 * i..9 * i + 3];
            let dl = &self.dlam[3 * i..3 * i + 3];
            self.dpsi[i] = self.q0[i] - (t[0] * dl[0] + t[1] * dl[1] + t[2] * dl[2]);
        }
    }

    /// Largest step along the current direction that keeps `gamma, s >= 0` and `beta, eta` in
    /// the cone (may be infinite). Uses the cone determinants stored by [`Self::assemble`].
    fn max_step(&self) -> f64 {
        let mut alpha = f64::INFINITY;
        for i in 0..self.k {
            let mu = self.mu[i];
            let gam = self.lam[3 * i];
            let dgam = self.dlam[3 * i];
            alpha = alpha.min(ray_step(gam, dgam)).min(ray_step(self.s[i], self.ds[i]));
            let beta = [mu * gam, self.lam[3 * i + 1], self.lam[3 * i + 2]];
            let dbeta = [mu * dgam, self.dlam[3 * i + 1], self.dlam[3 * i + 2]];
            let eta = [self.psi[i], self.w[3 * i + 1], self.w[3 * i + 2]];
            let deta = [self.dpsi[i], self.dw[3 * i + 1], self.dw[3 * i + 2]];
            alpha = alpha.min(soc_step(beta, dbeta, self.dets[2 * i])).min(soc_step(eta, deta, self.dets[2 * i + 1]));
        }
        alpha
    }

    /// `mu_c = sum_i (gamma s + beta^T eta) / (2k)`.
    fn mean_complementarity(&self) -> f64 {
        self.mean_complementarity_after(0.0)
    }

    fn mean_complementarity_after(&self, alpha: f64) -> f64 {
        let k = self.k;
        let n = 3 * k;
        let mut acc = 0.0;
        let lam = self.lam[..n].chunks_exact(3).zip(self.dlam[..n].chunks_exact(3));
        let w = self.w[..n].chunks_exact(3).zip(self.dw[..n].chunks_exact(3));
        let sp = self.s[..k].iter().zip(&self.ds[..k]).zip(self.psi[..k].iter().zip(&self.dpsi[..k]));
        for (((l, dl), (w, dw)), (((s, ds), (p, dp)), mu)) in lam.zip(w).zip(sp.zip(&self.mu[..k])) {
            let gam = l[0] + alpha * dl[0];
            let s = s + alpha * ds;
            let psi = p + alpha * dp;
            let lt = [l[1] + alpha * dl[1], l[2] + alpha * dl[2]];
            let wt = [w[1] + alpha * dw[1], w[2] + alpha * dw[2]];
            acc += gam * s + mu * gam * psi + lt[0] * wt[0] + lt[1] * wt[1];
        }
        acc / (2 * k.max(1)) as f64
    }

    /// Scaled residual against target `kappa`, the `kappa = 0` complementarity (module docs) and
    /// the cone margin `min_i (mu_i gamma_i - ||l_t,i||)` (normalized), in one pass.
    fn residual(&self, kappa: f64) -> (f64, f64, f64) {
        let k = self.k;
        let n = 3 * k;
        let mut prim = 0.0_f64;
        let mut dev = 0.0_f64;
        let mut comp = 0.0_f64;
        let mut margin = f64::INFINITY;
        let mut nan = false;
        let per = self.lam[..n].chunks_exact(3).zip(self.w[..n].chunks_exact(3));
        for ((l, w), ((&s, &psi), &mu)) in per.zip(self.s[..k].iter().zip(&self.psi[..k]).zip(&self.mu[..k])) {
            let gam = l[0];
            let beta = [mu * gam, l[1], l[2]];
            let eta = [psi, w[1], w[2]];
            let j = jordan(beta, eta);
            let gs = gam * s;
            prim = prim.max((s - w[0]).abs());
            let tang = j[1].abs().max(j[2].abs());
            comp = comp.max(gs.abs()).max(j[0].abs()).max(tang);
            dev = dev.max((gs - kappa).abs()).max((j[0] - kappa).abs()).max(tang);
            margin = margin.min(beta[0] - norm2(l[1], l[2]));
            // NaN must not hide behind `max` (which drops NaN operands).
            nan |= l.iter().chain(w).any(|x| x.is_nan());
        }
        if nan {
            return (f64::NAN, f64::NAN, f64::NAN);
        }
        (prim.max(dev), comp, margin)
    }

    fn update_w(&mut self) {
        let n = 3 * self.k;
        mat_vec(&self.gt[..n * n], n, &self.lam[..n], &mut self.w[..n]);
        for (w, &b) in self.w[..n].iter_mut().zip(&self.bt[..n]) {
            *w += b;
        }
    }
}

/// `sqrt(a^2 + b^2)` without `hypot`'s overflow protection (normalized data never needs it, and
/// `hypot` costs tens of nanoseconds).
fn norm2(a: f64, b: f64) -> f64 {
    (a * a + b * b).sqrt()
}

/// `det(x) = x0^2 - ||x1||^2` of the second-order cone, as `(x0 - ||x1||)(x0 + ||x1||)`, which
/// loses less precision near the boundary.
fn soc_det(x: [f64; 3]) -> f64 {
    let nx = norm2(x[1], x[2]);
    (x[0] - nx) * (x[0] + nx)
}

/// Jordan product of the second-order cone, `x o y = (x^T y, x0 y1 + y0 x1)`.
fn jordan(x: [f64; 3], y: [f64; 3]) -> [f64; 3] {
    [x[0] * y[0] + x[1] * y[1] + x[2] * y[2], x[0] * y[1] + y[0] * x[1], x[0] * y[2] + y[0] * x[2]]
}

/// Arrow matrix `Arw(x) = [[x0, x1^T], [x1, x0 I]]`, row-major.
fn arrow(x: [f64; 3]) -> [f64; 9] {
    [x[0], x[1], x[2], x[1], x[0], 0.0, x[2], 0.0, x[0]]
}

/// `Arw(x)^-1 = 1/det [[x0, -x1^T], [-x1, (det/x0) I + x1 x1^T / x0]]`, `det = x0^2 - ||x1||^2`;
/// `x` is strictly inside the cone (guaranteed by the step rule).
fn arrow_inverse(x: [f64; 3]) -> [f64; 9] {
    let inv = 1.0 / soc_det(x);
    let inv0 = 1.0 / x[0];
    [
        x[0] * inv,
        -x[1] * inv,
        -x[2] * inv,
        -x[1] * inv,
        inv0 + x[1] * x[1] * inv * inv0,
        x[1] * x[2] * inv * inv0,
        -x[2] * inv,
        x[1] * x[2] * inv * inv0,
        inv0 + x[2] * x[2] * inv * inv0,
    ]
}

/// `Arw(x)^-1 v` given `1 / det(x)`: `y0 = (x0 v0 - x1^T v1) / det`, `y1 = (v1 - y0 x1) / x0`.
fn arrow_solve(x: [f64; 3], inv_det: f64, v: [f64; 3]) -> [f64; 3] {
    let y0 = (x[0] * v[0] - x[1] * v[1] - x[2] * v[2]) * inv_det;
    let inv0 = 1.0 / x[0];
    [y0, (v[1] - y0 * x[1]) * inv0, (v[2] - y0 * x[2]) * inv0]
}

/// Nesterov-Todd scaling of one cone pair (see [`nt_scaling`]).
struct NtScaling {
    w: [f64; 9],
    winv: [f64; 9],
    l: [f64; 3],
    /// `det(lambda) = sqrt(det(s) det(z))`.
    det_l: f64,
}

/// Nesterov-Todd scaling of `s, z` strictly inside the second-order cone (as in ECOS, Domahidi
/// et al. 2013, and CVXOPT, Vandenberghe 2010): the symmetric `W` with `W z = W^-1 s = lambda`,
/// given `det_s = s'Js`, `det_z = z'Jz` (computed by [`soc_det`]). With `J = diag(1, -1, -1)`,
/// `s_ = s / sqrt(s'Js)`, `z_ = z / sqrt(z'Jz)`, `g = sqrt((1 + z_'s_) / 2)`,
/// `a = (s_0 + z_0) / (2g)`, `q = (s_1 - z_1) / (2g)` (so `a^2 - |q|^2 = 1`) and
/// `eta = (s'Js / z'Jz)^(1/4)`: `W = eta [[a, q'], [q, I + q q' / (1 + a)]]`,
/// `W^-1 = J W J / eta^2`.
fn nt_scaling(s: [f64; 3], z: [f64; 3], det_s: f64, det_z: f64) -> NtScaling {
    let (ds, dz) = (det_s.sqrt(), det_z.sqrt());
    let (is, iz) = (1.0 / ds, 1.0 / dz);
    let sb = [s[0] * is, s[1] * is, s[2] * is];
    let zb = [z[0] * iz, z[1] * iz, z[2] * iz];
    let g = ((1.0 + zb[0] * sb[0] + zb[1] * sb[1] + zb[2] * sb[2]) * 0.5).sqrt();
    let ig = 0.5 / g;
    let a = (sb[0] + zb[0]) * ig;
    let q = [(sb[1] - zb[1]) * ig, (sb[2] - zb[2]) * ig];
    let eta = (ds * iz).sqrt();
    let ieta = 1.0 / eta;
    let c = 1.0 / (1.0 + a);
    let (m11, m12, m22) = (1.0 + c * q[0] * q[0], c * q[0] * q[1], 1.0 + c * q[1] * q[1]);
    let w = [eta * a, eta * q[0], eta * q[1], eta * q[0], eta * m11, eta * m12, eta * q[1], eta * m12, eta * m22];
    let winv = [
        ieta * a,
        -ieta * q[0],
        -ieta * q[1],
        -ieta * q[0],
        ieta * m11,
        ieta * m12,
        -ieta * q[1],
        ieta * m12,
        ieta * m22,
    ];
    let l = mat3_vec(&w, z);
    NtScaling { w, winv, l, det_l: ds * dz }
}

fn mat3_vec(a: &[f64], x: [f64; 3]) -> [f64; 3] {
    let a = &a[..9];
    [
        a[0] * x[0] + a[1] * x[1] + a[2] * x[2],
        a[3] * x[0] + a[4] * x[1] + a[5] * x[2],
        a[6] * x[0] + a[7] * x[1] + a[8] * x[2],
    ]
}

fn mat3_mul(a: &[f64; 9], b: &[f64; 9]) -> [f64; 9] {
    let mut c = [0.0; 9];
    for r in 0..3 {
        for j in 0..3 {
            c[3 * r + j] = a[3 * r] * b[j] + a[3 * r + 1] * b[3 + j] + a[3 * r + 2] * b[6 + j];
        }
    }
    c
}

/// Largest `alpha >= 0` with `x + alpha dx >= 0` (for `x > 0`).
fn ray_step(x: f64, dx: f64) -> f64 {
    if dx < 0.0 {
        -x / dx
    } else {
        f64::INFINITY
    }
}

/// Largest `alpha >= 0` with `x + alpha dx` in the second-order cone, for `x` strictly inside
/// with `c = det(x)` (from [`soc_det`]): the first positive root of
/// `det(x + alpha dx) = a alpha^2 + 2 b alpha + c`.
fn soc_step(x: [f64; 3], dx: [f64; 3], c: f64) -> f64 {
    let a = dx[0] * dx[0] - dx[1] * dx[1] - dx[2] * dx[2];
    let b = x[0] * dx[0] - x[1] * dx[1] - x[2] * dx[2];
    let scale = dx[0].abs().max(dx[1].abs()).max(dx[2].abs());
    if scale == 0.0 {
        return f64::INFINITY;
    }
    if a.abs() <= 1e-14 * scale * scale {
        return if b < 0.0 { -c / (2.0 * b) } else { f64::INFINITY };
    }
    let disc = b * b - a * c;
    if disc < 0.0 {
        // det never vanishes: the ray stays inside.
        return f64::INFINITY;
    }
    // Stable roots of a t^2 + 2 b t + c: q = -(b + sign(b) sqrt(disc)), t = q / a and c / q.
    let q = -(b + b.signum() * disc.sqrt());
    let mut best = f64::INFINITY;
    for t in [q / a, c / q] {
        if t > 0.0 && t < best {
            best = t;
        }
    }
    best
}

/// Dispatches a dense kernel to its fixed-size version for `n = 3k`, `k <= 4` (fully unrolled,
/// no bounds checks in the loops), else to the general one.
macro_rules! fixed_size {
    ($n:expr, $fixed:ident, $general:ident, ($($arg:expr),*)) => {
        match $n {
            3 => $fixed::<3>($($arg),*),
            6 => $fixed::<6>($($arg),*),
            9 => $fixed::<9>($($arg),*),
            12 => $fixed::<12>($($arg),*),
            n => $general(n, $($arg),*),
        }
    };
}

/// The leading `n x n` block of a row-major buffer as an array of rows.
fn rows<const N: usize>(a: &[f64]) -> &[[f64; N]; N] {
    a[..N * N].as_chunks::<N>().0.try_into().expect("N rows")
}

fn rows_mut<const N: usize>(a: &mut [f64]) -> &mut [[f64; N]; N] {
    a[..N * N].as_chunks_mut::<N>().0.try_into().expect("N rows")
}

/// `y = A x` for row-major `n x n` `A`.
fn mat_vec(a: &[f64], n: usize, x: &[f64], y: &mut [f64]) {
    fixed_size!(n, mat_vec_fixed, mat_vec_general, (a, x, y))
}

fn mat_vec_fixed<const N: usize>(a: &[f64], x: &[f64], y: &mut [f64]) {
    let a = rows::<N>(a);
    let x: &[f64; N] = x[..N].try_into().expect("N");
    for (yr, row) in y[..N].iter_mut().zip(a) {
        let mut acc = 0.0;
        for c in 0..N {
            acc += row[c] * x[c];
        }
        *yr = acc;
    }
}

fn mat_vec_general(n: usize, a: &[f64], x: &[f64], y: &mut [f64]) {
    let x = &x[..n];
    for (yr, row) in y[..n].iter_mut().zip(a[..n * n].chunks_exact(n)) {
        let mut acc = 0.0;
        for (a, x) in row.iter().zip(x) {
            acc += a * x;
        }
        *yr = acc;
    }
}

/// In-place LU with partial pivoting of a row-major `n x n` matrix. Returns `false` if a pivot
/// is zero, subnormal or non-finite. No threshold relative to the largest entry: rows of
/// separated contacts carry `s/gamma` up to ~1e20 and must not make the others look singular.
fn lu_factor(a: &mut [f64], n: usize, piv: &mut [usize]) -> bool {
    fixed_size!(n, lu_factor_fixed, lu_factor_general, (a, piv))
}

/// A pivot [`lu_factor`] accepts.
fn pivot_ok(pmax: f64) -> bool {
    pmax >= f64::MIN_POSITIVE && pmax.is_finite()
}

fn lu_factor_fixed<const N: usize>(a: &mut [f64], piv: &mut [usize]) -> bool {
    let a = rows_mut::<N>(a);
    let piv: &mut [usize; N] = (&mut piv[..N]).try_into().expect("N");
    for col in 0..N {
        let mut p = col;
        let mut pmax = a[col][col].abs();
        for r in col + 1..N {
            let v = a[r][col].abs();
            if v > pmax {
                pmax = v;
                p = r;
            }
        }
        if !pivot_ok(pmax) {
            return false;
        }
        piv[col] = p;
        a.swap(col, p);
        let (top, bottom) = a.split_at_mut(col + 1);
        let prow = &top[col];
        let inv = 1.0 / prow[col];
        for row in bottom {
            let l = row[col] * inv;
            row[col] = l;
            if l != 0.0 {
                for c in col + 1..N {
                    row[c] -= l * prow[c];
                }
            }
        }
    }
    true
}

fn lu_factor_general(n: usize, a: &mut [f64], piv: &mut [usize]) -> bool {
    let a = &mut a[..n * n];
    for col in 0..n {
        let mut p = col;
        let mut pmax = a[col * n + col].abs();
        for (r, row) in a[(col + 1) * n..].chunks_exact(n).enumerate() {
            let v = row[col].abs();
            if v > pmax {
                pmax = v;
                p = col + 1 + r;
            }
        }
        if !pivot_ok(pmax) {
            return false;
        }
        piv[col] = p;
        let (top, bottom) = a.split_at_mut((col + 1) * n);
        let prow = &mut top[col * n..];
        if p != col {
            prow.swap_with_slice(&mut bottom[(p - col - 1) * n..(p - col) * n]);
        }
        let prow = &prow[col..];
        let inv = 1.0 / prow[0];
        for row in bottom.chunks_exact_mut(n) {
            let row = &mut row[col..];
            let l = row[0] * inv;
            row[0] = l;
            if l != 0.0 {
                for (x, &y) in row[1..].iter_mut().zip(&prow[1..]) {
                    *x -= l * y;
                }
            }
        }
    }
    true
}

/// Solves `A x = rhs` in place with the factors of [`lu_factor`].
fn lu_solve(a: &[f64], n: usize, piv: &[usize], x: &mut [f64]) {
    fixed_size!(n, lu_solve_fixed, lu_solve_general, (a, piv, x))
}

fn lu_solve_fixed<const N: usize>(a: &[f64], piv: &[usize], x: &mut [f64]) {
    let a = rows::<N>(a);
    let x: &mut [f64; N] = (&mut x[..N]).try_into().expect("N");
    for (col, &p) in piv[..N].iter().enumerate() {
        x.swap(col, p);
    }
    for r in 0..N {
        let mut acc = x[r];
        for c in 0..r {
            acc -= a[r][c] * x[c];
        }
        x[r] = acc;
    }
    for r in (0..N).rev() {
        let mut acc = x[r];
        for c in r + 1..N {
            acc -= a[r][c] * x[c];
        }
        x[r] = acc / a[r][r];
    }
}

fn lu_solve_general(n: usize, a: &[f64], piv: &[usize], x: &mut [f64]) {
    let a = &a[..n * n];
    let x = &mut x[..n];
    for (col, &p) in piv[..n].iter().enumerate() {
        x.swap(col, p);
    }
    for (r, row) in a.chunks_exact(n).enumerate() {
        let mut acc = x[r];
        for (a, x) in row[..r].iter().zip(&x[..r]) {
            acc -= a * x;
        }
        x[r] = acc;
    }
    for (r, row) in a.chunks_exact(n).enumerate().rev() {
        let mut acc = x[r];
        for (a, x) in row[r + 1..].iter().zip(&x[r + 1..]) {
            acc -= a * x;
        }
        x[r] = acc / row[r];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_inverse_is_inverse() {
        let x = [2.0, 0.7, -1.1];
        let p = arrow_inverse(x);
        let a = arrow(x);
        for r in 0..3 {
            for c in 0..3 {
                let v: f64 = (0..3).map(|j| a[3 * r + j] * p[3 * j + c]).sum();
                let e = if r == c { 1.0 } else { 0.0 };
                assert!((v - e).abs() < 1e-12, "{r} {c} {v}");
            }
        }
    }

    #[test]
    fn arrow_solve_inverts_arrow() {
        let x = [2.0, 0.7, -1.1];
        let v = [0.3, -1.2, 0.8];
        let y = arrow_solve(x, 1.0 / soc_det(x), v);
        let back = mat3_vec(&arrow(x), y);
        for j in 0..3 {
            assert!((back[j] - v[j]).abs() < 1e-12, "{back:?}");
        }
    }

    #[test]
    fn nt_scaling_maps_both_points_to_lambda() {
        let s = [2.0, 0.7, -1.1];
        let z = [0.5, -0.2, 0.3];
        let nt = nt_scaling(s, z, soc_det(s), soc_det(z));
        let (w, winv, l) = (nt.w, nt.winv, nt.l);
        let a = mat3_vec(&w, z);
        let b = mat3_vec(&winv, s);
        let id = mat3_mul(&w, &winv);
        for j in 0..3 {
            assert!((a[j] - l[j]).abs() < 1e-12 && (b[j] - l[j]).abs() < 1e-12, "{a:?} {b:?}");
            for c in 0..3 {
                let e = if j == c { 1.0 } else { 0.0 };
                assert!((id[3 * j + c] - e).abs() < 1e-12);
            }
        }
        assert!((w[1] - w[3]).abs() < 1e-14, "W is symmetric");
    }

    #[test]
    fn soc_step_hits_boundary() {
        let x = [1.0, 0.2, 0.1];
        let dx = [-0.3, 0.5, -0.2];
        let t = soc_step(x, dx, soc_det(x));
        let y = [x[0] + t * dx[0], x[1] + t * dx[1], x[2] + t * dx[2]];
        assert!((y[0] - y[1].hypot(y[2])).abs() < 1e-12 && y[0] > 0.0);
        // Moving towards the axis never leaves.
        assert_eq!(soc_step(x, [1.0, 0.0, 0.0], soc_det(x)), f64::INFINITY);
    }

    #[test]
    fn fixed_and_general_kernels_agree() {
        let n = 6;
        let a0: Vec<f64> = (0..n * n).map(|j| ((j * 37 % 11) as f64 - 5.0) / (1.0 + (j % 7) as f64)).collect();
        let (mut a1, mut a2) = (a0.clone(), a0.clone());
        let (mut p1, mut p2) = ([0; 6], [0; 6]);
        assert!(lu_factor_fixed::<6>(&mut a1, &mut p1));
        assert!(lu_factor_general(n, &mut a2, &mut p2));
        assert_eq!((a1.clone(), p1), (a2.clone(), p2));
        let rhs: Vec<f64> = (0..n).map(|j| j as f64 - 2.5).collect();
        let (mut x1, mut x2) = (rhs.clone(), rhs.clone());
        lu_solve_fixed::<6>(&a1, &p1, &mut x1);
        lu_solve_general(n, &a2, &p2, &mut x2);
        assert_eq!(x1, x2);
        let (mut y1, mut y2) = (vec![0.0; n], vec![0.0; n]);
        mat_vec_fixed::<6>(&a0, &x1, &mut y1);
        mat_vec_general(n, &a0, &x1, &mut y1.clone());
        mat_vec_general(n, &a0, &x1, &mut y2);
        assert_eq!(y1, y2);
        for (y, r) in y1.iter().zip(&rhs) {
            assert!((y - r).abs() < 1e-12);
        }
    }

    #[test]
    fn lu_solves_permuted_system() {
        let mut a = vec![0.0, 2.0, 1.0, 1.0, 1.0, 0.0, 3.0, 0.0, 1.0];
        let a0 = a.clone();
        let mut piv = [0; 3];
        assert!(lu_factor(&mut a, 3, &mut piv));
        let mut x = [1.0, 2.0, 3.0];
        lu_solve(&a, 3, &piv, &mut x);
        let mut y = [0.0; 3];
        mat_vec(&a0, 3, &x, &mut y);
        for (y, e) in y.iter().zip([1.0, 2.0, 3.0]) {
            assert!((y - e).abs() < 1e-12);
        }
    }
}
