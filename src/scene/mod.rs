//! Scenes: RON files under `scenes/` that say which robot, where it starts, on what terrain,
//! with which time step, solver settings, controller and scheduled pulls.
//!
//! ```ron
//! Scene(
//!     name: "quadruped_stand",
//!     robot: Builtin(Quadruped),            // or Urdf(path: "x.urdf", floating: true), Box(size: (..), mass: ..)
//!     initial: (
//!         base_position: (0.0, 0.0, 0.33),
//!         base_rpy: (0.0, 0.0, 0.0),
//!         joints: {"*_thigh_joint": 0.8, "*_calf_joint": -1.6},
//!     ),
//!     terrain: (ground: (friction: 0.8), boxes: []),
//!     dt: 0.002,
//!     controller: JointPd(kp: 80.0, kd: 2.0, posture: {"*_thigh_joint": 0.8, "*_calf_joint": -1.6}),
//!     pulls: [(body: "trunk", point: (0.0, 0.0, 0.0), force: (0.0, 60.0, 0.0), start: 1.0, duration: 0.2)],
//!     duration: 3.0,
//! )
//! ```
//! Joint maps take joint names, or `*suffix` patterns that set every joint whose name ends in
//! `suffix`; exact names win over patterns. Base velocities are given in the world frame and
//! stored as the body twist (`v_lin = R^T pdot`, `w_body = R^T w_world`).
//!
//! Every error names the file, the line and column, the field path and the allowed range.

pub mod check;

use crate::contact::Terrain;
use crate::model::builtin;
use crate::model::urdf::{self, RootJoint};
use crate::model::{configuration::set_free_flyer, neutral, Model};
use crate::sim::{Controller, Pull, Simulation, StepSettings};
use crate::spatial::Se3;
use nalgebra::{DVector, Rotation3, Vector3};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

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

/// A terminal objective term on a body point's world position `p` and velocity `pdot`:
/// `0.5 sum_a weight_a (p_a - target_a)^2 + linear . p + linear_velocity . pdot`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveTermSpec {
    /// Link or frame name.
    pub body: String,
    /// In the link or frame (m).
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub point: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub linear: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub weight: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub target: [f64; 3],
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub linear_velocity: [f64; 3],
}

fn default_points() -> usize {
    41
}
fn default_samples() -> usize {
    24
}
fn default_kappa() -> f64 {
    1e-4
}
fn default_delta() -> f64 {
    1e-3
}

/// A gradient-quality sweep (`contactlab gradcheck`, DESIGN 4). Command-line flags override
/// `param`, `from`, `to` and `points`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradcheckSpec {
    /// `base_x`, `base_y`, `base_z` (initial base position offset, m), `pull:N` (force
    /// magnitude of pull N, N) or `torque:JOINTS` (a torque offset, N m, on the actuated joints
    /// matching a comma-separated list of names or `*suffix` patterns).
    pub param: String,
    #[serde(deserialize_with = "check::finite")]
    pub from: f64,
    #[serde(deserialize_with = "check::finite")]
    pub to: f64,
    #[serde(default = "default_points")]
    pub points: usize,
    /// Rollout length (s).
    #[serde(deserialize_with = "check::positive")]
    pub horizon: f64,
    /// Terminal objective terms, summed.
    pub objective: Vec<ObjectiveTermSpec>,
    /// Smoothing scale of the smoothed truth (parameter units); default 5 % of the range.
    #[serde(default, deserialize_with = "check::positive_opt")]
    pub sigma: Option<f64>,
    /// Antithetic sample pairs of the smoothed truth.
    #[serde(default = "default_samples")]
    pub samples: usize,
    /// Contact names shown in the mode strip.
    #[serde(default)]
    pub watch: Vec<String>,
    /// Simulated time before the sweep starts (s): the sweep's state is the scene's initial
    /// state advanced this long (a settled stance), with the parameter applied there.
    #[serde(default, deserialize_with = "check::non_negative")]
    pub settle: f64,
    /// Relaxation of the two relaxed sensitivities (N s m/s) and the normal shift (m/s).
    #[serde(default = "default_kappa", deserialize_with = "check::positive")]
    pub kappa: f64,
    #[serde(default = "default_delta", deserialize_with = "check::non_negative")]
    pub delta: f64,
}

fn default_settle() -> f64 {
    1.0
}
fn default_ocp_horizon() -> f64 {
    0.3
}
fn default_knot_dt() -> f64 {
    0.01
}
fn default_cito_iterations() -> usize {
    50
}
fn default_ocp_sensitivity() -> String {
    "relaxed".into()
}
fn default_ocp_kappa() -> f64 {
    1e-4
}

/// Cost weights of a base-pose task (`ocp::ContactAction`'s cost; defaults in brackets).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CitoWeights {
    /// Base position per world axis [(100, 100, 400)] and orientation per log-map axis
    /// [(50, 50, 20)].
    #[serde(deserialize_with = "check::non_negative3")]
    pub position: [f64; 3],
    #[serde(deserialize_with = "check::non_negative3")]
    pub orientation: [f64; 3],
    /// Joint posture toward the start [0.02], joint velocity [0.1], base velocity [1],
    /// effort [1e-3].
    #[serde(deserialize_with = "check::non_negative")]
    pub posture: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub joint_velocity: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub base_velocity: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub control: f64,
    /// Terminal knot: state cost times this [200].
    #[serde(deserialize_with = "check::non_negative")]
    pub terminal: f64,
    /// Foot clearance weight [0: off] and fade height (m) [0.02] (`ocp::FootClearance`).
    #[serde(deserialize_with = "check::non_negative")]
    pub foot_clearance: f64,
    #[serde(deserialize_with = "check::positive")]
    pub clearance_scale: f64,
}

impl Default for CitoWeights {
    fn default() -> Self {
        Self {
            position: [100.0, 100.0, 400.0],
            orientation: [50.0, 50.0, 20.0],
            posture: 0.02,
            joint_velocity: 0.1,
            base_velocity: 1.0,
            control: 1e-3,
            terminal: 200.0,
            foot_clearance: 0.0,
            clearance_scale: 0.02,
        }
    }
}

/// A contact-implicit trajectory optimization task (`contactlab cito`, DESIGN 5): reach a base
/// pose from the scene's settled stance with no contact schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CitoSpec {
    /// Target base position relative to the settled start, world frame (m).
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub target_offset: [f64; 3],
    /// Target rotation relative to the start, roll, pitch, yaw about the world axes (rad):
    /// `R* = Rz Ry Rx R_start`.
    #[serde(default = "zero3", deserialize_with = "check::finite3")]
    pub target_rpy: [f64; 3],
    /// Simulated time under the scene's controller before the plan starts (s) [1].
    #[serde(default = "default_settle", deserialize_with = "check::non_negative")]
    pub settle: f64,
    /// Plan length (s) [0.3] and knot step (s) [0.01].
    #[serde(default = "default_ocp_horizon", deserialize_with = "check::positive")]
    pub horizon: f64,
    #[serde(default = "default_knot_dt", deserialize_with = "check::time_step")]
    pub knot_dt: f64,
    #[serde(default)]
    pub weights: CitoWeights,
    /// DDP iteration limit [50].
    #[serde(default = "default_cito_iterations")]
    pub iterations: usize,
    /// `exact`, `signorini` or `relaxed` [relaxed]; the command line overrides it.
    #[serde(default = "default_ocp_sensitivity")]
    pub sensitivity: String,
    /// Relaxation (N s m/s) [1e-4] and normal shift (m/s) [1e-3] of the relaxed sensitivities.
    #[serde(default = "default_ocp_kappa", deserialize_with = "check::positive")]
    pub kappa: f64,
    #[serde(default = "default_delta", deserialize_with = "check::non_negative")]
    pub delta: f64,
}

fn default_mpc_duration() -> f64 {
    4.0
}
fn default_mpc_iterations() -> usize {
    1
}
fn default_recovery_tolerance() -> f64 {
    0.02
}
fn default_recovery_time() -> f64 {
    2.0
}

/// Closed-loop MPC (`contactlab mpc`): hold the settled stance's base pose against the scene's
/// pulls, replanning every knot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MpcSpec {
    /// Simulated time under the scene's controller before MPC takes over (s) [1]; the pulls'
    /// `start` counts from the moment MPC takes over.
    #[serde(default = "default_settle", deserialize_with = "check::non_negative")]
    pub settle: f64,
    /// Receding horizon (s) [0.3] and knot step (s) [0.01]; the control period is one knot.
    #[serde(default = "default_ocp_horizon", deserialize_with = "check::positive")]
    pub horizon: f64,
    #[serde(default = "default_knot_dt", deserialize_with = "check::time_step")]
    pub knot_dt: f64,
    /// DDP iterations per control period [1].
    #[serde(default = "default_mpc_iterations")]
    pub iterations: usize,
    /// Closed-loop duration (s) [4].
    #[serde(default = "default_mpc_duration", deserialize_with = "check::positive")]
    pub duration: f64,
    #[serde(default)]
    pub weights: CitoWeights,
    #[serde(default = "default_ocp_sensitivity")]
    pub sensitivity: String,
    #[serde(default = "default_ocp_kappa", deserialize_with = "check::positive")]
    pub kappa: f64,
    #[serde(default = "default_delta", deserialize_with = "check::non_negative")]
    pub delta: f64,
    /// Recovered: the base is within this distance of its target (m) [0.02] ...
    #[serde(default = "default_recovery_tolerance", deserialize_with = "check::positive")]
    pub recovery_tolerance: f64,
    /// ... from at most this long after the last pull ends until the end of the run (s) [2].
    #[serde(default = "default_recovery_time", deserialize_with = "check::positive")]
    pub recovery_time: f64,
}

/// The defaults a scene file gets for an empty `cito: ()` (the app's Control window starts
/// from these on scenes without a `cito` section).
impl Default for CitoSpec {
    fn default() -> Self {
        Self {
            target_offset: zero3(),
            target_rpy: zero3(),
            settle: default_settle(),
            horizon: default_ocp_horizon(),
            knot_dt: default_knot_dt(),
            weights: CitoWeights::default(),
            iterations: default_cito_iterations(),
            sensitivity: default_ocp_sensitivity(),
            kappa: default_ocp_kappa(),
            delta: default_delta(),
        }
    }
}

/// The defaults of an empty `mpc: ()`.
impl Default for MpcSpec {
    fn default() -> Self {
        Self {
            settle: default_settle(),
            horizon: default_ocp_horizon(),
            knot_dt: default_knot_dt(),
            iterations: default_mpc_iterations(),
            duration: default_mpc_duration(),
            weights: CitoWeights::default(),
            sensitivity: default_ocp_sensitivity(),
            kappa: default_ocp_kappa(),
            delta: default_delta(),
            recovery_tolerance: default_recovery_tolerance(),
            recovery_time: default_recovery_time(),
        }
    }
}

fn default_learn_task() -> String {
    "stand".into()
}
fn default_episode() -> f64 {
    0.5
}
fn default_action_scale() -> f64 {
    0.3
}
fn default_hidden() -> Vec<usize> {
    vec![64, 64]
}
fn default_activation() -> String {
    "tanh".into()
}
fn default_learn_kappa() -> f64 {
    1e-3
}
fn default_learn_delta() -> f64 {
    1e-2
}

/// Ranges of the commands a learning task samples per episode (uniform, symmetric about zero
/// unless stated).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LearnCommandSpec {
    /// Base height offset from the settled stance (m) [0.04] and roll, pitch, yaw offsets
    /// about the world axes (rad) [(0.1, 0.1, 0.1)] (stand).
    #[serde(deserialize_with = "check::non_negative")]
    pub height: f64,
    #[serde(deserialize_with = "check::non_negative3")]
    pub rpy: [f64; 3],
    /// Forward speed range (m/s) [(0.2, 0.5)] and gait clock frequency (Hz) [2] (walk).
    #[serde(deserialize_with = "check::non_negative2")]
    pub speed: [f64; 2],
    #[serde(deserialize_with = "check::positive")]
    pub gait_frequency: f64,
}

impl Default for LearnCommandSpec {
    fn default() -> Self {
        Self { height: 0.04, rpy: [0.1, 0.1, 0.1], speed: [0.2, 0.5], gait_frequency: 2.0 }
    }
}

/// Reset distribution around the settled stance (uniform, symmetric).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LearnInitSpec {
    /// Joint position offsets (rad) [0.05], base linear and angular velocity per body axis
    /// (m/s, rad/s) [0.2, 0.3], and a drop: base raised by up to this (m) [0.01].
    #[serde(deserialize_with = "check::non_negative")]
    pub joints: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub base_linear_velocity: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub base_angular_velocity: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub drop: f64,
}

impl Default for LearnInitSpec {
    fn default() -> Self {
        Self { joints: 0.05, base_linear_velocity: 0.2, base_angular_velocity: 0.3, drop: 0.01 }
    }
}

/// Random horizontal pushes on the trunk during training and evaluation episodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LearnPushSpec {
    /// Probability that an episode has a push [0.7].
    #[serde(deserialize_with = "check::probability")]
    pub probability: f64,
    /// Force magnitude (N) [(20, 50)], start within the episode (s) [(0, 0.3)], duration (s)
    /// [(0.1, 0.2)]; the direction is uniform in the horizontal plane.
    #[serde(deserialize_with = "check::non_negative2")]
    pub force: [f64; 2],
    #[serde(deserialize_with = "check::non_negative2")]
    pub start: [f64; 2],
    #[serde(deserialize_with = "check::non_negative2")]
    pub duration: [f64; 2],
}

impl Default for LearnPushSpec {
    fn default() -> Self {
        Self { probability: 0.7, force: [20.0, 50.0], start: [0.0, 0.3], duration: [0.1, 0.2] }
    }
}

/// Per-step cost weights of a learning task (`learn::task` module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LearnWeights {
    /// Base height error (1/m^2) [2500], orientation log-map error (1/rad^2) [100], base
    /// linear [1] and angular [0.2] velocity, joint velocity [1e-3], action [0.01], forward
    /// speed error (walk) [10].
    #[serde(deserialize_with = "check::non_negative")]
    pub height: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub orientation: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub linear_velocity: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub angular_velocity: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub joint_velocity: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub action: f64,
    #[serde(deserialize_with = "check::non_negative")]
    pub speed: f64,
}

impl Default for LearnWeights {
    fn default() -> Self {
        Self {
            height: 2500.0,
            orientation: 100.0,
            linear_velocity: 1.0,
            angular_velocity: 0.2,
            joint_velocity: 1e-3,
            action: 0.01,
            speed: 10.0,
        }
    }
}

/// A policy-learning task (`contactlab train`, DESIGN 6; `learn::task`). The scene's `dt` is the
/// control period and simulation step; its `JointPd` gains turn actions (joint targets) into
/// torques; its `pulls` are the shipped pushes of the standing check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearnSpec {
    /// `stand` (track a commanded base height and orientation under pushes) or `walk` (walk
    /// forward at a commanded speed) [stand].
    #[serde(default = "default_learn_task")]
    pub task: String,
    /// Episode length (s) [0.5].
    #[serde(default = "default_episode", deserialize_with = "check::positive")]
    pub episode: f64,
    /// Time under the scene's controller that gives the nominal stance (s) [1].
    #[serde(default = "default_settle", deserialize_with = "check::non_negative")]
    pub settle: f64,
    /// Joint target offset per unit action (rad) [0.3].
    #[serde(default = "default_action_scale", deserialize_with = "check::positive")]
    pub action_scale: f64,
    /// Hidden layer widths [[64, 64]] and activation `tanh` or `elu` [tanh].
    #[serde(default = "default_hidden")]
    pub hidden: Vec<usize>,
    #[serde(default = "default_activation")]
    pub activation: String,
    #[serde(default)]
    pub command: LearnCommandSpec,
    #[serde(default)]
    pub init: LearnInitSpec,
    #[serde(default)]
    pub push: LearnPushSpec,
    #[serde(default)]
    pub weights: LearnWeights,
    /// BPTT's contact sensitivity `exact`, `signorini` or `relaxed` [relaxed], its relaxation
    /// (N s m/s) [1e-3] and normal shift (m/s) [1e-2]; the command line overrides them.
    #[serde(default = "default_ocp_sensitivity")]
    pub sensitivity: String,
    #[serde(default = "default_learn_kappa", deserialize_with = "check::positive")]
    pub kappa: f64,
    #[serde(default = "default_learn_delta", deserialize_with = "check::non_negative")]
    pub delta: f64,
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
    #[serde(default)]
    pub controller: ControllerSpec,
    #[serde(default)]
    pub pulls: Vec<PullSpec>,
    /// Default duration of `simulate` (s).
    #[serde(default, deserialize_with = "check::positive_opt")]
    pub duration: Option<f64>,
    /// Default gradient-quality sweep of `gradcheck`.
    #[serde(default)]
    pub gradcheck: Option<GradcheckSpec>,
    /// Trajectory optimization task of `cito`.
    #[serde(default)]
    pub cito: Option<CitoSpec>,
    /// Closed-loop MPC of `mpc`.
    #[serde(default)]
    pub mpc: Option<MpcSpec>,
    /// Policy-learning task of `train` and `compare-learning`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learn: Option<LearnSpec>,
}

#[derive(Debug, Error)]
pub enum SceneError {
    #[error("{file}: cannot read: {message}")]
    Io { file: PathBuf, message: String },
    #[error("{file}:{line}:{column}: {field}: {message}")]
    Invalid { file: PathBuf, line: usize, column: usize, field: String, message: String },
    #[error(transparent)]
    Urdf(#[from] urdf::UrdfError),
}

/// A loaded scene, ready to simulate.
#[derive(Clone, Debug)]
pub struct Scene {
    pub path: PathBuf,
    pub file: SceneFile,
    pub model: Arc<Model>,
    pub terrain: Terrain,
    pub settings: StepSettings,
    pub q0: DVector<f64>,
    pub v0: DVector<f64>,
    pub controller: Controller,
    pub pulls: Vec<Pull>,
    /// Warnings from model import.
    pub warnings: Vec<String>,
}

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
    pub fn load(path: &Path) -> Result<Scene, SceneError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SceneError::Io { file: path.to_path_buf(), message: e.to_string() })?;
        Self::from_str(&text, path)
    }

    /// Parses scene text; `path` is used in messages and to resolve relative URDF paths.
    pub fn from_str(text: &str, path: &Path) -> Result<Scene, SceneError> {
        let file = path.to_path_buf();
        let spanned = |e: ron::error::SpannedError, field: String| SceneError::Invalid {
            file: file.clone(),
            line: e.span.start.line,
            column: e.span.start.col,
            field: if field.is_empty() || field == "." { "scene".into() } else { field },
            message: e.code.to_string(),
        };
        // `implicit_some` lets optional fields be written as plain values (`duration: 3.0`).
        let options = ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
        let mut de = ron::Deserializer::from_str_with_options(text, &options).map_err(|e| spanned(e, String::new()))?;
        let parsed: Result<SceneFile, _> = serde_path_to_error::deserialize(&mut de);
        let sf = match parsed {
            Ok(sf) => sf,
            Err(e) => {
                let field = e.path().to_string();
                let err = de.span_error(e.into_inner());
                return Err(spanned(err, field));
            }
        };
        de.end().map_err(|e| spanned(de.span_error(e), "scene".into()))?;
        Self::from_file(sf, text, path)
    }

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

        let settings = StepSettings { dt: sf.dt, solver: sf.solver, contact_margin: sf.contact_margin };
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
                let posture = model.actuated_dofs.iter().map(|&dof| {
                    let j = model.joints.iter().find(|j| j.idx_v == dof).expect("actuated dof belongs to a joint");
                    target[j.idx_q]
                });
                Controller::JointPd { kp: *kp, kd: *kd, posture: posture.collect() }
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
        if let Some(g) = &sf.gradcheck {
            resolve_param(&model, &pulls, &g.param)
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
            if g.to <= g.from || g.points < 2 || g.samples == 0 {
                return Err(invalid(
                    "gradcheck",
                    "gradcheck".into(),
                    "needs from < to, points >= 2 and samples >= 1".into(),
                ));
            }
        }
        let ocp_checks = [
            sf.cito.as_ref().map(|c| ("cito", c.knot_dt, c.horizon, c.iterations, c.sensitivity.as_str())),
            sf.mpc.as_ref().map(|c| ("mpc", c.knot_dt, c.horizon, c.iterations, c.sensitivity.as_str())),
        ];
        for (section, knot_dt, horizon, iterations, sensitivity) in ocp_checks.into_iter().flatten() {
            if !model.has_free_flyer() {
                return Err(invalid(
                    section,
                    section.into(),
                    "needs a floating-base robot (a base pose to track)".into(),
                ));
            }
            if !["exact", "signorini", "relaxed"].contains(&sensitivity) {
                return Err(invalid(
                    &format!("\"{sensitivity}\""),
                    format!("{section}.sensitivity"),
                    format!("unknown sensitivity `{sensitivity}`: expected exact, signorini or relaxed"),
                ));
            }
            if iterations == 0 {
                return Err(invalid("iterations", format!("{section}.iterations"), "must be at least 1".into()));
            }
            let knots = horizon / knot_dt;
            if !(knots.round() >= 1.0 && knots.round() <= 1000.0) {
                return Err(invalid(
                    "horizon",
                    format!("{section}.horizon"),
                    format!("{horizon} s at knot_dt {knot_dt} s gives {knots:.1} knots: allowed [1, 1000]"),
                ));
            }
        }
        if let Some(l) = &sf.learn {
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
            if !["stand", "walk"].contains(&l.task.as_str()) {
                return Err(invalid(
                    &format!("\"{}\"", l.task),
                    "learn.task".into(),
                    format!("unknown task `{}`: expected stand or walk", l.task),
                ));
            }
            if !["exact", "signorini", "relaxed"].contains(&l.sensitivity.as_str()) {
                return Err(invalid(
                    &format!("\"{}\"", l.sensitivity),
                    "learn.sensitivity".into(),
                    format!("unknown sensitivity `{}`: expected exact, signorini or relaxed", l.sensitivity),
                ));
            }
            if !["tanh", "elu"].contains(&l.activation.as_str()) {
                return Err(invalid(
                    &format!("\"{}\"", l.activation),
                    "learn.activation".into(),
                    format!("unknown activation `{}`: expected tanh or elu", l.activation),
                ));
            }
            if l.hidden.is_empty() || l.hidden.iter().any(|&w| w == 0 || w > 1024) {
                return Err(invalid(
                    "hidden",
                    "learn.hidden".into(),
                    format!("{:?}: needs at least one layer, widths in [1, 1024]", l.hidden),
                ));
            }
            let steps = l.episode / sf.dt;
            if !(steps.round() >= 2.0 && steps.round() <= 10_000.0) {
                return Err(invalid(
                    "episode",
                    "learn.episode".into(),
                    format!("{} s at dt {} s gives {steps:.1} steps: allowed [2, 10000]", l.episode, sf.dt),
                ));
            }
            for (name, r) in [
                ("push.force", l.push.force),
                ("push.start", l.push.start),
                ("push.duration", l.push.duration),
                ("command.speed", l.command.speed),
            ] {
                if r[0] > r[1] {
                    return Err(invalid(
                        name.rsplit('.').next().unwrap_or(name),
                        format!("learn.{name}"),
                        format!("({}, {}): needs low <= high", r[0], r[1]),
                    ));
                }
            }
        }
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

    /// A simulation at the scene's initial state.
    pub fn simulation(&self) -> Simulation {
        let mut sim =
            Simulation::new(self.model.clone(), self.terrain.clone(), self.settings, self.q0.clone(), self.v0.clone());
        sim.controller = self.controller.clone();
        sim.pulls = self.pulls.clone();
        sim
    }

    /// Writes the scene's file form atomically.
    pub fn save(file: &SceneFile, path: &Path) -> std::io::Result<()> {
        let text = ron::ser::to_string_pretty(file, ron::ser::PrettyConfig::default())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        crate::io::write_atomic(path, text.as_bytes())
    }
}

/// Resolves a sweep parameter name (see [`GradcheckSpec::param`]) against a model and its pulls.
pub fn resolve_param(model: &Model, pulls: &[Pull], name: &str) -> Result<crate::diff::Param, String> {
    use crate::diff::Param;
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
            for (k, &dof) in model.actuated_dofs.iter().enumerate() {
                let j = model.joints.iter().find(|j| j.idx_v == dof).expect("actuated dof belongs to a joint");
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
