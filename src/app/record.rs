//! Recordings: a run kept as its scene, its settings and every input, so that replaying it
//! reproduces the run bit for bit.
//!
//! The simulation is deterministic: a step is a function of the state, the warm start, the
//! controls and the pulls (the contact solver runs the same floating-point operations in the
//! same order every time). So a run is fully described by where it started (the scene file as
//! it was when the recording began, with the app's edits of time step, solver and friction
//! already in it) and the inputs that changed what a step does, each with the index of the
//! step before which it was applied:
//!
//! * parameter edits: time step, contact-solver settings, friction;
//! * pulls fired from the panel, pulls cleared, and the mouse spring (start, every move,
//!   release: the spring force is recomputed every step from the state, as in the live run);
//! * drivers: MPC engaged with its settings (sensitivity, `kappa`, `delta`, horizon, ...), its
//!   target moved, the driver released;
//! * a reset, and a branch (play resumed from an earlier history entry).
//!
//! Inputs reach the simulation only between step batches, through [`super::sim::SimCommand`]s,
//! and the live app and the replay apply them with the same function
//! ([`super::sim::apply_input`]) and step with the same one ([`super::sim::step_once`]); a replay
//! steps one batch per input interval, so the frame boundaries of the live run do not matter.
//!
//! A recording also holds a checkpoint of `(t, q, v)` every [`CHECKPOINT_EVERY`] steps; a
//! replay compares its state with each, so a recording made by a different build (or a
//! nondeterministic driver) is reported at the first step where it departs, never silently.
//!
//! A learned policy is not recorded (its command sliders reach it outside the step
//! boundaries); a recording with one is saved, says from which step, and refuses to replay
//! past it.
//!
//! File format: JSON (`.clrec`), written atomically. `serde_json` writes every `f64` with the
//! shortest representation that reads back to the same bits.
//!
//! The results of `simulate` (CSV), `cito` (`trajectory.csv`) and `mpc` (`trace.csv`) open as
//! replays too ([`load_csv`]): their `q` (and `v` where present) columns, named as
//! [`crate::sim::record::state_names`] names them.

use super::sim::{apply_input, step_once, DragPull, Driver, Driving, StepStop};
use crate::contact::solver;
use crate::model::Data;
use crate::ocp::mpc::MpcSettings;
use crate::scene::Scene;
use crate::sim::snapshot::Snapshot;
use crate::sim::Pull;
use nalgebra::{DVector, Matrix3, Vector3};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Steps between two checkpoints.
pub const CHECKPOINT_EVERY: u64 = 100;

/// What a recording file says it is.
pub const FORMAT: &str = "contactlab-recording";
pub const VERSION: u32 = 1;

/// A pull in a recording (body frame point, world force).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PullRecord {
    pub body: usize,
    pub point: [f64; 3],
    pub force: [f64; 3],
    pub start: f64,
    pub duration: f64,
}

impl From<&Pull> for PullRecord {
    fn from(p: &Pull) -> Self {
        Self { body: p.body, point: p.point.into(), force: p.force.into(), start: p.start, duration: p.duration }
    }
}

impl From<&PullRecord> for Pull {
    fn from(p: &PullRecord) -> Self {
        Pull {
            body: p.body,
            point: Vector3::from(p.point),
            force: Vector3::from(p.force),
            start: p.start,
            duration: p.duration,
        }
    }
}

/// The mouse spring in a recording.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DragRecord {
    pub body: usize,
    pub point: [f64; 3],
    pub target: [f64; 3],
    pub stiffness: f64,
    pub damping: f64,
    pub max_force: f64,
}

impl From<&DragPull> for DragRecord {
    fn from(d: &DragPull) -> Self {
        Self {
            body: d.body,
            point: d.point.into(),
            target: d.target.into(),
            stiffness: d.stiffness,
            damping: d.damping,
            max_force: d.max_force,
        }
    }
}

impl From<&DragRecord> for DragPull {
    fn from(d: &DragRecord) -> Self {
        DragPull {
            body: d.body,
            point: Vector3::from(d.point),
            target: Vector3::from(d.target),
            stiffness: d.stiffness,
            damping: d.damping,
            max_force: d.max_force,
        }
    }
}

/// A driver as a recording can rebuild it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DriverRecord {
    /// Boxed: the settings are most of an [`Input`]'s size, and the other inputs are small.
    Mpc(Box<MpcSettings>),
}

/// A base pose (position, rotation matrix by rows).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoseRecord {
    pub position: [f64; 3],
    pub rotation: [[f64; 3]; 3],
}

impl PoseRecord {
    pub fn new(p: &Vector3<f64>, r: &Matrix3<f64>) -> Self {
        let row = |i: usize| [r[(i, 0)], r[(i, 1)], r[(i, 2)]];
        Self { position: (*p).into(), rotation: [row(0), row(1), row(2)] }
    }

    pub fn pose(&self) -> (Vector3<f64>, Matrix3<f64>) {
        let r = &self.rotation;
        (
            Vector3::from(self.position),
            Matrix3::new(r[0][0], r[0][1], r[0][2], r[1][0], r[1][1], r[1][2], r[2][0], r[2][1], r[2][2]),
        )
    }
}

/// An input that changes what the next steps do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Input {
    SetDt(f64),
    SetSolver(solver::Settings),
    SetFriction(f64),
    /// A pull whose `start` is absolute (the time it was fired plus its delay).
    FirePull(PullRecord),
    ClearPulls,
    Drag(Option<DragRecord>),
    Drive(DriverRecord),
    /// The driver's target moved.
    SetTarget(PoseRecord),
    StopDriving,
    /// Back to the scene's initial state (step count 0).
    Reset,
    /// Play resumed from the state after step `n` (what came after it is gone).
    Branch(u64),
}

/// An input and the number of steps taken before it was applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub step: u64,
    pub input: Input,
}

/// The state after step `step`, when `events` inputs had been applied (so a checkpoint
/// belongs to one branch of a run that went back in its history).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub step: u64,
    pub events: usize,
    pub t: f64,
    pub q: Vec<f64>,
    pub v: Vec<f64>,
}

/// A recorded run (module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    pub format: String,
    pub version: u32,
    /// Where the scene was loaded from (relative URDF paths resolve against it).
    pub scene_path: PathBuf,
    /// The scene file's text when the recording began (RON).
    pub scene: String,
    pub events: Vec<Event>,
    pub checkpoints: Vec<Checkpoint>,
    /// Steps from the start to the end of the run (after the last branch).
    pub steps: u64,
    /// Why the run cannot be replayed past some step, if it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreplayable: Option<(u64, String)>,
}

/// Errors of reading and replaying recordings, with the file they concern.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("{file}: {message}")]
    Read { file: PathBuf, message: String },
    #[error("{file}: line {line}, column {column}: {message}")]
    Parse { file: PathBuf, line: usize, column: usize, message: String },
    #[error("the recorded scene does not load: {0}")]
    Scene(String),
    #[error("{0}")]
    Replay(String),
}

impl Recording {
    /// A new recording of `scene` from its current (initial) state.
    pub fn start(scene: &Scene) -> Result<Self, String> {
        let text = ron::ser::to_string_pretty(&scene.file, ron::ser::PrettyConfig::default())
            .map_err(|e| format!("cannot write the scene: {e}"))?;
        Ok(Self {
            format: FORMAT.into(),
            version: VERSION,
            // Absolute, so the replay finds relative URDF paths from any directory.
            scene_path: std::fs::canonicalize(&scene.path).unwrap_or_else(|_| scene.path.clone()),
            scene: text,
            events: Vec::new(),
            checkpoints: Vec::new(),
            steps: 0,
            unreplayable: None,
        })
    }

    /// The scene the recording starts from.
    pub fn scene(&self) -> Result<Scene, RecordingError> {
        Scene::from_str(&self.scene, &self.scene_path).map_err(|e| RecordingError::Scene(e.to_string()))
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        crate::io::write_atomic(path, &json)
    }

    pub fn load(path: &Path) -> Result<Self, RecordingError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| RecordingError::Read { file: path.into(), message: e.to_string() })?;
        let rec: Recording = serde_json::from_str(&text).map_err(|e| RecordingError::Parse {
            file: path.into(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if rec.format != FORMAT || rec.version != VERSION {
            return Err(RecordingError::Read {
                file: path.into(),
                message: format!(
                    "format `{}` version {}: this build reads `{FORMAT}` version {VERSION}",
                    rec.format, rec.version
                ),
            });
        }
        Ok(rec)
    }

    /// Notes an input applied before step `self.steps`. A reset or a branch is noted at the
    /// step where it happened; the count then continues from where it leads.
    pub fn push(&mut self, input: Input) {
        let to = match &input {
            Input::Reset => Some(0),
            Input::Branch(n) => Some(*n),
            _ => None,
        };
        self.events.push(Event { step: self.steps, input });
        if let Some(n) = to {
            self.steps = n;
            self.checkpoints.retain(|c| c.step <= n);
        }
    }

    /// Notes one step taken; `snap` is its snapshot.
    pub fn stepped(&mut self, snap: &Snapshot) {
        self.steps += 1;
        if self.steps.is_multiple_of(CHECKPOINT_EVERY) {
            self.checkpoints.push(Checkpoint {
                step: self.steps,
                events: self.events.len(),
                t: snap.t,
                q: snap.q.iter().copied().collect(),
                v: snap.v.iter().copied().collect(),
            });
        }
    }

    /// Marks the run unreplayable from now on (the first reason is kept).
    pub fn taint(&mut self, why: String) {
        if self.unreplayable.is_none() {
            self.unreplayable = Some((self.steps, why));
        }
    }
}

/// Builds the driver a recording names (the app supplies one that reports to its windows).
pub type DriverFactory<'a> = dyn Fn(&DriverRecord) -> Result<Box<dyn Driver>, String> + 'a;

/// A plain MPC driver for replays without a window.
pub fn plain_driver(record: &DriverRecord) -> Result<Box<dyn Driver>, String> {
    match record {
        DriverRecord::Mpc(settings) => {
            settings.validate().map_err(|e| e.to_string())?;
            Ok(Box::new(PlainMpc(crate::ocp::mpc::MpcDriver::new((**settings).clone()))))
        }
    }
}

/// [`crate::ocp::mpc::MpcDriver`] with nothing to report to.
struct PlainMpc(crate::ocp::mpc::MpcDriver);

impl Driver for PlainMpc {
    fn name(&self) -> String {
        super::control::MPC_DRIVER.into()
    }

    fn engage(&mut self, sim: &mut crate::sim::Simulation) -> Result<(), String> {
        self.0.engage(sim).map_err(|e| e.to_string())
    }

    fn before_step(&mut self, sim: &mut crate::sim::Simulation) -> Result<(), String> {
        self.0.before_step(sim, None).map(|_| ()).map_err(|e| e.to_string())
    }

    fn release(&mut self, sim: &mut crate::sim::Simulation) {
        self.0.release(sim);
    }

    fn record(&self) -> Option<DriverRecord> {
        Some(DriverRecord::Mpc(Box::new(self.0.spec.clone())))
    }

    fn set_target(&mut self, p: Vector3<f64>, r: Matrix3<f64>) {
        self.0.set_target(p, r);
    }
}

/// A replayed run: one snapshot per step of the final branch, the initial state first.
pub struct ReplayRun {
    pub scene: Scene,
    pub snapshots: Vec<Snapshot>,
    /// Checkpoints compared (all equal bit for bit, or the replay fails).
    pub checkpoints_checked: usize,
    /// Why the replay stopped before the end (a step failure, as in the live run), if it did.
    pub stopped: Option<String>,
}

/// Replays `rec` from its scene (module docs). `cancel` is polled between steps.
pub fn replay(
    rec: &Recording,
    drivers: &DriverFactory,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<ReplayRun, RecordingError> {
    let mut scene = rec.scene()?;
    let mut sim = scene.simulation();
    let mut data = Data::new(&sim.model);
    let mut snapshots = vec![Snapshot::capture(&sim, None, &mut data)];
    let (mut drag, mut drag_prev, mut driving): (Option<DragPull>, Option<Vector3<f64>>, Option<Driving>) =
        (None, None, None);
    let mut events = rec.events.iter().peekable();
    let mut checkpoints = rec.checkpoints.iter().peekable();
    let mut checked = 0;
    let mut n: u64 = 0;
    let mut applied = 0;
    let mut stopped = None;
    let limit = rec.unreplayable.as_ref().map_or(u64::MAX, |(s, _)| *s);
    loop {
        while let Some(e) = events.next_if(|e| e.step == n) {
            applied += 1;
            match &e.input {
                Input::Reset => {
                    scene = rec.scene()?;
                    sim = scene.simulation();
                    data = Data::new(&sim.model);
                    snapshots = vec![Snapshot::capture(&sim, None, &mut data)];
                    (drag, drag_prev, driving) = (None, None, None);
                    checked = 0;
                    n = 0;
                }
                Input::Branch(k) => {
                    let k = *k;
                    let s = snapshots.get(k as usize).ok_or_else(|| {
                        RecordingError::Replay(format!("branch to step {k}, but only {} steps were taken", n))
                    })?;
                    s.restore(&mut sim);
                    snapshots.truncate(k as usize + 1);
                    n = k;
                }
                Input::Drive(d) => {
                    let driver = drivers(d).map_err(|e| RecordingError::Replay(format!("step {n}: {e}")))?;
                    apply_input(&e.input, &mut sim, &mut scene, &mut drag, &mut drag_prev, &mut driving, Some(driver))
                        .map_err(|m| RecordingError::Replay(format!("step {n}: {m}")))?;
                }
                other => {
                    apply_input(other, &mut sim, &mut scene, &mut drag, &mut drag_prev, &mut driving, None)
                        .map_err(|m| RecordingError::Replay(format!("step {n}: {m}")))?;
                }
            }
        }
        // Events are in step order; one behind the count would be a corrupt file.
        if let Some(e) = events.peek() {
            if e.step < n {
                return Err(RecordingError::Replay(format!("event at step {} after step {n}: out of order", e.step)));
            }
        }
        let end = events.peek().map_or(rec.steps, |e| e.step);
        if n >= end {
            if events.peek().is_none() {
                break;
            }
            continue;
        }
        if n >= limit {
            let why = rec.unreplayable.as_ref().map_or(String::new(), |(_, w)| w.clone());
            stopped = Some(format!("the recording cannot be replayed past step {n}: {why}"));
            break;
        }
        if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            stopped = Some(format!("cancelled at step {n}"));
            break;
        }
        let base_pulls = sim.pulls.len();
        match step_once(&mut sim, &mut data, drag, &mut drag_prev, &mut driving, base_pulls) {
            Ok(snap) => snapshots.push(snap),
            Err(StepStop::Failed(t, status)) => {
                stopped = Some(format!("the step at t = {t:.3} s failed ({status:?}), as it did in the run"));
                break;
            }
            Err(StepStop::Driver(e)) => {
                stopped = Some(e);
                break;
            }
        }
        n += 1;
        if let Some(c) = checkpoints.next_if(|c| c.step == n && c.events == applied) {
            let s = snapshots.last().expect("just pushed");
            let same = |a: &DVector<f64>, b: &[f64]| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            };
            if s.t.to_bits() != c.t.to_bits() || !same(&s.q, &c.q) || !same(&s.v, &c.v) {
                return Err(RecordingError::Replay(format!(
                    "the replay departs from the recording at step {n} (t = {} s): the recorded state differs \
                     (a different build, or a nondeterministic input)",
                    c.t
                )));
            }
            checked += 1;
        }
    }
    Ok(ReplayRun { scene, snapshots, checkpoints_checked: checked, stopped })
}

/// A result file (`simulate`'s CSV, `cito`'s `trajectory.csv`, `mpc`'s `trace.csv`) as
/// snapshots of `scene`'s model: columns `t`, every `q` column, and the `v` columns if present.
pub fn load_csv(path: &Path, scene: &Scene) -> Result<Vec<Snapshot>, RecordingError> {
    let err = |line: usize, message: String| RecordingError::Parse { file: path.into(), line, column: 1, message };
    let text = std::fs::read_to_string(path)
        .map_err(|e| RecordingError::Read { file: path.into(), message: e.to_string() })?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or_else(|| err(1, "empty file".into()))?.split(',').collect();
    let mut sim = scene.simulation();
    let (qn, vn, _) = crate::sim::record::state_names(&sim.model);
    let col = |name: &str| header.iter().position(|h| *h == name);
    let t_col = col("t").ok_or_else(|| err(1, "no `t` column".into()))?;
    let q_cols: Vec<usize> = qn
        .iter()
        .map(|n| {
            col(n).ok_or_else(|| {
                err(
                    1,
                    format!(
                        "no column `{n}`: this file does not hold the configuration of scene `{}` ({} columns expected: {})",
                        scene.file.name,
                        qn.len(),
                        qn.join(", ")
                    ),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let v_cols: Option<Vec<usize>> = vn.iter().map(|n| col(n)).collect();
    let mut data = Data::new(&sim.model);
    let mut out = Vec::new();
    for (i, l) in lines.enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split(',').collect();
        let num = |c: usize| -> Result<f64, RecordingError> {
            let s = f.get(c).ok_or_else(|| err(i + 2, format!("column `{}` is missing", header[c])))?;
            s.parse::<f64>().map_err(|_| err(i + 2, format!("column `{}`: `{s}` is not a number", header[c])))
        };
        sim.t = num(t_col)?;
        for (k, &c) in q_cols.iter().enumerate() {
            sim.q[k] = num(c)?;
        }
        match &v_cols {
            Some(vc) => {
                for (k, &c) in vc.iter().enumerate() {
                    sim.v[k] = num(c)?;
                }
            }
            None => sim.v.fill(0.0),
        }
        if !sim.q.iter().chain(sim.v.iter()).all(|x| x.is_finite()) {
            return Err(err(i + 2, "a state entry is not finite".into()));
        }
        out.push(Snapshot::capture(&sim, None, &mut data));
    }
    if out.is_empty() {
        return Err(err(2, "no rows".into()));
    }
    Ok(out)
}
