//! Action models: one knot of an optimal control problem, `x+ = f(x, u)` with a cost
//! `l(x, u)`, and their derivatives, on a state manifold with `integrate` / `difference`
//! (DESIGN 5; Crocoddyl's `ActionModelAbstract`). Derivatives are in tangent coordinates:
//! `fx = d x+ / d dx` (ndx x ndx), `fu` (ndx x nu), and the cost's gradient and Gauss-Newton
//! Hessian blocks `lx, lu, lxx, luu, lux`.
//!
//! [`Lqr`] is the linear-quadratic model (Euclidean state), the reference the solver is checked
//! against; the contact simulator is the other implementation (`ocp::contact`).

use nalgebra::{DMatrix, DVector};
use std::any::Any;

/// A model's own per-knot scratch in [`ActionData::extra`]: any `Clone + Send` type (so that a
/// solver and its knots' data can be cloned, e.g. to replay one MPC replan from a snapshot);
/// `data.extra.as_any_mut().downcast_mut::<T>()` reaches it.
pub trait ActionExtra: Any + Send {
    fn clone_box(&self) -> Box<dyn ActionExtra>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Send + Clone> ActionExtra for T {
    fn clone_box(&self) -> Box<dyn ActionExtra> {
        Box::new(self.clone())
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Per-knot results and the model's own scratch. Preallocated by [`ActionModel::create_data`].
pub struct ActionData {
    /// Next state (representation, `nx`) and running cost.
    pub x_next: DVector<f64>,
    pub cost: f64,
    pub fx: DMatrix<f64>,
    pub fu: DMatrix<f64>,
    pub lx: DVector<f64>,
    pub lu: DVector<f64>,
    pub lxx: DMatrix<f64>,
    pub luu: DMatrix<f64>,
    /// `d^2 l / du dx` (nu x ndx).
    pub lux: DMatrix<f64>,
    /// Whether the last `calc` produced a usable result (a failed simulator step does not).
    pub ok: bool,
    /// Whether the last `calc_diff` took its derivatives from a fallback model (the contact
    /// model's other sensitivity when the chosen one's linear system failed), and whether they
    /// came from a backward solve that did not converge. Solvers count both per run.
    pub fallback: bool,
    pub unconverged: bool,
    /// Model-specific workspace.
    pub extra: Box<dyn ActionExtra>,
}

// Written out rather than derived: a derive needs `Box<dyn ActionExtra>: Clone`, and with that
// the box itself would be an `ActionExtra` (the blanket impl), so `extra.as_any_mut()` would
// hand back the box instead of the model's scratch.
impl Clone for ActionData {
    fn clone(&self) -> Self {
        Self {
            x_next: self.x_next.clone(),
            cost: self.cost,
            fx: self.fx.clone(),
            fu: self.fu.clone(),
            lx: self.lx.clone(),
            lu: self.lu.clone(),
            lxx: self.lxx.clone(),
            luu: self.luu.clone(),
            lux: self.lux.clone(),
            ok: self.ok,
            fallback: self.fallback,
            unconverged: self.unconverged,
            extra: self.extra.clone_box(),
        }
    }
}

impl ActionData {
    pub fn new(nx: usize, ndx: usize, nu: usize, extra: Box<dyn ActionExtra>) -> Self {
        Self {
            x_next: DVector::zeros(nx),
            cost: 0.0,
            fx: DMatrix::zeros(ndx, ndx),
            fu: DMatrix::zeros(ndx, nu),
            lx: DVector::zeros(ndx),
            lu: DVector::zeros(nu),
            lxx: DMatrix::zeros(ndx, ndx),
            luu: DMatrix::zeros(nu, nu),
            lux: DMatrix::zeros(nu, ndx),
            ok: true,
            fallback: false,
            unconverged: false,
            extra,
        }
    }
}

/// One knot of a shooting problem. A terminal model is called with `u` empty and only its cost
/// and cost derivatives in `x` are used.
pub trait ActionModel: Send + Sync {
    /// Dimension of the state representation (e.g. `nq + nv`).
    fn nx(&self) -> usize;
    /// Dimension of the state tangent space (e.g. `2 nv`).
    fn ndx(&self) -> usize;
    fn nu(&self) -> usize;
    /// Optional control box `[lower, upper]` (each `nu`).
    fn control_bounds(&self) -> Option<(&DVector<f64>, &DVector<f64>)> {
        None
    }
    fn create_data(&self) -> ActionData;
    /// `x_next` and `cost` at `(x, u)`.
    fn calc(&self, data: &mut ActionData, x: &DVector<f64>, u: &DVector<f64>);
    /// `calc` plus all derivatives at `(x, u)`.
    fn calc_diff(&self, data: &mut ActionData, x: &DVector<f64>, u: &DVector<f64>);
    /// Whether `calc`'s cost is never negative, at any `(x, u)`. A forward pass of DDP may then
    /// stop a trial as soon as its running sum is already too high (`ddp::Settings::trial_abort`).
    /// Default `false`.
    fn nonnegative_cost(&self) -> bool {
        false
    }
    /// Whether `calc` depends on `(x, u)` alone, not on what `data` held before (a warm start
    /// from the knot's previous solution would make it depend on that). DDP on more than one
    /// thread may then differentiate the initial rollout's knots while it goes on, and roll out
    /// a line search's next trial into other buffers while the current one runs (`ddp` module
    /// docs, "Threads"), with the same results. Default `false`.
    fn history_free(&self) -> bool {
        false
    }
    /// `x (+) dx` on the state manifold.
    fn integrate(&self, x: &DVector<f64>, dx: &DVector<f64>, out: &mut DVector<f64>);
    /// `x1 (-) x0`: the tangent `dx` with `x0 (+) dx = x1`.
    fn difference(&self, x0: &DVector<f64>, x1: &DVector<f64>, out: &mut DVector<f64>);
}

/// Linear dynamics `x+ = A x + B u + c` with the cost
/// `0.5 x^T Q x + q^T x + 0.5 u^T R u + r^T u + u^T N x` (Euclidean state).
#[derive(Clone, Debug)]
pub struct Lqr {
    pub a: DMatrix<f64>,
    pub b: DMatrix<f64>,
    pub c: DVector<f64>,
    pub q: DMatrix<f64>,
    pub q_lin: DVector<f64>,
    pub r: DMatrix<f64>,
    pub r_lin: DVector<f64>,
    /// `nu x nx`.
    pub n: DMatrix<f64>,
}

impl ActionModel for Lqr {
    fn nx(&self) -> usize {
        self.a.nrows()
    }
    fn ndx(&self) -> usize {
        self.a.nrows()
    }
    fn nu(&self) -> usize {
        self.b.ncols()
    }
    fn create_data(&self) -> ActionData {
        ActionData::new(self.nx(), self.ndx(), self.nu(), Box::new(()))
    }
    fn history_free(&self) -> bool {
        true
    }
    fn calc(&self, d: &mut ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        d.x_next = &self.a * x + &self.c;
        if self.nu() > 0 && !u.is_empty() {
            d.x_next += &self.b * u;
            d.cost = 0.5 * x.dot(&(&self.q * x))
                + self.q_lin.dot(x)
                + 0.5 * u.dot(&(&self.r * u))
                + self.r_lin.dot(u)
                + u.dot(&(&self.n * x));
        } else {
            d.cost = 0.5 * x.dot(&(&self.q * x)) + self.q_lin.dot(x);
        }
        d.ok = true;
    }
    fn calc_diff(&self, d: &mut ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        self.calc(d, x, u);
        d.fx.copy_from(&self.a);
        d.fu.copy_from(&self.b);
        d.lxx.copy_from(&self.q);
        d.lx = &self.q * x + &self.q_lin;
        if self.nu() > 0 && !u.is_empty() {
            d.lx += self.n.tr_mul(u);
            d.lu = &self.r * u + &self.r_lin + &self.n * x;
            d.luu.copy_from(&self.r);
            d.lux.copy_from(&self.n);
        }
    }
    fn integrate(&self, x: &DVector<f64>, dx: &DVector<f64>, out: &mut DVector<f64>) {
        *out = x + dx;
    }
    fn difference(&self, x0: &DVector<f64>, x1: &DVector<f64>, out: &mut DVector<f64>) {
        *out = x1 - x0;
    }
}
