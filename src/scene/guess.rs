//! Scenes for robots that come without one: a URDF stood up on flat ground with a joint PD
//! whose posture is guessed from the joint limits, and the reverse direction, a state written
//! as a scene's `initial` section (a keyframe).
//!
//! # The posture guess
//! A legged robot's knee is the joint whose range excludes zero (go1's calves,
//! `[-2.82, -0.89]`): it is bent a quarter of its range in from the end nearest zero, and its
//! parent joint (the thigh) is turned by minus half of that, clamped to its limits, so that for
//! equal thigh and shank lengths the foot stays under the hip. Every other joint takes the value
//! in its range nearest zero. A robot whose knees straighten both ways (solo12's limits are
//! `+-10`) stands on straight legs; its scene file (`scenes/solo12_stand.ron`) sets a bent
//! posture instead. The base is placed so that the lowest contact sphere touches the ground,
//! 5 mm above it, and the PD gains scale with the total mass (`kp = 8 m` N m/rad per kg,
//! `kd = kp / 15`), which stands go1 (12 kg) and solo12 (2.5 kg) at 2 ms steps.

use super::file::InitialState;
use super::{Scene, SceneError};
use crate::dynamics::forward_kinematics;
use crate::model::configuration::neutral;
use crate::model::{Data, JointKind, Model};
use nalgebra::{Rotation3, UnitQuaternion, Vector3};
use std::collections::BTreeMap;
use std::path::Path;

/// Height of the lowest contact above the ground at the start (m).
const DROP: f64 = 0.005;

/// The guessed standing posture (joint name to angle) of `model` (module docs).
pub fn posture_from_limits(model: &Model) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let nearest_zero = |lo: f64, hi: f64| 0.0f64.clamp(lo, hi);
    for j in &model.joints {
        if matches!(j.kind, JointKind::FreeFlyer) {
            continue;
        }
        let (lo, hi) = (j.limits.lower, j.limits.upper);
        out.insert(j.name.clone(), if lo <= hi { nearest_zero(lo, hi) } else { 0.0 });
    }
    for (i, j) in model.joints.iter().enumerate() {
        let (lo, hi) = (j.limits.lower, j.limits.upper);
        if !(lo.is_finite() && hi.is_finite()) || (lo <= 0.0 && hi >= 0.0) {
            continue;
        }
        let knee = if hi < 0.0 { hi + 0.25 * (lo - hi) } else { lo + 0.25 * (hi - lo) };
        out.insert(j.name.clone(), knee);
        if let Some(p) = j.parent {
            let pj = &model.joints[p];
            if !matches!(pj.kind, JointKind::FreeFlyer)
                && model.joints.iter().filter(|c| c.parent == Some(p)).count() == 1
            {
                let thigh = (-0.5 * knee).clamp(pj.limits.lower, pj.limits.upper);
                out.insert(pj.name.clone(), thigh);
            }
        }
        let _ = i;
    }
    out
}

/// A scene for the URDF at `path` (module docs): floating base, contacts on links named
/// `*foot`, the guessed posture, flat ground with friction 0.8, 2 ms steps.
pub fn urdf_scene(path: &Path) -> Result<Scene, SceneError> {
    let name = path.file_stem().map_or("robot".to_string(), |s| s.to_string_lossy().into_owned());
    let abs =
        std::fs::canonicalize(path).map_err(|e| SceneError::Io { file: path.to_path_buf(), message: e.to_string() })?;
    let loaded = crate::model::urdf::load(&abs, crate::model::urdf::RootJoint::FreeFlyer)?;
    let model = &loaded.model;
    if model.contact_points.is_empty() {
        return Err(SceneError::Invalid {
            file: abs.clone(),
            line: 1,
            column: 1,
            field: "robot.contacts".into(),
            message:
                "no link is named `*foot`: write a scene with `robot: Urdf(path: .., floating: true, contacts: [..])`"
                    .into(),
        });
    }
    let posture = posture_from_limits(model);
    let mut q = neutral(model);
    for j in &model.joints {
        if let Some(a) = posture.get(&j.name) {
            if j.nq() == 1 {
                q[j.idx_q] = *a;
            }
        }
    }
    let mut data = Data::new(model);
    forward_kinematics(model, &mut data, q.as_slice(), None);
    let lowest = model
        .contact_points
        .iter()
        .map(|c| data.o_m_i[c.body].act_point(&c.position).z - c.radius)
        .fold(f64::INFINITY, f64::min);
    let kp = 8.0 * model.total_mass();
    let map = posture.iter().map(|(k, v)| format!("{k:?}: {v:?}")).collect::<Vec<_>>().join(", ");
    let text = format!(
        "Scene(\n    name: {name:?},\n    description: {desc:?},\n    robot: Urdf(path: {path:?}, floating: true),\n    \
         initial: (base_position: (0.0, 0.0, {z:?}), joints: {{{map}}}),\n    terrain: (ground: (friction: 0.8)),\n    \
         dt: 0.002,\n    controller: JointPd(kp: {kp:?}, kd: {kd:?}, posture: {{{map}}}),\n)\n",
        desc = format!("{} standing on its guessed posture", abs.display()),
        path = abs.display().to_string(),
        z = DROP - lowest,
        kd = kp / 15.0,
    );
    Scene::from_str(&text, &abs)
}

/// A scene file, or a URDF stood up by [`urdf_scene`] (chosen by the `.urdf` extension): what
/// the app opens from a path.
pub fn load_scene_or_urdf(path: &Path) -> Result<Scene, SceneError> {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("urdf")) {
        urdf_scene(path)
    } else {
        Scene::load(path)
    }
}

/// The state `(q, v)` of `model` as a scene's `initial` section (world-frame base velocities,
/// roll-pitch-yaw as `R = Rz(yaw) Ry(pitch) Rx(roll)`).
pub fn keyframe(model: &Model, q: &[f64], v: &[f64]) -> InitialState {
    let mut k = InitialState::default();
    for j in &model.joints {
        match j.kind {
            JointKind::FreeFlyer => {
                let (p, quat) = (&q[j.idx_q..j.idx_q + 3], &q[j.idx_q + 3..j.idx_q + 7]);
                let r = UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(quat[3], quat[0], quat[1], quat[2]));
                let rot: Rotation3<f64> = r.to_rotation_matrix();
                let (roll, pitch, yaw) = rot.euler_angles();
                k.base_position = [p[0], p[1], p[2]];
                k.base_rpy = [roll, pitch, yaw];
                let lin = rot * Vector3::new(v[j.idx_v], v[j.idx_v + 1], v[j.idx_v + 2]);
                let ang = rot * Vector3::new(v[j.idx_v + 3], v[j.idx_v + 4], v[j.idx_v + 5]);
                k.base_linear_velocity = lin.into();
                k.base_angular_velocity = ang.into();
            }
            _ => {
                k.joints.insert(j.name.clone(), q[j.idx_q]);
                if v[j.idx_v] != 0.0 {
                    k.joint_velocities.insert(j.name.clone(), v[j.idx_v]);
                }
            }
        }
    }
    k
}

/// [`keyframe`] as RON text: `initial: (...)`, ready to paste into a scene file.
pub fn keyframe_ron(model: &Model, q: &[f64], v: &[f64]) -> String {
    let k = keyframe(model, q, v);
    let cfg = ron::ser::PrettyConfig::default().struct_names(false);
    let body = ron::ser::to_string_pretty(&k, cfg).unwrap_or_else(|e| format!("/* cannot write: {e} */"));
    format!("initial: {body},\n")
}
