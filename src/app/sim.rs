//! The simulation plugin: a [`Simulation`] stepped on a background task at real time (or a
//! chosen speed), a history of [`Snapshot`]s to scrub back through, and the commands the UI
//! and the mouse write as intent.
//!
//! Ownership: the simulation lives in [`SimWorker`] while idle and *moves into* the step task
//! while one runs (the task owns its inputs; nothing is borrowed from the ECS). A frame never
//! waits for it: [`advance`] polls the task with `check_ready`, takes the simulation back when
//! it is done, applies the queued commands, and starts the next batch. Commands that need the
//! simulation (reset, settings, pulls) wait in [`SimCommands`] while a batch runs; a batch
//! is short (one frame's worth of steps) and can be cancelled between steps, returning the
//! simulation at its last completed step, so the state is always one the step produced.
//!
//! A step that fails, or produces a non-finite state, stops the batch before its snapshot is
//! recorded, pauses the simulation and sets [`SimControl::message`]; nothing non-finite
//! reaches the history or the screen.
//!
//! A [`Driver`] (MPC, a learned policy) may take over the controls: it travels with the
//! simulation into the batch task and sets the controls before every step, so its planning
//! runs on the background thread, never in a frame. It reports to its own plugin through
//! whatever shared state it carries; the simulation plugin only engages, runs and releases it.

use super::record::{DriverRecord, Input, Recording};
use super::{cost_scope, AppSet, CurrentScene};
use crate::contact::solver;
use crate::model::Data;
use crate::scene::Scene;
use crate::sim::snapshot::Snapshot;
use crate::sim::{Pull, Simulation, StepStatus};
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, AsyncComputeTaskPool, Task};
use nalgebra::{Matrix3, Vector3};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Play state and speed, written by the UI (through [`SimCommand`]s) and read by the panels.
#[derive(Resource, Debug, Clone)]
pub struct SimControl {
    pub playing: bool,
    /// Simulated seconds per real second.
    pub speed: f64,
    /// Most steps one frame may owe; beyond it the simulation runs slower than asked
    /// (reported by `behind`) instead of piling up work.
    pub max_steps_per_frame: usize,
    /// Whether the last frame could not keep up with `speed`.
    pub behind: bool,
    /// A message for the user (solver failure, bad file, ...), shown until dismissed.
    pub message: Option<String>,
}

impl Default for SimControl {
    fn default() -> Self {
        Self { playing: true, speed: 1.0, max_steps_per_frame: 200, behind: false, message: None }
    }
}

/// A spring pull from the mouse: `f = k (target - p) - d p_dot` on a body point, recomputed
/// every step, as MuJoCo's viewer perturbation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DragPull {
    pub body: usize,
    /// Grabbed point in the body frame (m).
    pub point: Vector3<f64>,
    /// Where the mouse holds it, world frame (m).
    pub target: Vector3<f64>,
    /// Stiffness (N/m) and damping (N s/m).
    pub stiffness: f64,
    pub damping: f64,
    /// Force limit (N).
    pub max_force: f64,
}

impl DragPull {
    /// The spring force on the point at `p` moving at `p_dot`, clamped to `max_force`.
    pub fn force(&self, p: &Vector3<f64>, p_dot: &Vector3<f64>) -> Vector3<f64> {
        let f = (self.target - p) * self.stiffness - p_dot * self.damping;
        let n = f.norm();
        if n > self.max_force && n > 0.0 {
            f * (self.max_force / n)
        } else {
            f
        }
    }
}

/// Something that sets the simulation's controls before each step: MPC, a learned policy.
///
/// `engage` runs once, before its first step, on the batch's thread (it may plan);
/// `release` gives the controls back (restores the controller it replaced). An error stops the
/// batch like a failed step, with the message shown, and drops the driver (after `release`).
pub trait Driver: Send + 'static {
    /// Shown in the top bar while it drives.
    fn name(&self) -> String;
    fn engage(&mut self, sim: &mut Simulation) -> Result<(), String>;
    fn before_step(&mut self, sim: &mut Simulation) -> Result<(), String>;
    fn release(&mut self, sim: &mut Simulation);
    /// How a recording can rebuild this driver; `None`: it cannot (the recording says so).
    fn record(&self) -> Option<DriverRecord> {
        None
    }
    /// A new target pose for the base (drivers that track one).
    fn set_target(&mut self, _position: Vector3<f64>, _rotation: Matrix3<f64>) {}
}

/// A driver handed over by a command (commands are `Clone`; the first application takes it).
#[derive(Clone)]
pub struct DriverSlot(pub Arc<std::sync::Mutex<Option<Box<dyn Driver>>>>);

impl DriverSlot {
    pub fn new(d: Box<dyn Driver>) -> Self {
        Self(Arc::new(std::sync::Mutex::new(Some(d))))
    }

    fn take(&self) -> Option<Box<dyn Driver>> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

impl std::fmt::Debug for DriverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DriverSlot")
    }
}

/// A driver in the simulation, and whether it has been engaged.
pub struct Driving {
    // Resources must be `Sync`; the driver is only ever used through `&mut` (on the batch
    // thread or while idle), so it need not be.
    driver: bevy::platform::cell::SyncCell<Box<dyn Driver>>,
    engaged: bool,
}

impl Driving {
    pub fn new(driver: Box<dyn Driver>) -> Self {
        Self { driver: bevy::platform::cell::SyncCell::new(driver), engaged: false }
    }
}

/// Intent from the UI, the mouse or a test. Applied in order by [`advance`].
#[derive(Clone, Debug)]
pub enum SimCommand {
    Play,
    Pause,
    /// Advance this many steps, then pause.
    Step(usize),
    /// Back to the scene's initial state; clears the history.
    Reset,
    /// Show history entry `i` (pauses). Playing from there continues from that state and drops
    /// the entries after it.
    Scrub(usize),
    /// Leave scrubbing and show the newest entry again.
    Live,
    SetSpeed(f64),
    SetDt(f64),
    SetSolver(solver::Settings),
    /// Friction of the ground and of every terrain box.
    SetFriction(f64),
    /// Fire a pull: its `start` is relative to now.
    FirePull(Pull),
    /// Remove pulls that have not finished yet (scene and fired).
    ClearPulls,
    /// Start, move or (with `None`) release the mouse spring.
    Drag(Option<DragPull>),
    /// Replace the scene (already validated).
    Load(Box<Scene>),
    /// Stop the running batch at its next step boundary.
    Cancel,
    /// Hand the controls to a driver (replacing, and releasing, any current one).
    Drive(DriverSlot),
    /// Release the current driver: the scene's controller takes over again.
    StopDriving,
    /// Move the driver's base target (world frame).
    SetTarget(Vector3<f64>, Matrix3<f64>),
    /// Start recording (from a reset to the scene's initial state) or, with `None`, stop.
    Record(bool),
}

/// Commands written this frame; [`advance`] drains what it can apply.
#[derive(Resource, Default, Debug)]
pub struct SimCommands(pub Vec<SimCommand>);

impl SimCommands {
    pub fn push(&mut self, c: SimCommand) {
        self.0.push(c);
    }
}

/// Past snapshots, oldest first, with an optional scrub cursor.
#[derive(Resource, Debug)]
pub struct SimHistory {
    pub snapshots: VecDeque<Snapshot>,
    /// Entries kept; older ones are dropped.
    pub capacity: usize,
    /// `Some(i)`: the user is looking at entry `i`; `None`: at the newest.
    pub cursor: Option<usize>,
    /// Counts every snapshot ever pushed (survives dropping old ones), so plots know when to
    /// refresh.
    pub pushed: u64,
}

impl Default for SimHistory {
    fn default() -> Self {
        Self { snapshots: VecDeque::new(), capacity: 10_000, cursor: None, pushed: 0 }
    }
}

impl SimHistory {
    /// The snapshot on screen.
    pub fn displayed(&self) -> Option<&Snapshot> {
        match self.cursor {
            Some(i) => self.snapshots.get(i).or(self.snapshots.back()),
            None => self.snapshots.back(),
        }
    }

    fn push(&mut self, s: Snapshot) {
        if self.snapshots.len() == self.capacity {
            self.snapshots.pop_front();
            if let Some(c) = self.cursor.as_mut() {
                *c = c.saturating_sub(1);
            }
        }
        self.snapshots.push_back(s);
        self.pushed += 1;
    }

    /// Replaces the history with `snaps` (a replay), keeping all of them.
    pub fn replace(&mut self, snaps: Vec<Snapshot>) {
        self.capacity = self.capacity.max(snaps.len());
        self.snapshots = snaps.into();
        self.cursor = None;
        self.pushed += 1;
    }

    fn clear(&mut self) {
        self.snapshots.clear();
        self.cursor = None;
        self.pushed += 1;
    }
}

/// What a step batch took with it and brings back.
pub struct Batch {
    pub sim: Simulation,
    pub data: Data,
    pub drag_prev: Option<Vector3<f64>>,
    pub snapshots: Vec<Snapshot>,
    /// Wall time of each step (ms), for the profiler.
    pub step_ms: Vec<f64>,
    /// The step status that stopped the batch, if one did.
    pub failure: Option<(f64, StepStatus)>,
    /// A driver error that stopped the batch (the driver has been released and dropped).
    driver_error: Option<String>,
    driving: Option<Driving>,
    pub cancelled: bool,
}

/// The simulation when idle, or the task that holds it.
#[derive(Resource)]
pub struct SimWorker {
    idle: Option<(Simulation, Data)>,
    task: Option<Task<Batch>>,
    cancel: Arc<AtomicBool>,
    /// Simulated time owed to real time (s).
    owed: f64,
    /// Steps requested by `Step(n)`.
    single_steps: usize,
    drag: Option<DragPull>,
    /// Position of the dragged point at the previous step (for its velocity).
    drag_prev: Option<Vector3<f64>>,
    /// The driver while idle (it travels with the batch).
    driving: Option<Driving>,
    /// Name of the current driver (kept while it is away in a batch).
    driver_name: Option<String>,
    /// Batches completed (tests wait on it).
    pub batches: u64,
    /// The recording being made, if one is.
    pub recording: Option<Recording>,
    /// A recording just stopped, for the record plugin to save.
    pub finished_recording: Option<Recording>,
}

impl SimWorker {
    pub fn new(sim: Simulation) -> Self {
        let data = Data::new(&sim.model);
        Self {
            idle: Some((sim, data)),
            task: None,
            cancel: Arc::new(AtomicBool::new(false)),
            owed: 0.0,
            single_steps: 0,
            drag: None,
            drag_prev: None,
            driving: None,
            driver_name: None,
            batches: 0,
            recording: None,
            finished_recording: None,
        }
    }

    /// Whether a step batch is running.
    pub fn busy(&self) -> bool {
        self.task.is_some()
    }

    /// The idle simulation (for tests and for starting sweeps from the current state).
    pub fn idle_sim(&self) -> Option<&Simulation> {
        self.idle.as_ref().map(|(s, _)| s)
    }

    pub fn drag(&self) -> Option<&DragPull> {
        self.drag.as_ref()
    }

    /// The name of the driver in control, if any.
    pub fn driver(&self) -> Option<&str> {
        self.driver_name.as_deref()
    }
}

/// Releases and drops the driver.
fn release(driving: &mut Option<Driving>, sim: &mut Simulation) {
    if let Some(mut d) = driving.take() {
        if d.engaged {
            d.driver.get().release(sim);
        }
    }
}

/// Wall time of the latest steps (ms), for the profiler.
#[derive(Resource, Debug, Default)]
pub struct StepProfile {
    pub step_ms: VecDeque<f64>,
    /// Steps ever timed.
    pub total: u64,
}

impl StepProfile {
    /// Steps kept.
    pub const CAPACITY: usize = 2000;

    fn push(&mut self, ms: &[f64]) {
        for &m in ms {
            if self.step_ms.len() == Self::CAPACITY {
                self.step_ms.pop_front();
            }
            self.step_ms.push_back(m);
            self.total += 1;
        }
    }
}

/// Most steps in one batch.
const MAX_BATCH: usize = 2000;

pub struct SimPlugin;

impl Plugin for SimPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<SimControl>()
            .init_resource::<SimCommands>()
            .init_resource::<SimHistory>()
            .init_resource::<StepProfile>()
            .add_systems(Startup, init_worker)
            .add_systems(Update, advance.in_set(AppSet::Simulate));
    }
}

fn init_worker(mut commands: Commands, scene: Res<CurrentScene>, mut history: ResMut<SimHistory>) {
    let sim = scene.scene.simulation();
    let mut data = Data::new(&sim.model);
    history.clear();
    history.push(Snapshot::capture(&sim, None, &mut data));
    commands.insert_resource(SimWorker::new(sim));
}

/// Why [`step_once`] did not produce a snapshot.
pub enum StepStop {
    /// The step at time `t` failed (or produced a non-finite state) with this status.
    Failed(f64, StepStatus),
    /// The driver failed; it has been released and dropped.
    Driver(String),
}

/// One step with the mouse spring and the driver, as the live app and a replay take it: the
/// spring force from the state (its point's velocity from `drag_prev`), the driver's controls,
/// the step, its snapshot. Pulls beyond `base_pulls` (the spring's) are removed afterwards.
pub fn step_once(
    sim: &mut Simulation,
    data: &mut Data,
    drag: Option<DragPull>,
    drag_prev: &mut Option<Vector3<f64>>,
    driving: &mut Option<Driving>,
    base_pulls: usize,
) -> Result<Snapshot, StepStop> {
    sim.pulls.truncate(base_pulls);
    if let Some(d) = drag {
        crate::dynamics::forward_kinematics(&sim.model, data, sim.q.as_slice(), None);
        let p = data.o_m_i[d.body].act_point(&d.point);
        let p_dot = drag_prev.map_or(Vector3::zeros(), |prev| (p - prev) / sim.settings.dt);
        *drag_prev = Some(p);
        let force = d.force(&p, &p_dot);
        sim.pulls.push(Pull { body: d.body, point: d.point, force, start: sim.t, duration: sim.settings.dt });
    }
    if let Some(d) = driving.as_mut() {
        let r = if d.engaged { Ok(()) } else { d.driver.get().engage(sim) };
        d.engaged = true;
        if let Err(e) = r.and_then(|_| d.driver.get().before_step(sim)) {
            let msg = format!("{}: {e}", d.driver.get().name());
            sim.pulls.truncate(base_pulls);
            release(driving, sim);
            return Err(StepStop::Driver(msg));
        }
    }
    let t0 = sim.t;
    let info = sim.step();
    let snap = Snapshot::capture(sim, Some((&info, t0)), data);
    sim.pulls.truncate(base_pulls);
    if !info.status.advanced() || !snap.is_finite() {
        return Err(StepStop::Failed(sim.t, info.status));
    }
    Ok(snap)
}

/// Steps `n` times (or until cancelled or a failure), recording a snapshot per step and the
/// wall time of each step.
fn run_batch(
    mut sim: Simulation,
    mut data: Data,
    n: usize,
    drag: Option<DragPull>,
    mut drag_prev: Option<Vector3<f64>>,
    mut driving: Option<Driving>,
    cancel: Arc<AtomicBool>,
) -> Batch {
    let mut snapshots = Vec::with_capacity(n);
    let mut step_ms = Vec::with_capacity(n);
    let mut failure = None;
    let mut driver_error = None;
    let mut cancelled = false;
    // The mouse spring is the last pull while it is held.
    let base_pulls = sim.pulls.len();
    for _ in 0..n {
        if cancel.load(Ordering::Relaxed) {
            cancelled = true;
            break;
        }
        let t = std::time::Instant::now();
        match step_once(&mut sim, &mut data, drag, &mut drag_prev, &mut driving, base_pulls) {
            Ok(snap) => {
                step_ms.push(t.elapsed().as_secs_f64() * 1e3);
                snapshots.push(snap);
            }
            Err(StepStop::Failed(t, status)) => {
                failure = Some((t, status));
                break;
            }
            Err(StepStop::Driver(e)) => {
                driver_error = Some(e);
                break;
            }
        }
    }
    Batch { sim, data, drag_prev, snapshots, step_ms, failure, driver_error, driving, cancelled }
}

/// Applies a recordable input to the simulation (module docs of [`super::record`]): the one
/// place that says what an input does, for the live app and for replays. `driver` is the
/// driver of an [`Input::Drive`]. `Reset` and `Branch` touch the history and are the caller's.
pub fn apply_input(
    input: &Input,
    sim: &mut Simulation,
    scene: &mut Scene,
    drag: &mut Option<DragPull>,
    drag_prev: &mut Option<Vector3<f64>>,
    driving: &mut Option<Driving>,
    driver: Option<Box<dyn Driver>>,
) -> Result<(), String> {
    match input {
        Input::SetDt(dt) => {
            let mut s = sim.settings;
            s.dt = *dt;
            s.validate().map_err(|e| format!("time step: {e}"))?;
            sim.settings = s;
            scene.settings.dt = *dt;
            scene.file.dt = *dt;
        }
        Input::SetSolver(solver) => {
            solver.validate().map_err(|e| e.to_string())?;
            sim.settings.solver = *solver;
            scene.settings.solver = *solver;
            scene.file.solver = *solver;
        }
        Input::SetFriction(mu) => {
            if !(mu.is_finite() && (0.0..=10.0).contains(mu)) {
                return Err(format!("friction {mu} is out of range: allowed [0, 10]"));
            }
            for t in [&mut sim.terrain, &mut scene.terrain, &mut scene.file.terrain] {
                t.ground.friction = *mu;
                for b in &mut t.boxes {
                    b.friction = *mu;
                }
            }
        }
        Input::FirePull(p) => sim.pulls.push(p.into()),
        Input::ClearPulls => {
            let t = sim.t;
            sim.pulls.retain(|p| p.start + p.duration <= t);
        }
        Input::Drag(d) => {
            let d: Option<DragPull> = d.as_ref().map(DragPull::from);
            if d.is_none() || drag.map(|o| o.body) != d.map(|n| n.body) {
                *drag_prev = None;
            }
            *drag = d;
        }
        Input::Drive(_) => {
            if let Some(driver) = driver {
                release(driving, sim);
                *driving = Some(Driving::new(driver));
            }
        }
        Input::SetTarget(pose) => {
            if let Some(d) = driving.as_mut() {
                let (p, r) = pose.pose();
                d.driver.get().set_target(p, r);
            }
        }
        Input::StopDriving => release(driving, sim),
        Input::Reset | Input::Branch(_) => {}
    }
    Ok(())
}

/// Polls the running batch, applies commands while the simulation is idle, and starts the next
/// batch (module docs).
#[allow(clippy::too_many_arguments)]
pub fn advance(
    time: Res<Time>,
    mut worker: ResMut<SimWorker>,
    mut control: ResMut<SimControl>,
    mut queue: ResMut<SimCommands>,
    mut history: ResMut<SimHistory>,
    mut scene: ResMut<CurrentScene>,
    mut profile: ResMut<StepProfile>,
) {
    let _cost = cost_scope();
    let worker = &mut *worker;
    if let Some(task) = worker.task.as_mut() {
        if let Some(batch) = check_ready(task) {
            worker.task = None;
            worker.batches += 1;
            worker.drag_prev = batch.drag_prev;
            for s in batch.snapshots {
                if let Some(r) = worker.recording.as_mut() {
                    r.stepped(&s);
                }
                history.push(s);
            }
            profile.push(&batch.step_ms);
            if let Some((t, status)) = batch.failure {
                control.playing = false;
                worker.single_steps = 0;
                control.message = Some(format!(
                    "The step at t = {t:.3} s failed ({status:?}); the simulation is paused at the last good state. \
                     Try a smaller time step, a looser tolerance or more solver iterations, then reset."
                ));
            }
            if let Some(e) = batch.driver_error {
                control.playing = false;
                worker.single_steps = 0;
                worker.driver_name = None;
                control.message = Some(format!("{e}; the scene's controller has taken over again."));
            }
            worker.driving = batch.driving;
            worker.idle = Some((batch.sim, batch.data));
        }
    }
    // Pause and speed act at once, even while a batch runs.
    for c in queue.0.iter() {
        match c {
            SimCommand::Pause => control.playing = false,
            SimCommand::SetSpeed(s) if s.is_finite() && *s > 0.0 => control.speed = *s,
            SimCommand::Cancel => {
                worker.cancel.store(true, Ordering::Relaxed);
                worker.single_steps = 0;
            }
            _ => {}
        }
    }
    if worker.idle.is_none() {
        queue.0.retain(|c| !matches!(c, SimCommand::Pause | SimCommand::SetSpeed(_) | SimCommand::Cancel));
        worker.owed = 0.0;
        return;
    }
    let (mut sim, data) = worker.idle.take().expect("idle simulation");
    let mut data = data;
    for c in queue.0.drain(..) {
        // The recordable inputs go through `apply_input`, as in a replay.
        let mut incoming: Option<Box<dyn Driver>> = None;
        let input = match c {
            SimCommand::Play | SimCommand::Step(_) => {
                if let Some(i) = history.cursor.take() {
                    let from_end = (history.snapshots.len() - 1 - i.min(history.snapshots.len() - 1)) as u64;
                    branch_from(&mut history, i, &mut sim);
                    if let Some(r) = worker.recording.as_mut() {
                        r.push(Input::Branch(r.steps.saturating_sub(from_end)));
                    }
                }
                if let SimCommand::Step(n) = c {
                    control.playing = false;
                    worker.single_steps += n;
                } else {
                    control.playing = true;
                    control.message = None;
                }
                continue;
            }
            SimCommand::Pause | SimCommand::SetSpeed(_) | SimCommand::Cancel => continue,
            SimCommand::Reset => {
                reset(worker, &mut sim, &mut data, &mut history, &scene.scene);
                control.message = None;
                Input::Reset
            }
            SimCommand::Scrub(i) => {
                if !history.snapshots.is_empty() {
                    control.playing = false;
                    history.cursor = Some(i.min(history.snapshots.len() - 1));
                }
                continue;
            }
            SimCommand::Live => {
                history.cursor = None;
                continue;
            }
            SimCommand::SetDt(dt) => Input::SetDt(dt),
            SimCommand::SetSolver(s) => Input::SetSolver(s),
            SimCommand::SetFriction(mu) => Input::SetFriction(mu),
            SimCommand::FirePull(mut p) => {
                p.start += sim.t;
                Input::FirePull((&p).into())
            }
            SimCommand::ClearPulls => Input::ClearPulls,
            SimCommand::Drag(d) => Input::Drag(d.as_ref().map(Into::into)),
            SimCommand::SetTarget(p, r) => Input::SetTarget(super::record::PoseRecord::new(&p, &r)),
            SimCommand::StopDriving => {
                worker.driver_name = None;
                Input::StopDriving
            }
            SimCommand::Drive(slot) => {
                let Some(driver) = slot.take() else { continue };
                worker.driver_name = Some(driver.name());
                match driver.record() {
                    Some(r) => {
                        incoming = Some(driver);
                        Input::Drive(r)
                    }
                    None => {
                        if let Some(rec) = worker.recording.as_mut() {
                            rec.taint(format!("{} drove the robot, and it cannot be recorded", driver.name()));
                        }
                        release(&mut worker.driving, &mut sim);
                        worker.driving = Some(Driving::new(driver));
                        continue;
                    }
                }
            }
            SimCommand::Record(on) => {
                if on {
                    reset(worker, &mut sim, &mut data, &mut history, &scene.scene);
                    match Recording::start(&scene.scene) {
                        Ok(r) => worker.recording = Some(r),
                        Err(e) => control.message = Some(format!("cannot record: {e}")),
                    }
                } else {
                    worker.finished_recording = worker.recording.take();
                }
                continue;
            }
            SimCommand::Load(s) => {
                scene.scene = *s;
                reset(worker, &mut sim, &mut data, &mut history, &scene.scene);
                if worker.recording.is_some() {
                    // A recording belongs to one scene.
                    worker.finished_recording = worker.recording.take();
                }
                control.message = None;
                scene.generation += 1;
                continue;
            }
        };
        let r = apply_input(
            &input,
            &mut sim,
            &mut scene.scene,
            &mut worker.drag,
            &mut worker.drag_prev,
            &mut worker.driving,
            incoming,
        );
        match r {
            Ok(()) => {
                if let Some(rec) = worker.recording.as_mut() {
                    rec.push(input);
                }
            }
            Err(e) => control.message = Some(e),
        }
    }
    let dt = sim.settings.dt;
    // Long step requests run as several batches, so a batch's snapshots stay small and a
    // cancel is never far away.
    let mut n = worker.single_steps.min(MAX_BATCH);
    worker.single_steps -= n;
    control.behind = false;
    if control.playing && history.cursor.is_none() {
        worker.owed += time.delta_secs_f64() * control.speed;
        let owed_steps = (worker.owed / dt).floor() as usize;
        let steps = owed_steps.min(control.max_steps_per_frame);
        control.behind = owed_steps > steps;
        // Time that cannot be caught up is dropped, so the simulation does not race afterwards.
        worker.owed = if control.behind { 0.0 } else { worker.owed - steps as f64 * dt };
        n += steps;
    } else {
        worker.owed = 0.0;
    }
    if n == 0 {
        worker.idle = Some((sim, data));
        return;
    }
    worker.cancel.store(false, Ordering::Relaxed);
    let cancel = worker.cancel.clone();
    let (drag, drag_prev) = (worker.drag, worker.drag_prev);
    let driving = worker.driving.take();
    worker.task = Some(
        AsyncComputeTaskPool::get().spawn(async move { run_batch(sim, data, n, drag, drag_prev, driving, cancel) }),
    );
}

/// Back to the scene's initial state: drivers, the spring and the history go.
fn reset(worker: &mut SimWorker, sim: &mut Simulation, data: &mut Data, history: &mut SimHistory, scene: &Scene) {
    release(&mut worker.driving, sim);
    worker.driving = None;
    worker.driver_name = None;
    *sim = scene.simulation();
    *data = Data::new(&sim.model);
    history.clear();
    history.push(Snapshot::capture(sim, None, data));
    worker.single_steps = 0;
    worker.drag = None;
    worker.drag_prev = None;
}

/// Continues from history entry `i`: restores its state and drops what came after it.
fn branch_from(history: &mut SimHistory, i: usize, sim: &mut Simulation) {
    if let Some(s) = history.snapshots.get(i) {
        s.restore(sim);
        history.snapshots.truncate(i + 1);
        history.pushed += 1;
    }
}
