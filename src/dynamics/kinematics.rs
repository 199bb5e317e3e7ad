//! Forward kinematics, frame placements, point Jacobians, centre of mass and momentum.
//!
//! `forward_kinematics` computes `parentMi = jointPlacement * XJ(q_i)`, `worldMi` and the body
//! velocities `v_i = iXparent v_parent + S_i qd_i` in body coordinates.
//! `point_jacobian` gives the LOCAL_WORLD_ALIGNED linear Jacobian of a point fixed on a body:
//! `pdot_world = J v`, column `k` being `w_k x (p - o_k) + v_k` for the world-frame motion
//! subspace column `(v_k, w_k)` of an ancestor joint (expressed about the world origin).

use crate::model::configuration::free_flyer_placement;
use crate::model::{Data, JointKind, Model};
use crate::spatial::{ang, lin, Se3};
use nalgebra::{DMatrix, Rotation3, Unit, Vector3, Vector6};

/// `XJ(q)`: the joint's own motion.
#[inline]
pub fn joint_transform(kind: &JointKind, q: &[f64]) -> Se3 {
    match kind {
        JointKind::FreeFlyer => free_flyer_placement(q),
        JointKind::Revolute { axis } => {
            let r = Rotation3::from_axis_angle(&Unit::new_unchecked(*axis), q[0]);
            Se3::new(*r.matrix(), Vector3::zeros())
        }
        JointKind::Prismatic { axis } => Se3::from_translation(axis * q[0]),
    }
}

/// Joint velocity `S qd` in the joint frame.
#[inline]
pub fn joint_motion(kind: &JointKind, v: &[f64]) -> Vector6<f64> {
    match kind {
        JointKind::FreeFlyer => Vector6::from_column_slice(&v[..6]),
        _ => kind.subspace_col(0) * v[0],
    }
}

/// Placements (and velocities when `v` is given) of every body.
pub fn forward_kinematics(model: &Model, data: &mut Data, q: &[f64], v: Option<&[f64]>) {
    for (i, j) in model.joints.iter().enumerate() {
        let xj = joint_transform(&j.kind, &q[j.idx_q..j.idx_q + j.nq()]);
        data.li_m_i[i] = j.placement.compose(&xj);
        match j.parent {
            Some(p) => data.o_m_i[i] = data.o_m_i[p].compose(&data.li_m_i[i]),
            None => data.o_m_i[i] = data.li_m_i[i],
        }
        if let Some(v) = v {
            let vj = joint_motion(&j.kind, &v[j.idx_v..j.idx_v + j.nv()]);
            data.v[i] = match j.parent {
                Some(p) => data.li_m_i[i].act_inv_motion(&data.v[p]) + vj,
                None => vj,
            };
        }
    }
}

/// `worldMf` of every frame; call after `forward_kinematics`.
pub fn update_frame_placements(model: &Model, data: &mut Data) {
    for (k, f) in model.frames.iter().enumerate() {
        data.o_m_f[k] = data.o_m_i[f.body].compose(&f.placement);
    }
}

/// LOCAL_WORLD_ALIGNED linear Jacobian (3 x nv) of the point `p_world` rigidly attached to
/// `body`, written into `jac` (which must be 3 x nv; columns of non-ancestors are zeroed).
/// Needs `forward_kinematics`.
pub fn point_jacobian(model: &Model, o_m_i: &[Se3], body: usize, p_world: &Vector3<f64>, jac: &mut DMatrix<f64>) {
    jac.as_mut_slice().fill(0.0);
    for &b in &model.supports[body] {
        let j = &model.joints[b];
        let o = &o_m_i[b];
        for c in 0..j.nv() {
            let v = subspace_point_velocity(o, &j.kind.subspace_col(c), p_world);
            let col = j.idx_v + c;
            jac[(0, col)] = v.x;
            jac[(1, col)] = v.y;
            jac[(2, col)] = v.z;
        }
    }
}

/// World velocity of the point `p_world` due to a unit rate of the motion-subspace column `s` of
/// a joint whose frame is at `o` (world): `w x (p - o) + v` with `(v, w) = o.rot * s`. Column of
/// every point Jacobian.
#[inline]
pub fn subspace_point_velocity(o: &Se3, s: &Vector6<f64>, p_world: &Vector3<f64>) -> Vector3<f64> {
    let w = o.rot * ang(s);
    o.rot * lin(s) + w.cross(&(p_world - o.trans))
}

/// World velocity of a point rigidly attached to `body` (needs `forward_kinematics` with `v`).
pub fn point_velocity(data: &Data, body: usize, p_world: &Vector3<f64>) -> Vector3<f64> {
    let o = &data.o_m_i[body];
    let vb = &data.v[body];
    let w = o.rot * ang(vb);
    o.rot * lin(vb) + w.cross(&(p_world - o.trans))
}

/// World position of the centre of mass (needs `forward_kinematics`).
pub fn center_of_mass(model: &Model, data: &Data) -> Vector3<f64> {
    let mut c = Vector3::zeros();
    let mut m = 0.0;
    for (i, inertia) in model.inertias.iter().enumerate() {
        c += inertia.mass * data.o_m_i[i].act_point(&inertia.com);
        m += inertia.mass;
    }
    if m > 0.0 {
        c / m
    } else {
        c
    }
}

/// Kinetic energy of the links `1/2 sum v_i^T I_i v_i` (needs `forward_kinematics` with `v`);
/// a rotor's `1/2 armature v_j^2` (`Model::armature`) is not in it.
pub fn kinetic_energy(model: &Model, data: &Data) -> f64 {
    model.inertias.iter().enumerate().map(|(i, inertia)| 0.5 * data.v[i].dot(&inertia.mul_motion(&data.v[i]))).sum()
}

/// Total spatial momentum `[linear; angular about the world origin]` in world coordinates.
pub fn spatial_momentum(model: &Model, data: &Data) -> Vector6<f64> {
    model.inertias.iter().enumerate().map(|(i, inertia)| data.o_m_i[i].act_force(&inertia.mul_motion(&data.v[i]))).sum()
}
