//! The globalized phase of the forward solver (math in the [module docs](super::super)): first
//! restarts of the Coulomb iteration with a shorter step and other starts, then Cadoux's fixed
//! point on the De Saxce shift, each step a *convex* (associated) second-order-cone
//! complementarity problem solved by an NT-scaled Mehrotra method, with hand-offs to the
//! Coulomb iteration. It runs only after the Coulomb iteration has stalled, so every solve that
//! converges without it is unchanged.

use super::super::cone::{jordan, norm2, soc_det, soc_step};
use super::{Centering, ContactSolver, MAX_STEP_CUTS, STALL_COUNT, STALL_STEP};
use crate::contact::solver::{Info, Settings, Status};
use crate::linalg::{lu_factor, lu_solve, mat_vec, PivotRule};

/// Where a restart of the Coulomb iteration begins.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    /// `lambda = 0` (the cold start, centered at the restart's `mu0`).
    Zero,
    /// Every approaching contact stopped ([`ContactSolver::sticking_start`]).
    Sticking,
}

/// The restarts tried before the fixed point, in order: start, fraction to the boundary `tau`,
/// centering `mu0`. A shorter step than the default `tau = 0.99` keeps the iterate away from
/// the cone boundaries where the Coulomb iteration jams. Chosen on the random problems of
/// `tests/contact_solver_random.rs` with another seed (17, 30 000 problems: the fixed point
/// alone with a budget of 3000 left 408 stalled, these restarts before it 150, the same with the
/// sticking start at `tau = 0.99` 179; a budget of 1200 with 300-iteration restarts 267).
const RESTARTS: [(Start, f64, f64); 3] =
    [(Start::Sticking, 0.3, 1e-4), (Start::Zero, 0.3, 1e-4), (Start::Zero, 0.5, 1e-2)];
/// Iterations per restart at most.
const RESTART_ITERATIONS: usize = 400;
/// Regularization (normalized, `G~` has unit largest diagonal) of the sticking start.
const STICK_REGULARIZATION: f64 = 1e-12;
/// Fixed-point steps at most.
const MAX_OUTER: usize = 100;
/// Iterations a hand-off to the Coulomb iteration may take before the fixed point resumes (two
/// default-length runs: it gets its stall restarts). Measured on the random problems: 15 hand-off
/// iterations leave 5 727 stalls, 30 leave 4 421, 60 3 826, 120 3 515, 240 3 454 (600 iterations in all).
const HANDOFF_ITERATIONS: usize = 120;

impl ContactSolver {
    /// Runs the globalized phase from the current (stalled) iterate; `info` accumulates.
    pub(super) fn globalize(&mut self, settings: &Settings, info: &mut Info) {
        let n = 3 * self.k;
        self.update_w();
        // The stalled iterate is the one to beat (measured as every later iterate is).
        let mut best = self.coulomb_residual(info);
        self.gbest[..n].copy_from_slice(&self.lam[..n]);
        let mut budget = settings.global_iterations;
        for &(start, tau, mu0) in &RESTARTS {
            if budget == 0 {
                break;
            }
            let local =
                Settings { fraction_to_boundary: tau, max_iterations: RESTART_ITERATIONS.min(budget), ..*settings };
            let before = info.iterations;
            if !(start == Start::Sticking && self.sticking_start()) {
                self.lam[..n].fill(0.0);
            }
            self.initialize(mu0);
            self.drive(&local, Centering::PredictorCorrector, info);
            budget -= (info.iterations - before).min(budget);
            if info.status == Status::Converged {
                return;
            }
            self.update_w();
            let res = self.coulomb_residual(info);
            if res < best {
                best = res;
                self.gbest[..n].copy_from_slice(&self.lam[..n]);
            }
        }
        self.lam[..n].copy_from_slice(&self.gbest[..n]);
        self.update_w();
        self.fixed_point(settings, budget, best, info);
        if info.status != Status::Converged && !self.enumerate_modes(settings, info) {
            self.coulomb_residual(info);
        }
    }

    /// Sets `lambda~` to the impulse that stops every approaching contact (`b~_n < 0`) and leaves
    /// the others at zero: `G~_AA lambda~_A = -b~_A` (regularized by `STICK_REGULARIZATION`).
    /// Returns `false` if that system cannot be factorized.
    fn sticking_start(&mut self) -> bool {
        let k = self.k;
        let n = 3 * k;
        let mut m = 0;
        for i in 0..k {
            if self.bt[3 * i] < 0.0 {
                for r in 0..3 {
                    self.active[m] = 3 * i + r;
                    m += 1;
                }
            }
        }
        if m == 0 {
            return false;
        }
        let rows = &self.active;
        for a in 0..m {
            for c in 0..m {
                self.lu[a * m + c] = self.gt[rows[a] * n + rows[c]];
            }
            self.lu[a * m + a] += STICK_REGULARIZATION;
            self.gdlam[a] = -self.bt[rows[a]];
        }
        if !lu_factor(&mut self.lu[..m * m], m, &mut self.piv[..m], PivotRule::Absolute) {
            return false;
        }
        lu_solve(&self.lu[..m * m], m, &self.piv[..m], &mut self.gdlam[..m]);
        self.lam[..n].fill(0.0);
        for a in 0..m {
            self.lam[self.active[a]] = self.gdlam[a];
        }
        self.lam[..n].iter().all(|x| x.is_finite())
    }

    /// Cadoux's fixed point on its own, from no slip (`sig = 0`), without hand-offs to the
    /// Coulomb iteration: at most `outer` convex solves sharing `budget` iterations, stopped
    /// when the shifts settle to `1e-13` relative. Leaves its last iterate, `w` up to date, for
    /// the enumeration to read modes from (module docs, "Enumeration").
    pub(super) fn plain_fixed_point(
        &mut self,
        settings: &Settings,
        damping: f64,
        outer: usize,
        mut budget: usize,
        info: &mut Info,
    ) {
        let k = self.k;
        self.sig[..k].fill(0.0);
        for _ in 0..outer {
            let ok = self.convex_solve(settings, &mut budget, info);
            self.update_w();
            if !ok {
                break;
            }
            let (mut change, mut size) = (0.0_f64, 0.0_f64);
            for i in 0..k {
                let s = norm2(self.w[3 * i + 1], self.w[3 * i + 2]);
                change = change.max((s - self.sig[i]).abs());
                size = size.max(s);
                self.sig[i] = (1.0 - damping) * s + damping * self.sig[i];
            }
            if change.is_nan() || change <= 1e-13 * (1.0 + size) {
                break;
            }
        }
    }

    /// Cadoux's fixed point from the current iterate, `best` its residual (kept in `gbest`).
    fn fixed_point(&mut self, settings: &Settings, mut budget: usize, mut best: f64, info: &mut Info) {
        let k = self.k;
        let n = 3 * k;
        for i in 0..k {
            self.sig[i] = norm2(self.w[3 * i + 1], self.w[3 * i + 2]);
        }
        for _ in 0..MAX_OUTER {
            let ok = self.convex_solve(settings, &mut budget, info);
            self.update_w();
            let res = self.coulomb_residual(info);
            if res <= settings.tolerance || self.converged_at_floor(settings, 0.0) {
                info.status = Status::Converged;
                return;
            }
            if res < best {
                best = res;
                self.gbest[..n].copy_from_slice(&self.lam[..n]);
            }
            if !ok || budget == 0 || !res.is_finite() {
                break;
            }
            // Hand every fixed-point iterate to the Coulomb iteration, which converges
            // quadratically where the fixed point converges only linearly (handing off only
            // below a residual of 0.1 left 7 % more stalls).
            self.glam[..n].copy_from_slice(&self.lam[..n]);
            let local = Settings { max_iterations: HANDOFF_ITERATIONS.min(budget), ..*settings };
            let before = info.iterations;
            self.initialize(settings.warm_start_mu);
            self.drive(&local, Centering::PredictorCorrector, info);
            budget -= info.iterations - before;
            if info.status == Status::Converged {
                return;
            }
            if budget == 0 {
                break;
            }
            // Resume the fixed point where it was.
            self.lam[..n].copy_from_slice(&self.glam[..n]);
            self.update_w();
            // Cadoux's fixed point: the next convex problem is shifted by this one's slip.
            for i in 0..k {
                self.sig[i] = norm2(self.w[3 * i + 1], self.w[3 * i + 2]);
            }
        }
        // Not converged: return the best iterate, which a caller may still use.
        info.status = Status::MaxIterations;
        self.lam[..n].copy_from_slice(&self.gbest[..n]);
        self.update_w();
        self.coulomb_residual(info);
    }

    /// Sets `s = max(w_n, 0)` and `psi = ||w_t||`, their values at a Coulomb solution, from the
    /// current `w`.
    pub(super) fn set_coulomb_duals(&mut self) {
        for i in 0..self.k {
            self.s[i] = self.w[3 * i].max(0.0);
            self.psi[i] = norm2(self.w[3 * i + 1], self.w[3 * i + 2]);
        }
    }

    /// Sets the duals as [`Self::set_coulomb_duals`] does for the current `lambda` and `w`, and
    /// reports the residual of the hard problem in `info`.
    pub(super) fn coulomb_residual(&mut self, info: &mut Info) -> f64 {
        self.set_coulomb_duals();
        let (res, comp, margin) = self.residual(0.0);
        info.residual = res;
        info.complementarity = comp;
        info.cone_margin = margin * self.lscale;
        info.min_iterate_cone_margin = info.min_iterate_cone_margin.min(info.cone_margin);
        // NaN must not pass for progress.
        if res.is_nan() {
            f64::INFINITY
        } else {
            res
        }
    }

    /// The convex problem of one fixed-point step, from a centered cold start:
    /// `beta_i = (mu gamma, l_t) in Q`, `z_i = ((w_n + mu sig_i) / mu, w_t) in Q`, `beta_i o z_i = 0`,
    /// with `z` a slack (`r_p = z - D (G~ lambda~ + b~ + c)` driven to zero: an infeasible start).
    /// Returns `false` if it cannot continue (budget, factorization, rounding), `true` when the
    /// residual reached the tolerance or the steps stalled at rounding level.
    fn convex_solve(&mut self, settings: &Settings, budget: &mut usize, info: &mut Info) -> bool {
        let k = self.k;
        let n = 3 * k;
        let tol_in = settings.tolerance;
        let mut short = 0;
        for i in 0..k {
            self.lam[3 * i] = 1.0 / self.mu[i];
            self.lam[3 * i + 1] = 0.0;
            self.lam[3 * i + 2] = 0.0;
            self.z[3 * i..3 * i + 3].copy_from_slice(&[1.0, 0.0, 0.0]);
        }
        loop {
            self.update_w();
            let mut res = 0.0_f64;
            let mut mu_c = 0.0;
            let mut margin = f64::INFINITY;
            for i in 0..k {
                let mu = self.mu[i];
                let beta = [mu * self.lam[3 * i], self.lam[3 * i + 1], self.lam[3 * i + 2]];
                let z = [self.z[3 * i], self.z[3 * i + 1], self.z[3 * i + 2]];
                let u = [(self.w[3 * i] + mu * self.sig[i]) / mu, self.w[3 * i + 1], self.w[3 * i + 2]];
                for r in 0..3 {
                    self.rp[3 * i + r] = z[r] - u[r];
                    res = res.max(self.rp[3 * i + r].abs());
                }
                let j = jordan(beta, z);
                res = res.max(j[0].abs()).max(j[1].abs()).max(j[2].abs());
                mu_c += j[0];
                margin = margin.min(beta[0] - norm2(beta[1], beta[2]));
            }
            mu_c /= k as f64;
            if !res.is_finite() {
                return false;
            }
            info.min_iterate_cone_margin = info.min_iterate_cone_margin.min(margin * self.lscale);
            if res <= tol_in {
                return true;
            }
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            info.iterations += 1;
            // Reduced matrix `G~ + blkdiag(D^-1 W^-2 M) + rho I`, `D = diag(1/mu, 1, 1)`,
            // `M = diag(mu, 1, 1)`: row 0 and column 0 of `W^-2` scaled by `mu`.
            self.lu[..n * n].copy_from_slice(&self.gt[..n * n]);
            for j in 0..n {
                self.lu[j * n + j] += self.rho;
            }
            for i in 0..k {
                let mu = self.mu[i];
                let beta = [mu * self.lam[3 * i], self.lam[3 * i + 1], self.lam[3 * i + 2]];
                let z = [self.z[3 * i], self.z[3 * i + 1], self.z[3 * i + 2]];
                let mut t = self.store_nt_scaling(i, beta, z);
                for r in 0..3 {
                    t[3 * r] *= mu;
                }
                for c in 0..3 {
                    t[c] *= mu;
                }
                let row0 = 3 * i * n + 3 * i;
                for r in 0..3 {
                    for c in 0..3 {
                        self.lu[row0 + r * n + c] += t[3 * r + c];
                    }
                }
            }
            if !lu_factor(&mut self.lu[..n * n], n, &mut self.piv[..n], PivotRule::Absolute) {
                return false;
            }
            self.convex_direction(0.0, false);
            let alpha_aff = self.convex_max_step().min(1.0);
            let mut mu_aff = 0.0;
            for i in 0..k {
                let mu = self.mu[i];
                let b = [
                    mu * (self.lam[3 * i] + alpha_aff * self.gdlam[3 * i]),
                    self.lam[3 * i + 1] + alpha_aff * self.gdlam[3 * i + 1],
                    self.lam[3 * i + 2] + alpha_aff * self.gdlam[3 * i + 2],
                ];
                for r in 0..3 {
                    mu_aff += b[r] * (self.z[3 * i + r] + alpha_aff * self.dz[3 * i + r]);
                }
            }
            mu_aff /= k as f64;
            let sigma = (mu_aff / mu_c).clamp(0.0, 1.0).powi(3);
            self.alam[..n].copy_from_slice(&self.gdlam[..n]);
            self.az[..n].copy_from_slice(&self.dz[..n]);
            self.convex_direction(sigma * mu_c, true);
            let alpha_max = self.convex_max_step();
            self.lam0[..n].copy_from_slice(&self.lam[..n]);
            self.z0[..n].copy_from_slice(&self.z[..n]);
            let mut alpha = (settings.fraction_to_boundary * alpha_max).min(1.0);
            for _ in 0..=MAX_STEP_CUTS {
                for j in 0..n {
                    self.lam[j] = self.lam0[j] + alpha * self.gdlam[j];
                    self.z[j] = self.z0[j] + alpha * self.dz[j];
                }
                if self.convex_interior() {
                    break;
                }
                alpha *= 0.5;
            }
            if !self.convex_interior() {
                self.lam[..n].copy_from_slice(&self.lam0[..n]);
                self.z[..n].copy_from_slice(&self.z0[..n]);
                return false;
            }
            // Jammed at rounding level (the fixed point's residual decides whether it matters).
            short = if alpha < STALL_STEP { short + 1 } else { 0 };
            if short >= STALL_COUNT {
                self.update_w();
                return true;
            }
        }
    }

    /// Whether `beta` and `z` are strictly inside the cone, as the next iteration computes them.
    fn convex_interior(&self) -> bool {
        (0..self.k).all(|i| {
            let beta = [self.mu[i] * self.lam[3 * i], self.lam[3 * i + 1], self.lam[3 * i + 2]];
            let z = [self.z[3 * i], self.z[3 * i + 1], self.z[3 * i + 2]];
            beta[0] > 0.0 && z[0] > 0.0 && soc_det(beta) >= f64::MIN_POSITIVE && soc_det(z) >= f64::MIN_POSITIVE
        })
    }

    /// Largest step keeping `beta` and `z` in the cone (determinants from the assembly).
    fn convex_max_step(&self) -> f64 {
        let mut alpha = f64::INFINITY;
        for i in 0..self.k {
            let mu = self.mu[i];
            let beta = [mu * self.lam[3 * i], self.lam[3 * i + 1], self.lam[3 * i + 2]];
            let dbeta = [mu * self.gdlam[3 * i], self.gdlam[3 * i + 1], self.gdlam[3 * i + 2]];
            let z = [self.z[3 * i], self.z[3 * i + 1], self.z[3 * i + 2]];
            let dz = [self.dz[3 * i], self.dz[3 * i + 1], self.dz[3 * i + 2]];
            alpha = alpha.min(soc_step(beta, dbeta, self.dets[2 * i])).min(soc_step(z, dz, self.dets[2 * i + 1]));
        }
        alpha
    }

    /// NT-scaled direction of the convex problem: `dz = D G~ dlambda - r_p`,
    /// `W^-1 dbeta + W dz = r_hat`, so `(G~ + D^-1 W^-2 M) dlambda = D^-1 (W^-1 r_hat + r_p)`.
    fn convex_direction(&mut self, kappa: f64, corrector: bool) {
        let k = self.k;
        let n = 3 * k;
        for i in 0..k {
            let mu = self.mu[i];
            let affine = corrector.then(|| {
                let dbeta = [mu * self.alam[3 * i], self.alam[3 * i + 1], self.alam[3 * i + 2]];
                (dbeta, [self.az[3 * i], self.az[3 * i + 1], self.az[3 * i + 2]])
            });
            let q = self.scaled_cone_rhs(i, kappa, affine);
            self.gdlam[3 * i] = mu * (q[0] + self.rp[3 * i]);
            self.gdlam[3 * i + 1] = q[1] + self.rp[3 * i + 1];
            self.gdlam[3 * i + 2] = q[2] + self.rp[3 * i + 2];
        }
        lu_solve(&self.lu[..n * n], n, &self.piv[..n], &mut self.gdlam[..n]);
        mat_vec(&self.gt[..n * n], n, &self.gdlam[..n], &mut self.gdw[..n]);
        for i in 0..k {
            let mu = self.mu[i];
            self.dz[3 * i] = self.gdw[3 * i] / mu - self.rp[3 * i];
            self.dz[3 * i + 1] = self.gdw[3 * i + 1] - self.rp[3 * i + 1];
            self.dz[3 * i + 2] = self.gdw[3 * i + 2] - self.rp[3 * i + 2];
        }
    }
}
