//! The scene file format: the serde types of `scenes/*.ron` as written, with their defaults
//! and field ranges (checked while parsing, so errors carry the line and column).

use crate::validate as check;

use crate::contact::Terrain;
use crate::diff::sweep::SweepSettings;
use crate::learn::TaskSettings;
use crate::ocp::cito::CitoSettings;
use crate::ocp::mpc::MpcSettings;
use crate::sim::StepSettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BuiltinRobot {
    /// `assets/robots/quadruped.urdf`, floating base.
    Quadruped,
    /// `assets/robots/hopper.urdf`, planar.
    Hopper,
    /// A 0.2 m, 1 kg cube.
    Cube,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RobotSpec {
    Builtin(BuiltinRobot),
    /// A URDF file, relative to the scene file. `floating: false` welds the root to the world.
    /// `contacts` replaces the automatic choice of contact points (links named `*foot`).
    Urdf {
        path: PathBuf,
        floating: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        contacts: Option<Vec<ContactSpec>>,
    },
    /// A rigid box with its corners as contacts.
    Box {
        #[serde(deserialize_with = "check::positive3")]
        size: [f64; 3],
        #[serde(deserialize_with = "check::positive")]
        mass: f64,
    },
}

/// A contact sphere on a link or frame of a URDF robot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContactSpec {
    /// Link or frame name.
    pub frame: String,
    /// Sphere centre in that frame (m).
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub position: [f64; 3],
    /// Sphere radius (m); 0 for a point.
    #[serde(default, deserialize_with = "check::non_negative")]
    pub radius: f64,
}

fn zero3() -> [f64; 3] {
    [0.0; 3]
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitialState {
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub base_position: [f64; 3],
    /// Roll, pitch, yaw (rad), `R = Rz(yaw) Ry(pitch) Rx(roll)`.
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub base_rpy: [f64; 3],
    /// World frame (m/s).
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub base_linear_velocity: [f64; 3],
    /// World frame (rad/s).
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub base_angular_velocity: [f64; 3],
    #[serde(default, deserialize_with = "check::finite_map")]
    pub joints: BTreeMap<String, f64>,
    #[serde(default, deserialize_with = "check::finite_map")]
    pub joint_velocities: BTreeMap<String, f64>,
}

impl Default for InitialState {
    fn default() -> Self {
        Self {
            base_position: zero3(),
            base_rpy: zero3(),
            base_linear_velocity: zero3(),
            base_angular_velocity: zero3(),
            joints: BTreeMap::new(),
            joint_velocities: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum ControllerSpec {
    #[default]
    None,
    /// Joint PD to a posture; joints missing from `posture` hold their initial position.
    JointPd {
        #[serde(deserialize_with = "check::non_negative")]
        kp: f64,
        #[serde(deserialize_with = "check::non_negative")]
        kd: f64,
        #[serde(default, deserialize_with = "check::finite_map")]
        posture: BTreeMap<String, f64>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullSpec {
    /// Link (body) or frame name.
    pub body: String,
    /// Point in that link's frame (m).
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub point: [f64; 3],
    /// World-frame force (N).
    #[serde(deserialize_with = "check::finite3")]
    pub force: [f64; 3],
    #[serde(deserialize_with = "check::non_negative")]
    pub start: f64,
    #[serde(deserialize_with = "check::positive")]
    pub duration: f64,
}

fn default_margin() -> f64 {
    StepSettings::default().contact_margin
}

fn default_gravity() -> [f64; 3] {
    [0.0, 0.0, -9.81]
}

/// The file format, as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename = "Scene", deny_unknown_fields)]
pub struct SceneFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub robot: RobotSpec,
    #[serde(default)]
    pub initial: InitialState,
    #[serde(default)]
    pub terrain: Terrain,
    #[serde(default = "default_gravity", deserialize_with = "check::finite3")]
    pub gravity: [f64; 3],
    #[serde(deserialize_with = "check::time_step")]
    pub dt: f64,
    #[serde(default)]
    pub solver: crate::contact::solver::Settings,
    /// Contact candidates closer than this enter the contact problem (m).
    #[serde(default = "default_margin", deserialize_with = "check::non_negative")]
    pub contact_margin: f64,
    /// Rotor inertia reflected through the gearbox, per one-DoF joint (kg m^2; `Model::armature`):
    /// names or `*suffix` patterns as in `initial.joints`, exact names winning. Empty: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub armature: BTreeMap<String, f64>,
    #[serde(default)]
    pub controller: ControllerSpec,
    #[serde(default)]
    pub pulls: Vec<PullSpec>,
    /// Default duration of `simulate` (s).
    #[serde(default, deserialize_with = "check::positive_opt")]
    pub duration: Option<f64>,
    /// Default gradient-quality sweep of `gradcheck`.
    #[serde(default)]
    pub gradcheck: Option<SweepSettings>,
    /// Trajectory optimization task of `cito`.
    #[serde(default)]
    pub cito: Option<CitoSettings>,
    /// Closed-loop MPC of `mpc`.
    #[serde(default)]
    pub mpc: Option<MpcSettings>,
    /// Policy-learning task of `train` and `compare-learning`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learn: Option<TaskSettings>,
}
