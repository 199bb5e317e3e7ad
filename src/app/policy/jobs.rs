//! The Policy window's background work: the policy driver at the simulation's controls, policy
//! loading and training on threads of their own, and the systems that apply the window's
//! requests and poll the work.

use super::state::{
    lock, LoadedPolicy, PolicyRequest, PolicyState, PolicyUi, Sample, Telemetry, TrainProgress, TrainSettings,
    TrainedPolicy,
};
use crate::app::sim::{Driver, DriverSlot, SimCommand, SimCommands, SimWorker};
use crate::app::{cost_scope, CurrentScene};
use crate::learn::mlp::MlpCache;
use crate::learn::report::{learn, train_command, Algorithm};
use crate::learn::TrainResult;
use crate::learn::{Command, IterLog, Policy, Task, TaskKind};
use crate::model::configuration::free_flyer_placement;
use crate::scene::Scene;
use crate::sim::{Controller, Simulation};
use bevy::prelude::*;
use bevy::tasks::futures::check_ready;
use nalgebra::Rotation3;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

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

impl PolicyState {
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

/// Reads a policy file and checks it against the scene's task (on a background task).
fn load_policy(path: &Path, scene: &Scene) -> Result<LoadedPolicy, String> {
    let policy = Policy::load(path).map_err(|e| e.to_string())?;
    let task = match scene.learn_settings().and_then(|settings| scene.task(settings)) {
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
    let task = scene.task(scene.learn_settings().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
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
    overlay: Option<ResMut<crate::app::overlay::OverlaySettings>>,
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
    // A walking policy leaves the view: the camera follows it (the overlay's `follow`).
    let mut walking = false;
    while let Some(r) = rest.next() {
        match r {
            PolicyRequest::Load(path) => {
                state.path = path.display().to_string();
                let sc = scene.scene.clone();
                let p = path.clone();
                // Dropping a load in flight cancels it.
                state.load = Some((path, crate::app::jobs::spawn("policy load", move || load_policy(&p, &sc))));
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
                    walking |= t.kind == TaskKind::Walk;
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
                    walking |= task.kind == TaskKind::Walk;
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
    if let (true, Some(mut o)) = (walking, overlay) {
        o.follow = true;
    }
}

pub(super) fn poll_dialog(mut ui: ResMut<PolicyUi>, mut state: ResMut<PolicyState>) {
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
