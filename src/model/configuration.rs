//! Configuration space operations: `neutral`, `integrate`, `difference`, `normalize`.
//!
//! `q` has `nq` entries, tangent vectors `nv`. The free-flyer part moves on SE(3) with the body
//! (right) convention `M+ = M exp6(dq)`, exactly as Pinocchio's `integrate`; one-DoF joints are
//! Euclidean. `difference(q0, q1)` is the inverse: `integrate(q0, difference(q0, q1)) = q1`.
//! Every derivative "with respect to q" in ContactLab lives in this tangent space.

use super::{JointKind, Model};
use crate::spatial::lie::{exp6, log6};
use crate::spatial::Se3;
use nalgebra::{DVector, Quaternion, UnitQuaternion, Vector3, Vector6};

/// The base pose encoded in `q[idx..idx + 7]`.
#[inline]
pub fn free_flyer_placement(q: &[f64]) -> Se3 {
    let quat = UnitQuaternion::from_quaternion(Quaternion::new(q[6], q[3], q[4], q[5]));
    Se3::new(*quat.to_rotation_matrix().matrix(), Vector3::new(q[0], q[1], q[2]))
}

fn write_free_flyer(m: &Se3, quat_hint: &[f64], out: &mut [f64]) {
    let mut quat = UnitQuaternion::from_matrix(&m.rot).into_inner();
    // Keep the sign of the stored quaternion continuous along a trajectory.
    let dot = quat.i * quat_hint[0] + quat.j * quat_hint[1] + quat.k * quat_hint[2] + quat.w * quat_hint[3];
    if dot < 0.0 {
        quat = -quat;
    }
    out[0] = m.trans.x;
    out[1] = m.trans.y;
    out[2] = m.trans.z;
    out[3] = quat.i;
    out[4] = quat.j;
    out[5] = quat.k;
    out[6] = quat.w;
}

/// The neutral configuration: identity base pose, zero joint positions.
pub fn neutral(model: &Model) -> DVector<f64> {
    let mut q = DVector::zeros(model.nq);
    for j in &model.joints {
        if j.kind == JointKind::FreeFlyer {
            q[j.idx_q + 6] = 1.0;
        }
    }
    q
}

/// `out = q ⊕ dq`. `out` may not alias `q`.
pub fn integrate(model: &Model, q: &[f64], dq: &[f64], out: &mut [f64]) {
    for j in &model.joints {
        let (iq, iv) = (j.idx_q, j.idx_v);
        match j.kind {
            JointKind::FreeFlyer => {
                let m = free_flyer_placement(&q[iq..iq + 7]);
                let nu = Vector6::from_column_slice(&dq[iv..iv + 6]);
                // Quaternion product rather than a rotation-matrix round trip: cheaper and keeps
                // the quaternion's sign continuous.
                let w = Vector3::new(nu[3], nu[4], nu[5]);
                let e = exp6(&nu);
                let p = m.act_point(&e.trans);
                let q0 = UnitQuaternion::from_quaternion(Quaternion::new(q[iq + 6], q[iq + 3], q[iq + 4], q[iq + 5]));
                let q1 = (q0 * UnitQuaternion::from_scaled_axis(w)).into_inner();
                let q1 = q1 / q1.norm();
                out[iq..iq + 3].copy_from_slice(p.as_slice());
                out[iq + 3] = q1.i;
                out[iq + 4] = q1.j;
                out[iq + 5] = q1.k;
                out[iq + 6] = q1.w;
            }
            _ => out[iq] = q[iq] + dq[iv],
        }
    }
}

/// `out = q1 ⊖ q0`, the tangent vector taking `q0` to `q1`.
pub fn difference(model: &Model, q0: &[f64], q1: &[f64], out: &mut [f64]) {
    for j in &model.joints {
        let (iq, iv) = (j.idx_q, j.idx_v);
        match j.kind {
            JointKind::FreeFlyer => {
                let m0 = free_flyer_placement(&q0[iq..iq + 7]);
                let m1 = free_flyer_placement(&q1[iq..iq + 7]);
                let nu = log6(&m0.inverse().compose(&m1));
                out[iv..iv + 6].copy_from_slice(nu.as_slice());
            }
            _ => out[iv] = q1[iq] - q0[iq],
        }
    }
}

/// Jacobians of `integrate(q, dq)` in tangent coordinates (Pinocchio's `dIntegrate`):
/// `d_dq` with respect to a tangent perturbation of `q`, `d_ddq` with respect to `dq`, both
/// nv x nv and block diagonal per joint. For the free-flyer, `q ⊕ e ⊕ dq = (q ⊕ dq) ⊕
/// Ad(exp(dq)^-1) e`, so `d_dq = Ad(exp(dq)^-1)`, and `d_ddq = J_r(dq)`, the right Jacobian of
/// SE(3). One-DoF joints contribute identities.
pub fn integrate_jacobians(
    model: &Model,
    dq: &[f64],
    d_dq: &mut nalgebra::DMatrix<f64>,
    d_ddq: &mut nalgebra::DMatrix<f64>,
) {
    // As slices: nalgebra's `fill` steps through a strided iterator, entry by entry.
    d_dq.as_mut_slice().fill(0.0);
    d_ddq.as_mut_slice().fill(0.0);
    integrate_jacobian_blocks(model, dq, d_dq, d_ddq);
}

/// The joints' diagonal blocks of [`integrate_jacobians`], written into `d_dq` and `d_ddq`
/// (nv x nv); the entries off those blocks are left as they are. For a caller that reads only
/// the blocks (the transition Jacobians), which then need not clear the rest every call.
pub fn integrate_jacobian_blocks(
    model: &Model,
    dq: &[f64],
    d_dq: &mut nalgebra::DMatrix<f64>,
    d_ddq: &mut nalgebra::DMatrix<f64>,
) {
    assert!(
        d_dq.shape() == (model.nv, model.nv) && d_ddq.shape() == (model.nv, model.nv),
        "integrate_jacobian_blocks: d_dq and d_ddq must be nv x nv"
    );
    for j in &model.joints {
        let iv = j.idx_v;
        match j.kind {
            JointKind::FreeFlyer => {
                let nu = Vector6::from_column_slice(&dq[iv..iv + 6]);
                let ad = exp6(&nu).inverse().action_matrix();
                d_dq.view_mut((iv, iv), (6, 6)).copy_from(&ad);
                d_ddq.view_mut((iv, iv), (6, 6)).copy_from(&crate::spatial::lie::jr6(&nu));
            }
            _ => {
                d_dq[(iv, iv)] = 1.0;
                d_ddq[(iv, iv)] = 1.0;
            }
        }
    }
}

/// Re-normalizes the base quaternion in place (after user edits or parsing).
pub fn normalize(model: &Model, q: &mut [f64]) {
    for j in &model.joints {
        if j.kind == JointKind::FreeFlyer {
            let s = &mut q[j.idx_q + 3..j.idx_q + 7];
            let n = s.iter().map(|x| x * x).sum::<f64>().sqrt();
            if n > 0.0 {
                s.iter_mut().for_each(|x| *x /= n);
            }
        }
    }
}

/// Writes a base pose into `q`.
pub fn set_free_flyer(q: &mut [f64], m: &Se3) {
    let hint = [0.0, 0.0, 0.0, 1.0];
    write_free_flyer(m, &hint, &mut q[..7]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::builtin;

    fn sample(model: &Model, seed: u64) -> (DVector<f64>, DVector<f64>) {
        // A small deterministic generator is enough here; no RNG dependency in the library.
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        let mut q = neutral(model);
        for x in q.iter_mut() {
            *x = next();
        }
        normalize(model, q.as_mut_slice());
        let dq = DVector::from_fn(model.nv, |_, _| next());
        (q, dq)
    }

    #[test]
    fn difference_inverts_integrate() {
        let model = builtin::quadruped().unwrap().model;
        for seed in 0..20 {
            let (q0, dq) = sample(&model, seed);
            let mut q1 = q0.clone();
            integrate(&model, q0.as_slice(), dq.as_slice(), q1.as_mut_slice());
            let mut back = dq.clone();
            difference(&model, q0.as_slice(), q1.as_slice(), back.as_mut_slice());
            assert!((back - &dq).norm() < 1e-12, "seed {seed}");
            let quat_norm = q1.rows(3, 4).norm();
            assert!((quat_norm - 1.0).abs() < 1e-14);
        }
    }

    #[test]
    fn integrate_jacobians_match_finite_differences() {
        let model = builtin::quadruped().unwrap().model;
        let nv = model.nv;
        let (q, dq) = sample(&model, 11);
        let mut jq = nalgebra::DMatrix::zeros(nv, nv);
        let mut jv = nalgebra::DMatrix::zeros(nv, nv);
        integrate_jacobians(&model, dq.as_slice(), &mut jq, &mut jv);
        let mut q1 = q.clone();
        integrate(&model, q.as_slice(), dq.as_slice(), q1.as_mut_slice());
        let eps = 1e-6;
        let (mut qa, mut qb, mut qp, mut out) = (q.clone(), q.clone(), q.clone(), DVector::zeros(nv));
        for k in 0..nv {
            let mut e = DVector::zeros(nv);
            e[k] = eps;
            // Perturb q in its tangent space.
            integrate(&model, q.as_slice(), e.as_slice(), qa.as_mut_slice());
            integrate(&model, qa.as_slice(), dq.as_slice(), qp.as_mut_slice());
            difference(&model, q1.as_slice(), qp.as_slice(), out.as_mut_slice());
            integrate(&model, q.as_slice(), (-&e).as_slice(), qb.as_mut_slice());
            integrate(&model, qb.as_slice(), dq.as_slice(), qp.as_mut_slice());
            let mut out2 = DVector::zeros(nv);
            difference(&model, q1.as_slice(), qp.as_slice(), out2.as_mut_slice());
            assert!(((&out - &out2) / (2.0 * eps) - jq.column(k)).norm() < 1e-7, "d/dq column {k}");
            // Perturb dq.
            integrate(&model, q.as_slice(), (&dq + &e).as_slice(), qp.as_mut_slice());
            difference(&model, q1.as_slice(), qp.as_slice(), out.as_mut_slice());
            integrate(&model, q.as_slice(), (&dq - &e).as_slice(), qp.as_mut_slice());
            difference(&model, q1.as_slice(), qp.as_slice(), out2.as_mut_slice());
            assert!(((&out - &out2) / (2.0 * eps) - jv.column(k)).norm() < 1e-7, "d/ddq column {k}");
        }
    }

    #[test]
    fn integrate_jacobian_blocks_write_the_blocks_and_nothing_else() {
        let model = builtin::quadruped().unwrap().model;
        let nv = model.nv;
        let (_, dq) = sample(&model, 5);
        let (mut jq, mut jv) = (nalgebra::DMatrix::zeros(nv, nv), nalgebra::DMatrix::zeros(nv, nv));
        integrate_jacobians(&model, dq.as_slice(), &mut jq, &mut jv);
        // Off the blocks a marker survives; on them the entries are the full call's.
        let (mut bq, mut bv) =
            (nalgebra::DMatrix::from_element(nv, nv, 7.0), nalgebra::DMatrix::from_element(nv, nv, 7.0));
        integrate_jacobian_blocks(&model, dq.as_slice(), &mut bq, &mut bv);
        let joint_of = |d: usize| model.joints.iter().position(|j| (j.idx_v..j.idx_v + j.nv()).contains(&d)).unwrap();
        for r in 0..nv {
            for c in 0..nv {
                if joint_of(r) == joint_of(c) {
                    assert_eq!((bq[(r, c)], bv[(r, c)]), (jq[(r, c)], jv[(r, c)]), "block entry ({r}, {c})");
                } else {
                    assert_eq!((bq[(r, c)], bv[(r, c)]), (7.0, 7.0), "off-block entry ({r}, {c})");
                }
            }
        }
    }

    #[test]
    fn integrate_matches_the_body_twist_to_first_order() {
        // d/dt q(t) at t = 0 for q(t) = integrate(q, t v): the base moves with world velocity R v_lin.
        let model = builtin::quadruped().unwrap().model;
        let (q, v) = sample(&model, 3);
        let eps = 1e-7;
        let (mut qp, mut qm) = (q.clone(), q.clone());
        integrate(&model, q.as_slice(), (&v * eps).as_slice(), qp.as_mut_slice());
        integrate(&model, q.as_slice(), (&v * -eps).as_slice(), qm.as_mut_slice());
        let pdot = (qp.rows(0, 3) - qm.rows(0, 3)) / (2.0 * eps);
        let r = free_flyer_placement(q.as_slice()).rot;
        assert!((pdot - r * v.rows(0, 3)).norm() < 1e-7);
        assert!(((qp[7] - qm[7]) / (2.0 * eps) - v[6]).abs() < 1e-7);
    }
}
