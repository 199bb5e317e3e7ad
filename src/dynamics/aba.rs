//! Articulated-body algorithm (Featherstone 2008, table 7.1): `qdd = M^-1 (tau - C v - g)` in
//! O(n) without forming `M`.
//!
//! Pass 1 (forward): placements, `v_i`, `c_i = v_i x (S_i qd_i)`, `IA_i = I_i`,
//! `pA_i = v_i x* I_i v_i`.
//! Pass 2 (backward), one-DoF joints: `U = IA S`, `D = S^T U`, `u = tau - S^T pA`,
//! `Ia = IA - U U^T / D`, `pa = pA + Ia c + U u / D`, accumulated into the parent.
//! The free-flyer root keeps its full articulated inertia.
//! Pass 3 (forward): `a' = iXp a_p + c_i` (root: `a_p = -gravity`), one-DoF
//! `qdd = (u - U^T a') / D`, `a = a' + S qdd`; free-flyer `qdd = IA^-1 (tau - pA) - a'`.
//! As in Pinocchio, the base part of `qdd` is the derivative of the body twist.

use super::kinematics::{joint_motion, joint_transform};
use crate::model::{Data, JointKind, Model};
use crate::spatial::{cross_force, cross_motion, motion, transform_inertia_matrix};
use nalgebra::{Vector3, Vector6};

/// Forward dynamics; the result is in `data.ddq`. Returns `false` when an articulated inertia
/// is singular (a massless subtree), leaving `ddq` unspecified.
pub fn aba(model: &Model, data: &mut Data, q: &[f64], v: &[f64], tau: &[f64]) -> bool {
    let nb = model.joints.len();
    for (i, j) in model.joints.iter().enumerate() {
        let xj = joint_transform(&j.kind, &q[j.idx_q..j.idx_q + j.nq()]);
        let li = j.placement.compose(&xj);
        data.li_m_i[i] = li;
        let vj = joint_motion(&j.kind, &v[j.idx_v..j.idx_v + j.nv()]);
        let vi = match j.parent {
            Some(p) => {
                data.o_m_i[i] = data.o_m_i[p].compose(&li);
                li.act_inv_motion(&data.v[p]) + vj
            }
            None => {
                data.o_m_i[i] = li;
                vj
            }
        };
        data.v[i] = vi;
        data.c[i] = cross_motion(&vi, &vj);
        let inertia = &model.inertias[i];
        data.ia[i] = inertia.matrix();
        data.pa[i] = cross_force(&vi, &inertia.mul_motion(&vi));
    }
    for i in (0..nb).rev() {
        let j = &model.joints[i];
        if j.kind == JointKind::FreeFlyer {
            continue;
        }
        let s = j.kind.subspace_col(0);
        let u_vec = data.ia[i] * s;
        let d = s.dot(&u_vec);
        if d.abs() < 1e-300 || !d.is_finite() {
            return false;
        }
        let d_inv = 1.0 / d;
        let u = tau[j.idx_v] - s.dot(&data.pa[i]);
        data.u_vec[i] = u_vec;
        data.d_inv[i] = d_inv;
        data.u_bias[i] = u;
        if let Some(p) = j.parent {
            let ia = data.ia[i] - u_vec * u_vec.transpose() * d_inv;
            let pa = data.pa[i] + ia * data.c[i] + u_vec * (u * d_inv);
            let ia_p = transform_inertia_matrix(&data.li_m_i[i], &ia);
            data.ia[p] += ia_p;
            let pa_p = data.li_m_i[i].act_force(&pa);
            data.pa[p] += pa_p;
        }
    }
    let a_world = motion(&(-model.gravity), &Vector3::zeros());
    for i in 0..nb {
        let j = &model.joints[i];
        let ap = match j.parent {
            Some(p) => data.li_m_i[i].act_inv_motion(&data.a[p]),
            None => data.li_m_i[i].act_inv_motion(&a_world),
        } + data.c[i];
        match j.kind {
            JointKind::FreeFlyer => {
                let rhs = Vector6::from_column_slice(&tau[j.idx_v..j.idx_v + 6]) - data.pa[i];
                let Some(chol) = data.ia[i].cholesky() else {
                    return false;
                };
                let acc = chol.solve(&rhs);
                let qdd = acc - ap;
                data.ddq.rows_mut(j.idx_v, 6).copy_from(&qdd);
                data.a[i] = acc;
            }
            _ => {
                let qdd = (data.u_bias[i] - data.u_vec[i].dot(&ap)) * data.d_inv[i];
                data.ddq[j.idx_v] = qdd;
                data.a[i] = ap + j.kind.subspace_col(0) * qdd;
            }
        }
    }
    true
}
