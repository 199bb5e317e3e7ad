//! The primal-dual interior-point iteration of the forward contact solver ([`ContactSolver`]):
//! normalization, warm start, the driving loop, and one Nesterov-Todd scaled Mehrotra
//! predictor-corrector step (the math is in the [module docs](super)).

use super::cone::{
    arrow, arrow_inverse, arrow_solve, jordan, mat3_mul, mat3_vec, norm2, nt_scaling, ray_step, soc_det, soc_step,
};
use super::{Info, Settings, Status};
use crate::linalg::{lu_factor, lu_solve, mat_vec, PivotRule};
use nalgebra::DMatrixView;

mod alart_curnier;
mod continuation;
mod enumerate;
mod globalize;
mod nsgs;
mod slip_roots;

/// A step shorter than this counts towards a stall.
const STALL_STEP: f64 = 1e-2;
/// Consecutive short steps that trigger a re-centering restart.
const STALL_COUNT: usize = 3;
/// Re-centering restarts allowed per run.
const MAX_RESTARTS: usize = 3;
/// Regularization (relative to `max G_jj`) of the last attempt after a singular Newton matrix.
const RETRY_REGULARIZATION: f64 = 1e-8;
/// Fraction to the boundary of a fast-finish step.
const TAU_MAX: f64 = 1.0 - 1e-9;
/// Mean complementarity (normalized) below which a fast-finish step is tried.
const FAST_FINISH_MU: f64 = 1e-3;
/// Residual reduction a fast-finish step must achieve, unless it lands below
/// `FAST_FINISH_TOL * tolerance` (a step that merely reaches the tolerance is not trusted: the
/// residual bounds the impulse error only loosely).
const FAST_FINISH_GAIN: f64 = 1e-3;
const FAST_FINISH_TOL: f64 = 0.1;
/// Safety factor on the rounding error of `w` in [`ContactSolver::converged_at_floor`].
const FLOOR_SAFETY: f64 = 4.0;
/// Halvings of a step that rounding pushed out of the cone interior.
const MAX_STEP_CUTS: usize = 60;

/// How the central-path parameter is chosen in a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Centering {
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
    /// Globalized phase: convex-problem slack `z` (3k), its saved copy, direction, affine
    /// direction, primal residual (3k each), and the De Saxce shift `sig` per contact (k).
    z: Vec<f64>,
    gbest: Vec<f64>,
    glam: Vec<f64>,
    gdlam: Vec<f64>,
    gdw: Vec<f64>,
    z0: Vec<f64>,
    dz: Vec<f64>,
    az: Vec<f64>,
    rp: Vec<f64>,
    sig: Vec<f64>,
    /// Rows of the approaching contacts in the sticking start (3k).
    active: Vec<usize>,
    /// Mode enumeration: guessed and tried modes (k each), the guess's slip angles (k), the
    /// unknowns, the step and the residual (3k each), the Jacobian and its
    /// right singular vectors (9k^2 each), singular values and a scratch column (3k each), and
    /// the null directions in impulse space (9k^2).
    emode: Vec<u8>,
    etry: Vec<u8>,
    eth0: Vec<f64>,
    ey: Vec<f64>,
    edy: Vec<f64>,
    ef: Vec<f64>,
    ejac: Vec<f64>,
    ev: Vec<f64>,
    esig: Vec<f64>,
    etmp: Vec<f64>,
    enull: Vec<f64>,
    /// Variable projection: the angle Jacobian, its right singular vectors (9k^2 each), singular
    /// values, the residual and a saved copy of the unknowns (3k each), the sliding contacts'
    /// angle positions in the unknowns and the angle step (k each).
    ejt: Vec<f64>,
    evt: Vec<f64>,
    esigt: Vec<f64>,
    er: Vec<f64>,
    ey1: Vec<f64>,
    eangle: Vec<usize>,
    estep: Vec<f64>,
    /// The final solve of a mode set puts its answer strictly inside the cones: sliding
    /// impulses on the ray of `mu (1 - eslip)`, separated contacts at the normal impulse
    /// `esep_i` (k); both zero before.
    eslip: f64,
    esep: Vec<f64>,
    /// Exact slip angles of a single sliding contact ([`slip_roots`]).
    eroots: [f64; 4],
    /// Continuation: the diagonal of `G~` and the last stage's answer (3k each).
    cdiag: Vec<f64>,
    cprev: Vec<f64>,
    /// Alart-Curnier: the `rho` per contact (k) and the iterate before a line search (3k).
    acrho: Vec<f64>,
    aclam: Vec<f64>,
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
            z: vec![0.0; n],
            gbest: vec![0.0; n],
            glam: vec![0.0; n],
            gdlam: vec![0.0; n],
            gdw: vec![0.0; n],
            z0: vec![0.0; n],
            dz: vec![0.0; n],
            az: vec![0.0; n],
            rp: vec![0.0; n],
            sig: vec![0.0; m],
            active: vec![0; n],
            emode: vec![0; m],
            etry: vec![0; m],
            eth0: vec![0.0; m],
            ey: vec![0.0; n],
            edy: vec![0.0; n],
            ef: vec![0.0; n],
            ejac: vec![0.0; n * n],
            ev: vec![0.0; n * n],
            esig: vec![0.0; n],
            etmp: vec![0.0; n],
            enull: vec![0.0; n * n],
            ejt: vec![0.0; n * n],
            evt: vec![0.0; n * n],
            esigt: vec![0.0; n],
            er: vec![0.0; n],
            ey1: vec![0.0; n],
            eangle: vec![0; m],
            estep: vec![0.0; m],
            eslip: 0.0,
            esep: vec![0.0; m],
            eroots: [0.0; 4],
            cdiag: vec![0.0; n],
            cprev: vec![0.0; n],
            acrho: vec![0.0; m],
            aclam: vec![0.0; n],
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
            let stuck = centering == Centering::PredictorCorrector && self.stick(settings, &mut info);
            if !stuck {
                match centering {
                    Centering::Fixed(kappa) if super::settings::valid_warm_start_mu(kappa) => {
                        self.initialize(kappa);
                        self.center_loaded_pairs(kappa);
                    }
                    _ => self.initialize(settings.warm_start_mu),
                }
                self.drive(settings, centering, &mut info);
                if matches!(info.status, Status::MaxIterations | Status::LinearSolveFailed) {
                    info.warm_started = false;
                }
            }
        }
        if !info.warm_started && info.status != Status::NonFinite {
            self.lam[..n].fill(0.0);
            self.initialize(1.0);
            self.drive(settings, centering, &mut info);
        }
        // A Newton matrix that stays singular at an interior iterate (seen with sliding contacts
        // hugging their cone boundaries on a fallen robot, residual 1e-7 to 1e-5): once more
        // from cold with a stronger regularization (a compliance of `RETRY_REGULARIZATION max
        // G_jj`, only for the solve's Newton matrices, not the answer's `w`). Forward solves
        // only; solves that converged or stopped otherwise never get here.
        if info.status == Status::LinearSolveFailed
            && matches!(centering, Centering::PredictorCorrector)
            && settings.regularization < RETRY_REGULARIZATION
        {
            let strong = Settings { regularization: RETRY_REGULARIZATION, ..*settings };
            self.rho = strong.regularization;
            self.lam[..n].fill(0.0);
            self.initialize(1.0);
            self.drive(&strong, centering, &mut info);
            self.rho = settings.regularization;
        }
        // Globalization: only where the Coulomb iteration stalled (warm and cold), so that every
        // solve it finishes is bit for bit what it was.
        if centering == Centering::PredictorCorrector
            && matches!(info.status, Status::MaxIterations | Status::LinearSolveFailed)
            && settings.global_iterations > 0
        {
            let stalled = info.status;
            self.globalize(settings, &mut info);
            if info.status == Status::MaxIterations {
                info.status = stalled;
            }
        }
        // Still singular: the last iterate is kept (finite, strictly inside the cones) with the
        // status, as after `MaxIterations`, unless the solve never took a step.
        let stalled = info.status == Status::LinearSolveFailed
            && info.iterations > 0
            && self.lam[..n].iter().all(|x| x.is_finite());

        if matches!(info.status, Status::Converged | Status::MaxIterations) || stalled {
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

    /// The all-sticking answer of a warm start that loads every contact: `G~ lambda~ = -b~`
    /// (`w = 0`), accepted if every impulse lies strictly inside its cone (`gamma > 0`,
    /// `||l_t|| < mu gamma`), which makes it an exact Coulomb solution (every contact sticks,
    /// `w_n = 0` with `gamma > 0`), and if the solver's own convergence test passes at it (slacks
    /// `s = max(w_n, 0)`, `psi = ||w_t||`: only rounding is left). A robot standing still is
    /// solved by one factorization instead of an interior-point iteration (its predictor and
    /// corrector, the scalings and the step search). Anything else (a contact unloaded in the
    /// warm start, a singular `G`, an impulse outside its cone) restores the warm start and
    /// returns `false`, and the interior-point iteration runs from it as without this step.
    /// `info` gets `Converged` with no iterations.
    fn stick(&mut self, settings: &Settings, info: &mut Info) -> bool {
        let k = self.k;
        let n = 3 * k;
        if k == 0 || (0..k).any(|i| self.lam[3 * i] <= 0.0) {
            return false;
        }
        self.lu[..n * n].copy_from_slice(&self.gt[..n * n]);
        // Relative pivots: a rank-deficient G (a box on four corners) has no unique sticking
        // impulse, and its rounding residue must not pass for one.
        if !lu_factor(&mut self.lu[..n * n], n, &mut self.piv[..n], PivotRule::Relative(1e-12)) {
            return false;
        }
        self.lam0[..n].copy_from_slice(&self.lam[..n]);
        for (l, &b) in self.lam[..n].iter_mut().zip(&self.bt[..n]) {
            *l = -b;
        }
        lu_solve(&self.lu[..n * n], n, &self.piv[..n], &mut self.lam[..n]);
        let inside = (0..k).all(|i| {
            let gam = self.lam[3 * i];
            gam > 0.0 && norm2(self.lam[3 * i + 1], self.lam[3 * i + 2]) < self.mu[i] * gam
        });
        if inside {
            self.update_w();
            for i in 0..k {
                self.s[i] = self.w[3 * i].max(0.0);
                self.psi[i] = norm2(self.w[3 * i + 1], self.w[3 * i + 2]);
            }
            let (residual, comp, margin) = self.residual(0.0);
            if residual <= settings.tolerance || self.converged_at_floor(settings, 0.0) {
                info.status = Status::Converged;
                info.residual = residual;
                info.complementarity = comp;
                info.cone_margin = margin * self.lscale;
                info.min_iterate_cone_margin = info.cone_margin;
                return true;
            }
        }
        self.lam[..n].copy_from_slice(&self.lam0[..n]);
        false
    }

    /// Puts the normal pair of every loaded contact on the central path `gamma s = mu0`: a
    /// contact whose impulse exceeds its slack there (`gamma > sqrt(mu0)`) gets `s = mu0 /
    /// gamma` even where `w_n` is larger, leaving that gap to the linear constraint `s = w_n`,
    /// which a Newton step removes exactly. [`Self::initialize`] keeps `s >= w_n` instead (a
    /// feasible start), so that a relaxed solve warm-started from the hard solution (`w_n` near
    /// `delta` on a loaded contact) starts with `gamma s` far above the path: one Newton step
    /// more on the standing quadruped (three instead of two).
    fn center_loaded_pairs(&mut self, mu0: f64) {
        let root = mu0.sqrt();
        for i in 0..self.k {
            let gam = self.lam[3 * i];
            if gam > root {
                self.s[i] = mu0 / gam;
            }
        }
    }

    /// The driving loop: evaluate, test, step.
    fn drive(&mut self, settings: &Settings, centering: Centering, info: &mut Info) {
        // The iteration's steps are inlined into the AVX2 copy.
        let this = self;
        crate::linalg::avx2_dispatch!(
            ContactSolver::drive_body,
            (this: &mut ContactSolver, settings: &Settings, centering: Centering, info: &mut Info)
        )
    }

    #[inline(always)]
    fn drive_body(&mut self, settings: &Settings, centering: Centering, info: &mut Info) {
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
            if residual <= settings.tolerance || self.converged_at_floor(settings, kappa_res) {
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
    #[inline(always)]
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
        // Absolute pivots: rows of separated contacts carry `s/gamma` up to ~1e20 and must not
        // make the others look singular; `rho` and the restarts handle a near-singular matrix.
        if !lu_factor(&mut self.lu[..n * n], n, &mut self.piv[..n], PivotRule::Absolute) {
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
    #[inline(always)]
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
    #[inline(always)]
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
    #[inline(always)]
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
            let m =
                if scaled { self.store_nt_scaling(i, beta, eta) } else { mat3_mul(&arrow_inverse(beta), &arrow(eta)) };
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

    /// `W^-1 r_hat` for contact `i`'s cone pair (scaling from [`Self::store_nt_scaling`]):
    /// `r_hat = -lambda_nt + kappa lambda_nt^-1`, less `lambda_nt^-1 o ((W^-1 dbeta_a) o (W dx_a))`
    /// for Mehrotra's corrector when the affine direction `(dbeta_a, dx_a)` is given.
    #[inline(always)]
    pub(super) fn scaled_cone_rhs(&self, i: usize, kappa: f64, affine: Option<([f64; 3], [f64; 3])>) -> [f64; 3] {
        let l = [self.lnt[3 * i], self.lnt[3 * i + 1], self.lnt[3 * i + 2]];
        let inv_det = 1.0 / self.detl[i];
        let winv = &self.winv[9 * i..9 * i + 9];
        // Arw(l)^-1 (kappa e) = kappa (l0, -l1, -l2) / det(l).
        let kd = kappa * inv_det;
        let mut r_hat = [-l[0] + kd * l[0], -l[1] - kd * l[1], -l[2] - kd * l[2]];
        if let Some((dbeta, dx)) = affine {
            let c = jordan(mat3_vec(winv, dbeta), mat3_vec(&self.wnt[9 * i..9 * i + 9], dx));
            let x = arrow_solve(l, inv_det, c);
            for (r, x) in r_hat.iter_mut().zip(x) {
                *r -= x;
            }
        }
        mat3_vec(winv, r_hat)
    }

    /// Nesterov-Todd scaling of contact `i`'s cone pair `(beta, x)`: stores the determinants,
    /// `W`, `W^-1` and the scaling point (for [`Self::direction`] and the step rule) and returns
    /// `W^-2` (3x3 row-major).
    pub(super) fn store_nt_scaling(&mut self, i: usize, beta: [f64; 3], x: [f64; 3]) -> [f64; 9] {
        let (db, dx) = (soc_det(beta), soc_det(x));
        let nt = nt_scaling(beta, x, db, dx);
        self.dets[2 * i] = db;
        self.dets[2 * i + 1] = dx;
        self.detl[i] = nt.det_l;
        self.wnt[9 * i..9 * i + 9].copy_from_slice(&nt.w);
        self.winv[9 * i..9 * i + 9].copy_from_slice(&nt.winv);
        self.lnt[3 * i..3 * i + 3].copy_from_slice(&nt.l);
        mat3_mul(&nt.winv, &nt.winv)
    }

    /// Newton direction for target `kappa`, with Mehrotra's second-order term if `corrector`.
    /// Needs the LU and the scaling of the current iterate (`assemble(_, true)`).
    ///
    /// Normal pair: `s dgamma + gamma ds = kappa - gamma s (- dgamma_a ds_a)`, `ds = dw_n - r1`.
    /// Cone pair (NT): `W^-1 dbeta + W deta = r_hat`,
    /// `r_hat = lambda_nt^-1 o (kappa e - lambda_nt o lambda_nt (- (W^-1 dbeta_a) o (W deta_a)))`
    /// `= -lambda_nt + kappa lambda_nt^-1 (- lambda_nt^-1 o c)`, with `Arw(lambda_nt)^-1` applied in
    /// closed form from the accurately computed `det(lambda_nt)`.
    #[inline(always)]
    fn direction(&mut self, kappa: f64, corrector: bool) {
        let k = self.k;
        let n = 3 * k;
        for i in 0..k {
            let gam = self.lam[3 * i];
            let mu = self.mu[i];
            let s = self.s[i];
            let r1 = s - self.w[3 * i];
            let mut r2 = gam * s - kappa;
            let affine = corrector.then(|| {
                r2 += self.alam[3 * i] * self.as_[i];
                let dbeta = [mu * self.alam[3 * i], self.alam[3 * i + 1], self.alam[3 * i + 2]];
                (dbeta, [self.apsi[i], self.aw[3 * i + 1], self.aw[3 * i + 2]])
            });
            let q = self.scaled_cone_rhs(i, kappa, affine);
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
    #[inline(always)]
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
    #[inline(always)]
    fn mean_complementarity(&self) -> f64 {
        // Not `mean_complementarity_after(0.0)`: that reads the direction, which at the start of
        // a solve is whatever the previous solve left (`0 * NaN` would leak into this one).
        let k = self.k;
        let mut acc = 0.0;
        for i in 0..k {
            let (l, w) = (&self.lam[3 * i..3 * i + 3], &self.w[3 * i..3 * i + 3]);
            acc += l[0] * self.s[i] + self.mu[i] * l[0] * self.psi[i] + l[1] * w[1] + l[2] * w[2];
        }
        acc / (2 * k.max(1)) as f64
    }

    #[inline(always)]
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
    #[inline(always)]
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

    /// Whether the current iterate meets `settings.tolerance` where it can, and its rounding
    /// floor where it cannot (`kappa` as for [`Self::residual`]). `w~ = G~ lambda~ + b~` carries
    /// a rounding error of about `dw = eps (n |lambda~|_inf + |b~|_inf)` (`G~` has unit
    /// diagonal): the slack equation is held to `max(tol, dw)`, and each complementarity product
    /// to `max(tol, c_i dw)` with `c_i = (1 + mu_i) gamma~_i + ||l~_t,i||` the impulse it multiplies
    /// `w` by. Only a soft direction of an ill-conditioned `G` (`|lambda~| >~ 1e3`) lifts a floor
    /// above the default `1e-8`, so every other solve is judged exactly by `residual <= tol`.
    /// The per-contact test runs only once `dw > tol` or `3 (1 + |lambda~|_inf) dw > tol`; for
    /// `mu > 1` a contact's `c_i` can exceed that bound, so the floor is applied conservatively
    /// there (a solve may iterate on where the floor alone would have let it stop).
    pub(super) fn converged_at_floor(&self, settings: &Settings, kappa: f64) -> bool {
        let n = 3 * self.k;
        let lam = self.lam[..n].iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        let b = self.bt[..n].iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        let dw = FLOOR_SAFETY * f64::EPSILON * (n as f64 * lam + b);
        let tol = settings.tolerance;
        if dw <= tol && dw * (1.0 + lam) * 3.0 <= tol {
            return false;
        }
        (0..self.k).all(|i| {
            let (l, w) = (&self.lam[3 * i..3 * i + 3], &self.w[3 * i..3 * i + 3]);
            let (gam, s, psi, mu) = (l[0], self.s[i], self.psi[i], self.mu[i]);
            let beta = [mu * gam, l[1], l[2]];
            let j = jordan(beta, [psi, w[1], w[2]]);
            let cf = tol.max(((1.0 + mu) * gam + norm2(l[1], l[2])) * dw);
            (s - w[0]).abs() <= tol.max(dw)
                && (gam * s - kappa).abs() <= cf
                && (j[0] - kappa).abs() <= cf
                && j[1].abs().max(j[2].abs()) <= cf
        })
    }

    fn update_w(&mut self) {
        let n = 3 * self.k;
        mat_vec(&self.gt[..n * n], n, &self.lam[..n], &mut self.w[..n]);
        for (w, &b) in self.w[..n].iter_mut().zip(&self.bt[..n]) {
            *w += b;
        }
    }
}
