//! Building a [`Scene`] from a parsed [`SceneFile`]: the robot, the initial state and joint
//! maps, the controller, the pulls, and the checks of the task sections that need the model.
//! Errors point at the text that caused them (see `locate`).

use super::{BuiltinRobot, ControllerSpec, RobotSpec, Scene, SceneError, SceneFile};
use crate::diff::Param;
use crate::model::builtin;
use crate::model::configuration::set_free_flyer;
use crate::model::neutral;
use crate::model::urdf::{self, RootJoint};
use crate::sim::{Controller, Pull, StepSettings};
use crate::spatial::Se3;
use crate::validate::SettingsError;
use nalgebra::{DVector, Rotation3, Vector3};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Line and column (1-based) of the first occurrence of `needle` in `text`, or (1, 1).
fn locate(text: &str, needle: &str) -> (usize, usize) {
    match text.find(needle) {
        Some(off) => {
            let before = &text[..off];
            let line = before.matches('\n').count() + 1;
            let col = off - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            (line, col)
        }
        None => (1, 1),
    }
}

impl Scene {
    /// Builds a scene from its parsed form; `text` (may be empty) is used to locate errors.
    pub fn from_file(sf: SceneFile, text: &str, path: &Path) -> Result<Scene, SceneError> {
        let invalid = |needle: &str, field: String, message: String| {
            let (line, column) = locate(text, needle);
            SceneError::Invalid { file: path.to_path_buf(), line, column, field, message }
        };
        let (mut model, warnings) = match &sf.robot {
            RobotSpec::Builtin(BuiltinRobot::Quadruped) => {
                let l = builtin::quadruped()?;
                (l.model, l.warnings)
            }
            RobotSpec::Builtin(BuiltinRobot::Hopper) => {
                let l = builtin::hopper()?;
                (l.model, l.warnings)
            }
            RobotSpec::Builtin(BuiltinRobot::Cube) => (
                builtin::rigid_box([0.2; 3], 1.0).map_err(|e| invalid("robot", "robot".into(), e.to_string()))?,
                vec![],
            ),
            RobotSpec::Box { size, mass } => {
                (builtin::rigid_box(*size, *mass).map_err(|e| invalid("robot", "robot".into(), e.to_string()))?, vec![])
            }
            RobotSpec::Urdf { path: p, floating, contacts } => {
                let full = if p.is_absolute() { p.clone() } else { path.parent().unwrap_or(Path::new(".")).join(p) };
                if !full.exists() {
                    return Err(invalid(
                        &p.to_string_lossy(),
                        "robot.path".into(),
                        format!("URDF file {} does not exist", full.display()),
                    ));
                }
                let mut l = urdf::load(&full, if *floating { RootJoint::FreeFlyer } else { RootJoint::Fixed })?;
                if let Some(contacts) = contacts {
                    l.model.contact_points.clear();
                    for (i, c) in contacts.iter().enumerate() {
                        let Some((body, placement)) = l.model.resolve_body_or_frame(&c.frame) else {
                            return Err(invalid(
                                &format!("\"{}\"", c.frame),
                                format!("robot.contacts[{i}].frame"),
                                format!("no link or frame named `{}` in {}", c.frame, full.display()),
                            ));
                        };
                        l.model.contact_points.push(crate::model::ContactPoint {
                            name: c.frame.clone(),
                            body,
                            position: placement.act_point(&Vector3::from(c.position)),
                            radius: c.radius,
                        });
                    }
                }
                (l.model, l.warnings)
            }
        };
        model.gravity = Vector3::from(sf.gravity);

        let settings =
            StepSettings { dt: sf.dt, solver: sf.solver, contact_margin: sf.contact_margin, ..StepSettings::default() };
        settings.validate().map_err(|e| match e {
            crate::sim::step::StepSettingsError::Solver(m) => invalid("solver", "solver".into(), m),
            other => invalid("dt", "settings".into(), other.to_string()),
        })?;
        let init = &sf.initial;
        let mut q0 = neutral(&model);
        let mut v0 = DVector::zeros(model.nv);
        if model.has_free_flyer() {
            let r = Rotation3::from_euler_angles(init.base_rpy[0], init.base_rpy[1], init.base_rpy[2]);
            let m = Se3::new(*r.matrix(), Vector3::from(init.base_position));
            set_free_flyer(q0.as_mut_slice(), &m);
            let rt = r.matrix().transpose();
            let vl = rt * Vector3::from(init.base_linear_velocity);
            let wb = rt * Vector3::from(init.base_angular_velocity);
            v0.rows_mut(0, 3).copy_from(&vl);
            v0.rows_mut(3, 3).copy_from(&wb);
        }
        // Patterns first, then exact names, so that exact names win.
        let apply = |map: &BTreeMap<String, f64>, field: &str, out: &mut DVector<f64>, use_q: bool| {
            let patterns = map.iter().filter(|(k, _)| k.starts_with('*'));
            for (key, &val) in patterns.chain(map.iter().filter(|(k, _)| !k.starts_with('*'))) {
                let matches: Vec<usize> = match key.strip_prefix('*') {
                    Some(suffix) => {
                        (0..model.joints.len()).filter(|&j| model.joints[j].name.ends_with(suffix)).collect()
                    }
                    None => model.joint_index(key).into_iter().collect(),
                };
                let one_dof: Vec<usize> = matches.into_iter().filter(|&j| model.joints[j].nv() == 1).collect();
                if one_dof.is_empty() {
                    let names: Vec<&str> =
                        model.joints.iter().filter(|j| j.nv() == 1).map(|j| j.name.as_str()).collect();
                    return Err(invalid(
                        &format!("\"{key}\""),
                        format!("{field}[\"{key}\"]"),
                        format!("no joint matches; joints are: {}", names.join(", ")),
                    ));
                }
                for j in one_dof {
                    out[if use_q { model.joints[j].idx_q } else { model.joints[j].idx_v }] = val;
                }
            }
            Ok(())
        };
        let mut armature = DVector::zeros(model.nv);
        apply(&sf.armature, "armature", &mut armature, false)?;
        if let Some((key, &val)) = sf.armature.iter().find(|(_, &a)| !(a.is_finite() && a >= 0.0)) {
            return Err(invalid(
                &format!("\"{key}\""),
                format!("armature[\"{key}\"]"),
                format!("{val} is not a rotor inertia: allowed [0, inf)"),
            ));
        }
        apply(&init.joints, "initial.joints", &mut q0, true)?;
        apply(&init.joint_velocities, "initial.joint_velocities", &mut v0, false)?;
        for j in &model.joints {
            if j.nq() == 1 {
                let x = q0[j.idx_q];
                if x < j.limits.lower - 1e-9 || x > j.limits.upper + 1e-9 {
                    return Err(invalid(
                        &j.name,
                        format!("initial.joints[\"{}\"]", j.name),
                        format!("{x} is outside the joint limits [{}, {}]", j.limits.lower, j.limits.upper),
                    ));
                }
            }
        }

        let controller = match &sf.controller {
            ControllerSpec::None => Controller::None,
            ControllerSpec::JointPd { kp, kd, posture } => {
                let mut target = q0.clone();
                apply(posture, "controller.posture", &mut target, true)?;
                Controller::JointPd { kp: *kp, kd: *kd, posture: model.actuated_positions(target.as_slice()) }
            }
        };

        let mut pulls = Vec::new();
        for (i, p) in sf.pulls.iter().enumerate() {
            let Some((body, placement)) = model.resolve_body_or_frame(&p.body) else {
                return Err(invalid(
                    &format!("\"{}\"", p.body),
                    format!("pulls[{i}].body"),
                    format!("no link or frame named `{}`; links are: {}", p.body, model.body_names.join(", ")),
                ));
            };
            pulls.push(Pull {
                body,
                point: placement.act_point(&Vector3::from(p.point)),
                force: Vector3::from(p.force),
                start: p.start,
                duration: p.duration,
            });
        }
        // Field ranges are the settings' own (`validate`); what needs the model is checked here.
        let settings_error = |section: &str, e: SettingsError| {
            let last = e
                .field
                .rsplit('.')
                .next()
                .unwrap_or(&e.field)
                .trim_end_matches(|c: char| c == ']' || c.is_ascii_digit())
                .trim_end_matches('[')
                .to_string();
            invalid(&format!("{last}:"), format!("{section}.{}", e.field), e.message)
        };
        if let Some(g) = &sf.gradcheck {
            g.validate().map_err(|e| settings_error("gradcheck", e))?;
            Param::resolve(&model, &pulls, &g.param)
                .map_err(|m| invalid(&format!("\"{}\"", g.param), "gradcheck.param".into(), m))?;
            for (i, t) in g.objective.iter().enumerate() {
                if model.resolve_body_or_frame(&t.body).is_none() {
                    return Err(invalid(
                        &format!("\"{}\"", t.body),
                        format!("gradcheck.objective[{i}].body"),
                        format!("no link or frame named `{}`; links are: {}", t.body, model.body_names.join(", ")),
                    ));
                }
            }
            for (i, w) in g.watch.iter().enumerate() {
                if !model.contact_points.iter().any(|c| &c.name == w) {
                    let names: Vec<&str> = model.contact_points.iter().map(|c| c.name.as_str()).collect();
                    return Err(invalid(
                        &format!("\"{w}\""),
                        format!("gradcheck.watch[{i}]"),
                        format!("no contact named `{w}`; contacts are: {}", names.join(", ")),
                    ));
                }
            }
        }
        if let Some(c) = &sf.cito {
            c.validate().map_err(|e| settings_error("cito", e))?;
        }
        if let Some(c) = &sf.mpc {
            c.validate().map_err(|e| settings_error("mpc", e))?;
        }
        for section in [sf.cito.as_ref().map(|_| "cito"), sf.mpc.as_ref().map(|_| "mpc")].into_iter().flatten() {
            if !model.has_free_flyer() {
                return Err(invalid(
                    section,
                    section.into(),
                    "needs a floating-base robot (a base pose to track)".into(),
                ));
            }
        }
        if let Some(l) = &sf.learn {
            l.validate().map_err(|e| settings_error("learn", e))?;
            l.steps(sf.dt).map_err(|e| settings_error("learn", e))?;
            if !model.has_free_flyer() || model.nu == 0 {
                return Err(invalid("learn", "learn".into(), "needs a floating-base robot with actuators".into()));
            }
            if !matches!(sf.controller, ControllerSpec::JointPd { .. }) {
                return Err(invalid(
                    "learn",
                    "learn".into(),
                    "needs a JointPd controller (its gains turn joint targets into torques)".into(),
                ));
            }
        }
        model.armature = armature.as_slice().to_vec();
        Ok(Scene {
            path: path.to_path_buf(),
            terrain: sf.terrain.clone(),
            file: sf,
            model: Arc::new(model),
            settings,
            q0,
            v0,
            controller,
            pulls,
            warnings,
        })
    }
}
