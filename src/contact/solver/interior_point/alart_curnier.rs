//! Alart-Curnier's semismooth Newton with random restarts: the very last stage of the globalized
//! phase (math in the [module docs](super::super), "Alart-Curnier"). Per contact, with
//! `w = G~ lambda~ + b~`, `r_n = l_n - rho_i w_n`, `z = l_t - rho_i w_t` and the disk radius
//! `R = mu max(r_n, 0)`,
//!
//! ```text
//! F_n = l_n - max(r_n, 0),      F_t = l_t - P_{D(R)}(z)
//! ```
//!
//! whose zeros are exactly the Coulomb solutions (Alart & Curnier 1991). `F` is piecewise
//! smooth; Newton runs on an element of its generalized Jacobian, the step is the least-norm
//! one through the pseudo-inverse (a sticking contact's rows are `rho_i G~`, singular with
//! `G~`), with Armijo backtracking on `|F|^2` and a steepest-descent step on `|F|^2` where the
//! Newton direction does not descend. Nothing makes this global either, so it is restarted
//! from random impulses and random `rho` scales, every other start with a continuation in
//! `mu` (`0, 1/4, ..., 1`, from the frictionless problem, which is convex); an iterate that
//! comes near a zero is handed to the mode enumeration, which finishes it inside the cones and
//! accepts it only if the solver's convergence test passes. The iterates here may leave the
//! cones: only the enumeration's answer becomes the solver's iterate.

use super::ContactSolver;
use crate::contact::solver::{Info, Settings};
use crate::linalg::{lu_factor, lu_solve, svd_jacobi, svd_step, PivotRule};

/// Starts at most, and Newton iterations all of them share at most (module docs of the solver,
/// "Alart-Curnier", say how they were chosen).
const STARTS: usize = 1000;
const BUDGET: usize = 400_000;
/// Newton iterations per start and stage of the continuation at most.
const ITERATIONS: usize = 200;
/// A start is given up when `|F|^2` has not halved over this many iterations.
const WINDOW: usize = 50;
/// Continuation stages in `mu` of the odd starts.
const STAGES: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];
/// `|F|_inf` (relative to `max(1, |lambda~|_inf)`) below which an iterate goes to the
/// enumeration, and below which Newton stops.
const HANDOFF: f64 = 1e-6;
const DONE: f64 = 1e-13;
/// Relative cut-off of the pseudo-inverse.
const CUTOFF: f64 = 1e-14;
/// Smallest pivot (relative to the largest entry of `J`) of the LU step.
const LU_PIVOT: f64 = 1e-10;
/// Seed of the restarts' generator: the same problem takes the same path.
const SEED: u64 = 0x5eed_a1a7_c0de_0001;

/// SplitMix64 (Steele, Lea, Flood 2014): a reproducible uniform in `[0, 1)`.
struct Uniform(u64);

impl Uniform {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl ContactSolver {
    /// Runs the restarts from the phase's best iterate (kept in `glam`). On success the
    /// iterate is the enumeration's accepted answer and `info` says `Converged`; otherwise the
    /// iterate is restored from `glam` (`w` up to date) and `info` is untouched but for the
    /// iterations.
    pub(super) fn alart_curnier(&mut self, settings: &Settings, info: &mut Info) -> bool {
        let k = self.k;
        let n = 3 * k;
        let mut rng = Uniform(SEED);
        let mut budget = BUDGET;
        for start in 0..STARTS {
            if budget == 0 {
                break;
            }
            let scale = if start == 0 { 1.0 } else { 10f64.powf(4.0 * rng.next() - 2.0) };
            for i in 0..k {
                let frob = (0..3)
                    .flat_map(|r| (0..3).map(move |c| (r, c)))
                    .map(|(r, c)| self.gt[(3 * i + r) * n + 3 * i + c].powi(2))
                    .sum::<f64>()
                    .sqrt();
                self.acrho[i] = if frob > 0.0 && frob.is_finite() { scale / frob } else { scale };
            }
            match start {
                0 => self.lam[..n].fill(0.0),
                1 => self.lam[..n].copy_from_slice(&self.glam[..n]),
                _ => {
                    for i in 0..k {
                        let ln = 10f64.powf(6.0 * rng.next() - 3.0) * rng.next();
                        let (angle, r) = (std::f64::consts::TAU * rng.next(), self.mu[i] * ln * rng.next());
                        self.lam[3 * i..3 * i + 3].copy_from_slice(&[ln, r * angle.cos(), r * angle.sin()]);
                    }
                }
            }
            let stages: &[f64] = if start % 2 == 1 { &STAGES } else { &STAGES[4..] };
            for &stage in stages {
                let used = self.ac_newton(stage, budget.min(ITERATIONS));
                budget -= used.min(budget);
                info.iterations += used;
            }
            let size = self.lam_inf().max(1.0);
            // `ac_residual` leaves `w` at this iterate, as the enumeration reads it; a failed
            // enumeration leaves `info`'s status alone.
            let f = self.ac_residual(1.0, false);
            if self.iterate_finite() && f <= HANDOFF * size && self.enumerate_from_iterate(settings, info, 0) {
                return true;
            }
        }
        self.lam[..n].copy_from_slice(&self.glam[..n]);
        self.update_w();
        false
    }

    /// Newton on `F` with `mu` scaled by `stage`, at most `max` iterations from the current
    /// `lambda~`; returns the iterations taken. Leaves `w` stale.
    fn ac_newton(&mut self, stage: f64, max: usize) -> usize {
        let n = 3 * self.k;
        let (mut window_start, mut window_merit) = (0, f64::INFINITY);
        for it in 0..max {
            let size = self.lam_inf().max(1.0);
            let f = self.ac_residual(stage, true);
            let merit = self.ef[..n].iter().map(|x| x * x).sum::<f64>();
            if !merit.is_finite() || f <= DONE * size {
                return it;
            }
            if it == window_start {
                window_merit = merit;
            } else if it >= window_start + WINDOW {
                if merit > 0.5 * window_merit {
                    return it;
                }
                (window_start, window_merit) = (it, merit);
            }
            // Steepest descent of |F|^2 / 2, `J^T F`, before the SVD overwrites `J`.
            for c in 0..n {
                self.etmp[c] = (0..n).map(|r| self.ejac[r * n + c] * self.ef[r]).sum();
            }
            // The Newton step by LU where `J` is safely invertible (the pseudo-inverse's step
            // there, at a tenth of its cost), else the least-norm one.
            self.lu[..n * n].copy_from_slice(&self.ejac[..n * n]);
            if lu_factor(&mut self.lu[..n * n], n, &mut self.piv[..n], PivotRule::Relative(LU_PIVOT)) {
                for c in 0..n {
                    self.edy[c] = -self.ef[c];
                }
                lu_solve(&self.lu[..n * n], n, &self.piv[..n], &mut self.edy[..n]);
            } else {
                svd_jacobi(&mut self.ejac[..n * n], n, n, &mut self.ev[..n * n], &mut self.esig[..n]);
                svd_step(&self.ejac, n, n, &self.ev, &self.esig, CUTOFF, &self.ef, &mut self.edy);
            }
            self.aclam[..n].copy_from_slice(&self.lam[..n]);
            if !self.ac_search(stage, merit, 1e-10, true) {
                for c in 0..n {
                    self.edy[c] = -self.etmp[c];
                }
                if !self.ac_search(stage, merit, 1e-14, false) {
                    return it + 1;
                }
            }
        }
        max
    }

    /// Backtracking along `edy` from `aclam` (step 1, halved down to `t_min`): Armijo's
    /// decrease of `|F|^2` if `armijo`, any decrease otherwise. Leaves the accepted point in
    /// `lambda~` (or `aclam` restored) and `ef` at it; whether a step was accepted.
    fn ac_search(&mut self, stage: f64, merit: f64, t_min: f64, armijo: bool) -> bool {
        let n = 3 * self.k;
        let mut t = 1.0;
        while t >= t_min {
            for c in 0..n {
                self.lam[c] = self.aclam[c] + t * self.edy[c];
            }
            self.ac_residual(stage, false);
            let trial = self.ef[..n].iter().map(|x| x * x).sum::<f64>();
            if trial.is_finite() && if armijo { trial <= (1.0 - 1e-4 * t) * merit } else { trial < merit } {
                return true;
            }
            t *= 0.5;
        }
        self.lam[..n].copy_from_slice(&self.aclam[..n]);
        false
    }

    /// `F` at the current `lambda~` (and `mu` scaled by `stage`) into `ef`, its generalized
    /// Jacobian into `ejac` (row-major) if `jacobian`; updates `w`. Returns `|F|_inf`.
    fn ac_residual(&mut self, stage: f64, jacobian: bool) -> f64 {
        let n = 3 * self.k;
        self.update_w();
        let mut worst = 0.0_f64;
        for i in 0..self.k {
            let a = 3 * i;
            let (rho, mu) = (self.acrho[i], stage * self.mu[i]);
            let l = [self.lam[a], self.lam[a + 1], self.lam[a + 2]];
            let w = [self.w[a], self.w[a + 1], self.w[a + 2]];
            let rn = l[0] - rho * w[0];
            let z = [l[1] - rho * w[1], l[2] - rho * w[2]];
            let radius = mu * rn.max(0.0);
            let nz = z[0].hypot(z[1]);
            let inside = nz <= radius;
            // F_n = rho w_n (pushing) or l_n (released); F_t = rho w_t (inside the disk) or
            // l_t - R z / |z| (on its rim).
            self.ef[a] = if rn > 0.0 { rho * w[0] } else { l[0] };
            let zh = if nz > 0.0 { [z[0] / nz, z[1] / nz] } else { [0.0, 0.0] };
            for t in 0..2 {
                self.ef[a + 1 + t] = if inside { rho * w[1 + t] } else { l[1 + t] - radius * zh[t] };
            }
            worst = self.ef[a..a + 3].iter().fold(worst, |m, x| m.max(x.abs()));
            if !jacobian {
                continue;
            }
            for c in 0..n {
                let g = [self.gt[a * n + c], self.gt[(a + 1) * n + c], self.gt[(a + 2) * n + c]];
                let e = |r: usize| if c == a + r { 1.0 } else { 0.0 };
                // d r_n and d z (rows of the identity minus rho G~).
                let drn = e(0) - rho * g[0];
                let dz = [e(1) - rho * g[1], e(2) - rho * g[2]];
                self.ejac[a * n + c] = if rn > 0.0 { rho * g[0] } else { e(0) };
                if inside {
                    self.ejac[(a + 1) * n + c] = rho * g[1];
                    self.ejac[(a + 2) * n + c] = rho * g[2];
                } else {
                    // d (R z / |z|) = R / |z| (I - zh zh^T) dz + zh dR, dR = mu d r_n (r_n > 0).
                    let dr = if rn > 0.0 { mu * drn } else { 0.0 };
                    let along = zh[0] * dz[0] + zh[1] * dz[1];
                    let q = if nz > 0.0 { radius / nz } else { 0.0 };
                    for t in 0..2 {
                        let dproj = q * (dz[t] - zh[t] * along) + zh[t] * dr;
                        self.ejac[(a + 1 + t) * n + c] = e(1 + t) - dproj;
                    }
                }
            }
        }
        worst
    }
}
