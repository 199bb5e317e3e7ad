//! Settings of the learning tasks ([`super::task::Task`]): what a scene's `learn` section holds.

use crate::diff::{Sensitivity, SensitivityKind};
use crate::validate::{Checker, SettingsError};
use serde::{Deserialize, Serialize};

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
fn default_settle() -> f64 {
    1.0
}

/// Ranges of the commands a learning task samples per episode (uniform, symmetric about zero
/// unless stated).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommandSettings {
    /// Base height offset from the settled stance (m) [0.04] and roll, pitch, yaw offsets
    /// about the world axes (rad) [(0.1, 0.1, 0.1)] (stand).
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub height: f64,
    #[serde(deserialize_with = "crate::validate::non_negative3")]
    pub rpy: [f64; 3],
    /// Forward speed range (m/s) [(0.2, 0.5)] and gait clock frequency (Hz) \[2\] (walk).
    #[serde(deserialize_with = "crate::validate::non_negative2")]
    pub speed: [f64; 2],
    #[serde(deserialize_with = "crate::validate::positive")]
    pub gait_frequency: f64,
}

impl Default for CommandSettings {
    fn default() -> Self {
        Self { height: 0.04, rpy: [0.1, 0.1, 0.1], speed: [0.2, 0.5], gait_frequency: 2.0 }
    }
}

/// Reset distribution around the settled stance (uniform, symmetric).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InitSettings {
    /// Joint position offsets (rad) [0.05], base linear and angular velocity per body axis
    /// (m/s, rad/s) [0.2, 0.3], and a drop: base raised by up to this (m) [0.01].
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub joints: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub base_linear_velocity: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub base_angular_velocity: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub drop: f64,
}

impl Default for InitSettings {
    fn default() -> Self {
        Self { joints: 0.05, base_linear_velocity: 0.2, base_angular_velocity: 0.3, drop: 0.01 }
    }
}

/// Random horizontal pushes on the trunk during training and evaluation episodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PushSettings {
    /// Probability that an episode has a push [0.7].
    #[serde(deserialize_with = "crate::validate::probability")]
    pub probability: f64,
    /// Force magnitude (N) [(20, 50)], start within the episode (s) [(0, 0.3)], duration (s)
    /// [(0.1, 0.2)]; the direction is uniform in the horizontal plane.
    #[serde(deserialize_with = "crate::validate::non_negative2")]
    pub force: [f64; 2],
    #[serde(deserialize_with = "crate::validate::non_negative2")]
    pub start: [f64; 2],
    #[serde(deserialize_with = "crate::validate::non_negative2")]
    pub duration: [f64; 2],
}

impl Default for PushSettings {
    fn default() -> Self {
        Self { probability: 0.7, force: [20.0, 50.0], start: [0.0, 0.3], duration: [0.1, 0.2] }
    }
}

/// Per-step cost weights of a learning task (`learn::task` module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskWeights {
    /// Base height error (1/m^2) \[2500\], orientation log-map error (1/rad^2) \[100\], base
    /// linear \[1\] and angular [0.2] velocity, joint velocity [1e-3], action [0.01], forward
    /// speed error (walk) \[10\], foot height error against the gait's reference swing height
    /// (walk, 1/m^2) \[0\].
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub height: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub orientation: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub linear_velocity: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub angular_velocity: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub joint_velocity: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub action: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub speed: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub foot_height: f64,
}

impl Default for TaskWeights {
    fn default() -> Self {
        Self {
            height: 2500.0,
            orientation: 100.0,
            linear_velocity: 1.0,
            angular_velocity: 0.2,
            joint_velocity: 1e-3,
            action: 0.01,
            speed: 10.0,
            foot_height: 0.0,
        }
    }
}

/// Gait shaping of the walk task (`learn::task` module docs, *Gait*): a trot clock with the
/// diagonal leg pairs in antiphase, a clock-driven reference swing height per foot (scored by
/// `weights.foot_height`), an optional clock-driven reference joint trajectory (the "trot
/// prior") the action is a residual on, and random clock phases at the episode starts. Every
/// learner sees the same task. The defaults switch everything off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GaitSettings {
    /// Reference foot height at mid-swing (m) \[0\]: `z_ref,k = swing_height max(0, sin phi_k)`.
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub swing_height: f64,
    /// Trot prior, lift: thigh flexion at mid-swing (rad) \[0\] (the calf flexes twice as much,
    /// which lifts the foot straight up from the stance posture).
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub prior_lift: f64,
    /// Trot prior, stride: thigh swing amplitude per unit commanded speed (rad per m/s) \[0\].
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub prior_stride: f64,
    /// Start each episode at a uniformly random clock phase \[false\].
    pub random_phase: bool,
    /// Fraction of the commanded speed added to the start's forward base velocity \[0\] (so
    /// short episodes also see the robot already moving).
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub start_speed: f64,
}

impl Default for GaitSettings {
    fn default() -> Self {
        Self { swing_height: 0.0, prior_lift: 0.0, prior_stride: 0.0, random_phase: false, start_speed: 0.0 }
    }
}

/// BPTT's training configuration for the task (`learn::bptt`); the command line overrides it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BpttTaskSettings {
    /// Rollouts per iteration \[16\].
    pub batch: usize,
    /// Adam learning rate [1e-3].
    #[serde(deserialize_with = "crate::validate::positive")]
    pub lr: f64,
    /// Simulated-step budget of `train bptt` and `compare-learning` [100 000].
    pub steps: usize,
}

impl Default for BpttTaskSettings {
    fn default() -> Self {
        Self { batch: 16, lr: 1e-3, steps: 100_000 }
    }
}

/// A policy-learning task (DESIGN 6; [`super::task`]). The simulation's `dt` is the control
/// period and simulation step; its `JointPd` gains turn actions (joint targets) into torques;
/// its pulls are the shipped pushes of the standing check. A scene's `learn` section is this
/// struct, field for field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSettings {
    /// `stand` (track a commanded base height and orientation under pushes) or `walk` (walk
    /// forward at a commanded speed) \[stand\].
    #[serde(default = "default_learn_task")]
    pub task: String,
    /// Episode length (s) [0.5].
    #[serde(default = "default_episode", deserialize_with = "crate::validate::positive")]
    pub episode: f64,
    /// Time under the scene's controller that gives the nominal stance (s) \[1\].
    #[serde(default = "default_settle", deserialize_with = "crate::validate::non_negative")]
    pub settle: f64,
    /// Joint target offset per unit action (rad) [0.3].
    #[serde(default = "default_action_scale", deserialize_with = "crate::validate::positive")]
    pub action_scale: f64,
    /// Hidden layer widths [[64, 64]] and activation `tanh` or `elu` \[tanh\].
    #[serde(default = "default_hidden")]
    pub hidden: Vec<usize>,
    #[serde(default = "default_activation")]
    pub activation: String,
    #[serde(default)]
    pub command: CommandSettings,
    #[serde(default)]
    pub init: InitSettings,
    #[serde(default)]
    pub push: PushSettings,
    #[serde(default)]
    pub weights: TaskWeights,
    /// Gait shaping (walk) \[off\].
    #[serde(default)]
    pub gait: GaitSettings,
    /// BPTT's batch, learning rate and step budget \[16, 1e-3, 100 000\].
    #[serde(default)]
    pub bptt: BpttTaskSettings,
    /// BPTT's contact sensitivity `exact`, `signorini` or `relaxed` \[relaxed\], its relaxation
    /// (N s m/s) [`crate::diff::DEFAULT_KAPPA`] and normal shift (m/s)
    /// [`crate::diff::DEFAULT_DELTA`]; the command line overrides them.
    #[serde(default)]
    pub sensitivity: SensitivityKind,
    #[serde(default = "crate::diff::sensitivity::default_kappa", deserialize_with = "crate::validate::positive")]
    pub kappa: f64,
    #[serde(default = "crate::diff::sensitivity::default_delta", deserialize_with = "crate::validate::non_negative")]
    pub delta: f64,
}

impl Default for TaskSettings {
    /// The defaults of an empty `learn: ()`: the stand task.
    fn default() -> Self {
        Self {
            task: default_learn_task(),
            episode: default_episode(),
            settle: default_settle(),
            action_scale: default_action_scale(),
            hidden: default_hidden(),
            activation: default_activation(),
            command: CommandSettings::default(),
            init: InitSettings::default(),
            push: PushSettings::default(),
            weights: TaskWeights::default(),
            gait: GaitSettings::default(),
            bptt: BpttTaskSettings::default(),
            sensitivity: SensitivityKind::default(),
            kappa: crate::diff::DEFAULT_KAPPA,
            delta: crate::diff::DEFAULT_DELTA,
        }
    }
}

impl TaskSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        let w = &self.weights;
        Checker::new("TaskSettings")
            .check(["stand", "walk"].contains(&self.task.as_str()), "task", || {
                format!("unknown task `{}`: expected stand or walk", self.task)
            })
            .positive("episode", self.episode)
            .non_negative("settle", self.settle)
            .positive("action_scale", self.action_scale)
            .widths("hidden", &self.hidden)
            .check(["tanh", "elu"].contains(&self.activation.as_str()), "activation", || {
                format!("unknown activation `{}`: expected tanh or elu", self.activation)
            })
            .non_negative("command.height", self.command.height)
            .all_non_negative("command.rpy", &self.command.rpy)
            .range("command.speed", self.command.speed)
            .positive("command.gait_frequency", self.command.gait_frequency)
            .non_negative("init.joints", self.init.joints)
            .non_negative("init.base_linear_velocity", self.init.base_linear_velocity)
            .non_negative("init.base_angular_velocity", self.init.base_angular_velocity)
            .non_negative("init.drop", self.init.drop)
            .probability("push.probability", self.push.probability)
            .range("push.force", self.push.force)
            .range("push.start", self.push.start)
            .range("push.duration", self.push.duration)
            .non_negative("weights.height", w.height)
            .non_negative("weights.orientation", w.orientation)
            .non_negative("weights.linear_velocity", w.linear_velocity)
            .non_negative("weights.angular_velocity", w.angular_velocity)
            .non_negative("weights.joint_velocity", w.joint_velocity)
            .non_negative("weights.action", w.action)
            .non_negative("weights.speed", w.speed)
            .non_negative("weights.foot_height", w.foot_height)
            .non_negative("gait.swing_height", self.gait.swing_height)
            .non_negative("gait.prior_lift", self.gait.prior_lift)
            .non_negative("gait.prior_stride", self.gait.prior_stride)
            .non_negative("gait.start_speed", self.gait.start_speed)
            .count("bptt.batch", self.bptt.batch, 1, 1 << 20)
            .positive("bptt.lr", self.bptt.lr)
            .count("bptt.steps", self.bptt.steps, 1, usize::MAX)
            .positive("kappa", self.kappa)
            .non_negative("delta", self.delta)
            .finish()
    }

    /// Steps per episode at control period `dt`, checked to lie in [2, 10000].
    pub fn steps(&self, dt: f64) -> Result<usize, SettingsError> {
        let steps = (self.episode / dt).round();
        if !(2.0..=10_000.0).contains(&steps) {
            return Err(SettingsError::new(
                "TaskSettings",
                "episode",
                format!("{} s at dt {dt} s gives {steps} steps: allowed [2, 10000]", self.episode),
            ));
        }
        Ok(steps as usize)
    }

    /// BPTT's sensitivity, with the settings' `kappa` and `delta`.
    pub fn sensitivity(&self) -> Sensitivity {
        self.sensitivity.with(self.kappa, self.delta)
    }
}
