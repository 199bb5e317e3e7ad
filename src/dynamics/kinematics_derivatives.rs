//! Derivatives of point kinematics with respect to the configuration, in the tangent space of
//! `integrate` (Carpentier & Mansard, "Analytical Derivatives of Rigid Body Dynamics
//! Algorithms", RSS 2018, sec. IV; Pinocchio `kinematics-derivatives.hxx`).
//!
//! Setting. A point `p` (world coordinates) is rigidly attached to `body`. For every DoF `k` on
//! the chain root..body, let `(v_k, w_k)` be its world-frame motion subspace column about the
//! world origin and `u_k = v_k + w_k x p` the column of the LOCAL_WORLD_ALIGNED point Jacobian
//! `J_p` (so `pdot = J_p v = sum_k u_k v_k`). Write `j ⪯ k` when the joint of DoF `j` is an
//! ancestor of, or the same joint as, the joint of DoF `k` (for a free-flyer all six DoFs are
//! mutually `⪯`, because `integrate` perturbs the base as `M exp6(dq)` on the right).
//!
//! A tangent increment `dq_j` moves the subtree of its joint rigidly with the world twist
//! `(v_j, w_j)`. Hence
//!
//! * `d p / d q_j = u_j`, i.e. **`d p_world / d q = J_p`** (no separate function is needed:
//!   use [`point_jacobian`](super::kinematics::point_jacobian));
//! * `d u_k / d q_j = w_j x u_k` for `j ⪯ k` (column `k` is carried along with the point),
//!   and `d u_k / d q_j = w_k x u_j` for `k ≺ j` (column `k` is fixed, the point moves by `u_j`).
//!
//! Contracting with a velocity `v` or with a force `f` gives the two products the contact step
//! needs, each in O(depth) or O(depth^2) with no `nv x nv` intermediate:
//!
//! * [`point_velocity_derivative`]: `d (J_p v) / d q` at fixed `v`, column `j` equal to
//!   `w_j x (pdot - pdot_parent) + w_parent x u_j`, where `pdot_parent` and `w_parent` are the
//!   contributions of the strict ancestors of `j`'s joint (the velocity `p` would have if it were
//!   fixed to that joint's parent body, and that body's angular velocity).
//! * [`jt_force_derivative`]: `d (J_p^T f) / d q` for a force `f` held fixed in the world,
//!   entry `(k, j)` equal to `f . (w_j x u_k)` when `j ⪯ k` and `f . (w_k x u_j)` when `k ≺ j`.
//!
//! A contact impulse `lambda` given in a contact frame `C = [n t1 t2]` is the world force
//! `f = C lambda`. For flat terrain `C` does not depend on `q`, so
//! `d (J_c^T lambda) / d q = d (J_p^T C lambda) / d q` is exactly [`jt_force_derivative`] with
//! `f = C lambda`, and `d (J_c v) / d q = C^T d (J_p v) / d q`. On curved terrain the caller adds
//! the terms from `dC/dq` (the frame moves with the contact point).

use crate::model::Model;
use crate::spatial::{ang, lin, Se3};
use nalgebra::{DMatrix, Vector3};

/// `(w_k, u_k)`: angular part of the world motion subspace column `c` of body `b`'s joint and
/// the linear velocity it gives the world point `p`.
#[inline]
fn point_column(model: &Model, o_m_i: &[Se3], b: usize, c: usize, p: &Vector3<f64>) -> (Vector3<f64>, Vector3<f64>) {
    let s = model.joints[b].kind.subspace_col(c);
    let o = &o_m_i[b];
    let w = o.rot * ang(&s);
    (w, o.rot * lin(&s) + w.cross(&(p - o.trans)))
}

/// `d (J_p v) / d q` at fixed `v` (3 x nv, tangent space), written into `out` (columns of
/// non-ancestor DoFs are zeroed): the change of the world velocity of the point `p_world`,
/// rigidly attached to `body`, when `q` moves and the joint rates `v` stay fixed.
///
/// `v` is any velocity (for instance the contact step's free velocity), not necessarily the
/// one of the last `forward_kinematics`. Needs the body placements `o_m_i` at `q` (from
/// `forward_kinematics` or any algorithm that updates them). Allocation-free.
pub fn point_velocity_derivative(
    model: &Model,
    o_m_i: &[Se3],
    body: usize,
    p_world: &Vector3<f64>,
    v: &[f64],
    out: &mut DMatrix<f64>,
) {
    assert_eq!(out.shape(), (3, model.nv), "point_velocity_derivative: out must be 3 x nv");
    out.as_mut_slice().fill(0.0);
    with_chain_columns(model, o_m_i, body, Some(p_world), |cols| point_velocity_columns(model, body, cols, v, out));
}

/// [`point_velocity_derivative`] and [`angular_velocity_derivative`] of one body at once, from
/// one evaluation of its chain's columns (what a contact's velocity derivative needs); the same
/// numbers as the two calls.
pub fn contact_velocity_derivatives(
    model: &Model,
    o_m_i: &[Se3],
    body: usize,
    p_world: &Vector3<f64>,
    v: &[f64],
    d_point: &mut DMatrix<f64>,
    d_omega: &mut DMatrix<f64>,
) {
    assert_eq!(d_point.shape(), (3, model.nv), "contact_velocity_derivatives: d_point must be 3 x nv");
    assert_eq!(d_omega.shape(), (3, model.nv), "contact_velocity_derivatives: d_omega must be 3 x nv");
    d_point.as_mut_slice().fill(0.0);
    d_omega.as_mut_slice().fill(0.0);
    with_chain_columns(model, o_m_i, body, Some(p_world), |cols| {
        point_velocity_columns(model, body, cols, v, d_point);
        angular_velocity_columns(model, body, cols, v, d_omega);
    });
}

/// The columns of [`point_velocity_derivative`] from the chain's columns: `pdot` summed root
/// first, then joint by joint (every joint of the chain, so the parent sums take the same
/// additions as a loop over joints would).
#[inline]
fn point_velocity_columns(model: &Model, body: usize, cols: &[ChainColumn], v: &[f64], out: &mut DMatrix<f64>) {
    let mut pdot = Vector3::zeros();
    for k in cols {
        pdot += k.u * v[k.dof];
    }
    // Contributions of the joints above the current one, accumulated root first.
    let mut pdot_parent = Vector3::zeros();
    let mut w_parent = Vector3::zeros();
    let mut next = cols.iter().peekable();
    for pos in 0..model.supports[body].len() {
        let (mut dp, mut dw) = (Vector3::zeros(), Vector3::zeros());
        while let Some(k) = next.next_if(|k| k.pos == pos) {
            let col = k.w.cross(&(pdot - pdot_parent)) + w_parent.cross(&k.u);
            out.fixed_view_mut::<3, 1>(0, k.dof).copy_from(&col);
            dp += k.u * v[k.dof];
            dw += k.w * v[k.dof];
        }
        pdot_parent += dp;
        w_parent += dw;
    }
}

/// The columns of [`angular_velocity_derivative`] from the chain's columns (their `w`).
#[inline]
fn angular_velocity_columns(model: &Model, body: usize, cols: &[ChainColumn], v: &[f64], out: &mut DMatrix<f64>) {
    let mut omega = Vector3::zeros();
    for k in cols {
        omega += k.w * v[k.dof];
    }
    let mut omega_parent = Vector3::zeros();
    let mut next = cols.iter().peekable();
    for pos in 0..model.supports[body].len() {
        let mut dw = Vector3::zeros();
        while let Some(k) = next.next_if(|k| k.pos == pos) {
            out.fixed_view_mut::<3, 1>(0, k.dof).copy_from(&k.w.cross(&(omega - omega_parent)));
            dw += k.w * v[k.dof];
        }
        omega_parent += dw;
    }
}

/// Adds `d (J_p^T f) / d q` (nv x nv, tangent space) to `out`, for the world force `f_world`
/// held fixed in the world and applied at the point `p_world` rigidly attached to `body`.
/// Only the rows and columns of the chain root..body are touched.
///
/// To subtract (an external force in inverse dynamics, `tau = rnea - J^T f`), pass `-f`.
/// Needs the body placements `o_m_i` at `q`. Allocation-free for chains of up to 48 DoFs; O(depth^2).
pub fn jt_force_derivative(
    model: &Model,
    o_m_i: &[Se3],
    body: usize,
    p_world: &Vector3<f64>,
    f_world: &Vector3<f64>,
    out: &mut DMatrix<f64>,
) {
    assert_eq!(out.shape(), (model.nv, model.nv), "jt_force_derivative: out must be nv x nv");
    // Each pair (k, j) of the chain's DoFs needs both columns: compute them once.
    with_chain_columns(model, o_m_i, body, Some(p_world), |cols| {
        for k in cols {
            // f . (w_j x u_k) = w_j . (u_k x f) for every j with j ⪯ k.
            let uk_x_f = k.u.cross(f_world);
            // f . (w_k x u_j) = u_j . (f x w_k) for every j with k ≺ j.
            let f_x_wk = f_world.cross(&k.w);
            for j in cols {
                let val = if j.pos <= k.pos { j.w.dot(&uk_x_f) } else { j.u.dot(&f_x_wk) };
                out[(k.dof, j.dof)] += val;
            }
        }
    })
}

/// The columns of one DoF of a chain: its joint's position on the chain, the DoF, its world
/// angular axis `w` and the linear velocity `u` it gives a point (zero if none was asked).
#[derive(Clone, Copy, Default)]
struct ChainColumn {
    pos: usize,
    dof: usize,
    w: Vector3<f64>,
    u: Vector3<f64>,
}

/// DoFs on one root-to-body chain that [`with_chain_columns`] keeps on the stack.
const CHAIN_CAPACITY: usize = 48;

/// Calls `f` with the columns of the chain root..`body`, root first (with the linear velocities
/// they give `p_world`, if asked). Allocation-free for chains of up to [`CHAIN_CAPACITY`] DoFs
/// (every builtin robot's); a longer chain takes a heap buffer.
fn with_chain_columns<R>(
    model: &Model,
    o_m_i: &[Se3],
    body: usize,
    p_world: Option<&Vector3<f64>>,
    f: impl FnOnce(&[ChainColumn]) -> R,
) -> R {
    let mut stack = [ChainColumn::default(); CHAIN_CAPACITY];
    match chain_columns(model, o_m_i, body, p_world, &mut stack) {
        Some(n) => f(&stack[..n]),
        None => {
            let dofs = model.supports[body].iter().map(|&b| model.joints[b].nv()).sum();
            let mut heap = vec![ChainColumn::default(); dofs];
            let n = chain_columns(model, o_m_i, body, p_world, &mut heap).unwrap_or(0);
            f(&heap[..n])
        }
    }
}

/// Fills `cols` with the columns of the chain root..`body` (root first) and returns their
/// number, or `None` if there are more than `cols` holds.
fn chain_columns(
    model: &Model,
    o_m_i: &[Se3],
    body: usize,
    p_world: Option<&Vector3<f64>>,
    cols: &mut [ChainColumn],
) -> Option<usize> {
    let mut n = 0;
    for (pos, &b) in model.supports[body].iter().enumerate() {
        let j = &model.joints[b];
        for c in 0..j.nv() {
            let slot = cols.get_mut(n)?;
            let (w, u) = match p_world {
                Some(p) => point_column(model, o_m_i, b, c, p),
                None => (angular_column(model, o_m_i, b, c), Vector3::zeros()),
            };
            *slot = ChainColumn { pos, dof: j.idx_v + c, w, u };
            n += 1;
        }
    }
    Some(n)
}

/// Adds `J_p^T f` (nv) to `out` for the world force `f_world` at `p_world` on `body`.
pub fn add_jt_force(
    model: &Model,
    o_m_i: &[Se3],
    body: usize,
    p_world: &Vector3<f64>,
    f_world: &Vector3<f64>,
    out: &mut [f64],
) {
    for &b in &model.supports[body] {
        let j = &model.joints[b];
        for c in 0..j.nv() {
            out[j.idx_v + c] += point_column(model, o_m_i, b, c, p_world).1.dot(f_world);
        }
    }
}

/// World angular axis `w_k` of DoF column `c` of body `b`'s joint.
#[inline]
fn angular_column(model: &Model, o_m_i: &[Se3], b: usize, c: usize) -> Vector3<f64> {
    o_m_i[b].rot * ang(&model.joints[b].kind.subspace_col(c))
}

/// `d omega / d q` at fixed `v` (3 x nv, tangent space) into `out` (other columns zeroed), for
/// the world angular velocity `omega = J_w v = sum_k w_k v_k` of `body`.
///
/// With `d w_k / d q_j = w_j x w_k` for `j ⪯ k` and `0` for `k ≺ j` (a strict ancestor's axis
/// does not move with a descendant's DoF), column `j` is `w_j x (omega - omega_parent)`, where
/// `omega_parent` sums the strict ancestor joints of `j`. For a free-flyer this is the
/// `R (e_j x e_k)` pattern of the right perturbation `M exp6(dq)`. Allocation-free.
pub fn angular_velocity_derivative(model: &Model, o_m_i: &[Se3], body: usize, v: &[f64], out: &mut DMatrix<f64>) {
    assert_eq!(out.shape(), (3, model.nv), "angular_velocity_derivative: out must be 3 x nv");
    out.as_mut_slice().fill(0.0);
    with_chain_columns(model, o_m_i, body, None, |cols| angular_velocity_columns(model, body, cols, v, out));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamics::forward_kinematics;
    use crate::model::urdf::{load_str, RootJoint};
    use crate::model::{neutral, Data};
    use std::path::Path;

    /// A chain longer than [`CHAIN_CAPACITY`] (50 revolute links in series on a free-flyer, 56
    /// DoFs) takes the heap buffer and gives the pairwise definition of `d (J_p^T f) / d q`.
    #[test]
    fn a_chain_longer_than_the_stack_buffer_gives_the_pairwise_derivative() {
        let inertial = "<inertial><mass value=\"1\"/><inertia ixx=\"0.01\" iyy=\"0.01\" izz=\"0.01\" \
                        ixy=\"0\" ixz=\"0\" iyz=\"0\"/></inertial>";
        let mut urdf = format!("<robot name=\"snake\"><link name=\"l0\">{inertial}</link>");
        for i in 1..=50 {
            let axis = ["1 0 0", "0 1 0", "0 0 1"][i % 3];
            urdf += &format!(
                "<link name=\"l{i}\">{inertial}</link><joint name=\"j{i}\" type=\"revolute\">\
                 <parent link=\"l{}\"/><child link=\"l{i}\"/><origin xyz=\"0.1 0.02 0\"/>\
                 <axis xyz=\"{axis}\"/><limit lower=\"-3\" upper=\"3\" effort=\"10\" velocity=\"10\"/></joint>",
                i - 1
            );
        }
        urdf += "</robot>";
        let model = load_str(&urdf, Path::new("snake.urdf"), RootJoint::FreeFlyer).unwrap().model;
        let mut data = Data::new(&model);
        let mut q = neutral(&model);
        for (i, x) in q.iter_mut().enumerate().skip(7) {
            *x = 0.2 * (i as f64).sin();
        }
        forward_kinematics(&model, &mut data, q.as_slice(), None);
        let tip = model.body_index("l50").unwrap();
        let (p, f) = (Vector3::new(0.3, -0.2, 0.1), Vector3::new(1.0, -2.0, 0.5));
        let mut out = DMatrix::zeros(model.nv, model.nv);
        jt_force_derivative(&model, &data.o_m_i, tip, &p, &f, &mut out);
        let mut reference = DMatrix::zeros(model.nv, model.nv);
        let chain = &model.supports[tip];
        let dofs: usize = chain.iter().map(|&b| model.joints[b].nv()).sum();
        assert!(dofs > CHAIN_CAPACITY);
        for (pos_k, &bk) in chain.iter().enumerate() {
            for ck in 0..model.joints[bk].nv() {
                let (wk, uk) = point_column(&model, &data.o_m_i, bk, ck, &p);
                for (pos_j, &bj) in chain.iter().enumerate() {
                    for cj in 0..model.joints[bj].nv() {
                        let (wj, uj) = point_column(&model, &data.o_m_i, bj, cj, &p);
                        let val = if pos_j <= pos_k { wj.dot(&uk.cross(&f)) } else { uj.dot(&f.cross(&wk)) };
                        reference[(model.joints[bk].idx_v + ck, model.joints[bj].idx_v + cj)] += val;
                    }
                }
            }
        }
        assert!(reference.norm() > 0.0);
        assert_eq!(out, reference);
    }

    /// The velocity derivatives from the chain's columns, alone and both at once, are the
    /// joint-by-joint loops that recompute each column where they need it (the form they had
    /// before the columns were shared), bit for bit, on every body of the quadruped at a
    /// generic state (tests/rbd_derivatives.rs checks them against finite differences).
    #[test]
    fn velocity_derivatives_from_shared_columns_are_the_joint_loops_bit_for_bit() {
        let model = crate::model::builtin::quadruped().unwrap().model;
        let mut data = Data::new(&model);
        let mut q = neutral(&model);
        for (i, x) in q.iter_mut().enumerate() {
            *x += 0.3 * ((i as f64) * 1.7).sin();
        }
        crate::model::configuration::normalize(&model, q.as_mut_slice());
        let v: Vec<f64> = (0..model.nv).map(|i| ((i as f64) * 0.9).cos()).collect();
        forward_kinematics(&model, &mut data, q.as_slice(), None);
        for body in 1..model.nbodies() {
            let p = data.o_m_i[body].trans + Vector3::new(0.01, -0.02, -0.2);
            // Reference: the joint-by-joint loops.
            let mut ref_p = DMatrix::zeros(3, model.nv);
            let mut ref_w = DMatrix::zeros(3, model.nv);
            let chain = &model.supports[body];
            let (mut pdot, mut omega) = (Vector3::zeros(), Vector3::zeros());
            for &b in chain {
                let j = &model.joints[b];
                for c in 0..j.nv() {
                    pdot += point_column(&model, &data.o_m_i, b, c, &p).1 * v[j.idx_v + c];
                    omega += angular_column(&model, &data.o_m_i, b, c) * v[j.idx_v + c];
                }
            }
            let (mut pdot_parent, mut w_parent, mut omega_parent) =
                (Vector3::zeros(), Vector3::zeros(), Vector3::zeros());
            for &b in chain {
                let j = &model.joints[b];
                let (mut dp, mut dw, mut dw2) = (Vector3::zeros(), Vector3::zeros(), Vector3::zeros());
                for c in 0..j.nv() {
                    let (w, u) = point_column(&model, &data.o_m_i, b, c, &p);
                    let col = w.cross(&(pdot - pdot_parent)) + w_parent.cross(&u);
                    ref_p.fixed_view_mut::<3, 1>(0, j.idx_v + c).copy_from(&col);
                    dp += u * v[j.idx_v + c];
                    dw += w * v[j.idx_v + c];
                    let wa = angular_column(&model, &data.o_m_i, b, c);
                    ref_w.fixed_view_mut::<3, 1>(0, j.idx_v + c).copy_from(&wa.cross(&(omega - omega_parent)));
                    dw2 += wa * v[j.idx_v + c];
                }
                pdot_parent += dp;
                w_parent += dw;
                omega_parent += dw2;
            }
            let (mut dp, mut dw) = (DMatrix::zeros(3, model.nv), DMatrix::zeros(3, model.nv));
            contact_velocity_derivatives(&model, &data.o_m_i, body, &p, &v, &mut dp, &mut dw);
            let bits = |m: &DMatrix<f64>| m.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&dp), bits(&ref_p), "body {body}: point");
            assert_eq!(bits(&dw), bits(&ref_w), "body {body}: angular");
            let mut alone = DMatrix::from_element(3, model.nv, f64::NAN);
            point_velocity_derivative(&model, &data.o_m_i, body, &p, &v, &mut alone);
            assert_eq!(bits(&alone), bits(&ref_p), "body {body}: point alone");
            angular_velocity_derivative(&model, &data.o_m_i, body, &v, &mut alone);
            assert_eq!(bits(&alone), bits(&ref_w), "body {body}: angular alone");
            if body + 1 == model.nbodies() {
                assert!(ref_p.norm() > 0.1 && ref_w.norm() > 0.1);
            }
        }
    }
}
