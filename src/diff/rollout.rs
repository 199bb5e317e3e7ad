//! Rollout gradients by the adjoint (reverse) method over stored transition Jacobians.
//!
//! A rollout from `x_0 = (q_0, v_0)` runs the simulation's own closed loop for `T` steps:
//! `u_t = pi(x_t) + delta_t (+ s e_u)`, `x_{t+1} = F(x_t, u_t, tau_ext,t)`, where `pi` is the
//! scene's controller (joint PD with implicit damping, or none), `delta_t` are open-loop control
//! offsets (zero in the rollout; the gradient is taken with respect to them) and `s` a scalar
//! parameter ([`Param`]). The cost is
//!
//! ```text
//! J = sum_{t<T} h l(x_t, u_t) + l_T(x_T),
//! ```
//!
//! with [`Cost`]'s running and terminal terms. The forward pass stores `A_t`, `B_t`, the
//! parameter column `C_t = d x_{t+1}/ds` ([`transition_jacobians_ext`]) and the controller
//! gain `K_t = d pi / d x`; the backward pass is the adjoint recursion
//!
//! ```text
//! lambda_T = dl_T/dx,
//! g_t = h dl/du + B_t^T lambda_{t+1}                                  (= dJ/d delta_t)
//! lambda_t = h dl/dx + A_t^T lambda_{t+1} + K_t^T g_t                 (dJ/dx_0 = lambda_0)
//! dJ/ds = sum_t (C_t^T lambda_{t+1} + e_u^T g_t) + lambda_0^T dx_0/ds.
//! ```
//!
//! All state vectors are in tangent coordinates. The contact sensitivity is a choice
//! ([`Sensitivity`]); the forward trajectory never depends on it. The PD gain `K_t` is zero
//! for saturated actuators (the clamp is flat there); control offsets are added after the clamp.

use super::transition::{transition_jacobians_ext, Sensitivity, TransitionStatus, TransitionWorkspace};
use crate::contact::ContactMode;
use crate::dynamics::kinematics::point_velocity;
use crate::dynamics::kinematics_derivatives::point_velocity_derivative;
use crate::dynamics::rnea_derivatives::PointForce;
use crate::dynamics::{forward_kinematics, point_jacobian};
use crate::model::{Data, JointKind, Model};
use crate::sim::{Controller, Simulation};
use nalgebra::{DMatrix, DVector, Vector3};
use thiserror::Error;

/// A scalar parameter of a rollout.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    /// Initial base position along a world axis (0, 1, 2), m, added to the scene's.
    BasePosition { axis: usize },
    /// A constant control offset `s * direction` (nu) at every step, N m.
    ControlOffset { direction: DVector<f64> },
    /// The force magnitude of pull `index` (N): it applies `s` times the unit vector of its
    /// scene force.
    PullForce { index: usize },
}

/// A point cost on a body point's world position `p` and velocity `pdot`:
/// `0.5 sum_a weight_a (p_a - target_a)^2 + linear . p + linear_velocity . pdot`.
#[derive(Clone, Debug, PartialEq)]
pub struct PointCost {
    pub body: usize,
    /// In the body frame (m).
    pub point: Vector3<f64>,
    pub target: Vector3<f64>,
    pub weight: Vector3<f64>,
    pub linear: Vector3<f64>,
    pub linear_velocity: Vector3<f64>,
}

/// Running and terminal cost (module docs). The state part is
/// `s(x) = sum_j 0.5 w_q,j (q_j - r_j)^2 + 0.5 sum w_v v^2 + sum of point costs` over the
/// one-dof joints `j`; `l = running (s(x) + 0.5 sum w_u u^2)`, `l_T = terminal s(x_T)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Cost {
    pub running: f64,
    pub terminal: f64,
    /// Joint targets (nq; free-flyer entries unused) and weights (nv; free-flyer unused).
    pub q_ref: DVector<f64>,
    pub w_q: DVector<f64>,
    pub w_v: DVector<f64>,
    pub w_u: DVector<f64>,
    pub points: Vec<PointCost>,
}

impl Cost {
    /// No cost at all (add terms to the fields).
    pub fn zero(model: &Model) -> Self {
        Self {
            running: 0.0,
            terminal: 0.0,
            q_ref: DVector::zeros(model.nq),
            w_q: DVector::zeros(model.nv),
            w_v: DVector::zeros(model.nv),
            w_u: DVector::zeros(model.nu),
            points: Vec::new(),
        }
    }

    /// State cost `s(x)` and, if asked, its tangent gradient (2nv). Needs `data` scratch.
    fn state(&self, model: &Model, data: &mut Data, q: &[f64], v: &[f64], grad: Option<&mut DVector<f64>>) -> f64 {
        let nv = model.nv;
        let mut grad = grad;
        if let Some(g) = grad.as_deref_mut() {
            g.fill(0.0);
        }
        let mut f = 0.0;
        for j in model.joints.iter().filter(|j| j.kind != JointKind::FreeFlyer) {
            let e = q[j.idx_q] - self.q_ref[j.idx_q];
            let w = self.w_q[j.idx_v];
            f += 0.5 * w * e * e;
            if let Some(g) = grad.as_deref_mut() {
                g[j.idx_v] += w * e;
            }
        }
        for i in 0..nv {
            f += 0.5 * self.w_v[i] * v[i] * v[i];
            if let Some(g) = grad.as_deref_mut() {
                g[nv + i] += self.w_v[i] * v[i];
            }
        }
        if !self.points.is_empty() {
            forward_kinematics(model, data, q, Some(v));
            for pc in &self.points {
                let p = data.o_m_i[pc.body].act_point(&pc.point);
                let e = p - pc.target;
                f += 0.5 * e.component_mul(&pc.weight).dot(&e) + pc.linear.dot(&p);
                let moving = pc.linear_velocity != Vector3::zeros();
                if moving {
                    f += pc.linear_velocity.dot(&point_velocity(data, pc.body, &p));
                }
                if let Some(g) = grad.as_deref_mut() {
                    // d/dq of p (and of pdot = J_p v at fixed v), d/dv of pdot = J_p.
                    let dp = e.component_mul(&pc.weight) + pc.linear;
                    point_jacobian(model, &data.o_m_i, pc.body, &p, &mut data.jac3);
                    for c in 0..nv {
                        g[c] += data.jac3.column(c).dot(&dp);
                        g[nv + c] += data.jac3.column(c).dot(&pc.linear_velocity);
                    }
                    if moving {
                        point_velocity_derivative(model, &data.o_m_i, pc.body, &p, v, &mut data.jac3);
                        for c in 0..nv {
                            g[c] += data.jac3.column(c).dot(&pc.linear_velocity);
                        }
                    }
                }
            }
        }
        f
    }
}

/// Why a rollout gradient could not be computed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum RolloutError {
    #[error("step {step} (t = {time:.4} s): transition Jacobians failed: {status:?}")]
    Step { step: usize, time: f64, status: TransitionStatus },
    #[error("parameter {0:?} does not fit the model or scene")]
    BadParam(Param),
}

/// Result of [`rollout_gradient`].
#[derive(Clone, Debug)]
pub struct RolloutGradient {
    /// Total cost `J`.
    pub cost: f64,
    /// `dJ/dx_0` in tangent coordinates (2nv).
    pub grad_x0: DVector<f64>,
    /// `dJ/d delta_t` (T x nu).
    pub grad_u: DMatrix<f64>,
    /// `dJ/ds` (zero without a parameter).
    pub grad_param: f64,
    /// Realized contact mode per step and contact point, of its nearest contact (T x points).
    pub modes: Vec<Vec<ContactMode>>,
    /// Steps whose relaxed backward solve hit its iteration limit.
    pub backward_not_converged: usize,
    /// Final state.
    pub q_final: DVector<f64>,
    pub v_final: DVector<f64>,
}

/// Applies the parameter value `s` to a simulation (its initial state or its pulls). Used by the
/// finite-difference and smoothed references to realize `f(s)`.
pub fn apply_param(sim: &mut Simulation, param: &Param, s: f64) -> Result<(), RolloutError> {
    match param {
        Param::BasePosition { axis } => {
            let root_free = sim.model.joints.first().is_some_and(|j| j.kind == JointKind::FreeFlyer);
            if *axis > 2 || !root_free {
                return Err(RolloutError::BadParam(param.clone()));
            }
            sim.q[*axis] += s;
        }
        Param::ControlOffset { direction } => {
            if direction.len() != sim.model.nu {
                return Err(RolloutError::BadParam(param.clone()));
            }
            sim.u_offset.axpy(s, direction, 1.0);
        }
        Param::PullForce { index } => {
            let p = sim.pulls.get_mut(*index).ok_or_else(|| RolloutError::BadParam(param.clone()))?;
            let n = p.force.norm();
            if n == 0.0 {
                return Err(RolloutError::BadParam(param.clone()));
            }
            p.force *= s / n;
        }
    }
    sim.ws.reset_warm_start();
    Ok(())
}

/// Rolls `sim` (already carrying the parameter value, see [`apply_param`]) forward for `steps`
/// steps with the chosen sensitivity and returns the cost and its gradients (module docs).
/// `sim` is not modified.
pub fn rollout_gradient(
    sim: &Simulation,
    cost: &Cost,
    steps: usize,
    param: Option<&Param>,
    sensitivity: Sensitivity,
) -> Result<RolloutGradient, RolloutError> {
    let model = &*sim.model;
    let (nv, nu, h) = (model.nv, model.nu, sim.settings.dt);
    let mut ws = sim.ws.clone();
    let mut tw = TransitionWorkspace::new(model);
    let mut data = Data::new(model);
    let (mut q, mut v) = (sim.q.clone(), sim.v.clone());
    let mut u = DVector::zeros(nu);
    let mut tau_ext = DVector::zeros(nv);
    let mut loads: Vec<PointForce> = Vec::new();
    let mut direction = DVector::zeros(nv);
    let e_u = match param {
        Some(Param::ControlOffset { direction }) => Some(direction.clone()),
        _ => None,
    };
    let pull_index = match param {
        Some(Param::PullForce { index }) => Some(*index),
        _ => None,
    };

    let mut a_t = Vec::with_capacity(steps);
    let mut b_t = Vec::with_capacity(steps);
    let mut c_t = Vec::with_capacity(steps);
    let mut k_t = Vec::with_capacity(steps);
    let mut lx = Vec::with_capacity(steps);
    let mut us = Vec::with_capacity(steps);
    let mut modes = Vec::with_capacity(steps);
    let mut grad = DVector::zeros(2 * nv);
    let mut total = 0.0;
    let mut not_converged = 0;
    let mut damping = DVector::zeros(nu);
    for t in 0..steps {
        let time = sim.t + t as f64 * h;
        sim.controller.compute(model, q.as_slice(), v.as_slice(), h, &mut u, &mut damping);
        ws.actuator_damping.copy_from(&damping);
        let mut gain = DMatrix::zeros(nu, 2 * nv);
        if let Controller::JointPd { kp, .. } = &sim.controller {
            for (k, &dof) in model.actuated_dofs.iter().enumerate() {
                if damping[k] > 0.0 {
                    gain[(k, dof)] = -kp;
                    gain[(k, nv + dof)] = -damping[k];
                }
            }
        }
        // The simulation's control offset (where a `ControlOffset` parameter's value lives),
        // added after the clamp exactly as `Simulation::step` does.
        u += &sim.u_offset;
        tau_ext.fill(0.0);
        loads.clear();
        direction.fill(0.0);
        let mut has_direction = false;
        if sim.pulls.iter().any(|p| p.active(time)) {
            forward_kinematics(model, &mut data, q.as_slice(), None);
            for (i, p) in sim.pulls.iter().enumerate().filter(|(_, p)| p.active(time)) {
                let pw = data.o_m_i[p.body].act_point(&p.point);
                point_jacobian(model, &data.o_m_i, p.body, &pw, &mut data.jac3);
                tau_ext.gemv_tr(1.0, &data.jac3, &p.force, 1.0);
                loads.push(PointForce::new(p.body, pw, p.force));
                if pull_index == Some(i) {
                    let unit = p.force / p.force.norm().max(f64::MIN_POSITIVE);
                    direction.gemv_tr(1.0, &data.jac3, &unit, 1.0);
                    has_direction = true;
                }
            }
        }
        // Running cost at (x_t, u_t).
        let mut gx = DVector::zeros(2 * nv);
        let sx = cost.state(model, &mut data, q.as_slice(), v.as_slice(), Some(&mut gx));
        let uu: f64 = (0..nu).map(|k| cost.w_u[k] * u[k] * u[k]).sum();
        total += h * cost.running * (sx + 0.5 * uu);
        lx.push(gx * (h * cost.running));

        let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
        let mut c = DVector::zeros(2 * nv);
        let info = transition_jacobians_ext(
            model,
            &sim.terrain,
            &sim.settings,
            &mut ws,
            &mut tw,
            (q.as_slice(), v.as_slice(), u.as_slice(), tau_ext.as_slice()),
            &loads,
            if has_direction { Some(direction.as_slice()) } else { None },
            sensitivity,
            &mut a,
            &mut b,
            Some(&mut c),
        );
        match info.status {
            TransitionStatus::Ok => {}
            TransitionStatus::BackwardNotConverged => not_converged += 1,
            status => return Err(RolloutError::Step { step: t, time, status }),
        }
        modes.push(ws.modes[..ws.contacts.points].to_vec());
        a_t.push(a);
        b_t.push(b);
        c_t.push(c);
        k_t.push(gain);
        us.push(u.clone());
        q.copy_from(&tw.q_next);
        v.copy_from(&tw.v_next);
    }
    total += cost.terminal * cost.state(model, &mut data, q.as_slice(), v.as_slice(), Some(&mut grad));
    let mut lambda = grad * cost.terminal;

    let mut grad_u = DMatrix::zeros(steps, nu);
    let mut grad_param = 0.0;
    for t in (0..steps).rev() {
        let mut g = b_t[t].tr_mul(&lambda);
        for k in 0..nu {
            g[k] += h * cost.running * cost.w_u[k] * us[t][k];
        }
        grad_param += c_t[t].dot(&lambda);
        if let Some(e) = &e_u {
            grad_param += e.dot(&g);
        }
        let mut next = a_t[t].tr_mul(&lambda);
        next += &lx[t];
        next += k_t[t].tr_mul(&g);
        grad_u.row_mut(t).copy_from(&g.transpose());
        lambda = next;
    }
    if let Some(Param::BasePosition { axis }) = param {
        // A world translation e_a of the base is the body-frame tangent R^T e_a.
        let r = crate::model::configuration::free_flyer_placement(sim.q.as_slice()).rot;
        let d = r.transpose() * Vector3::ith(*axis, 1.0);
        grad_param += (0..3).map(|i| lambda[i] * d[i]).sum::<f64>();
    }
    Ok(RolloutGradient {
        cost: total,
        grad_x0: lambda,
        grad_u,
        grad_param,
        modes,
        backward_not_converged: not_converged,
        q_final: q,
        v_final: v,
    })
}

/// The cost `J` of the same rollout through [`Simulation::step`] alone (no Jacobians): the
/// reference that finite differences and smoothed truths are taken of. `sim` is not modified.
/// With `modes`, the realized modes of every step are pushed there.
pub fn rollout_cost(
    sim: &Simulation,
    cost: &Cost,
    steps: usize,
    mut modes: Option<&mut Vec<Vec<ContactMode>>>,
) -> Result<(f64, Simulation), RolloutError> {
    let mut s = sim.clone();
    let model = sim.model.clone();
    let (nu, h) = (model.nu, sim.settings.dt);
    let mut data = Data::new(&model);
    let mut total = 0.0;
    let mut u = DVector::zeros(nu);
    let mut damping = DVector::zeros(nu);
    for t in 0..steps {
        // The controls Simulation::step will apply (before its implicit damping term).
        s.controller.compute(&model, s.q.as_slice(), s.v.as_slice(), h, &mut u, &mut damping);
        u += &s.u_offset;
        let sx = cost.state(&model, &mut data, s.q.as_slice(), s.v.as_slice(), None);
        let uu: f64 = (0..nu).map(|k| cost.w_u[k] * u[k] * u[k]).sum();
        total += h * cost.running * (sx + 0.5 * uu);
        let info = s.step();
        if !info.status.advanced() {
            return Err(RolloutError::Step { step: t, time: s.t, status: TransitionStatus::StepFailed });
        }
        if let Some(m) = modes.as_deref_mut() {
            m.push(s.ws.modes[..s.ws.contacts.points].to_vec());
        }
    }
    total += cost.terminal * cost.state(&model, &mut data, s.q.as_slice(), s.v.as_slice(), None);
    Ok((total, s))
}

impl Param {
    /// Resolves a parameter name against a model and its pulls: `base_x`, `base_y`, `base_z`
    /// (initial base position offset, m), `pull:N` (force magnitude of pull N, N) or
    /// `torque:JOINTS` (a torque offset, N m, on the actuated joints matching a comma-separated
    /// list of names or `*suffix` patterns).
    pub fn resolve(model: &Model, pulls: &[crate::sim::Pull], name: &str) -> Result<Param, String> {
        let name = name.trim();
        match name {
            "base_x" | "base_y" | "base_z" => {
                if !model.has_free_flyer() {
                    return Err(format!("`{name}` needs a floating base"));
                }
                return Ok(Param::BasePosition { axis: (name.as_bytes()[5] - b'x') as usize });
            }
            _ => {}
        }
        if let Some(idx) = name.strip_prefix("pull") {
            let index = match idx.strip_prefix(':') {
                Some(n) => n.parse::<usize>().map_err(|_| format!("`{name}`: expected pull:N"))?,
                None if idx.is_empty() => 0,
                None => return Err(format!("`{name}`: expected pull or pull:N")),
            };
            return match pulls.get(index) {
                Some(p) if p.force.norm() > 0.0 => Ok(Param::PullForce { index }),
                Some(_) => Err(format!("pull {index} has a zero force: no direction to scale")),
                None => Err(format!("`{name}`: the scene has {} pull(s)", pulls.len())),
            };
        }
        if let Some(list) = name.strip_prefix("torque:") {
            let mut direction = DVector::zeros(model.nu);
            for pat in list.split(',').map(str::trim) {
                let mut hit = false;
                for (k, j) in model.actuated_joints().enumerate() {
                    let m = match pat.strip_prefix('*') {
                        Some(suffix) => j.name.ends_with(suffix),
                        None => j.name == pat,
                    };
                    if m {
                        direction[k] = 1.0;
                        hit = true;
                    }
                }
                if !hit {
                    return Err(format!("no actuated joint matches `{pat}`"));
                }
            }
            return Ok(Param::ControlOffset { direction });
        }
        Err(format!("unknown parameter `{name}`: expected base_x, base_y, base_z, pull:N or torque:JOINTS"))
    }
}
