//! Signorini-relaxed contact system (DESIGN 3.2), solved by Newton from the forward solution.
//!
//! Only the normal complementarity is relaxed; friction keeps the realized mode of the forward
//! step. Per contact `i`, with `w = G lambda + b`, `lambda_i = (gamma, l_t)`, `w_i = (w_n, w_t)`
//! and a slack `s_i`:
//!
//! ```text
//! s - w_n = 0,        gamma s = kappa                       (every contact, separated included)
//! separated: l_t = 0;   sticking: w_t = 0;   sliding: l_t + mu gamma w_t / ||w_t|| = 0
//! ```
//!
//! The slack keeps the start interior when the forward solution sits on `w_n = 0` or
//! `gamma = 0`; it is eliminated from the Newton step (`ds = dw_n - (s - w_n)`), which leaves the
//! normal row `s dgamma + gamma G_n dlambda = kappa - gamma w_n`. Steps keep `gamma, s > 0` with
//! the fraction-to-boundary rule of the forward solver. Everything runs in the forward solver's
//! normalized units (`lambda~ = lambda / L`, `w~ = w / V`, `G~ = G L / V`), so tolerances are
//! dimensionless.
//!
//! Convergence: the primal and friction rows to `tolerance`, and `gamma s` to within `1e-6`
//! relative of `kappa` (an absolute tolerance would accept any `gamma s` below it when `kappa`
//! is tiny, and `kappa -> 0` is exactly the regime in which this must reproduce the exact
//! sensitivity).
//!
//! The implicit-function derivative at the answer is assembled by
//! [`transition_jacobians`](super::transition_jacobians).

use crate::contact::solver::{ContactMode, Info, Settings, Status};
use crate::linalg::{lu_factor, lu_solve, PivotRule};
use nalgebra::DMatrixView;

/// Relative accuracy of `gamma s = kappa` at convergence (module docs).
const KAPPA_RTOL: f64 = 1e-6;

/// Preallocated Newton workspace for up to `max_contacts` contacts (normalized units).
#[derive(Clone, Debug)]
pub struct SignoriniSolver {
    max_contacts: usize,
    /// `G~` (3k x 3k row-major).
    gt: Vec<f64>,
    bt: Vec<f64>,
    lam: Vec<f64>,
    w: Vec<f64>,
    s: Vec<f64>,
    /// Newton matrix, LU-factored in place (3k x 3k row-major), and its pivots.
    jac: Vec<f64>,
    piv: Vec<usize>,
    /// Right-hand side, then the direction `dlambda` (3k); `ds` (k).
    dlam: Vec<f64>,
    ds: Vec<f64>,
}

impl SignoriniSolver {
    pub fn new(max_contacts: usize) -> Self {
        let n = 3 * max_contacts;
        Self {
            max_contacts,
            gt: vec![0.0; n * n],
            bt: vec![0.0; n],
            lam: vec![0.0; n],
            w: vec![0.0; n],
            s: vec![0.0; max_contacts],
            jac: vec![0.0; n * n],
            piv: vec![0; n],
            dlam: vec![0.0; n],
            ds: vec![0.0; max_contacts],
        }
    }

    /// Solves the Signorini-relaxed system for `G` (3k x 3k), `b` (3k), `mu` (k) and the
    /// forward modes (k), starting from the forward impulses `lambda0`, at `kappa > 0`
    /// (physical, N s * m/s). `scales = (V, L)` are the forward solve's normalization.
    /// Writes the impulses to `lambda` and `G lambda + b` to `w` (unless the status is
    /// `NonFinite`, `LinearSolveFailed` or `InvalidInput`). Allocation-free.
    #[allow(clippy::too_many_arguments)]
    pub fn solve(
        &mut self,
        settings: &Settings,
        g: DMatrixView<'_, f64>,
        b: &[f64],
        mu: &[f64],
        modes: &[ContactMode],
        lambda0: &[f64],
        kappa: f64,
        (vscale, lscale): (f64, f64),
        lambda: &mut [f64],
        w: &mut [f64],
    ) -> Info {
        let n = g.nrows();
        let k = n / 3;
        let mut info = Info::not_run();
        info.status = Status::InvalidInput;
        let ok = n.is_multiple_of(3)
            && g.ncols() == n
            && k <= self.max_contacts
            && [b.len(), lambda0.len(), lambda.len(), w.len()].iter().all(|&l| l == n)
            && mu.len() == k
            && modes.len() == k
            && kappa > 0.0
            && kappa.is_finite()
            && vscale > 0.0
            && lscale > 0.0;
        if !ok {
            return info;
        }
        info.velocity_scale = vscale;
        info.impulse_scale = lscale;
        info.kappa = kappa;
        let gscale = vscale / lscale;
        for r in 0..n {
            for c in 0..n {
                self.gt[r * n + c] = g[(r, c)] / gscale;
            }
            self.bt[r] = b[r] / vscale;
            self.lam[r] = lambda0[r] / lscale;
        }
        if !self.gt[..n * n].iter().chain(&self.bt[..n]).chain(&self.lam[..n]).all(|x| x.is_finite()) {
            info.status = Status::NonFinite;
            return info;
        }
        let kt = kappa / (vscale * lscale);
        // Sticking rows read `G_t dlambda = -w_t`; with more contact rows than degrees of
        // freedom (a box on four corners) G is singular, so the direction gets the forward
        // solver's kind of diagonal regularization (the residual stays exact).
        let rho = settings.regularization.max(1e-10);

        // Interior start: whichever of gamma and w_n is the larger keeps its value and the other
        // is set so that gamma s = kappa (a separated contact keeps its gap velocity, a pressed
        // one its impulse).
        self.update_w(n);
        for i in 0..k {
            let (gam, wn) = (self.lam[3 * i].max(0.0), self.w[3 * i]);
            if gam >= wn {
                self.lam[3 * i] = gam.max(kt.sqrt());
                self.s[i] = wn.max(kt / self.lam[3 * i]);
            } else {
                self.s[i] = wn;
                self.lam[3 * i] = gam.max(kt / wn);
            }
            if modes[i] == ContactMode::Separated {
                self.lam[3 * i + 1] = 0.0;
                self.lam[3 * i + 2] = 0.0;
            }
        }
        self.update_w(n);

        let mut iter = 0;
        loop {
            let (res, comp) = self.residual(k, mu, modes, kt);
            info.residual = res;
            info.complementarity = comp;
            if !(res.is_finite() && comp.is_finite()) {
                info.status = Status::NonFinite;
                return info;
            }
            if res <= settings.tolerance && comp <= KAPPA_RTOL * kt + f64::MIN_POSITIVE {
                info.status = Status::Converged;
                break;
            }
            if iter == settings.max_iterations {
                info.status = Status::MaxIterations;
                break;
            }
            iter += 1;
            if !self.newton_direction(k, mu, modes, kt, rho) {
                info.status = Status::LinearSolveFailed;
                return info;
            }
            // Fraction to the boundary on gamma and s.
            let mut alpha: f64 = 1.0;
            for i in 0..k {
                for (x, dx) in [(self.lam[3 * i], self.dlam[3 * i]), (self.s[i], self.ds[i])] {
                    if dx < 0.0 {
                        alpha = alpha.min(-settings.fraction_to_boundary * x / dx);
                    }
                }
            }
            for r in 0..n {
                self.lam[r] += alpha * self.dlam[r];
            }
            for i in 0..k {
                self.s[i] += alpha * self.ds[i];
            }
            self.update_w(n);
        }
        info.iterations = iter;
        let mut margin = f64::INFINITY;
        for r in 0..n {
            lambda[r] = self.lam[r] * lscale;
        }
        for i in 0..k {
            let l = &lambda[3 * i..3 * i + 3];
            margin = margin.min(mu[i] * l[0] - l[1].hypot(l[2]));
        }
        info.cone_margin = margin;
        info.min_iterate_cone_margin = margin;
        for r in 0..n {
            let mut acc = b[r];
            for c in 0..n {
                acc += g[(r, c)] * lambda[c];
            }
            w[r] = acc;
        }
        info
    }

    fn update_w(&mut self, n: usize) {
        for r in 0..n {
            let row = &self.gt[r * n..r * n + n];
            self.w[r] = self.bt[r] + row.iter().zip(&self.lam[..n]).map(|(g, l)| g * l).sum::<f64>();
        }
    }

    /// `(max of the primal and friction rows, max_i |gamma s - kappa| )`, normalized.
    fn residual(&self, k: usize, mu: &[f64], modes: &[ContactMode], kt: f64) -> (f64, f64) {
        let (mut res, mut comp) = (0.0f64, 0.0f64);
        for i in 0..k {
            let (l, w) = (&self.lam[3 * i..3 * i + 3], &self.w[3 * i..3 * i + 3]);
            res = res.max((self.s[i] - w[0]).abs());
            comp = comp.max((l[0] * self.s[i] - kt).abs());
            let rt = friction_residual(modes[i], mu[i], l, w);
            res = res.max(rt[0].abs()).max(rt[1].abs());
            if l.iter().chain(w).any(|x| x.is_nan()) {
                return (f64::NAN, f64::NAN);
            }
        }
        (res, comp)
    }

    /// Assembles and solves the Newton system; `false` if it is singular.
    fn newton_direction(&mut self, k: usize, mu: &[f64], modes: &[ContactMode], kt: f64, rho: f64) -> bool {
        let n = 3 * k;
        for i in 0..k {
            let r0 = 3 * i;
            let (gam, s) = (self.lam[r0], self.s[i]);
            // Normal row: s dgamma + gamma G_n dlambda = kappa - gamma w_n.
            for c in 0..n {
                self.jac[r0 * n + c] = gam * self.gt[r0 * n + c];
            }
            self.jac[r0 * n + r0] += s;
            self.dlam[r0] = kt - gam * self.w[r0];
            let (l, w) = (&self.lam[r0..r0 + 3], &self.w[r0..r0 + 3]);
            let rt = friction_residual(modes[i], mu[i], l, w);
            let lin = friction_linearization(modes[i], mu[i], l, w);
            for a in 0..2 {
                let r = r0 + 1 + a;
                for c in 0..n {
                    let gpart = lin.rw[a][0] * self.gt[(r0 + 1) * n + c] + lin.rw[a][1] * self.gt[(r0 + 2) * n + c];
                    self.jac[r * n + c] = gpart;
                }
                for (j, &x) in lin.rl[a].iter().enumerate() {
                    self.jac[r * n + r0 + j] += x;
                }
                self.jac[r * n + r] += rho;
                self.dlam[r] = -rt[a];
            }
        }
        // Relative pivots: no row is scaled apart by design (the normal row is multiplied by
        // gamma, not divided by it), so a pivot below 1e-14 of the largest entry means a singular
        // Newton matrix, better reported as `LinearSolveFailed` than followed to a huge step.
        if !lu_factor(&mut self.jac[..n * n], n, &mut self.piv[..n], PivotRule::Relative(1e-14)) {
            return false;
        }
        lu_solve(&self.jac[..n * n], n, &self.piv[..n], &mut self.dlam[..n]);
        for i in 0..k {
            let r0 = 3 * i;
            let row = &self.gt[r0 * n..r0 * n + n];
            let dwn: f64 = row.iter().zip(&self.dlam[..n]).map(|(g, d)| g * d).sum();
            self.ds[i] = dwn + self.w[r0] - self.s[i];
        }
        self.dlam[..n].iter().all(|x| x.is_finite())
    }
}

/// Tangential residual of the forward mode's friction law (2 rows).
pub(crate) fn friction_residual(mode: ContactMode, mu: f64, l: &[f64], w: &[f64]) -> [f64; 2] {
    match mode {
        ContactMode::Separated => [l[1], l[2]],
        ContactMode::Sticking => [w[1], w[2]],
        ContactMode::Sliding => {
            let speed = w[1].hypot(w[2]);
            [l[1] + mu * l[0] * w[1] / speed, l[2] + mu * l[0] * w[2] / speed]
        }
    }
}

/// Linearization `rl dlambda_i + rw dw_t` of [`friction_residual`]: `rl` is 2 x 3 (against
/// `(dgamma, dl_t)`), `rw` 2 x 2 (against `dw_t`).
pub(crate) struct FrictionLinearization {
    pub rl: [[f64; 3]; 2],
    pub rw: [[f64; 2]; 2],
}

pub(crate) fn friction_linearization(mode: ContactMode, mu: f64, l: &[f64], w: &[f64]) -> FrictionLinearization {
    match mode {
        ContactMode::Separated => {
            FrictionLinearization { rl: [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], rw: [[0.0, 0.0], [0.0, 0.0]] }
        }
        ContactMode::Sticking => FrictionLinearization { rl: [[0.0; 3], [0.0; 3]], rw: [[1.0, 0.0], [0.0, 1.0]] },
        ContactMode::Sliding => {
            // l_t + mu gamma t_hat:  d t_hat = (I - t_hat t_hat^T) dw_t / ||w_t||.
            let speed = w[1].hypot(w[2]);
            let t = [w[1] / speed, w[2] / speed];
            let f = mu * l[0] / speed;
            FrictionLinearization {
                rl: [[mu * t[0], 1.0, 0.0], [mu * t[1], 0.0, 1.0]],
                rw: [[f * (1.0 - t[0] * t[0]), -f * t[0] * t[1]], [-f * t[1] * t[0], f * (1.0 - t[1] * t[1])]],
            }
        }
    }
}
