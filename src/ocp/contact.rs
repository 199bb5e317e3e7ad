//! The contact simulator as an action model: `x = (q, v)`, `u` = actuator torques, one step of
//! the hard-contact simulator per knot, with the transition Jacobians of a chosen contact
//! sensitivity (DESIGN 3) as `f_x`, `f_u` (at the point of the last `calc` the step is not taken
//! twice: its forward solution is reused). No contact schedule: which feet touch is whatever
//! the simulator decides along the trajectory (contact-implicit). A knot whose chosen
//! sensitivity fails on a step that did advance (`SingularContactSystem`, `BackwardFailed`)
//! (or that returns non-finite Jacobians) takes its `f_x`, `f_u` from the other family instead
//! (exact <-> relaxed with kappa 1e-4, delta 1e-3), then from the relaxed one with kappa and
//! delta 1e-2, so one degenerate knot does not stop the solver.
//!
//! # Cost (residual form, Gauss-Newton Hessian `J^T W J`)
//!
//! ```text
//! l(x, u) = 0.5 sum_a w_p,a (p - p*)_a^2 + 0.5 sum_a w_o,a r_a^2        base pose, r = log3(R*^T R)
//!         + 0.5 w_q sum_j (q_j - q*_j)^2 + 0.5 w_v sum_j v_j^2          joint posture, joint velocity
//!         + 0.5 w_b |v_base|^2 + 0.5 w_u |u|^2                        base velocity, effort
//!         + 0.5 w_r sum_j (max(0, q_j - (hi_j - m)) + min(0, q_j - (lo_j + m)))^2   joint range
//! ```
//!
//! The joint range term (off unless `w_r > 0`) stands in for the position limits the simulator
//! does not enforce: `[lo_j, hi_j]` is the joint's URDF range and `m` a margin, so the penalty
//! starts `m` inside the range. It is the quadratic barrier of Crocoddyl's
//! `ActivationModelQuadraticBarrier` on the joint coordinates; piecewise quadratic, so its
//! Gauss-Newton Hessian `w_r` (inside the active band) is exact.
//!
//! With the Pinocchio tangent of the free-flyer (body-frame `(dp, dtheta)`): `dp = R dp_body`,
//! `dr = J_r^-1(r) dtheta` (the right Jacobian of SO(3), inverse in closed form). A terminal model
//! uses the state terms only, scaled by `terminal_weight`.

use super::action::{ActionData, ActionModel};
use crate::contact::Terrain;
use crate::diff::{
    transition_jacobians, transition_jacobians_after_step, Sensitivity, TransitionStatus, TransitionWorkspace,
};
use crate::linalg::zero_dense;
use crate::model::configuration::free_flyer_placement;
use crate::model::{difference, integrate, JointKind, Model};
use crate::sim::{step, StepWorkspace};
use crate::sim::{StepInfo, StepSettings};
use nalgebra::{DMatrix, DVector, Matrix3, Vector3};
use std::sync::Arc;

/// Weights and targets of [`ContactAction`]'s cost (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct PoseCost {
    pub base_position: Vector3<f64>,
    pub base_rotation: Matrix3<f64>,
    pub w_position: Vector3<f64>,
    pub w_orientation: Vector3<f64>,
    /// Joint targets (nq; free-flyer entries unused).
    pub posture: DVector<f64>,
    pub w_posture: f64,
    pub w_joint_velocity: f64,
    pub w_base_velocity: f64,
    pub w_control: f64,
    /// Joint range penalty weight (`0`: off) and the margin inside the URDF range where it
    /// starts (module docs).
    pub w_joint_range: f64,
    pub joint_range_margin: f64,
}

/// The optional foot-clearance term (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FootClearance {
    /// `w_c` (s^2/m^2 units of cost).
    pub weight: f64,
    /// `s`: the height over which the penalty fades (m).
    pub scale: f64,
}

/// One knot: a simulator step and the pose cost.
pub struct ContactAction {
    pub model: Arc<Model>,
    pub terrain: Terrain,
    pub settings: StepSettings,
    pub sensitivity: Sensitivity,
    pub cost: PoseCost,
    /// A terminal knot: no step, state cost times this weight.
    pub terminal: Option<f64>,
    /// Foot clearance term; `None` (the default of [`ContactAction::new`]) leaves it out.
    pub clearance: Option<FootClearance>,
    /// Start each contact solve from this knot's previous solution instead of cold (`false`,
    /// the default of [`ContactAction::new`]): fewer interior-point iterations, but a plan is
    /// then reproduced by replaying its controls only to within the solver tolerance (see
    /// `calc`). For MPC, whose plans are never replayed.
    pub warm_start: bool,
    lower: DVector<f64>,
    upper: DVector<f64>,
}

#[derive(Clone)]
struct Work {
    ws: StepWorkspace,
    tw: TransitionWorkspace,
    a: DMatrix<f64>,
    b: DMatrix<f64>,
    tau_ext: DVector<f64>,
    /// Kinematics workspace and the 3 x nv point Jacobian and velocity derivative of the
    /// foot clearance term.
    data: crate::model::Data,
    jac: DMatrix<f64>,
    dvdq: DMatrix<f64>,
    /// The last `calc`'s `(x, u)` and step report: its forward solution is still in `ws` and
    /// `tw.q_next`, `tw.v_next`, so `calc_diff` at the same point does not step again.
    last: Option<(DVector<f64>, DVector<f64>, StepInfo)>,
}

impl ContactAction {
    pub fn new(
        model: Arc<Model>,
        terrain: Terrain,
        settings: StepSettings,
        sensitivity: Sensitivity,
        cost: PoseCost,
        terminal: Option<f64>,
    ) -> Self {
        let lower = DVector::from_iterator(model.nu, model.effort_limits.iter().map(|l| -l));
        let upper = DVector::from_iterator(model.nu, model.effort_limits.iter().copied());
        Self { model, terrain, settings, sensitivity, cost, terminal, clearance: None, warm_start: false, lower, upper }
    }

    /// The foot clearance cost at `x` (module docs), added to `grad` / `hess` if given. Uses
    /// `work`'s own kinematics buffers.
    fn clearance_cost(
        &self,
        work: &mut Work,
        x: &DVector<f64>,
        grad: Option<(&mut DVector<f64>, &mut DMatrix<f64>)>,
    ) -> f64 {
        let Some(c) = self.clearance else { return 0.0 };
        let m = &*self.model;
        let (nq, nv) = (m.nq, m.nv);
        let (q, v) = (&x.as_slice()[..nq], &x.as_slice()[nq..]);
        crate::dynamics::forward_kinematics(m, &mut work.data, q, None);
        let mut f = 0.0;
        let mut gh = grad;
        for cp in m.contact_points.iter().filter(|cp| cp.name.ends_with("foot")) {
            let centre = work.data.o_m_i[cp.body].act_point(&cp.position);
            crate::dynamics::point_jacobian(m, &work.data.o_m_i, cp.body, &centre, &mut work.jac);
            let vel = &work.jac * x.rows(nq, nv);
            let z = centre.z - cp.radius;
            let e = (-z / c.scale).exp();
            f += 0.5 * c.weight * e * (vel[0] * vel[0] + vel[1] * vel[1]);
            if let Some((g, h)) = gh.as_mut() {
                crate::dynamics::kinematics_derivatives::point_velocity_derivative(
                    m,
                    &work.data.o_m_i,
                    cp.body,
                    &centre,
                    v,
                    &mut work.dvdq,
                );
                let sq = (c.weight * e).sqrt();
                // Residual rows a = x, y: [dr/dq, dr/dv] (1 x 2nv).
                for a in 0..2 {
                    let r = sq * vel[a];
                    let mut row = DVector::zeros(2 * nv);
                    for j in 0..nv {
                        row[j] = sq * (work.dvdq[(a, j)] - vel[a] * work.jac[(2, j)] / (2.0 * c.scale));
                        row[nv + j] = sq * work.jac[(a, j)];
                    }
                    g.axpy(r, &row, 1.0);
                    h.ger(1.0, &row, &row, 1.0);
                }
            }
        }
        f
    }

    /// State cost and, if asked, its tangent gradient and Gauss-Newton Hessian.
    fn state_cost(&self, x: &DVector<f64>, grad: Option<(&mut DVector<f64>, &mut DMatrix<f64>)>) -> f64 {
        let m = &*self.model;
        let (nq, nv) = (m.nq, m.nv);
        let q = x.rows(0, nq);
        let v = x.rows(nq, nv);
        let c = &self.cost;
        let mut f = 0.0;
        let mut gh = grad;
        if let Some((g, h)) = gh.as_mut() {
            g.fill(0.0);
            zero_dense(h);
        }
        for j in &m.joints {
            match j.kind {
                JointKind::FreeFlyer => {
                    let mq = free_flyer_placement(&q.as_slice()[j.idx_q..j.idx_q + 7]);
                    let ep = mq.trans - c.base_position;
                    let r = crate::spatial::lie::log3(&(c.base_rotation.transpose() * mq.rot));
                    for a in 0..3 {
                        f += 0.5 * c.w_position[a] * ep[a] * ep[a] + 0.5 * c.w_orientation[a] * r[a] * r[a];
                    }
                    let vb = v.rows(j.idx_v, 6);
                    f += 0.5 * c.w_base_velocity * vb.norm_squared();
                    if let Some((g, h)) = gh.as_mut() {
                        let iv = j.idx_v;
                        // Position residual Jacobian R (cols iv..iv+3), orientation Jr^-1(r).
                        let jp = mq.rot;
                        let jo = so3_right_jacobian_inv(&r);
                        let wp = Matrix3::from_diagonal(&c.w_position);
                        let wo = Matrix3::from_diagonal(&c.w_orientation);
                        let gp = jp.transpose() * (wp * ep);
                        let go = jo.transpose() * (wo * r);
                        g.rows_mut(iv, 3).add_assign(&gp);
                        g.rows_mut(iv + 3, 3).add_assign(&go);
                        h.view_mut((iv, iv), (3, 3)).add_assign(&(jp.transpose() * wp * jp));
                        h.view_mut((iv + 3, iv + 3), (3, 3)).add_assign(&(jo.transpose() * wo * jo));
                        for k in 0..6 {
                            g[nv + iv + k] += c.w_base_velocity * vb[k];
                            h[(nv + iv + k, nv + iv + k)] += c.w_base_velocity;
                        }
                    }
                }
                _ => {
                    let e = q[j.idx_q] - c.posture[j.idx_q];
                    let w = v[j.idx_v];
                    f += 0.5 * c.w_posture * e * e + 0.5 * c.w_joint_velocity * w * w;
                    if let Some((g, h)) = gh.as_mut() {
                        g[j.idx_v] += c.w_posture * e;
                        h[(j.idx_v, j.idx_v)] += c.w_posture;
                        g[nv + j.idx_v] += c.w_joint_velocity * w;
                        h[(nv + j.idx_v, nv + j.idx_v)] += c.w_joint_velocity;
                    }
                    if c.w_joint_range > 0.0 {
                        let (lo, hi) = (j.limits.lower + c.joint_range_margin, j.limits.upper - c.joint_range_margin);
                        let qj = q[j.idx_q];
                        let r = if qj > hi {
                            qj - hi
                        } else if qj < lo {
                            qj - lo
                        } else {
                            0.0
                        };
                        if r != 0.0 {
                            f += 0.5 * c.w_joint_range * r * r;
                            if let Some((g, h)) = gh.as_mut() {
                                g[j.idx_v] += c.w_joint_range * r;
                                h[(j.idx_v, j.idx_v)] += c.w_joint_range;
                            }
                        }
                    }
                }
            }
        }
        f
    }
}

use std::ops::AddAssign;

pub use crate::spatial::lie::so3_right_jacobian_inv;

impl ActionModel for ContactAction {
    fn nx(&self) -> usize {
        self.model.nq + self.model.nv
    }
    fn ndx(&self) -> usize {
        2 * self.model.nv
    }
    fn nu(&self) -> usize {
        if self.terminal.is_some() {
            0
        } else {
            self.model.nu
        }
    }
    fn control_bounds(&self) -> Option<(&DVector<f64>, &DVector<f64>)> {
        (self.terminal.is_none()).then_some((&self.lower, &self.upper))
    }
    /// Without `warm_start` each contact solve starts cold (see `calc`), so a knot's step
    /// depends on `(x, u)` alone.
    fn history_free(&self) -> bool {
        !self.warm_start
    }
    fn create_data(&self) -> ActionData {
        let m = &*self.model;
        let work = Work {
            ws: StepWorkspace::new(m),
            tw: TransitionWorkspace::new(m),
            a: DMatrix::zeros(2 * m.nv, 2 * m.nv),
            b: DMatrix::zeros(2 * m.nv, m.nu),
            tau_ext: DVector::zeros(m.nv),
            data: crate::model::Data::new(m),
            jac: DMatrix::zeros(3, m.nv),
            dvdq: DMatrix::zeros(3, m.nv),
            last: None,
        };
        ActionData::new(self.nx(), self.ndx(), self.nu(), Box::new(work))
    }
    fn calc(&self, d: &mut ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        let m = &*self.model;
        let (nq, nv) = (m.nq, m.nv);
        let work = d.extra.as_any_mut().downcast_mut::<Work>().expect("ContactAction data");
        let clearance = self.clearance_cost(work, x, None);
        if let Some(w) = self.terminal {
            d.cost = w * (self.state_cost(x, None) + clearance);
            d.ok = d.cost.is_finite();
            return;
        }
        // No warm start from this knot's previous iterate unless asked: the interior-point
        // solution then depends on (x, u) alone, so a replay of the controls reproduces the
        // planned states (a warm start moves the solution within the solver tolerance, and a
        // gait amplifies 1e-5 m/s differences into a different trajectory within a few knots).
        if !self.warm_start {
            work.ws.reset_warm_start();
        }
        let info = step(
            m,
            &self.terrain,
            &self.settings,
            &mut work.ws,
            &x.as_slice()[..nq],
            &x.as_slice()[nq..],
            u.as_slice(),
            work.tau_ext.as_slice(),
            work.tw.q_next.as_mut_slice(),
            work.tw.v_next.as_mut_slice(),
        );
        d.ok = info.status.advanced();
        d.x_next.rows_mut(0, nq).copy_from(&work.tw.q_next);
        d.x_next.rows_mut(nq, nv).copy_from(&work.tw.v_next);
        match &mut work.last {
            Some((lx, lu, li)) => {
                lx.copy_from(x);
                lu.copy_from(u);
                *li = info;
            }
            None => work.last = Some((x.clone(), u.clone(), info)),
        }
        d.cost = self.state_cost(x, None) + clearance + 0.5 * self.cost.w_control * u.norm_squared();
    }
    fn calc_diff(&self, d: &mut ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        let m = &*self.model;
        let (nq, nv) = (m.nq, m.nv);
        // The cost terms accumulate into the data's own l_x, l_xx (no allocation per knot).
        let ActionData { lx: g, lxx: h, extra, .. } = d;
        if g.len() != 2 * nv || h.shape() != (2 * nv, 2 * nv) {
            *g = DVector::zeros(2 * nv);
            *h = DMatrix::zeros(2 * nv, 2 * nv);
        }
        // `state_cost` zeroes `g` and `h` before it adds to them.
        let work = extra.as_any_mut().downcast_mut::<Work>().expect("ContactAction data");
        let sc = self.state_cost(x, Some((&mut *g, &mut *h))) + self.clearance_cost(work, x, Some((&mut *g, &mut *h)));
        if let Some(w) = self.terminal {
            *g *= w;
            *h *= w;
            d.cost = w * sc;
            d.ok = d.cost.is_finite();
            return;
        }
        let (q, v) = (&x.as_slice()[..nq], &x.as_slice()[nq..]);
        let info = match work.last.take() {
            Some((lx, lu, step_info)) if &lx == x && &lu == u => {
                let info = transition_jacobians_after_step(
                    m,
                    &self.settings,
                    &mut work.ws,
                    &mut work.tw,
                    (q, v),
                    step_info,
                    &[],
                    None,
                    self.sensitivity,
                    &mut work.a,
                    &mut work.b,
                    None,
                );
                work.last = Some((lx, lu, step_info));
                info
            }
            _ => {
                work.ws.reset_warm_start();
                transition_jacobians(
                    m,
                    &self.terrain,
                    &self.settings,
                    &mut work.ws,
                    &mut work.tw,
                    (q, v, u.as_slice(), work.tau_ext.as_slice()),
                    self.sensitivity,
                    &mut work.a,
                    &mut work.b,
                )
            }
        };
        d.ok = matches!(info.status, TransitionStatus::Ok | TransitionStatus::BackwardNotConverged);
        d.fallback = false;
        d.unconverged = info.status == TransitionStatus::BackwardNotConverged;
        let finite = |w: &Work| crate::linalg::all_finite(w.a.as_slice()) && crate::linalg::all_finite(w.b.as_slice());
        let failed = |st: TransitionStatus, w: &Work| match st {
            TransitionStatus::SingularContactSystem | TransitionStatus::BackwardFailed => true,
            TransitionStatus::Ok | TransitionStatus::BackwardNotConverged => !finite(w),
            TransitionStatus::StepFailed => false,
        };
        if failed(info.status, work) {
            // The step advanced but this sensitivity's linear system failed (an exact sliding
            // system at a vanishing slip, a relaxed Newton solve that broke down): fall back
            // to the other family, then to a strongly relaxed one, for this knot rather than
            // stopping the solver.
            d.ok = false;
            for fallback in self.sensitivity.fallbacks() {
                work.ws.reset_warm_start();
                let retry = transition_jacobians(
                    m,
                    &self.terrain,
                    &self.settings,
                    &mut work.ws,
                    &mut work.tw,
                    (q, v, u.as_slice(), work.tau_ext.as_slice()),
                    fallback,
                    &mut work.a,
                    &mut work.b,
                );
                if !failed(retry.status, work) && retry.status != TransitionStatus::StepFailed {
                    d.ok = true;
                    d.fallback = true;
                    d.unconverged = retry.status == TransitionStatus::BackwardNotConverged;
                    break;
                }
            }
        }
        d.x_next.rows_mut(0, nq).copy_from(&work.tw.q_next);
        d.x_next.rows_mut(nq, nv).copy_from(&work.tw.v_next);
        // Hand the Jacobians over instead of copying them: `after_step` writes every entry of
        // `a` and `b`, so the buffers the data gives back need no clearing.
        std::mem::swap(&mut d.fx, &mut work.a);
        std::mem::swap(&mut d.fu, &mut work.b);
        d.cost = sc + 0.5 * self.cost.w_control * u.norm_squared();
        d.lu.copy_from(u);
        d.lu *= self.cost.w_control;
        d.luu.fill_with_identity();
        d.luu *= self.cost.w_control;
        zero_dense(&mut d.lux);
    }
    fn nonnegative_cost(&self) -> bool {
        // Every term is a weighted square (the clearance weight times a positive exponential).
        let c = &self.cost;
        let scalars = [
            c.w_posture,
            c.w_joint_velocity,
            c.w_base_velocity,
            c.w_control,
            c.w_joint_range,
            self.clearance.map_or(0.0, |c| c.weight),
            self.terminal.unwrap_or(0.0),
        ];
        c.w_position.iter().chain(c.w_orientation.iter()).chain(scalars.iter()).all(|&w| w >= 0.0)
    }
    fn integrate(&self, x: &DVector<f64>, dx: &DVector<f64>, out: &mut DVector<f64>) {
        let m = &*self.model;
        let (nq, nv) = (m.nq, m.nv);
        if out.len() != nq + nv {
            *out = DVector::zeros(nq + nv);
        }
        let mut q = DVector::zeros(nq);
        integrate(m, &x.as_slice()[..nq], &dx.as_slice()[..nv], q.as_mut_slice());
        out.rows_mut(0, nq).copy_from(&q);
        out.rows_mut(nq, nv).copy_from(&(x.rows(nq, nv) + dx.rows(nv, nv)));
    }
    fn difference(&self, x0: &DVector<f64>, x1: &DVector<f64>, out: &mut DVector<f64>) {
        let m = &*self.model;
        let (nq, nv) = (m.nq, m.nv);
        if out.len() != 2 * nv {
            *out = DVector::zeros(2 * nv);
        }
        let mut dq = DVector::zeros(nv);
        difference(m, &x0.as_slice()[..nq], &x1.as_slice()[..nq], dq.as_mut_slice());
        out.rows_mut(0, nv).copy_from(&dq);
        out.rows_mut(nv, nv).copy_from(&(x1.rows(nq, nv) - x0.rows(nq, nv)));
    }
}
