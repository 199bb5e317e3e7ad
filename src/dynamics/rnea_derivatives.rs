//! Analytical derivatives of inverse dynamics, `d tau / d q` and `d tau / d v` for
//! `tau = rnea(q, v, a)`, in O(nv * depth) (Carpentier & Mansard, "Analytical Derivatives of
//! Rigid Body Dynamics Algorithms", RSS 2018; Pinocchio `rnea-derivatives.hxx`).
//!
//! Everything is expressed in the world frame about the world origin. For DoF `j` of joint
//! `i` (parent body `λ`), `J_j = oMi S_j` is its world motion subspace column. The forward pass
//! computes body velocities `ov_i`, accelerations `oa_i` (gravity included: `oa_world = -g`),
//! body forces `of_i = oI_i oa_i + ov_i x* oI_i ov_i` and per DoF
//!
//! ```text
//! dVdq_j = ov_λ x J_j
//! dAdq_j = oa_λ x J_j + ov_λ x dVdq_j
//! dAdv_j = ov_i x J_j + dVdq_j
//! B_i    = ov_i x* oI_i - oI_i ov_i x + (oI_i ov_i) x*-matrix      (u -> u x* (oI_i ov_i))
//! ```
//!
//! A tangent increment `dq_j` moves the subtree of joint `i` rigidly with the twist `J_j` (for
//! a free-flyer, `integrate` is `M exp6(dq)`, so all six DoFs of the base behave alike). The
//! force of a body `l` in that subtree then changes by
//! `d of_l = J_j x* of_l + oI_l dAdq_j + B_l dVdq_j`, and with `d ov_l / d v_j = J_j`,
//! `d of_l / d v_j = oI_l dAdv_j + B_l J_j`. Summing over subtrees (composites `oYcrb`,
//! `doYcrb` accumulated in the backward pass) and using `tau_k = J_k^T F_(joint k)`, where the
//! rigid-transport part `J_j x* F` cancels against `d J_k = J_j x J_k` whenever `j ⪯ k`:
//!
//! ```text
//! j ⪯ k (j's joint is an ancestor of, or is, k's joint c):
//!     dtau_k/dq_j = J_k^T (oYcrb_c dAdq_j + doYcrb_c dVdq_j)
//!     dtau_k/dv_j = J_k^T (oYcrb_c dAdv_j + doYcrb_c J_j)
//! k ≺ j (k's joint a strict ancestor of j's joint i):
//!     dtau_k/dq_j = J_k^T (oYcrb_i dAdq_j + doYcrb_i dVdq_j + J_j x* F_i)
//!     dtau_k/dv_j = J_k^T (oYcrb_i dAdv_j + doYcrb_i J_j)
//! otherwise (different branches): 0.
//! ```
//!
//! `d tau / d a = M(q)`, which [`crba`](super::crba::crba) computes.
//!
//! External forces. [`rnea_derivatives_with_forces`] takes world forces applied at points
//! rigidly attached to bodies, with optional pure torques, all held fixed in the world
//! ([`PointForce`]); they enter as `tau = rnea(q, v, a) - sum J^T F_e` (the torque the joints
//! must supply when the external loads help), `F_e = [f; p x f + t]` about the world origin.
//! They are folded into the passes above: `-F_e` joins its body's force `of_l`, so the subtree
//! forces, `tau` and the rigid-transport term `J_j x* F_i` include it. A world-fixed load is not
//! carried along by the rotation of its body, though: with `u_j = v_j + w_j x p`,
//! `d F_e / d q_j = [0; u_j x f]` against the transport `J_j x* F_e`, and the difference
//! (Jacobi's identity) is linear in `w_j` alone:
//!
//! ```text
//! J_j x* F_e - d F_e / d q_j = Phi_e w_j,   Phi_e = [-[f]x; -[p]x [f]x - [t]x]   (6 x 3).
//! ```
//!
//! So `d(-F_e)/dq_j = J_j x* (-F_e) + Phi_e w_j` for every `j` on the load's chain, and the
//! formulas above take `+ J_k^T oPhi_c w_j` with `oPhi_c` the sum of `Phi_e` over the subtree of
//! the deeper joint `c` of the pair (accumulated like `oYcrb`). This is Pinocchio's treatment
//! of `fext`, for loads fixed in the world instead of in the body: O(1) per load rather than
//! O(depth^2) with [`jt_force_derivative`](super::kinematics_derivatives::jt_force_derivative),
//! which a caller that only needs `d (J^T lambda) / d q` calls directly (see
//! `kinematics_derivatives` for contact frames).

use super::kinematics::{joint_motion, joint_transform};
use crate::model::{Data, Model, NO_DOF};
use crate::spatial::{ang, cross_force, cross_motion, lin, motion, skew};
use nalgebra::{Matrix3, Matrix6, Matrix6x3, Vector3, Vector6};

/// A world-frame force applied at a point rigidly attached to a body, and a pure torque on the
/// body, both held fixed in the world while `q` varies (the point is material: it moves with the
/// body).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PointForce {
    /// Body the point belongs to.
    pub body: usize,
    /// Current position of the point, world frame (m).
    pub point: Vector3<f64>,
    /// Force, world frame (N).
    pub force: Vector3<f64>,
    /// Pure torque on the body, world frame (N m); zero for a plain point force.
    pub torque: Vector3<f64>,
}

impl PointForce {
    /// A point force without torque.
    pub fn new(body: usize, point: Vector3<f64>, force: Vector3<f64>) -> Self {
        Self { body, point, force, torque: Vector3::zeros() }
    }
}

/// `d tau / d q` into `data.dtau_dq` and `d tau / d v` into `data.dtau_dv` (nv x nv, tangent
/// space) at `(q, v, a)`; also `tau = rnea(q, v, a)` into `data.tau` and the body placements.
/// Allocation-free.
pub fn rnea_derivatives(model: &Model, data: &mut Data, q: &[f64], v: &[f64], a: &[f64]) {
    rnea_derivatives_with_forces(model, data, q, v, a, &[]);
}

/// [`rnea_derivatives`] with external point forces and torques:
/// `tau = rnea(q, v, a) - sum_i (J_pi^T f_i + J_wi^T t_i)` and its derivatives (the loads are
/// world-fixed; their points move with their bodies).
pub fn rnea_derivatives_with_forces(
    model: &Model,
    data: &mut Data,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    forces: &[PointForce],
) {
    let q = Some(q);
    crate::linalg::avx2_dispatch!(
        with_forces,
        (model: &Model, data: &mut Data, q: Option<&[f64]>, v: &[f64], a: &[f64], forces: &[PointForce])
    )
}

/// [`rnea_derivatives_with_forces`] at the configuration whose body placements `data.li_m_i`
/// and `data.o_m_i` already hold (copied from a step's workspace, which computed them for the
/// same `q`): the same numbers without the joint transforms' trigonometry.
pub fn rnea_derivatives_from_placements(model: &Model, data: &mut Data, v: &[f64], a: &[f64], forces: &[PointForce]) {
    let q = None;
    crate::linalg::avx2_dispatch!(
        with_forces,
        (model: &Model, data: &mut Data, q: Option<&[f64]>, v: &[f64], a: &[f64], forces: &[PointForce])
    )
}

#[inline(always)]
fn with_forces(model: &Model, data: &mut Data, q: Option<&[f64]>, v: &[f64], a: &[f64], forces: &[PointForce]) {
    let a_world = motion(&(-model.gravity), &Vector3::zeros());
    for (i, j) in model.joints.iter().enumerate() {
        let (iq, iv, nv) = (j.idx_q, j.idx_v, j.nv());
        let li = match q {
            Some(q) => {
                let li = j.placement.compose(&joint_transform(&j.kind, &q[iq..iq + j.nq()]));
                data.li_m_i[i] = li;
                data.o_m_i[i] = match j.parent {
                    Some(p) => data.o_m_i[p].compose(&li),
                    None => li,
                };
                li
            }
            None => data.li_m_i[i],
        };
        let vj = joint_motion(&j.kind, &v[iv..iv + nv]);
        let aj = joint_motion(&j.kind, &a[iv..iv + nv]);
        let (vp, ap, ov_p, oa_p) = match j.parent {
            Some(p) => (li.act_inv_motion(&data.v[p]), li.act_inv_motion(&data.a[p]), data.ov[p], data.oa_gf[p]),
            None => (Vector6::zeros(), li.act_inv_motion(&a_world), Vector6::zeros(), a_world),
        };
        let vi = vp + vj;
        let ai = ap + aj + cross_motion(&vi, &vj);
        data.v[i] = vi;
        data.a[i] = ai;
        let o = data.o_m_i[i];
        let ov = o.act_motion(&vi);
        let oa = o.act_motion(&ai);
        for c in 0..nv {
            let col = iv + c;
            let jc = o.act_motion(&j.kind.subspace_col(c));
            let dvdq = cross_motion(&ov_p, &jc);
            data.dadq[col] = cross_motion(&oa_p, &jc) + cross_motion(&ov_p, &dvdq);
            data.dadv[col] = cross_motion(&ov, &jc) + dvdq;
            data.dvdq[col] = dvdq;
            data.oj[col] = jc;
        }
        // Written in place: a 6 x 6 returned by value is a copy per joint.
        data.o_ycrb[i] = model.inertias[i].transformed(&o).matrix();
        let oi = &data.o_ycrb[i];
        let h = mul6(oi, &ov);
        data.of[i] = mul6(oi, &oa) + cross_force(&ov, &h);
        inertia_velocity_variation(oi, &ov, &h, &mut data.do_ycrb[i]);
        data.o_phi[i] = Matrix6x3::zeros();
        data.ov[i] = ov;
        data.oa_gf[i] = oa;
    }

    // External loads join their bodies' forces as -F_e (module docs).
    for pf in forces {
        let (f, p, t) = (&pf.force, &pf.point, &pf.torque);
        data.of[pf.body] -= motion(f, &(p.cross(f) + t));
        let fx = skew(f);
        let phi = &mut data.o_phi[pf.body];
        let mut top = phi.fixed_view_mut::<3, 3>(0, 0);
        top -= fx;
        let mut bottom = phi.fixed_view_mut::<3, 3>(3, 0);
        bottom -= skew(p) * fx + skew(t);
    }
    let loaded = !forces.is_empty();

    // As slices: nalgebra's `fill` steps through a strided iterator, entry by entry.
    data.dtau_dq.as_mut_slice().fill(0.0);
    data.dtau_dv.as_mut_slice().fill(0.0);
    let nvt = model.nv;
    // Column-major nv x nv slices: entry (r, c) at `r + c nv`. The subtree quantities are read
    // in place (a copy of the two 6 x 6 composites per joint cost more than their use).
    let (dtq, dtv) = (data.dtau_dq.as_mut_slice(), data.dtau_dv.as_mut_slice());
    let (oj, dadq, dadv, dvdq) = (&data.oj, &data.dadq, &data.dadv, &data.dvdq);
    for i in (0..model.joints.len()).rev() {
        let j = &model.joints[i];
        let (iv, nv) = (j.idx_v, j.nv());
        let f = data.of[i];
        let (y, dy, phi) = (&data.o_ycrb[i], &data.do_ycrb[i], &data.o_phi[i]);
        for c in 0..nv {
            let col = iv + c;
            data.tau[col] = oj[col].dot(&f);
            let dfdv = mul6(y, &dadv[col]) + mul6(dy, &oj[col]);
            let mut dfdq = mul6(y, &dadq[col]) + mul6(dy, &dvdq[col]);
            if loaded {
                dfdq += phi * ang(&oj[col]);
            }
            let (cq, cv) = (&mut dtq[col * nvt..(col + 1) * nvt], &mut dtv[col * nvt..(col + 1) * nvt]);
            // Rows of this joint (j ⪯ k both ways for a free-flyer's own DoFs).
            for r in iv..iv + nv {
                cq[r] = oj[r].dot(&dfdq);
                cv[r] = oj[r].dot(&dfdv);
            }
            // Rows of strict ancestors: their columns J_k do not move with dq_j, so the rigid
            // transport of the subtree force does not cancel. (Up the dof chain from the
            // joint's first dof: the ancestors' dofs, each entry on its own.)
            let dfdq_up = dfdq + cross_force(&oj[col], &f);
            let mut r = model.dof_parent[iv];
            while r != NO_DOF {
                cq[r] = oj[r].dot(&dfdq_up);
                cv[r] = oj[r].dot(&dfdv);
                r = model.dof_parent[r];
            }
        }
        // Rows of this joint, columns of strict ancestors: J_k^T oYcrb = (oYcrb J_k)^T as
        // oYcrb is symmetric, so each row needs two 6-vectors.
        for r in iv..iv + nv {
            let yk = mul6(y, &oj[r]);
            let dk = tr_mul6(dy, &oj[r]);
            let pk = if loaded { phi.tr_mul(&oj[r]) } else { Vector3::zeros() };
            let mut col = model.dof_parent[iv];
            while col != NO_DOF {
                let mut d = yk.dot(&dadq[col]) + dk.dot(&dvdq[col]);
                if loaded {
                    d += pk.dot(&ang(&oj[col]));
                }
                dtq[r + col * nvt] = d;
                dtv[r + col * nvt] = yk.dot(&dadv[col]) + dk.dot(&oj[col]);
                col = model.dof_parent[col];
            }
        }
        if let Some(p) = j.parent {
            // p < i (parents come first), so the parent is in the lower half.
            data.of[p] += f;
            let (lo, hi) = data.o_ycrb.split_at_mut(i);
            lo[p] += &hi[0];
            let (lo, hi) = data.do_ycrb.split_at_mut(i);
            lo[p] += &hi[0];
            if loaded {
                let (lo, hi) = data.o_phi.split_at_mut(i);
                lo[p] += &hi[0];
            }
        }
    }
}

/// `m x`, summed over the columns of `m` in order as nalgebra's product does (the same bits).
/// Written out because nalgebra's generic product, inlined into the AVX2 copy with the 6 x 6
/// blocks read in place, compiled to a register-to-register VEX `vmovq`, which valgrind 3.19
/// (the instruction counter of `scripts/reproduce perfcount`) cannot decode.
#[inline(always)]
fn mul6(m: &Matrix6<f64>, x: &Vector6<f64>) -> Vector6<f64> {
    let s = m.as_slice();
    let mut o = [0.0; 6];
    for (r, o) in o.iter_mut().enumerate() {
        *o = s[r] * x[0];
    }
    for k in 1..6 {
        for (r, o) in o.iter_mut().enumerate() {
            *o += s[6 * k + r] * x[k];
        }
    }
    Vector6::from(o)
}

/// `m^T x`: each entry the dot product of a column of `m` with `x`, summed in order from zero
/// as nalgebra's `tr_mul` does.
#[inline(always)]
fn tr_mul6(m: &Matrix6<f64>, x: &Vector6<f64>) -> Vector6<f64> {
    let s = m.as_slice();
    let mut o = [0.0; 6];
    for (c, o) in o.iter_mut().enumerate() {
        let mut acc = 0.0;
        for k in 0..6 {
            acc += s[6 * c + k] * x[k];
        }
        *o = acc;
    }
    Vector6::from(o)
}

/// `B(I, v) = v x* I - I v x + (I v) x*-matrix`, so that
/// `B u = I (u x v) + v x* (I u) + u x* (I v)`: the change of a body force `I a + v x* I v` that
/// is linear in a motion change `u` entering both `a` (as `u x v`) and `v` (Pinocchio's `doYcrb`),
/// written into `b`.
fn inertia_velocity_variation(i6: &Matrix6<f64>, v: &Vector6<f64>, h: &Vector6<f64>, b: &mut Matrix6<f64>) {
    // crf(v) = [[w x, 0], [v x, w x]]; crm(v) = -crf(v)^T, and since I is symmetric
    // crf(v) I - I crm(v) = A + A^T with A = crf(v) I. A's column c is
    // [w x I_top; v x I_top + w x I_bottom] of I's column c: the dense product's sums over k in
    // increasing order with its structural zeros left out (adding a zero product changes no
    // sum), so the entries are the dense product's bit for bit at a quarter of the work.
    let (w, u) = (ang(v), lin(v));
    let s = i6.as_slice();
    let mut a = Matrix6::zeros();
    let out = a.as_mut_slice();
    for c in 0..6 {
        let (x, y) = (&s[6 * c..6 * c + 3], &s[6 * c + 3..6 * c + 6]);
        let o = &mut out[6 * c..6 * c + 6];
        // Rows of w x (skew rows [0, -wz, wy], [wz, 0, -wx], [-wy, wx, 0]).
        o[0] = -w.z * x[1] + w.y * x[2];
        o[1] = w.z * x[0] + -w.x * x[2];
        o[2] = -w.y * x[0] + w.x * x[1];
        o[3] = ((-u.z * x[1] + u.y * x[2]) + -w.z * y[1]) + w.y * y[2];
        o[4] = ((u.z * x[0] + -u.x * x[2]) + w.z * y[0]) + -w.x * y[2];
        o[5] = ((-u.y * x[0] + u.x * x[1]) + -w.y * y[0]) + w.x * y[1];
    }
    // b = a + a^T, entry by entry as nalgebra's sum of the two.
    let (sa, sb) = (a.as_slice(), b.as_mut_slice());
    for c in 0..6 {
        for r in 0..6 {
            sb[r + 6 * c] = sa[r + 6 * c] + sa[c + 6 * r];
        }
    }
    // u x* h = [w_u x f_h; w_u x n_h + v_u x f_h] = [[0, -f x], [-f x, -n x]] u.
    let (fx, nx): (Matrix3<f64>, Matrix3<f64>) = (skew(&lin(h)), skew(&ang(h)));
    let mut top_right = b.fixed_view_mut::<3, 3>(0, 3);
    top_right -= fx;
    let mut bottom_left = b.fixed_view_mut::<3, 3>(3, 0);
    bottom_left -= fx;
    let mut bottom_right = b.fixed_view_mut::<3, 3>(3, 3);
    bottom_right -= nx;
}
