//! Recursive Newton-Euler algorithm (Featherstone 2008, table 5.1; Pinocchio `rnea.hpp`).
//!
//! Forward pass, body frames: `v_i = iXp v_p + S_i qd_i`,
//! `a_i = iXp a_p + S_i qdd_i + v_i x (S_i qd_i)` with `a_world = -gravity` (so gravity acts as
//! a fictitious upward acceleration), `f_i = I_i a_i + v_i x* I_i v_i`.
//! Backward pass: `tau_i = S_i^T f_i`, `f_p += pXi* f_i`.
//! Result: `tau = M(q) qdd + C(q, v) v + g(q)`; `nle` is `rnea(q, v, 0)`.

use super::kinematics::{joint_motion, joint_transform};
use crate::model::{Data, Model};
use crate::spatial::{cross_force, cross_motion, motion};
use nalgebra::Vector6;

/// Inverse dynamics; the result is in `data.tau`.
pub fn rnea(model: &Model, data: &mut Data, q: &[f64], v: &[f64], a: &[f64]) {
    rnea_impl(model, data, q, v, Some(a));
}

/// Nonlinear effects `C(q, v) v + g(q)`; the result is in `data.nle` (and `data.tau`).
pub fn nle(model: &Model, data: &mut Data, q: &[f64], v: &[f64]) {
    rnea_impl(model, data, q, v, None);
    data.nle.copy_from(&data.tau);
}

fn rnea_impl(model: &Model, data: &mut Data, q: &[f64], v: &[f64], a: Option<&[f64]>) {
    crate::linalg::avx2_dispatch!(
        rnea_body,
        (model: &Model, data: &mut Data, q: &[f64], v: &[f64], a: Option<&[f64]>)
    )
}

#[inline(always)]
fn rnea_body(model: &Model, data: &mut Data, q: &[f64], v: &[f64], a: Option<&[f64]>) {
    let a_world = motion(&(-model.gravity), &nalgebra::Vector3::zeros());
    for (i, j) in model.joints.iter().enumerate() {
        let (iq, iv, nv) = (j.idx_q, j.idx_v, j.nv());
        let xj = joint_transform(&j.kind, &q[iq..iq + j.nq()]);
        let li = j.placement.compose(&xj);
        data.li_m_i[i] = li;
        let vj = joint_motion(&j.kind, &v[iv..iv + nv]);
        let aj = match a {
            Some(a) => joint_motion(&j.kind, &a[iv..iv + nv]),
            None => Vector6::zeros(),
        };
        let (vp, ap) = match j.parent {
            Some(p) => {
                data.o_m_i[i] = data.o_m_i[p].compose(&li);
                (li.act_inv_motion(&data.v[p]), li.act_inv_motion(&data.a[p]))
            }
            None => {
                data.o_m_i[i] = li;
                (Vector6::zeros(), li.act_inv_motion(&a_world))
            }
        };
        let vi = vp + vj;
        let ai = ap + aj + cross_motion(&vi, &vj);
        let inertia = &model.inertias[i];
        data.f[i] = inertia.mul_motion(&ai) + cross_force(&vi, &inertia.mul_motion(&vi));
        data.v[i] = vi;
        data.a[i] = ai;
    }
    for i in (0..model.joints.len()).rev() {
        let j = &model.joints[i];
        for c in 0..j.nv() {
            data.tau[j.idx_v + c] = j.kind.project_force(c, &data.f[i]);
        }
        if let Some(p) = j.parent {
            let fp = data.li_m_i[i].act_force(&data.f[i]);
            data.f[p] += fp;
        }
    }
}
