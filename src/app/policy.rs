//! The Policy window (issue 6): a learned policy drives the robot live, commanded from sliders
//! and pushed around with the mouse spring; new policies train in the background while the
//! simulation keeps running.
//!
//! Two plugins. [`PolicyPlugin`] (in [`super::core_plugins`], so headless tests run it) owns
//! [`PolicyState`] and one system, [`drive_policy`], that applies the window's
//! [`PolicyRequest`]s and polls the background work; [`PolicyUiPlugin`] (windowed app only) draws
//! the window, which only edits settings and queues requests.
//!
//! Ownership and threads:
//! * Loading a policy builds the scene's [`Task`] (which settles the stance for a second of
//!   simulated time), so it runs on a thread of its own ([`super::jobs`]) that owns a copy of the scene.
//! * Driving: a [`PolicyDriver`] is handed to the simulation plugin ([`SimCommand::Drive`]) and
//!   runs on the step batch's thread before every step: `Policy::drive` with the current
//!   [`Command`], read from an `Arc<Mutex<Command>>` the sliders write. It reports base height,
//!   orientation error and per-step cost into a shared [`Telemetry`] ring that the window plots.
//!   `engage` keeps the controller it replaces and `release` puts it back, so stopping (or another
//!   driver taking over) returns the robot to the scene's PD.
//! * Training runs on its own `std::thread`, not on the async compute pool: a run takes seconds
//!   (BPTT) to minutes (PPO), and on a 2-core machine that pool has a single thread, which the
//!   simulation's step batches need. Its rayon work goes to a private pool one thread smaller
//!   than the machine, so the app keeps a core. The learner's per-iteration callback appends the
//!   [`IterLog`] to a shared [`TrainProgress`]; the cancel flag is checked between iterations.
//!
//! The learning curves are plotted against simulated training steps, the learners' common
//! budget (`learn::bptt`, `learn::ppo`), with the task's target return (stand: the reference
//! controller's; walk: the scene's PD) as a horizontal line.

use super::sim::{Driver, DriverSlot, SimCommand, SimCommands, SimWorker};
use super::{cost_scope, AppSet, CurrentScene, ToolWindows, ViewerOptions};
use crate::learn::mlp::MlpCache;
use crate::learn::report::{learn, train_command, Algorithm, DEFAULT_BPTT_STEPS, DEFAULT_PPO_STEPS};
use crate::learn::TrainResult;
use crate::learn::{Command, IterLog, Policy, Task, TaskKind};
use crate::model::configuration::free_flyer_placement;
use crate::scene::Scene;
use crate::sim::{Controller, Simulation};
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, Task as BevyTask};
use nalgebra::Rotation3;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The policy the window offers first.
pub const DEFAULT_POLICY: &str = "assets/policies/stand_bptt_relaxed.json";

/// Samples kept by [`Telemetry`] (40 s at the learning scenes' 10 ms step).
const TELEMETRY_CAPACITY: usize = 4000;

/// Locks shared state; a panic elsewhere while holding it leaves plain data, still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
    generation: u64,
}

/// Shared with the training thread: its log so far.
#[derive(Clone, Debug, Default)]
pub struct TrainProgress {
    pub logs: Vec<IterLog>,
    /// The task's target return (`learn::task`), once computed.
    pub target_return: Option<f64>,
    pub task_kind: Option<TaskKind>,
}

/// What a training thread ends with: the result and the task it trained on.
type TrainOutcome = Result<(TrainResult, Arc<Task>), String>;

/// A training run in progress.
pub struct Training {
    pub settings: TrainSettings,
    pub progress: Arc<Mutex<TrainProgress>>,
    cancel: Arc<AtomicBool>,
    handle: Option<JoinHandle<TrainOutcome>>,
    generation: u64,
}

impl Training {
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

impl Drop for Training {
    /// A run nobody will read (a new run, the app closing) stops at its next iteration.
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
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
    fn push(&mut self, s: Sample) {
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

/// A policy at the controls of the simulation ([`Driver`], module docs).
pub struct PolicyDriver {
    name: String,
    policy: Arc<Policy>,
    task: Arc<Task>,
    command: Arc<Mutex<Command>>,
    telemetry: Arc<Mutex<Telemetry>>,
    /// The controller it replaced, restored on release.
    replaced: Option<Controller>,
    obs: Vec<f64>,
    cache: MlpCache,
}

impl PolicyDriver {
    pub fn new(
        name: String,
        policy: Arc<Policy>,
        task: Arc<Task>,
        command: Arc<Mutex<Command>>,
        telemetry: Arc<Mutex<Telemetry>>,
    ) -> Self {
        let obs = vec![0.0; task.obs_dim()];
        Self { name, policy, task, command, telemetry, replaced: None, obs, cache: MlpCache::default() }
    }

    /// The step's record, from the observation and action the policy just drove with.
    fn sample(&self, sim: &Simulation, c: &Command, a: &[f64]) -> Sample {
        let task = &*self.task;
        let (z_t, r_t) = task.target(c);
        let m = free_flyer_placement(&sim.q.as_slice()[..7]);
        Sample {
            t: sim.t,
            height: m.trans.z,
            target_height: z_t,
            orientation_error: Rotation3::from_matrix_unchecked(r_t.transpose() * m.rot).angle(),
            speed: sim.v[0],
            target_speed: if task.kind == TaskKind::Walk { c.speed } else { 0.0 },
            cost: task.cost(&self.obs, a, None),
        }
    }
}

impl Driver for PolicyDriver {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn engage(&mut self, sim: &mut Simulation) -> Result<(), String> {
        let m = &self.task.model;
        if sim.model.nq != m.nq || sim.model.nv != m.nv || sim.model.nu != m.nu {
            return Err(format!(
                "the policy's task has nq {}, nv {}, nu {}; the simulation has {}, {}, {}",
                m.nq, m.nv, m.nu, sim.model.nq, sim.model.nv, sim.model.nu
            ));
        }
        // The policy acts once per step: a different step is a different control period.
        let (h, dt) = (self.task.settings.dt, sim.settings.dt);
        if (h - dt).abs() > 1e-12 * h {
            return Err(format!("the policy acts every {h} s but the time step is {dt} s; set it back to {h} s"));
        }
        self.replaced = Some(sim.controller.clone());
        Ok(())
    }

    fn before_step(&mut self, sim: &mut Simulation) -> Result<(), String> {
        let c = *lock(&self.command);
        let a = self.policy.drive_observed(&self.task, sim, &c, &mut self.obs, &mut self.cache);
        let s = self.sample(sim, &c, &a);
        lock(&self.telemetry).push(s);
        Ok(())
    }

    fn release(&mut self, sim: &mut Simulation) {
        if let Some(c) = self.replaced.take() {
            sim.controller = c;
        }
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
    driver_name: Option<String>,
    pending: Option<DriverSlot>,
    load: Option<(PathBuf, BevyTask<Result<LoadedPolicy, String>>)>,
    generation: u64,
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

    fn drive(&mut self, name: String, policy: Arc<Policy>, task: Arc<Task>, commands: &mut SimCommands) {
        {
            let mut tel = lock(&self.telemetry);
            tel.samples.clear();
            tel.episode_steps = task.steps;
            tel.kind = Some(task.kind);
        }
        if task.kind == TaskKind::Walk && self.command().speed == 0.0 {
            let s = task.spec.command.speed;
            self.set_command(Command { speed: 0.5 * (s[0] + s[1]), ..self.command() });
        }
        let d = PolicyDriver::new(name.clone(), policy, task, self.command.clone(), self.telemetry.clone());
        let slot = DriverSlot::new(Box::new(d));
        commands.push(SimCommand::Drive(slot.clone()));
        self.pending = Some(slot);
        self.driver_name = Some(name);
    }
}

pub struct PolicyPlugin;

impl Plugin for PolicyPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<PolicyState>()
            .add_systems(Startup, start_from_options)
            .add_systems(Update, drive_policy.in_set(AppSet::Background));
    }
}

/// `--policy FILE` fills the path; `--open policy --start` loads it and drives at once.
fn start_from_options(opts: Option<Res<ViewerOptions>>, mut state: ResMut<PolicyState>) {
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

/// Reads a policy file and checks it against the scene's task (on a background task).
fn load_policy(path: &Path, scene: &Scene) -> Result<LoadedPolicy, String> {
    let policy = Policy::load(path).map_err(|e| e.to_string())?;
    let task = match Task::from_scene(scene) {
        Err(e) => Err(format!("this scene has no policy task: {e}. Open a learning scene (scenes/learn_stand.ron, scenes/learn_walk.ron).")),
        Ok(task) => match policy.check(&task) {
            Ok(()) => Ok(Arc::new(task)),
            Err(e) => Err(format!(
                "trained on scene `{}` for task `{}` ({} observations -> {} actions); this scene `{}` has task `{}` \
                 ({} observations -> {} actions): {e}",
                policy.scene,
                policy.task,
                policy.mlp.n_in(),
                policy.mlp.n_out(),
                task.scene,
                task.spec.task,
                task.obs_dim(),
                task.act_dim()
            )),
        },
    };
    Ok(LoadedPolicy { path: path.to_path_buf(), policy: Arc::new(policy), task })
}

/// The training thread's work: the task, its target return, the run, and the policy's record.
fn train(
    scene: &Scene,
    settings: TrainSettings,
    cancel: &AtomicBool,
    progress: &Mutex<TrainProgress>,
) -> Result<(TrainResult, Arc<Task>), String> {
    let task = Task::from_scene(scene)?;
    let algorithm = Algorithm::parse(settings.learner.name(), &task).map_err(|e| e.to_string())?;
    {
        let mut p = lock(progress);
        p.task_kind = Some(task.kind);
    }
    let target = task.reference_return(&task.eval_episodes());
    lock(progress).target_return = Some(target);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1).max(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| e.to_string())?;
    let on_iter = |l: &IterLog, _: &Policy| lock(progress).logs.push(l.clone());
    let (mut result, config) = pool
        .install(|| learn(&task, algorithm, settings.seed, settings.steps, None, None, cancel, on_iter))
        .map_err(|e| e.to_string())?;
    result.policy.info = serde_json::json!({
        "trained_in": "contactlab app (Policy window)",
        "command": train_command(&task, algorithm, settings.seed, settings.steps, None, None),
        "config": config,
        "status": format!("{:?}", result.status),
        "final_return": result.final_return,
        "target_return": target,
        "sim_steps": result.sim_steps,
        "seconds": result.seconds,
    });
    Ok((result, Arc::new(task)))
}

/// Applies the requests and polls the background work (module docs).
pub fn drive_policy(
    mut state: ResMut<PolicyState>,
    scene: Res<CurrentScene>,
    worker: Option<Res<SimWorker>>,
    mut commands: ResMut<SimCommands>,
) {
    let _cost = cost_scope();
    let state = &mut *state;
    if scene.generation != state.generation {
        // A new scene dropped any driver; the loaded policy must be checked against it again.
        state.generation = scene.generation;
        state.driver_name = None;
        state.pending = None;
        state.set_command(Command::default());
        if let Some(l) = state.loaded.take() {
            state.requests.insert(0, PolicyRequest::Load(l.path));
        }
    }
    if state.pending.as_ref().is_some_and(|s| lock(&s.0).is_none()) {
        state.pending = None;
    }
    if state.pending.is_none()
        && state.driver_name.is_some()
        && worker.as_ref().and_then(|w| w.driver()) != state.driver_name.as_deref()
    {
        // Reset, a driver error or another tool took the controls.
        state.driver_name = None;
    }
    if let Some((_, task)) = state.load.as_mut() {
        if let Some(r) = check_ready(task) {
            state.load = None;
            state.loads += 1;
            match r {
                Ok(l) => {
                    state.message = l.task.as_ref().err().cloned();
                    state.loaded = Some(l);
                }
                Err(e) => {
                    state.message = Some(e);
                    state.loaded = None;
                }
            }
        }
    }
    if state.training.as_ref().is_some_and(|t| t.handle.as_ref().is_some_and(|h| h.is_finished())) {
        let mut t = state.training.take().expect("checked above");
        state.trainings += 1;
        match t.handle.take().expect("checked above").join() {
            Ok(Ok((result, task))) => {
                if state.save_path.is_empty() {
                    state.save_path =
                        format!("{}_{}_seed{}.json", task.scene, t.settings.learner.name(), t.settings.seed);
                }
                state.trained = Some(TrainedPolicy { settings: t.settings, result, task, generation: t.generation });
            }
            Ok(Err(e)) => state.message = Some(format!("training: {e}")),
            Err(_) => state.message = Some("training: the learner panicked (see the terminal)".into()),
        }
    }
    let requests = std::mem::take(&mut state.requests);
    let mut rest = requests.into_iter();
    while let Some(r) = rest.next() {
        match r {
            PolicyRequest::Load(path) => {
                state.path = path.display().to_string();
                let sc = scene.scene.clone();
                let p = path.clone();
                // Dropping a load in flight cancels it.
                state.load = Some((path, super::jobs::spawn("policy load", move || load_policy(&p, &sc))));
            }
            PolicyRequest::Run if state.load.is_some() => {
                // Wait for the load: keep this and the later requests for a next frame.
                state.requests = std::iter::once(PolicyRequest::Run).chain(rest).collect();
                break;
            }
            PolicyRequest::Run => match &state.loaded {
                Some(LoadedPolicy { path, policy, task: Ok(task) }) => {
                    let file =
                        path.file_name().map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into());
                    let name = format!("policy {} ({file})", policy.algorithm);
                    let (p, t) = (policy.clone(), task.clone());
                    state.drive(name, p, t, &mut commands);
                }
                Some(LoadedPolicy { task: Err(e), .. }) => state.message = Some(format!("cannot run this policy: {e}")),
                None => {
                    if state.message.is_none() {
                        state.message = Some("load a policy first".into());
                    }
                }
            },
            PolicyRequest::RunTrained => match &state.trained {
                Some(t) if t.generation == state.generation => {
                    let name = format!("policy {} (trained here, seed {})", t.result.policy.algorithm, t.settings.seed);
                    let (p, task) = (Arc::new(t.result.policy.clone()), t.task.clone());
                    state.drive(name, p, task, &mut commands);
                }
                Some(t) => {
                    state.message =
                        Some(format!("the trained policy belongs to scene `{}`, which is no longer open", t.task.scene))
                }
                None => state.message = Some("no trained policy yet".into()),
            },
            PolicyRequest::Stop => {
                if state.driving(worker.as_deref()) {
                    commands.push(SimCommand::StopDriving);
                }
                state.pending = None;
                state.driver_name = None;
            }
            PolicyRequest::Train(settings) => {
                state.training = None;
                let progress = Arc::new(Mutex::new(TrainProgress::default()));
                let cancel = Arc::new(AtomicBool::new(false));
                let (sc, p, c) = (scene.scene.clone(), progress.clone(), cancel.clone());
                let spawned = std::thread::Builder::new()
                    .name("policy-training".into())
                    .spawn(move || train(&sc, settings, &c, &p));
                match spawned {
                    Ok(handle) => {
                        state.train_settings = settings;
                        state.training = Some(Training {
                            settings,
                            progress,
                            cancel,
                            handle: Some(handle),
                            generation: state.generation,
                        });
                    }
                    Err(e) => state.message = Some(format!("training: cannot start a thread: {e}")),
                }
            }
            PolicyRequest::CancelTraining => {
                if let Some(t) = &state.training {
                    t.cancel.store(true, Ordering::Relaxed);
                }
            }
            PolicyRequest::Save(path) => {
                state.message = Some(match &state.trained {
                    Some(t) => match t.result.policy.save(&path) {
                        Ok(()) => format!("saved {}", path.display()),
                        Err(e) => format!("{}: cannot save: {e}", path.display()),
                    },
                    None => "no trained policy to save".into(),
                });
            }
        }
    }
}

/// The window (windowed app only; the logic is in [`PolicyPlugin`]).
pub struct PolicyUiPlugin;

impl Plugin for PolicyUiPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<PolicyUi>()
            .add_systems(Update, poll_dialog)
            .add_systems(bevy_egui::EguiPrimaryContextPass, window::policy_window);
    }
}

/// Window-only state.
#[derive(Resource)]
pub struct PolicyUi {
    /// A file dialog in progress (on its own thread: the dialog blocks it while open).
    dialog: Option<JoinHandle<Option<PathBuf>>>,
    /// Seconds of telemetry shown.
    pub window: f64,
}

impl Default for PolicyUi {
    fn default() -> Self {
        Self { dialog: None, window: 5.0 }
    }
}

fn poll_dialog(mut ui: ResMut<PolicyUi>, mut state: ResMut<PolicyState>) {
    let _cost = cost_scope();
    if !ui.dialog.as_ref().is_some_and(|h| h.is_finished()) {
        return;
    }
    match ui.dialog.take().and_then(|h| h.join().ok()).flatten() {
        Some(p) => state.request(PolicyRequest::Load(p)),
        None => {
            state.message = Some("No file dialog is available here (or it was cancelled): type a path instead.".into())
        }
    }
}

mod window {
    //! The window's panels: plain functions of `&mut egui::Ui` that edit settings, write the
    //! command and queue requests.

    use super::*;
    use bevy_egui::{egui, EguiContexts};
    use egui::Color32;
    use egui_plot::{HLine, Legend, Line, Plot, PlotPoints};

    const RED: Color32 = Color32::from_rgb(220, 40, 40);

    #[allow(clippy::too_many_arguments)]
    pub fn policy_window(
        mut contexts: EguiContexts,
        mut tools: ResMut<ToolWindows>,
        mut state: ResMut<PolicyState>,
        mut ui: ResMut<PolicyUi>,
        scene: Res<CurrentScene>,
        worker: Option<Res<SimWorker>>,
    ) -> Result {
        let _cost = cost_scope();
        if !tools.policy {
            return Ok(());
        }
        let ctx = contexts.ctx_mut()?.clone();
        let mut open = true;
        let right = ctx.viewport_rect().right();
        egui::Window::new("Policy")
            .open(&mut open)
            .default_pos([right - 440.0, 70.0])
            .default_width(420.0)
            .default_height((ctx.viewport_rect().height() - 120.0).max(300.0))
            .vscroll(true)
            .show(&ctx, |u| {
                let driving = state.driving(worker.as_deref());
                file_panel(u, &mut state, &mut ui);
                u.separator();
                run_panel(u, &mut state, &mut ui, &scene.scene, driving);
                u.separator();
                egui::CollapsingHeader::new("Training")
                    .default_open(state.training.is_some() || state.trained.is_some())
                    .show(u, |u| train_panel(u, &mut state, driving));
            });
        if !open {
            tools.policy = false;
        }
        Ok(())
    }

    fn file_panel(u: &mut egui::Ui, state: &mut PolicyState, ui: &mut PolicyUi) {
        u.horizontal(|u| {
            u.label("file");
            u.add(egui::TextEdit::singleline(&mut state.path).desired_width(240.0));
            if u.add_enabled(!state.loading(), egui::Button::new("Load")).clicked() {
                let p = PathBuf::from(state.path.trim());
                state.request(PolicyRequest::Load(p));
            }
            if u.add_enabled(ui.dialog.is_none(), egui::Button::new("...")).on_hover_text("Choose a file").clicked() {
                ui.dialog = std::thread::Builder::new()
                    .name("policy-dialog".into())
                    .spawn(|| {
                        rfd::FileDialog::new()
                            .add_filter("ContactLab policy", &["json"])
                            .set_directory("assets/policies")
                            .pick_file()
                    })
                    .ok();
            }
        });
        if state.loading() {
            u.label("loading and settling the scene's stance ...");
        }
        if let Some(l) = &state.loaded {
            let p = &l.policy;
            u.label(format!(
                "{}: trained on `{}` for `{}`, {} -> {} network{}",
                p.algorithm,
                p.scene,
                p.task,
                p.mlp.n_in(),
                p.mlp.n_out(),
                if p.log_std.is_some() { " (Gaussian mean)" } else { "" }
            ));
            let info = &p.info;
            let summary = info.get("summary").unwrap_or(info);
            let num = |k: &str| summary.get(k).and_then(|v| v.as_f64());
            if let Some(r) = num("final_return") {
                let target = num("target_return").map(|t| format!(" (target {t:.2})")).unwrap_or_default();
                let steps = num("sim_steps").map(|s| format!(" after {s:.0} steps")).unwrap_or_default();
                u.label(format!("evaluation return {r:.2}{target}{steps}"));
            }
            if let Some(c) = info.get("command").and_then(|c| c.as_str()) {
                u.small(c);
            }
        }
        if let Some(m) = &state.message {
            u.colored_label(RED, m);
        }
    }

    fn run_panel(u: &mut egui::Ui, state: &mut PolicyState, ui: &mut PolicyUi, scene: &Scene, driving: bool) {
        let ready = state.loaded.as_ref().is_some_and(|l| l.task.is_ok());
        u.horizontal(|u| {
            if driving {
                if u.button("Stop").on_hover_text("Give the controls back to the scene's controller").clicked() {
                    state.request(PolicyRequest::Stop);
                }
                u.colored_label(Color32::from_rgb(40, 120, 220), "driving; Ctrl + drag the trunk to push it");
            } else if u.add_enabled(ready, egui::Button::new("Run policy")).clicked() {
                state.request(PolicyRequest::Run);
            }
        });
        let Some(spec) = &scene.file.learn else { return };
        let walk = spec.task == "walk";
        let mut c = state.command();
        let old = c;
        // Slider ranges: 1.5 times the training range, so one can probe beyond it.
        let r = &spec.command;
        egui::Grid::new("policy_command").num_columns(2).show(u, |u| {
            if walk {
                u.label("speed (m/s)").on_hover_text(format!("trained on {:.2} to {:.2}", r.speed[0], r.speed[1]));
                u.add(egui::Slider::new(&mut c.speed, 0.0..=1.5 * r.speed[1]));
                u.end_row();
            } else {
                let mut cm = c.height * 100.0;
                u.label("height (cm)").on_hover_text(format!("trained on +-{:.1} cm", r.height * 100.0));
                if u.add(egui::Slider::new(&mut cm, -150.0 * r.height..=150.0 * r.height)).changed() {
                    c.height = cm / 100.0;
                }
                u.end_row();
                for (i, name) in ["roll (deg)", "pitch (deg)", "yaw (deg)"].into_iter().enumerate() {
                    let lim = 1.5 * r.rpy[i].to_degrees();
                    let mut deg = c.rpy[i].to_degrees();
                    u.label(name).on_hover_text(format!("trained on +-{:.1} deg", r.rpy[i].to_degrees()));
                    if u.add(egui::Slider::new(&mut deg, -lim..=lim)).changed() {
                        c.rpy[i] = deg.to_radians();
                    }
                    u.end_row();
                }
            }
        });
        if u.small_button("zero command").clicked() {
            c = Command { speed: if walk { c.speed } else { 0.0 }, ..Command::default() };
        }
        if c != old {
            state.set_command(c);
        }
        let tel = lock(&state.telemetry).clone();
        let Some(last) = tel.samples.back() else { return };
        u.horizontal_wrapped(|u| {
            u.monospace(format!(
                "height {:.3} m (cmd {:.3}), tilt err {:.1} deg",
                last.height,
                last.target_height,
                last.orientation_error.to_degrees()
            ));
            if tel.kind == Some(TaskKind::Walk) {
                u.monospace(format!("speed {:.2} m/s (cmd {:.2})", last.speed, last.target_speed));
            }
            if let Some(r) = tel.recent_return() {
                u.monospace(format!("return over the last {} steps {r:.2}", tel.episode_steps))
                    .on_hover_text("minus the task's summed cost: comparable with the evaluation returns");
            }
        });
        let t_end = last.t;
        let shown = tel.samples.iter().filter(|s| s.t >= t_end - ui.window);
        let (z, zc): (Vec<[f64; 2]>, Vec<[f64; 2]>) = shown.map(|s| ([s.t, s.height], [s.t, s.target_height])).unzip();
        // At least +-1 cm around the command, so millimetre noise does not fill the plot.
        let zc_last = last.target_height;
        Plot::new("policy_tracking")
            .height(140.0)
            .legend(Legend::default().position(egui_plot::Corner::LeftBottom).background_alpha(0.6))
            .y_axis_label("base height (m)")
            .x_axis_label("t (s)")
            .include_y(zc_last - 0.01)
            .include_y(zc_last + 0.01)
            .show(u, |p| {
                p.add(Line::new("base height", PlotPoints::from(z)).color(Color32::from_rgb(60, 110, 230)).width(2.0));
                p.add(Line::new("commanded", PlotPoints::from(zc)).color(Color32::from_rgb(200, 80, 40)));
            });
    }

    fn train_panel(u: &mut egui::Ui, state: &mut PolicyState, driving: bool) {
        let running = state.training.is_some();
        let s = &mut state.train_settings;
        u.add_enabled_ui(!running, |u| {
            egui::Grid::new("policy_train").num_columns(2).show(u, |u| {
                u.label("learner");
                egui::ComboBox::from_id_salt("policy_learner").selected_text(s.learner.name()).show_ui(u, |u| {
                    for l in Learner::ALL {
                        if u.selectable_value(&mut s.learner, l, l.name()).changed() {
                            s.steps = l.default_steps();
                        }
                    }
                });
                u.end_row();
                u.label("seed");
                u.add(egui::DragValue::new(&mut s.seed));
                u.end_row();
                u.label("simulated steps");
                u.add(egui::DragValue::new(&mut s.steps).range(1..=20_000_000).speed(1000.0));
                u.end_row();
            });
        });
        u.horizontal(|u| {
            if running {
                let cancelled = state.training.as_ref().is_some_and(|t| t.cancelled());
                if u.add_enabled(!cancelled, egui::Button::new("Cancel")).clicked() {
                    state.request(PolicyRequest::CancelTraining);
                }
            } else if u.button("Train in background").clicked() {
                let s = state.train_settings;
                state.request(PolicyRequest::Train(s));
            }
        });
        let Some(curve) = state.curve() else { return };
        let total = state.training.as_ref().map_or(state.train_settings.steps, |t| t.settings.steps);
        match curve.logs.last() {
            Some(l) => {
                let last_eval = curve.logs.iter().rev().map(|l| l.eval_return).find(|r| r.is_finite());
                u.monospace(format!(
                    "iteration {}, {} / {} steps, {:.1} s\nbatch return {:.2}, evaluation return {}{}",
                    l.iteration,
                    l.sim_steps,
                    total,
                    l.wall_s,
                    l.train_return,
                    last_eval.map_or("-".into(), |r| format!("{r:.2}")),
                    curve.target_return.map(|t| format!(" (target {t:.2})")).unwrap_or_default()
                ));
                if running {
                    u.add(egui::ProgressBar::new((l.sim_steps as f32 / total.max(1) as f32).min(1.0)));
                }
            }
            None => {
                u.label("building the task and scoring the reference controller ...");
            }
        }
        let eval: Vec<[f64; 2]> = curve
            .logs
            .iter()
            .filter(|l| l.eval_return.is_finite())
            .map(|l| [l.sim_steps as f64, l.eval_return])
            .collect();
        let batch: Vec<[f64; 2]> =
            curve.logs.iter().filter(|l| l.iteration > 0).map(|l| [l.sim_steps as f64, l.train_return]).collect();
        Plot::new("policy_learning")
            .height(150.0)
            .legend(Legend::default().position(egui_plot::Corner::RightBottom).background_alpha(0.6))
            .x_axis_label("simulated training steps")
            .y_axis_label("return")
            .show(u, |p| {
                p.add(Line::new("evaluation", PlotPoints::from(eval)).color(Color32::from_rgb(30, 160, 90)).width(2.0));
                p.add(Line::new("batch", PlotPoints::from(batch)).color(Color32::from_gray(150)));
                if let Some(t) = curve.target_return {
                    let label = if curve.task_kind == Some(TaskKind::Walk) { "scene PD" } else { "target" };
                    p.add(HLine::new(label, t).color(RED));
                }
            });
        let Some(t) = &state.trained else { return };
        if running {
            return;
        }
        u.label(format!(
            "{} ({:?}): evaluation return {:.2} after {} steps in {:.1} s",
            t.result.policy.algorithm, t.result.status, t.result.final_return, t.result.sim_steps, t.result.seconds
        ));
        u.horizontal(|u| {
            if u.add_enabled(!driving, egui::Button::new("Run trained policy")).clicked() {
                state.request(PolicyRequest::RunTrained);
            }
            u.add(egui::TextEdit::singleline(&mut state.save_path).desired_width(200.0));
            if u.button("Save policy").on_hover_text("Written atomically (JSON, loadable above)").clicked() {
                let p = PathBuf::from(state.save_path.trim());
                state.request(PolicyRequest::Save(p));
            }
        });
    }
}
