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

use super::{cost_scope, AppSet, CurrentScene};
use crate::contact::solver;
use crate::model::Data;
use crate::scene::Scene;
use crate::sim::snapshot::Snapshot;
use crate::sim::{Pull, Simulation, StepStatus};
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, AsyncComputeTaskPool, Task};
use nalgebra::Vector3;
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
struct Driving {
    // Resources must be `Sync`; the driver is only ever used through `&mut` (on the batch
    // thread or while idle), so it need not be.
    driver: bevy::platform::cell::SyncCell<Box<dyn Driver>>,
    engaged: bool,
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

/// Most steps in one batch.
const MAX_BATCH: usize = 2000;

pub struct SimPlugin;

impl Plugin for SimPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<SimControl>()
            .init_resource::<SimCommands>()
            .init_resource::<SimHistory>()
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

/// Steps `n` times (or until cancelled or a failure), recording a snapshot per step.
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
        sim.pulls.truncate(base_pulls);
        if let Some(d) = drag {
            crate::dynamics::forward_kinematics(&sim.model, &mut data, sim.q.as_slice(), None);
            let p = data.o_m_i[d.body].act_point(&d.point);
            let p_dot = drag_prev.map_or(Vector3::zeros(), |prev| (p - prev) / sim.settings.dt);
            drag_prev = Some(p);
            let force = d.force(&p, &p_dot);
            sim.pulls.push(Pull { body: d.body, point: d.point, force, start: sim.t, duration: sim.settings.dt });
        }
        if let Some(d) = driving.as_mut() {
            let r = if d.engaged { Ok(()) } else { d.driver.get().engage(&mut sim) };
            d.engaged = true;
            if let Err(e) = r.and_then(|_| d.driver.get().before_step(&mut sim)) {
                driver_error = Some(format!("{}: {e}", d.driver.get().name()));
                sim.pulls.truncate(base_pulls);
                release(&mut driving, &mut sim);
                break;
            }
        }
        let t0 = sim.t;
        let info = sim.step();
        let snap = Snapshot::capture(&sim, Some((&info, t0)), &mut data);
        if !info.status.advanced() || !snap.is_finite() {
            failure = Some((sim.t, info.status));
            break;
        }
        snapshots.push(snap);
    }
    sim.pulls.truncate(base_pulls);
    Batch { sim, data, drag_prev, snapshots, failure, driver_error, driving, cancelled }
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
) {
    let _cost = cost_scope();
    let worker = &mut *worker;
    if let Some(task) = worker.task.as_mut() {
        if let Some(batch) = check_ready(task) {
            worker.task = None;
            worker.batches += 1;
            worker.drag_prev = batch.drag_prev;
            for s in batch.snapshots {
                history.push(s);
            }
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
        match c {
            SimCommand::Play => {
                if let Some(i) = history.cursor.take() {
                    branch_from(&mut history, i, &mut sim);
                }
                control.playing = true;
                control.message = None;
            }
            SimCommand::Pause | SimCommand::SetSpeed(_) | SimCommand::Cancel => {}
            SimCommand::Step(n) => {
                if let Some(i) = history.cursor.take() {
                    branch_from(&mut history, i, &mut sim);
                }
                control.playing = false;
                worker.single_steps += n;
            }
            SimCommand::Reset => {
                worker.driving = None;
                worker.driver_name = None;
                sim = scene.scene.simulation();
                data = Data::new(&sim.model);
                history.clear();
                history.push(Snapshot::capture(&sim, None, &mut data));
                worker.single_steps = 0;
                worker.drag = None;
                worker.drag_prev = None;
                control.message = None;
            }
            SimCommand::Scrub(i) => {
                if !history.snapshots.is_empty() {
                    control.playing = false;
                    history.cursor = Some(i.min(history.snapshots.len() - 1));
                }
            }
            SimCommand::Live => history.cursor = None,
            SimCommand::SetDt(dt) => {
                let mut s = sim.settings;
                s.dt = dt;
                match s.validate() {
                    Ok(()) => {
                        sim.settings = s;
                        scene.scene.settings.dt = dt;
                        scene.scene.file.dt = dt;
                    }
                    Err(e) => control.message = Some(format!("time step: {e}")),
                }
            }
            SimCommand::SetSolver(solver) => match solver.validate() {
                Ok(()) => {
                    sim.settings.solver = solver;
                    scene.scene.settings.solver = solver;
                    scene.scene.file.solver = solver;
                }
                Err(e) => control.message = Some(e.to_string()),
            },
            SimCommand::SetFriction(mu) => {
                if mu.is_finite() && (0.0..=10.0).contains(&mu) {
                    let sc = &mut scene.scene;
                    for t in [&mut sim.terrain, &mut sc.terrain, &mut sc.file.terrain] {
                        t.ground.friction = mu;
                        for b in &mut t.boxes {
                            b.friction = mu;
                        }
                    }
                }
            }
            SimCommand::FirePull(mut p) => {
                p.start += sim.t;
                sim.pulls.push(p);
            }
            SimCommand::ClearPulls => {
                let t = sim.t;
                sim.pulls.retain(|p| p.start + p.duration <= t);
            }
            SimCommand::Drag(d) => {
                if d.is_none() || worker.drag.map(|o| o.body) != d.map(|n| n.body) {
                    worker.drag_prev = None;
                }
                worker.drag = d;
            }
            SimCommand::Drive(slot) => {
                if let Some(driver) = slot.take() {
                    release(&mut worker.driving, &mut sim);
                    worker.driver_name = Some(driver.name());
                    worker.driving =
                        Some(Driving { driver: bevy::platform::cell::SyncCell::new(driver), engaged: false });
                }
            }
            SimCommand::StopDriving => {
                release(&mut worker.driving, &mut sim);
                worker.driver_name = None;
            }
            SimCommand::Load(s) => {
                worker.driving = None;
                worker.driver_name = None;
                scene.scene = *s;
                sim = scene.scene.simulation();
                data = Data::new(&sim.model);
                history.clear();
                history.push(Snapshot::capture(&sim, None, &mut data));
                worker.single_steps = 0;
                worker.drag = None;
                worker.drag_prev = None;
                control.message = None;
                scene.generation += 1;
            }
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

/// Continues from history entry `i`: restores its state and drops what came after it.
fn branch_from(history: &mut SimHistory, i: usize, sim: &mut Simulation) {
    if let Some(s) = history.snapshots.get(i) {
        s.restore(sim);
        history.snapshots.truncate(i + 1);
        history.pushed += 1;
    }
}
