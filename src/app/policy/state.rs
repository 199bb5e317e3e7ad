//! The Policy window's resources: the learners and training runs it sets up, the requests it
//! queues, what the driver reports, and the state it shows.

use super::jobs::Training;
use crate::app::sim::{DriverSlot, SimWorker};
use crate::app::ViewerOptions;
use crate::learn::report::{DEFAULT_BPTT_STEPS, DEFAULT_PPO_STEPS};
use crate::learn::TrainResult;
use crate::learn::{Command, IterLog, Policy, Task, TaskKind};
use bevy::prelude::*;
use bevy::tasks::Task as BevyTask;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The policy the window offers first.
pub const DEFAULT_POLICY: &str = "assets/policies/stand_bptt_relaxed.json";

/// Samples kept by [`Telemetry`] (40 s at the learning scenes' 10 ms step).
const TELEMETRY_CAPACITY: usize = 4000;

/// Locks shared state; a panic elsewhere while holding it leaves plain data, still usable.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The learners the window can train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learner {
    BpttRelaxed,
    BpttExact,
    Ppo,
}

impl Learner {
    pub const ALL: [Learner; 3] = [Learner::BpttRelaxed, Learner::BpttExact, Learner::Ppo];

    /// The name `contactlab train` and the policy files use.
    pub fn name(&self) -> &'static str {
        match self {
            Learner::BpttRelaxed => "bptt-relaxed",
            Learner::BpttExact => "bptt-exact",
            Learner::Ppo => "ppo",
        }
    }

    /// The command line's default budget of simulated steps.
    pub fn default_steps(&self) -> usize {
        match self {
            Learner::Ppo => DEFAULT_PPO_STEPS,
            _ => DEFAULT_BPTT_STEPS,
        }
    }
}

/// A training run as set up in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainSettings {
    pub learner: Learner,
    pub seed: u64,
    /// Budget of simulated training steps (rounded up to whole iterations by the learner).
    pub steps: usize,
}

impl Default for TrainSettings {
    fn default() -> Self {
        Self { learner: Learner::BpttRelaxed, seed: 0, steps: Learner::BpttRelaxed.default_steps() }
    }
}

/// What the window (or a test) asks for; [`drive_policy`] applies them in order.
///
/// [`drive_policy`]: super::drive_policy
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyRequest {
    /// Load a policy file and check it against the current scene's task.
    Load(PathBuf),
    /// Drive the robot with the loaded policy (waits for a load in flight).
    Run,
    /// Drive the robot with the last trained policy.
    RunTrained,
    /// Give the controls back to the scene's controller.
    Stop,
    /// Start training in the background (cancelling a run in progress).
    Train(TrainSettings),
    CancelTraining,
    /// Write the last trained policy (atomically).
    Save(PathBuf),
}

/// A loaded policy file and, if it can drive this scene, the scene's task.
#[derive(Clone, Debug)]
pub struct LoadedPolicy {
    pub path: PathBuf,
    pub policy: Arc<Policy>,
    /// The current scene's task, or why the policy cannot drive it.
    pub task: Result<Arc<Task>, String>,
}

/// The last finished training run.
#[derive(Clone, Debug)]
pub struct TrainedPolicy {
    pub settings: TrainSettings,
    pub result: TrainResult,
    pub task: Arc<Task>,
    /// Scene generation it was trained on (it drives only that scene).
    pub(super) generation: u64,
}

/// Shared with the training thread: its log so far.
#[derive(Clone, Debug, Default)]
pub struct TrainProgress {
    pub logs: Vec<IterLog>,
    /// The task's target return (`learn::task`), once computed.
    pub target_return: Option<f64>,
    pub task_kind: Option<TaskKind>,
}

/// One control step as the driver saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Simulation time before the step (s).
    pub t: f64,
    /// Base height and the commanded one (m).
    pub height: f64,
    pub target_height: f64,
    /// Angle of `R*^T R` (rad).
    pub orientation_error: f64,
    /// Base forward velocity (world x, m/s) and the commanded speed (walk).
    pub speed: f64,
    pub target_speed: f64,
    /// The task's per-step cost of this state and the action taken (`learn::task`).
    pub cost: f64,
}

/// What the policy driver reports, newest last.
#[derive(Clone, Debug, Default)]
pub struct Telemetry {
    pub samples: VecDeque<Sample>,
    /// Steps of one training episode: the horizon of [`Telemetry::recent_return`].
    pub episode_steps: usize,
    /// The task kind of the policy driving.
    pub kind: Option<TaskKind>,
}

impl Telemetry {
    pub(super) fn push(&mut self, s: Sample) {
        // Playing from a scrubbed snapshot replaces the future: drop what came after it.
        while self.samples.back().is_some_and(|b| b.t >= s.t) {
            self.samples.pop_back();
        }
        if self.samples.len() == TELEMETRY_CAPACITY {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// Minus the summed cost of the last episode's worth of steps: comparable with the
    /// training returns (which also include pushes and random starts).
    pub fn recent_return(&self) -> Option<f64> {
        let n = self.episode_steps;
        (n > 0 && self.samples.len() >= n).then(|| -self.samples.iter().rev().take(n).map(|s| s.cost).sum::<f64>())
    }
}

/// The window's state, the shared handles of the driver and of the training thread, and the
/// queue of requests.
#[derive(Resource)]
pub struct PolicyState {
    /// Typed path of the policy file.
    pub path: String,
    pub requests: Vec<PolicyRequest>,
    pub loaded: Option<LoadedPolicy>,
    /// The last failure (load, run, save, training) or notice, shown until replaced.
    pub message: Option<String>,
    /// The command the driver tracks (the sliders write it).
    pub command: Arc<Mutex<Command>>,
    pub telemetry: Arc<Mutex<Telemetry>>,
    pub train_settings: TrainSettings,
    pub training: Option<Training>,
    pub trained: Option<TrainedPolicy>,
    /// Typed path to save the trained policy to.
    pub save_path: String,
    /// Name of the driver we handed over, and its slot until the simulation has taken it.
    pub(super) driver_name: Option<String>,
    pub(super) pending: Option<DriverSlot>,
    pub(super) load: Option<(PathBuf, BevyTask<Result<LoadedPolicy, String>>)>,
    pub(super) generation: u64,
    /// Loads and training runs finished (tests wait on them).
    pub loads: u64,
    pub trainings: u64,
}

impl Default for PolicyState {
    fn default() -> Self {
        Self {
            path: DEFAULT_POLICY.into(),
            requests: Vec::new(),
            loaded: None,
            message: None,
            command: Arc::default(),
            telemetry: Arc::default(),
            train_settings: TrainSettings::default(),
            training: None,
            trained: None,
            save_path: String::new(),
            driver_name: None,
            pending: None,
            load: None,
            generation: 0,
            loads: 0,
            trainings: 0,
        }
    }
}

impl PolicyState {
    pub fn request(&mut self, r: PolicyRequest) {
        self.requests.push(r);
    }

    pub fn loading(&self) -> bool {
        self.load.is_some()
    }

    pub fn training(&self) -> bool {
        self.training.is_some()
    }

    /// Whether our policy has (or is about to have) the controls.
    pub fn driving(&self, worker: Option<&SimWorker>) -> bool {
        self.pending.is_some()
            || (self.driver_name.is_some() && worker.and_then(|w| w.driver()) == self.driver_name.as_deref())
    }

    /// The current command.
    pub fn command(&self) -> Command {
        *lock(&self.command)
    }

    pub fn set_command(&self, c: Command) {
        *lock(&self.command) = c;
    }

    /// The learning curve to show: the running one, else the last finished one.
    pub fn curve(&self) -> Option<TrainProgress> {
        if let Some(t) = &self.training {
            return Some(lock(&t.progress).clone());
        }
        self.trained.as_ref().map(|t| TrainProgress {
            logs: t.result.logs.clone(),
            target_return: t.result.policy.info.get("target_return").and_then(|v| v.as_f64()),
            task_kind: Some(t.task.kind),
        })
    }
}

/// `--policy FILE` fills the path; `--open policy --start` loads it and drives at once.
pub(super) fn start_from_options(opts: Option<Res<ViewerOptions>>, mut state: ResMut<PolicyState>) {
    let Some(opts) = opts else { return };
    if let Some(p) = &opts.policy {
        state.path = p.display().to_string();
    }
    if opts.start && opts.open.iter().any(|o| o == "policy") {
        let path = PathBuf::from(&state.path);
        state.request(PolicyRequest::Load(path));
        state.request(PolicyRequest::Run);
    }
}

/// Window-only state.
#[derive(Resource)]
pub struct PolicyUi {
    /// A file dialog in progress (on its own thread: the dialog blocks it while open).
    pub(super) dialog: Option<JoinHandle<Option<PathBuf>>>,
    /// Seconds of telemetry shown.
    pub window: f64,
}

impl Default for PolicyUi {
    fn default() -> Self {
        Self { dialog: None, window: 5.0 }
    }
}
