//! DDP / iLQR on a shooting problem (DESIGN 5): Gauss-Newton backward pass (no second-order
//! dynamics terms), Levenberg-Marquardt regularization of `Q_uu`, backtracking line search on
//! the actual-to-expected improvement ratio, optional control box limits (Tassa, Mansard,
//! Todorov, "Control-limited differential dynamic programming", ICRA 2014).
//!
//! # Backward pass
//! With `V_x`, `V_xx` of the next knot (tangent coordinates):
//!
//! ```text
//! Q_x = l_x + f_x^T V_x          Q_u = l_u + f_u^T V_x
//! Q_xx = l_xx + f_x^T V_xx f_x   Q_uu = l_uu + f_u^T V_xx f_u + mu I   Q_ux = l_ux + f_u^T V_xx f_x
//! k = argmin_{lo <= u + k <= hi} 0.5 k^T Q_uu k + Q_u^T k       (box QP; Q_uu^-1 Q_u without bounds)
//! K = -Q_uu,ff^-1 Q_ux,f  (free rows; clamped rows 0)
//! V_x = Q_x + K^T Q_uu k + K^T Q_u + Q_ux^T k
//! V_xx = Q_xx + K^T Q_uu K + K^T Q_ux + Q_ux^T K
//! ```
//!
//! A `Q_uu` that is not positive definite raises `mu` (x `mu_factor`) and restarts the pass.
//!
//! # Forward pass
//! `x^_0 = x_0`, `u^_t = clamp(u_t + alpha k_t + K_t (x^_t (-) x_t))`, `x^_{t+1} = f(x^_t, u^_t)`;
//! the step is accepted when the actual improvement is at least `armijo` times the expected
//! `alpha sum k^T Q_u + alpha^2 / 2 sum k^T Q_uu k` (in absolute value). Accepted steps lower `mu`
//! (/ `mu_factor`, floored at `mu_min`), rejected line searches raise it. Converged when the
//! expected improvement of a full step is below `tolerance` (absolute, cost units).

use super::action::{ActionData, ActionModel};
use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A shooting problem: initial state, running models (one per knot) and a terminal model.
pub struct ShootingProblem {
    pub x0: DVector<f64>,
    pub running: Vec<Arc<dyn ActionModel>>,
    pub terminal: Arc<dyn ActionModel>,
}

impl ShootingProblem {
    pub fn horizon(&self) -> usize {
        self.running.len()
    }
}

/// Solver settings; check with [`Settings::validate`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Iteration limit. Default 100.
    pub max_iterations: usize,
    /// Converged when the expected improvement of a full step is below this. Default 1e-9.
    pub tolerance: f64,
    /// Initial, smallest and largest Levenberg-Marquardt regularization, and its factor.
    pub mu_init: f64,
    pub mu_min: f64,
    pub mu_max: f64,
    pub mu_factor: f64,
    /// Smallest line-search step before the search fails. Default 1/1024.
    pub alpha_min: f64,
    /// Accepted when actual >= armijo * expected improvement. Default 1e-4.
    pub armijo: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_iterations: 100,
            tolerance: 1e-9,
            mu_init: 1e-8,
            mu_min: 1e-10,
            mu_max: 1e8,
            mu_factor: 10.0,
            alpha_min: 1.0 / 1024.0,
            armijo: 1e-4,
        }
    }
}

impl Settings {
    pub fn validate(&self) -> Result<(), String> {
        let ok = self.max_iterations >= 1
            && self.tolerance >= 0.0
            && self.mu_min >= 0.0
            && self.mu_init >= self.mu_min
            && self.mu_max >= self.mu_init
            && self.mu_factor > 1.0
            && self.alpha_min > 0.0
            && self.alpha_min <= 1.0
            && self.armijo >= 0.0
            && self.armijo < 1.0
            && [self.tolerance, self.mu_init, self.mu_max, self.mu_factor, self.alpha_min]
                .iter()
                .all(|x| x.is_finite());
        if ok {
            Ok(())
        } else {
            Err(format!("invalid DDP settings: {self:?}"))
        }
    }
}

/// How a solve ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Converged,
    MaxIterations,
    /// `mu` exceeded `mu_max` (the backward pass or the line search kept failing).
    RegularizationLimit,
    /// No step length down to `alpha_min` improved the cost, even at the largest `mu`.
    LineSearchFailed,
    Cancelled,
    /// The initial rollout or the derivatives were not finite (or a model reported failure).
    NonFinite,
    InvalidInput,
}

/// One iteration's report.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationInfo {
    pub iteration: usize,
    pub cost: f64,
    /// Expected and actual improvement of the accepted step.
    pub expected: f64,
    pub actual: f64,
    pub mu: f64,
    pub alpha: f64,
    /// Wall time of the iteration (s).
    pub time: f64,
}

/// What a solve did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    pub status: Status,
    pub iterations: usize,
    pub cost: f64,
    pub history: Vec<IterationInfo>,
}

/// The DDP solver with its trajectory and preallocated per-knot data.
pub struct Ddp {
    pub problem: ShootingProblem,
    pub settings: Settings,
    /// States (T + 1, representation) and controls (T).
    pub xs: Vec<DVector<f64>>,
    pub us: Vec<DVector<f64>>,
    data: Vec<ActionData>,
    terminal_data: ActionData,
    k: Vec<DVector<f64>>,
    gains: Vec<DMatrix<f64>>,
    xs_try: Vec<DVector<f64>>,
    us_try: Vec<DVector<f64>>,
    try_data: Vec<ActionData>,
    try_terminal: ActionData,
    /// Expected improvement terms `sum k^T Q_u`, `sum k^T Q_uu k` of the last backward pass.
    d1: f64,
    d2: f64,
    pub mu: f64,
}

impl Ddp {
    pub fn new(problem: ShootingProblem, settings: Settings) -> Self {
        let t = problem.horizon();
        let data: Vec<ActionData> = problem.running.iter().map(|m| m.create_data()).collect();
        let try_data: Vec<ActionData> = problem.running.iter().map(|m| m.create_data()).collect();
        let terminal_data = problem.terminal.create_data();
        let try_terminal = problem.terminal.create_data();
        let mut xs = vec![problem.x0.clone(); t + 1];
        if t > 0 {
            xs.truncate(t + 1);
        }
        let us: Vec<DVector<f64>> = problem.running.iter().map(|m| DVector::zeros(m.nu())).collect();
        let k = us.clone();
        let gains = problem.running.iter().map(|m| DMatrix::zeros(m.nu(), m.ndx())).collect();
        Self {
            xs_try: xs.clone(),
            us_try: us.clone(),
            xs,
            us,
            data,
            terminal_data,
            k,
            gains,
            try_data,
            try_terminal,
            d1: 0.0,
            d2: 0.0,
            mu: settings.mu_init,
            problem,
            settings,
        }
    }

    /// The total cost of the current trajectory (after a rollout or a solve).
    pub fn cost(&self) -> f64 {
        self.data.iter().map(|d| d.cost).sum::<f64>() + self.terminal_data.cost
    }

    /// Feedback gains of the last backward pass (for MPC between solves).
    pub fn gains(&self) -> &[DMatrix<f64>] {
        &self.gains
    }

    /// Solves from the initial guess `us` (or the current controls if `None`; states are
    /// rolled out from `x0`). `cancel` is polled between passes.
    pub fn solve(&mut self, us: Option<&[DVector<f64>]>, cancel: Option<&AtomicBool>) -> Info {
        self.solve_observed(us, cancel, &mut |_| {})
    }

    /// [`Ddp::solve`] that hands every accepted iteration's report to `observe` as it happens
    /// (progress output, or a channel to a caller on another thread).
    pub fn solve_observed(
        &mut self,
        us: Option<&[DVector<f64>]>,
        cancel: Option<&AtomicBool>,
        observe: &mut dyn FnMut(&IterationInfo),
    ) -> Info {
        let mut info = Info { status: Status::MaxIterations, iterations: 0, cost: f64::NAN, history: vec![] };
        if self.settings.validate().is_err() {
            info.status = Status::InvalidInput;
            return info;
        }
        if let Some(us) = us {
            if us.len() != self.us.len() || us.iter().zip(&self.us).any(|(a, b)| a.len() != b.len()) {
                info.status = Status::InvalidInput;
                return info;
            }
            for (d, s) in self.us.iter_mut().zip(us) {
                d.copy_from(s);
            }
        }
        self.mu = self.settings.mu_init;
        // Initial rollout (clamped to the bounds).
        let problem = &self.problem;
        for (u, m) in self.us.iter_mut().zip(&problem.running) {
            clamp(m.as_ref(), u);
        }
        let ok = rollout(problem, &self.us, &mut self.xs, &mut self.data, &mut self.terminal_data);
        info.cost = self.cost();
        if !ok || !info.cost.is_finite() {
            info.status = Status::NonFinite;
            return info;
        }
        for it in 0..self.settings.max_iterations {
            let started = Instant::now();
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                info.status = Status::Cancelled;
                return info;
            }
            // Derivatives along the current trajectory.
            let t = self.problem.horizon();
            for i in 0..t {
                self.problem.running[i].calc_diff(&mut self.data[i], &self.xs[i], &self.us[i]);
            }
            self.problem.terminal.calc_diff(&mut self.terminal_data, &self.xs[t], &DVector::zeros(0));
            if !self.data.iter().all(|d| d.ok && finite_data(d)) || !finite_data(&self.terminal_data) {
                info.status = Status::NonFinite;
                return info;
            }
            // Backward pass, raising mu until every Q_uu is positive definite.
            loop {
                if self.backward() {
                    break;
                }
                self.mu = (self.mu * self.settings.mu_factor).max(self.settings.mu_min.max(1e-12));
                if self.mu > self.settings.mu_max {
                    info.status = Status::RegularizationLimit;
                    return info;
                }
            }
            let expected_full = -(self.d1 + 0.5 * self.d2);
            if expected_full.abs() <= self.settings.tolerance {
                info.status = Status::Converged;
                info.iterations = it;
                return info;
            }
            // Line search.
            let cost0 = self.cost();
            let mut alpha = 1.0;
            let mut accepted = None;
            while alpha >= self.settings.alpha_min {
                let expected = -(alpha * self.d1 + 0.5 * alpha * alpha * self.d2);
                if let Some(cost) = self.forward(alpha) {
                    let actual = cost0 - cost;
                    if actual.is_finite()
                        && (actual >= self.settings.armijo * expected)
                        && actual >= -1e-14 * cost0.abs()
                    {
                        accepted = Some((alpha, expected, actual, cost));
                        break;
                    }
                }
                alpha *= 0.5;
            }
            match accepted {
                Some((alpha, expected, actual, cost)) => {
                    std::mem::swap(&mut self.xs, &mut self.xs_try);
                    std::mem::swap(&mut self.us, &mut self.us_try);
                    std::mem::swap(&mut self.data, &mut self.try_data);
                    std::mem::swap(&mut self.terminal_data, &mut self.try_terminal);
                    info.cost = cost;
                    info.iterations = it + 1;
                    let report = IterationInfo {
                        iteration: it + 1,
                        cost,
                        expected,
                        actual,
                        mu: self.mu,
                        alpha,
                        time: started.elapsed().as_secs_f64(),
                    };
                    observe(&report);
                    info.history.push(report);
                    if alpha == 1.0 {
                        self.mu = (self.mu / self.settings.mu_factor).max(self.settings.mu_min);
                    }
                    // A full step whose improvement is within tolerance: done.
                    if actual.abs() <= self.settings.tolerance && alpha == 1.0 {
                        info.status = Status::Converged;
                        return info;
                    }
                }
                None => {
                    self.mu = (self.mu * self.settings.mu_factor).max(1e-12);
                    if self.mu > self.settings.mu_max {
                        info.status = Status::LineSearchFailed;
                        info.iterations = it + 1;
                        return info;
                    }
                }
            }
        }
        info.status = Status::MaxIterations;
        info.iterations = self.settings.max_iterations;
        info
    }

    /// Gauss-Newton backward pass at the current `mu`; `false` if a `Q_uu` is not positive
    /// definite.
    fn backward(&mut self) -> bool {
        let t = self.problem.horizon();
        let mut vx = self.terminal_data.lx.clone();
        let mut vxx = self.terminal_data.lxx.clone();
        self.d1 = 0.0;
        self.d2 = 0.0;
        for i in (0..t).rev() {
            let d = &self.data[i];
            let m = &self.problem.running[i];
            let nu = m.nu();
            let qx = &d.lx + d.fx.tr_mul(&vx);
            let qu = &d.lu + d.fu.tr_mul(&vx);
            // Explicit transposes: nalgebra's `tr_mul` is a plain dot-product loop, while `*`
            // on dynamic matrices goes through matrixmultiply's packed kernels (several times
            // faster at 36 x 36).
            let fxt = d.fx.transpose();
            let fut = d.fu.transpose();
            let vxx_fx = &vxx * &d.fx;
            let vxx_fu = &vxx * &d.fu;
            let qxx = &d.lxx + &fxt * &vxx_fx;
            let mut quu = &d.luu + &fut * &vxx_fu;
            let qux = &d.lux + &fut * &vxx_fx;
            for j in 0..nu {
                quu[(j, j)] += self.mu;
            }
            // Box QP for k, free set for K.
            let (k, free) = match m.control_bounds() {
                Some((lo, hi)) => {
                    let lower = lo - &self.us[i];
                    let upper = hi - &self.us[i];
                    match super::boxqp::solve(&quu, &qu, &lower, &upper, &self.k[i]) {
                        Some(r) => r,
                        None => return false,
                    }
                }
                None => match quu.clone().cholesky() {
                    Some(ch) => (-ch.solve(&qu), vec![true; nu]),
                    None => return false,
                },
            };
            let mut gain = DMatrix::zeros(nu, m.ndx());
            let idx: Vec<usize> = (0..nu).filter(|&j| free[j]).collect();
            if !idx.is_empty() {
                let qff = DMatrix::from_fn(idx.len(), idx.len(), |a, b| quu[(idx[a], idx[b])]);
                let Some(ch) = qff.cholesky() else { return false };
                let qfx = DMatrix::from_fn(idx.len(), m.ndx(), |a, c| qux[(idx[a], c)]);
                let kf = -ch.solve(&qfx);
                for (a, &j) in idx.iter().enumerate() {
                    gain.row_mut(j).copy_from(&kf.row(a));
                }
            }
            let quu_k = &quu * &k;
            self.d1 += k.dot(&qu);
            self.d2 += k.dot(&quu_k);
            let gt = gain.transpose();
            vx = &qx + &gt * &quu_k + &gt * &qu + qux.tr_mul(&k);
            let kt_qux = &gt * &qux;
            vxx = &qxx + (&gt * &quu) * &gain + &kt_qux + kt_qux.transpose();
            vxx = 0.5 * (&vxx + vxx.transpose());
            self.k[i] = k;
            self.gains[i] = gain;
        }
        self.d1.is_finite() && self.d2.is_finite()
    }

    /// Forward pass with step `alpha` into the trial buffers; the trial cost, or `None` if a
    /// model failed or produced non-finite numbers.
    fn forward(&mut self, alpha: f64) -> Option<f64> {
        let p = &self.problem;
        let t = p.horizon();
        self.xs_try[0].copy_from(&p.x0);
        let mut dx = DVector::zeros(0);
        let mut cost = 0.0;
        for i in 0..t {
            let m = &p.running[i];
            m.difference(&self.xs[i], &self.xs_try[i], &mut dx);
            let mut u = &self.us[i] + alpha * &self.k[i] + &self.gains[i] * &dx;
            clamp(m.as_ref(), &mut u);
            self.us_try[i] = u;
            m.calc(&mut self.try_data[i], &self.xs_try[i], &self.us_try[i]);
            let d = &self.try_data[i];
            if !d.ok || !d.cost.is_finite() || !d.x_next.iter().all(|x| x.is_finite()) {
                return None;
            }
            cost += d.cost;
            self.xs_try[i + 1] = d.x_next.clone();
        }
        p.terminal.calc(&mut self.try_terminal, &self.xs_try[t], &DVector::zeros(0));
        cost += self.try_terminal.cost;
        cost.is_finite().then_some(cost)
    }
}

fn clamp(m: &dyn ActionModel, u: &mut DVector<f64>) {
    if let Some((lo, hi)) = m.control_bounds() {
        for j in 0..u.len() {
            u[j] = u[j].clamp(lo[j], hi[j]);
        }
    }
}

fn finite_data(d: &ActionData) -> bool {
    d.cost.is_finite()
        && d.fx.iter().chain(d.fu.iter()).chain(d.lx.iter()).chain(d.lu.iter()).all(|x| x.is_finite())
        && d.lxx.iter().chain(d.luu.iter()).chain(d.lux.iter()).all(|x| x.is_finite())
}

/// Rolls `us` out from `x0` into `xs`, filling the data's costs; `false` if a model failed.
fn rollout(
    p: &ShootingProblem,
    us: &[DVector<f64>],
    xs: &mut [DVector<f64>],
    data: &mut [ActionData],
    terminal: &mut ActionData,
) -> bool {
    xs[0].copy_from(&p.x0);
    for i in 0..p.horizon() {
        p.running[i].calc(&mut data[i], &xs[i], &us[i]);
        if !data[i].ok {
            return false;
        }
        xs[i + 1] = data[i].x_next.clone();
    }
    p.terminal.calc(terminal, &xs[p.horizon()], &DVector::zeros(0));
    xs.iter().all(|x| x.iter().all(|v| v.is_finite()))
}
