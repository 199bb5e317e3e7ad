//! Contact-implicit trajectory optimization (CITO, DESIGN 5): DDP over the hard-contact
//! simulator ([`ContactAction`]) with no contact schedule, toward a base-pose target. Which feet
//! touch, and when, is whatever the simulator does along the optimized trajectory; the report
//! reads that schedule back.
//!
//! # Problem
//! `T = horizon / knot_dt` running knots, each one simulator step of `knot_dt` with the
//! actuator torques as controls (no PD: the controls are the torques), and a terminal knot.
//! Every knot pays the [`PoseCost`] toward the target (base position, orientation through the
//! SO(3) log, posture toward the start, joint and base velocities, effort, and the optional
//! foot clearance), the terminal knot `terminal` times the state part. With `ramp > 0` the
//! running knots pay a reference that moves from the start pose to the target over that
//! fraction of the horizon ([`Ramp`]: linear in position, along the geodesic in rotation), so
//! that a locomotion task asks for progress at every knot. The initial guess holds the start:
//! the torques of the scene's PD controller at the settled state, at every knot
//! ([`InitialGuess::Hold`]), or the torques that PD applies in closed loop from the start
//! ([`InitialGuess::Controller`], for horizons long enough that an open-loop hold drifts).
//!
//! Every knot's step starts without a warm start (`ContactAction`), so the interior-point
//! solution is a function of the knot's `(x, u)` alone and the report's replay is the plan.
//!
//! # Report ([`CitoReport`])
//! The trajectory is replayed knot by knot through the same step (so what is reported is what
//! the simulator does, not what the solver believed) and measured:
//! - `pose_error_m`, `pose_error_deg`: base position error (norm) and rotation angle of
//!   `R*^T R` at the final knot;
//! - `max_penetration_m`: `max(0, -min phi)` over all candidates (feet and trunk corners) and
//!   knots;
//! - `max_cone_violation`: `max(0, ||l_t|| - mu l_n)` over all contacts and knots (N s);
//! - the contact schedule: a foot is *in contact* at a knot when its gap is at most
//!   [`CONTACT_GAP`] and its normal impulse is at least [`CONTACT_IMPULSE`];
//! - `feet_repositioned`: the feet that start on the ground (gap at most [`CONTACT_GAP`] at the
//!   first knot), are out of contact for
//!   at least [`SWING_KNOTS`] consecutive knots, and have landed at the final knot (gap at most
//!   [`CONTACT_GAP`]) more than [`REPOSITION_DISTANCE`] from where they started, measured
//!   horizontally. A foot that slides 3 cm without lifting is not repositioned, nor is one still
//!   in the air when the horizon ends;
//! - `footfalls`: per foot, how often it lifted off by at least [`FOOTFALL_LIFT`] (gap) and then
//!   touched down again (in contact): the steps it took, whatever their length.

use super::contact::{ContactAction, FootClearance, PoseCost};
use super::ddp::{Ddp, Info, IterationInfo, Settings, ShootingProblem};
use super::ActionModel;
use crate::contact::Terrain;
use crate::diff::{Sensitivity, SensitivityKind};
use crate::model::configuration::free_flyer_placement;
use crate::model::Model;
use crate::sim::{step, Controller, Simulation, StepSettings, StepWorkspace};
use crate::validate::{Checker, SettingsError};
use nalgebra::{DVector, Matrix3, Rotation3, Vector3};
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// A foot is in contact when its gap is at most this (m) ...
pub const CONTACT_GAP: f64 = 0.005;
/// ... and its normal impulse at least this (N s).
pub const CONTACT_IMPULSE: f64 = 1e-3;
/// Consecutive knots out of contact that make a swing.
pub const SWING_KNOTS: usize = 3;
/// Gap a foot must reach between two contacts for the pair to count as a footfall (m).
pub const FOOTFALL_LIFT: f64 = 0.01;
/// Horizontal displacement of a swung foot that counts as repositioned (m).
pub const REPOSITION_DISTANCE: f64 = 0.03;

pub(crate) fn default_settle() -> f64 {
    1.0
}
pub(crate) fn default_ocp_horizon() -> f64 {
    0.3
}
pub(crate) fn default_knot_dt() -> f64 {
    0.01
}
fn default_cito_iterations() -> usize {
    50
}
pub(crate) fn zero3() -> [f64; 3] {
    [0.0; 3]
}

/// Cost weights of a base-pose task (`ocp::ContactAction`'s cost; defaults in brackets).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CitoWeights {
    /// Base position per world axis [(100, 100, 400)] and orientation per log-map axis
    /// [(50, 50, 20)].
    #[serde(deserialize_with = "crate::validate::non_negative3")]
    pub position: [f64; 3],
    #[serde(deserialize_with = "crate::validate::non_negative3")]
    pub orientation: [f64; 3],
    /// Joint posture toward the start [0.02], joint velocity [0.1], base velocity \[1\],
    /// effort [1e-3].
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub posture: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub joint_velocity: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub base_velocity: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub control: f64,
    /// Terminal knot: state cost times this \[200\].
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub terminal: f64,
    /// Foot clearance weight [0: off] and fade height (m) [0.02] (`ocp::FootClearance`).
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub foot_clearance: f64,
    #[serde(deserialize_with = "crate::validate::positive")]
    pub clearance_scale: f64,
    /// Joint range weight [0: off] and margin (rad or m) [0.05] (`ocp::PoseCost`): a quadratic
    /// penalty on every joint coordinate beyond its URDF range shrunk by the margin. The
    /// simulator does not enforce position limits, so without it a plan may swing a leg through
    /// a range the robot does not have.
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub joint_range: f64,
    #[serde(deserialize_with = "crate::validate::non_negative")]
    pub joint_range_margin: f64,
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
            joint_range: 0.0,
            joint_range_margin: 0.05,
        }
    }
}

/// A contact-implicit trajectory optimization task (DESIGN 5): reach a base pose from a settled
/// stance with no contact schedule. A scene's `cito` section is this struct, field for field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CitoSettings {
    /// Target base position relative to the settled start, world frame (m).
    #[serde(default = "zero3", deserialize_with = "crate::validate::finite3")]
    pub target_offset: [f64; 3],
    /// Target rotation relative to the start, roll, pitch, yaw about the world axes (rad):
    /// `R* = Rz Ry Rx R_start`.
    #[serde(default = "zero3", deserialize_with = "crate::validate::finite3")]
    pub target_rpy: [f64; 3],
    /// Simulated time under the scene's controller before the plan starts (s) \[1\].
    #[serde(default = "default_settle", deserialize_with = "crate::validate::non_negative")]
    pub settle: f64,
    /// Plan length (s) [0.3] and knot step (s) [0.01].
    #[serde(default = "default_ocp_horizon", deserialize_with = "crate::validate::positive")]
    pub horizon: f64,
    #[serde(default = "default_knot_dt", deserialize_with = "crate::validate::time_step")]
    pub knot_dt: f64,
    #[serde(default)]
    pub weights: CitoWeights,
    /// DDP iteration limit \[50\].
    #[serde(default = "default_cito_iterations")]
    pub iterations: usize,
    /// `exact`, `signorini` or `relaxed` \[relaxed\]; the command line overrides it.
    #[serde(default)]
    pub sensitivity: SensitivityKind,
    /// Relaxation (N s m/s) [1e-4] and normal shift (m/s) [1e-3] of the relaxed sensitivities.
    #[serde(default = "crate::diff::sensitivity::default_kappa", deserialize_with = "crate::validate::positive")]
    pub kappa: f64,
    #[serde(default = "crate::diff::sensitivity::default_delta", deserialize_with = "crate::validate::non_negative")]
    pub delta: f64,
    /// Fraction of the horizon over which the running knots' pose reference moves from the
    /// start to the target, linearly (position) and along the geodesic (rotation), then holds
    /// [0: every knot pays the target]. A moving reference asks for progress at every knot
    /// (a walk), where a fixed target rewards the quickest lean toward it.
    #[serde(default, deserialize_with = "crate::validate::non_negative")]
    pub ramp: f64,
    /// The controls DDP starts from \[hold\].
    #[serde(default)]
    pub guess: InitialGuess,
    /// The trot of `guess: trot` (default 2 Hz, 0.4 rad).
    #[serde(default)]
    pub trot: TrotGuess,
}

/// The initial control sequence of a CITO solve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialGuess {
    /// The torque the scene's controller applies at the start, at every knot ([`hold_torque`]):
    /// open loop, so a start that is not at rest drifts away from it over a long horizon.
    #[default]
    Hold,
    /// The torques the scene's controller applies in closed loop from the start, rolled out at
    /// the knot step ([`controller_guess`]): the stance the controller holds, which the open-loop
    /// replay of those torques reproduces.
    Controller,
    /// The torques of the scene's PD in closed loop while its posture reference trots in place
    /// ([`trot_guess`], `CitoSettings::trot`): a gait prior as a warm start only. DDP keeps,
    /// changes or drops the stepping; no contact schedule enters the problem.
    Trot,
}

/// The trotting-in-place reference of [`InitialGuess::Trot`]: diagonal pairs (FL with RR, FR
/// with RL) swing in turn at `frequency`; a swinging leg's thigh reference rises by
/// `lift sin(phase)` and its calf's by `-2 lift sin(phase)` over its half period (a knee bend
/// that lifts the foot about 5 cm at the default 0.4 rad on the quadruped). With `stride > 0`
/// every thigh reference also sweeps by `stride cos(phase)` (phase 0 at lift-off): the hip
/// swings the foot forward while it is in the air and back while it is on the ground, so the
/// prior walks forward instead of trotting in place (thighs pitch about the lateral axis: a
/// smaller thigh angle puts the foot further ahead). With `side != 0` every hip abduction
/// reference sweeps by `side cos(phase)` in the same way, so the prior steps sideways (a
/// positive abduction turns a foot toward `+y`: with `side < 0` a swinging foot lands toward
/// `+y` and the stance pushes the body that way). `phase` shifts every leg's phase (`pi` lifts
/// FR and RL first).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrotGuess {
    /// Steps per second of each leg (Hz) \[2\].
    pub frequency: f64,
    /// Thigh swing amplitude (rad) \[0.4\].
    pub lift: f64,
    /// Fore-aft thigh sweep (rad) \[0: in place\].
    pub stride: f64,
    /// Sideways hip abduction sweep (rad) \[0: in place\].
    pub side: f64,
    /// Phase of the FL-RR pair at the start (rad) \[0: FL and RR lift first\].
    pub phase: f64,
}

impl Default for TrotGuess {
    fn default() -> Self {
        Self { frequency: 2.0, lift: 0.4, stride: 0.0, side: 0.0, phase: 0.0 }
    }
}

/// The defaults (those of an empty `cito: ()` in a scene file).
impl Default for CitoSettings {
    fn default() -> Self {
        Self {
            target_offset: zero3(),
            target_rpy: zero3(),
            settle: default_settle(),
            horizon: default_ocp_horizon(),
            knot_dt: default_knot_dt(),
            weights: CitoWeights::default(),
            iterations: default_cito_iterations(),
            sensitivity: SensitivityKind::default(),
            kappa: crate::diff::DEFAULT_KAPPA,
            delta: crate::diff::DEFAULT_DELTA,
            ramp: 0.0,
            guess: InitialGuess::Hold,
            trot: TrotGuess::default(),
        }
    }
}

impl CitoWeights {
    pub fn validate(&self) -> Result<(), SettingsError> {
        Checker::new("CitoWeights")
            .all_non_negative("position", &self.position)
            .all_non_negative("orientation", &self.orientation)
            .non_negative("posture", self.posture)
            .non_negative("joint_velocity", self.joint_velocity)
            .non_negative("base_velocity", self.base_velocity)
            .non_negative("control", self.control)
            .non_negative("terminal", self.terminal)
            .non_negative("foot_clearance", self.foot_clearance)
            .positive("clearance_scale", self.clearance_scale)
            .non_negative("joint_range", self.joint_range)
            .non_negative("joint_range_margin", self.joint_range_margin)
            .finish()
    }
}

/// Knots of a horizon: `horizon / knot_dt`, rounded, in [1, 1000].
pub(crate) fn check_horizon(c: &mut Checker, horizon: f64, knot_dt: f64) {
    c.positive("horizon", horizon).time_step("knot_dt", knot_dt);
    let knots = (horizon / knot_dt).round();
    c.check((1.0..=1000.0).contains(&knots), "horizon", || {
        format!("{horizon} s at knot_dt {knot_dt} s gives {knots} knots: allowed [1, 1000]")
    });
}

impl CitoSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        let mut c = Checker::new("CitoSettings");
        c.all_finite("target_offset", &self.target_offset)
            .all_finite("target_rpy", &self.target_rpy)
            .non_negative("settle", self.settle)
            .count("iterations", self.iterations, 1, 100_000)
            .positive("kappa", self.kappa)
            .non_negative("delta", self.delta);
        c.check((0.0..=1.0).contains(&self.ramp), "ramp", || format!("{} is outside [0, 1]", self.ramp));
        c.positive("trot.frequency", self.trot.frequency)
            .non_negative("trot.lift", self.trot.lift)
            .non_negative("trot.stride", self.trot.stride)
            .finite("trot.side", self.trot.side)
            .finite("trot.phase", self.trot.phase);
        check_horizon(&mut c, self.horizon, self.knot_dt);
        c.finish()?;
        self.weights.validate().map_err(|e| e.within("CitoSettings", "weights"))
    }

    /// The sensitivity the settings name, with their `kappa` and `delta`.
    pub fn sensitivity(&self) -> Sensitivity {
        self.sensitivity.with(self.kappa, self.delta)
    }

    /// Sets the sensitivity (family and parameters).
    pub fn set_sensitivity(&mut self, s: Sensitivity) {
        s.store(&mut self.sensitivity, &mut self.kappa, &mut self.delta);
    }

    /// Running knots of the plan.
    pub fn knots(&self) -> usize {
        (self.horizon / self.knot_dt).round().max(1.0) as usize
    }
}

/// Why a CITO problem could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CitoError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("CITO needs a floating base; `{0}` has none")]
    NoFloatingBase(String),
    #[error("the trot guess needs a joint PD and legs named FL, FR, RL, RR: {0}")]
    Trot(String),
}

/// Everything a CITO solve needs, owned (it can be moved to a worker thread).
#[derive(Clone)]
pub struct CitoProblem {
    pub model: Arc<Model>,
    pub terrain: Terrain,
    /// The knots' step settings (`dt` = knot step).
    pub settings: StepSettings,
    /// Start state `(q, v)` (nq + nv).
    pub x0: DVector<f64>,
    /// Initial guess, held at every knot (nu).
    pub u_guess: DVector<f64>,
    pub cost: PoseCost,
    /// Terminal knot weight on the state cost.
    pub terminal_weight: f64,
    pub knots: usize,
    pub sensitivity: Sensitivity,
    pub ddp: Settings,
    /// Optional foot clearance term on every knot.
    pub clearance: Option<FootClearance>,
    /// Optional moving reference for the running knots (`CitoSettings::ramp`).
    pub ramp: Option<Ramp>,
    /// Initial controls per knot; `None`: `u_guess` at every knot.
    pub guess: Option<Vec<DVector<f64>>>,
    /// Warm-start every knot's contact solve ([`ContactAction::warm_start`]); CITO leaves it
    /// off so that its plans replay exactly, MPC may turn it on.
    pub warm_start_contacts: bool,
}

/// A reference that moves from the start pose to the cost's target over the first `fraction`
/// of the running knots: knot `k` pays `p(s) = p0 + s (p* - p0)`, `R(s) = exp(s log(R* R0^T)) R0`
/// with `s = min(1, k / (fraction T))`. The terminal knot pays the target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ramp {
    pub position: Vector3<f64>,
    pub rotation: Matrix3<f64>,
    pub fraction: f64,
}

impl Ramp {
    /// The reference pose of running knot `k` of `knots` toward `target`.
    pub fn at(&self, k: usize, knots: usize, target: (Vector3<f64>, Matrix3<f64>)) -> (Vector3<f64>, Matrix3<f64>) {
        let s = (k as f64 / (self.fraction * knots as f64).max(1e-12)).min(1.0);
        let p = self.position + s * (target.0 - self.position);
        let w = crate::spatial::lie::log3(&(target.1 * self.rotation.transpose()));
        let r = Rotation3::from_scaled_axis(w * s).matrix() * self.rotation;
        (p, r)
    }
}

/// The clearance term of `weights` (`None` at zero weight).
pub fn clearance(w: &CitoWeights) -> Option<FootClearance> {
    (w.foot_clearance > 0.0).then_some(FootClearance { weight: w.foot_clearance, scale: w.clearance_scale })
}

/// The cost of a base-pose target with `weights`, posture toward `q_start`.
pub fn pose_cost(q_start: &DVector<f64>, position: Vector3<f64>, rotation: Matrix3<f64>, w: &CitoWeights) -> PoseCost {
    PoseCost {
        base_position: position,
        base_rotation: rotation,
        w_position: Vector3::from(w.position),
        w_orientation: Vector3::from(w.orientation),
        posture: q_start.clone(),
        w_posture: w.posture,
        w_joint_velocity: w.joint_velocity,
        w_base_velocity: w.base_velocity,
        w_control: w.control,
        w_joint_range: w.joint_range,
        joint_range_margin: w.joint_range_margin,
    }
}

/// The torques `sim`'s controller applies over `knots` steps of `knot_dt` in closed loop from its
/// present state (no pulls), including the implicit damping term: replayed open loop through
/// the knot step they reproduce the controller's trajectory. A step that fails ends the rollout;
/// the remaining knots repeat the last torque.
pub fn controller_guess(sim: &Simulation, knots: usize, knot_dt: f64) -> Vec<DVector<f64>> {
    closed_loop_guess(sim, knots, knot_dt, |_, _| {})
}

/// The torques `sim`'s controller applies in closed loop over `knots` cold steps of `knot_dt`
/// (pulls removed), `before(k, sim)` adjusting it before step `k`; a step that fails ends the
/// rollout and the remaining knots repeat the last torque.
fn closed_loop_guess(
    sim: &Simulation,
    knots: usize,
    knot_dt: f64,
    mut before: impl FnMut(usize, &mut Simulation),
) -> Vec<DVector<f64>> {
    let mut s = sim.clone();
    s.pulls.clear();
    s.settings.dt = knot_dt;
    let mut out: Vec<DVector<f64>> = Vec::with_capacity(knots);
    for k in 0..knots {
        before(k, &mut s);
        s.ws.reset_warm_start();
        if !s.step().status.advanced() {
            break;
        }
        out.push(s.u.clone());
    }
    let last = out.last().cloned().unwrap_or_else(|| hold_torque(sim));
    out.resize(knots, last);
    out
}

/// The torques of the simulation's joint PD in closed loop, rolled out at the knot step, while
/// its posture reference trots in place ([`TrotGuess`]). Needs a `JointPd` controller and legs
/// whose actuated joints are named `FL_*`, `FR_*`, `RL_*`, `RR_*` with `*_thigh_joint` and
/// `*_calf_joint`.
pub fn trot_guess(sim: &Simulation, knots: usize, knot_dt: f64, trot: TrotGuess) -> Result<Vec<DVector<f64>>, String> {
    let Controller::JointPd { kp, kd, posture } = &sim.controller else {
        return Err("the scene's controller is not a joint PD".into());
    };
    let m = &*sim.model;
    // Per actuator: (phase offset of its leg, thigh or calf lift gain, sweep amplitude: the
    // stride for a thigh, the side for a hip abduction).
    let mut role = Vec::with_capacity(m.nu);
    for j in m.actuated_joints() {
        let phase = match j.name.split('_').next() {
            Some("FL" | "RR") => trot.phase,
            Some("FR" | "RL") => trot.phase + std::f64::consts::PI,
            _ => return Err(format!("joint `{}` is not on a leg named FL, FR, RL or RR", j.name)),
        };
        let (gain, sweep) = if j.name.ends_with("_thigh_joint") {
            (1.0, trot.stride)
        } else if j.name.ends_with("_calf_joint") {
            (-2.0, 0.0)
        } else if j.name.ends_with("_hip_joint") {
            (0.0, trot.side)
        } else {
            (0.0, 0.0)
        };
        role.push((phase, gain, sweep));
    }
    let omega = std::f64::consts::TAU * trot.frequency;
    Ok(closed_loop_guess(sim, knots, knot_dt, |k, s| {
        let t = k as f64 * knot_dt;
        let reference = posture.iter().zip(&role).map(|(p, &(phase, gain, sweep))| {
            let psi = omega * t + phase;
            p + gain * trot.lift * psi.sin().max(0.0) + sweep * psi.cos()
        });
        s.controller = Controller::JointPd { kp: *kp, kd: *kd, posture: reference.collect() };
    }))
}

/// The torque the simulation's controller applies at its current state (plus its control
/// offset): the guess that holds the present stance.
pub fn hold_torque(sim: &Simulation) -> DVector<f64> {
    let mut u = DVector::zeros(sim.model.nu);
    let mut damping = DVector::zeros(sim.model.nu);
    // At rest: the controller's damping of a transient velocity is not part of holding the pose.
    let rest = vec![0.0; sim.model.nv];
    sim.controller.compute(&sim.model, sim.q.as_slice(), &rest, sim.settings.dt, &mut u, &mut damping);
    if sim.u_offset.len() == u.len() {
        u += &sim.u_offset;
    }
    u
}

impl CitoProblem {
    /// The problem of `settings` starting from the simulation's present state (its `settle` is
    /// not used: settle first with [`Simulation::settle`]): target relative to the present base
    /// pose, posture toward the present joints, guess = the torque its controller applies now
    /// ([`hold_torque`]).
    pub fn from_state(sim: &Simulation, settings: &CitoSettings) -> Result<CitoProblem, CitoError> {
        settings.validate()?;
        let spec = settings;
        let m = &*sim.model;
        if m.nq < 7 || m.nv < 6 {
            return Err(CitoError::NoFloatingBase(m.name.clone()));
        }
        let base = free_flyer_placement(&sim.q.as_slice()[..7]);
        let position = base.trans + Vector3::from(spec.target_offset);
        let r = Rotation3::from_euler_angles(spec.target_rpy[0], spec.target_rpy[1], spec.target_rpy[2]);
        let rotation = r.matrix() * base.rot;
        let cost = pose_cost(&sim.q, position, rotation, &spec.weights);
        let sensitivity = spec.sensitivity();
        let mut x0 = DVector::zeros(m.nq + m.nv);
        x0.rows_mut(0, m.nq).copy_from(&sim.q);
        x0.rows_mut(m.nq, m.nv).copy_from(&sim.v);
        let mut settings = sim.settings;
        settings.dt = spec.knot_dt;
        Ok(CitoProblem {
            model: sim.model.clone(),
            terrain: sim.terrain.clone(),
            settings,
            x0,
            u_guess: hold_torque(sim),
            cost,
            terminal_weight: spec.weights.terminal,
            knots: spec.knots(),
            sensitivity,
            ddp: Settings { max_iterations: spec.iterations, ..Default::default() },
            clearance: clearance(&spec.weights),
            guess: match spec.guess {
                InitialGuess::Hold => None,
                InitialGuess::Controller => Some(controller_guess(sim, spec.knots(), spec.knot_dt)),
                InitialGuess::Trot => {
                    Some(trot_guess(sim, spec.knots(), spec.knot_dt, spec.trot).map_err(CitoError::Trot)?)
                }
            },
            ramp: (spec.ramp > 0.0).then_some(Ramp { position: base.trans, rotation: base.rot, fraction: spec.ramp }),
            warm_start_contacts: false,
        })
    }

    /// The shooting problem: `knots` copies of one running model and the terminal model.
    pub fn shooting(&self) -> ShootingProblem {
        let action = |cost: PoseCost, terminal| {
            let mut a = ContactAction::new(
                self.model.clone(),
                self.terrain.clone(),
                self.settings,
                self.sensitivity,
                cost,
                terminal,
            );
            a.clearance = self.clearance;
            a.warm_start = self.warm_start_contacts;
            a
        };
        let running: Vec<Arc<dyn ActionModel>> = match &self.ramp {
            None => vec![Arc::new(action(self.cost.clone(), None)) as Arc<dyn ActionModel>; self.knots],
            Some(ramp) => (0..self.knots)
                .map(|k| {
                    let (p, r) = ramp.at(k, self.knots, (self.cost.base_position, self.cost.base_rotation));
                    let cost = PoseCost { base_position: p, base_rotation: r, ..self.cost.clone() };
                    Arc::new(action(cost, None)) as Arc<dyn ActionModel>
                })
                .collect(),
        };
        ShootingProblem {
            x0: self.x0.clone(),
            running,
            terminal: Arc::new(action(self.cost.clone(), Some(self.terminal_weight))),
        }
    }
}

/// One knot of the replayed trajectory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Knot {
    pub t: f64,
    /// Base position (m) and orientation quaternion `(x, y, z, w)`.
    pub base: [f64; 7],
    /// World position of each foot's contact point (m), in `CitoReport::feet` order.
    pub feet: Vec<[f64; 3]>,
    /// Gap (m) and normal impulse (N s) of each foot; impulse of the step that starts here
    /// (zero at the final knot, which has no step).
    pub gap: Vec<f64>,
    pub impulse: Vec<f64>,
    pub contact: Vec<bool>,
}

/// What a CITO solve produced, measured on the replayed trajectory (module docs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CitoReport {
    pub sensitivity: String,
    pub info: Info,
    /// Wall time of the solve (s).
    pub solve_time: f64,
    pub pose_error_m: f64,
    pub pose_error_deg: f64,
    pub max_penetration_m: f64,
    pub max_cone_violation: f64,
    /// Foot (contact point) names.
    pub feet: Vec<String>,
    pub feet_repositioned: Vec<String>,
    /// Footfalls per foot, in `feet` order (module docs).
    pub footfalls: Vec<usize>,
    /// Terrain primitive each foot (in `feet` order) stood on last (`None`: never touched);
    /// empty on a terrain of one primitive.
    pub final_support: Vec<Option<usize>>,
    pub knots: Vec<Knot>,
    /// States (T + 1) and controls (T) of the plan.
    pub xs: Vec<Vec<f64>>,
    pub us: Vec<Vec<f64>>,
}

/// Solves `p` from its hold-the-start guess. `cancel` stops the solve between passes;
/// `observe` sees every accepted iteration.
pub fn solve(p: &CitoProblem, cancel: Option<&AtomicBool>, observe: &mut dyn FnMut(&IterationInfo)) -> CitoReport {
    let mut ddp = Ddp::new(p.shooting(), p.ddp);
    let guess = p.guess.clone().unwrap_or_else(|| vec![p.u_guess.clone(); p.knots]);
    let started = Instant::now();
    let info = ddp.solve_observed(Some(&guess), cancel, observe);
    let solve_time = started.elapsed().as_secs_f64();
    evaluate(p, &ddp.xs, &ddp.us, info, solve_time)
}

/// Replays `us` from `p.x0` through the knot step and measures it (module docs).
pub fn evaluate(p: &CitoProblem, xs: &[DVector<f64>], us: &[DVector<f64>], info: Info, solve_time: f64) -> CitoReport {
    let m = &*p.model;
    let (nq, nv) = (m.nq, m.nv);
    let feet: Vec<usize> =
        (0..m.contact_points.len()).filter(|&i| m.contact_points[i].name.ends_with("foot")).collect();
    let mut ws = StepWorkspace::new(m);
    let zeros = DVector::zeros(nv);
    let (mut qn, mut vn) = (DVector::zeros(nq), DVector::zeros(nv));
    let (mut max_pen, mut max_cone) = (0.0f64, 0.0f64);
    let mut knots = Vec::with_capacity(us.len() + 1);
    // The primitive each foot touched last (a foot mid-swing at the end keeps its last stance).
    let mut last_support: Vec<Option<usize>> = vec![None; feet.len()];
    let mut x = p.x0.clone();
    let mut replayed = vec![x.clone()];
    for i in 0..=us.len() {
        // The final knot has no step of its own: step it with the last control for the
        // contact geometry (its impulse is not reported).
        let u = &us[i.min(us.len() - 1)];
        let (q, v) = (&x.as_slice()[..nq], &x.as_slice()[nq..]);
        // As in `ContactAction`: every knot's step is a function of (x, u) alone.
        ws.reset_warm_start();
        let st = step(
            m,
            &p.terrain,
            &p.settings,
            &mut ws,
            q,
            v,
            u.as_slice(),
            zeros.as_slice(),
            qn.as_mut_slice(),
            vn.as_mut_slice(),
        );
        let c = &ws.contacts;
        for k in 0..c.k {
            max_pen = max_pen.max(-c.phi[k]);
            if i < us.len() {
                let l = &ws.lambda;
                let lt = (l[3 * k + 1].powi(2) + l[3 * k + 2].powi(2)).sqrt();
                max_cone = max_cone.max(lt - c.mu[k] * l[3 * k]);
            }
        }
        let impulse: Vec<f64> = feet.iter().map(|&k| if i < us.len() { ws.lambda[3 * k] } else { 0.0 }).collect();
        let gap: Vec<f64> = feet.iter().map(|&k| c.phi[k]).collect();
        let contact: Vec<bool> = gap
            .iter()
            .zip(&impulse)
            .map(|(&g, &l)| g <= CONTACT_GAP && (i == us.len() || l >= CONTACT_IMPULSE))
            .collect();
        for ((s, &k), &touching) in last_support.iter_mut().zip(&feet).zip(&contact) {
            if touching {
                *s = Some(c.primitive[k]);
            }
        }
        let mut base = [0.0; 7];
        base.copy_from_slice(&x.as_slice()[..7]);
        knots.push(Knot {
            t: i as f64 * p.settings.dt,
            base,
            feet: feet.iter().map(|&k| [c.point[k].x, c.point[k].y, c.point[k].z]).collect(),
            gap,
            impulse,
            contact,
        });
        if i == us.len() || !st.status.advanced() {
            break;
        }
        x.rows_mut(0, nq).copy_from(&qn);
        x.rows_mut(nq, nv).copy_from(&vn);
        replayed.push(x.clone());
    }
    let last = replayed.last().expect("at least the start");
    let b = free_flyer_placement(&last.as_slice()[..7]);
    let pose_error_m = (b.trans - p.cost.base_position).norm();
    let pose_error_deg = crate::spatial::lie::log3(&(p.cost.base_rotation.transpose() * b.rot)).norm().to_degrees();
    let names: Vec<String> = feet.iter().map(|&k| m.contact_points[k].name.clone()).collect();
    let feet_repositioned = repositioned(&knots).into_iter().map(|f| names[f].clone()).collect();
    let footfalls = footfalls(&knots);
    let raised_terrain = !p.terrain.boxes.is_empty() || !p.terrain.heightfields.is_empty();
    let final_support = if raised_terrain { last_support } else { vec![] };
    CitoReport {
        sensitivity: p.sensitivity.name().into(),
        info,
        solve_time,
        pose_error_m,
        pose_error_deg,
        max_penetration_m: max_pen.max(0.0),
        max_cone_violation: max_cone.max(0.0),
        feet: names,
        feet_repositioned,
        footfalls,
        final_support,
        knots,
        xs: xs.iter().map(|x| x.as_slice().to_vec()).collect(),
        us: us.iter().map(|u| u.as_slice().to_vec()).collect(),
    }
}

/// Footfalls per foot (module docs): lift-off to a gap of at least [`FOOTFALL_LIFT`], then
/// back within [`CONTACT_GAP`] of the ground (the final knot counts: a foot may land on it).
pub fn footfalls(knots: &[Knot]) -> Vec<usize> {
    let Some(first) = knots.first() else { return vec![] };
    (0..first.feet.len())
        .map(|f| {
            let (mut count, mut lifted) = (0, false);
            for k in knots {
                if k.gap[f] >= FOOTFALL_LIFT {
                    lifted = true;
                } else if lifted && k.gap[f] <= CONTACT_GAP {
                    count += 1;
                    lifted = false;
                }
            }
            count
        })
        .collect()
}

/// [`footfalls`] counted as a run goes, one gap per foot per step (closed-loop runs).
#[derive(Clone, Debug, Default)]
pub struct FootfallCounter {
    pub counts: Vec<usize>,
    lifted: Vec<bool>,
}

impl FootfallCounter {
    pub fn new(feet: usize) -> Self {
        Self { counts: vec![0; feet], lifted: vec![false; feet] }
    }

    /// Records one step's gaps, in foot order.
    pub fn record(&mut self, gaps: impl Iterator<Item = f64>) {
        for (f, g) in gaps.enumerate().take(self.counts.len()) {
            if g >= FOOTFALL_LIFT {
                self.lifted[f] = true;
            } else if self.lifted[f] && g <= CONTACT_GAP {
                self.counts[f] += 1;
                self.lifted[f] = false;
            }
        }
    }

    pub fn total(&self) -> usize {
        self.counts.iter().sum()
    }
}

/// Indices of the repositioned feet (module docs).
pub fn repositioned(knots: &[Knot]) -> Vec<usize> {
    let Some(first) = knots.first() else { return vec![] };
    let last = knots.last().expect("non-empty");
    (0..first.feet.len())
        .filter(|&f| {
            let mut run = 0;
            let mut longest = 0;
            for k in knots {
                run = if k.contact[f] { 0 } else { run + 1 };
                longest = longest.max(run);
            }
            let (a, b) = (first.feet[f], last.feet[f]);
            let moved = ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
            let landed = last.gap[f] <= CONTACT_GAP;
            first.gap[f] <= CONTACT_GAP && longest >= SWING_KNOTS && landed && moved > REPOSITION_DISTANCE
        })
        .collect()
}

/// `summary.json` of a report: the scalar results and the repositioned feet.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CitoSummary {
    pub scene: String,
    pub sensitivity: String,
    pub status: super::Status,
    pub final_cost: f64,
    pub iterations: usize,
    pub solve_time_s: f64,
    pub pose_error_m: f64,
    pub pose_error_deg: f64,
    pub max_penetration_m: f64,
    pub max_cone_violation: f64,
    pub feet_repositioned: Vec<String>,
    /// Footfalls per foot name (module docs).
    pub footfalls: std::collections::BTreeMap<String, usize>,
    /// Knot derivatives that came from a fallback sensitivity (a run called `exact` that took
    /// relaxed Jacobians at some knots says how many here), and those whose relaxed backward
    /// solve did not converge; counted over every derivative sweep of the solve.
    pub fallback_jacobians: usize,
    pub unconverged_jacobians: usize,
    /// Height of each foot's contact point at the final knot (m): 0 on the ground, the
    /// platform's height on a step.
    #[serde(default)]
    pub final_foot_height: std::collections::BTreeMap<String, f64>,
    /// On terrain with steps or heightfields: the primitive each foot stood on last (0 the
    /// ground, `1 + i` box `i`, then heightfields; a foot in its swing at the end keeps the
    /// stance it lifted off from); absent on flat ground.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_foot_support: Option<std::collections::BTreeMap<String, usize>>,
}

impl CitoReport {
    pub fn summary(&self, scene: &str) -> CitoSummary {
        CitoSummary {
            scene: scene.into(),
            sensitivity: self.sensitivity.clone(),
            status: self.info.status,
            final_cost: self.info.cost,
            iterations: self.info.iterations,
            solve_time_s: self.solve_time,
            pose_error_m: self.pose_error_m,
            pose_error_deg: self.pose_error_deg,
            max_penetration_m: self.max_penetration_m,
            max_cone_violation: self.max_cone_violation,
            feet_repositioned: self.feet_repositioned.clone(),
            footfalls: self.feet.iter().cloned().zip(self.footfalls.iter().copied()).collect(),
            fallback_jacobians: self.info.fallback_jacobians,
            unconverged_jacobians: self.info.unconverged_jacobians,
            final_foot_height: match self.knots.last() {
                Some(k) => self.feet.iter().cloned().zip(k.feet.iter().map(|p| p[2])).collect(),
                None => Default::default(),
            },
            final_foot_support: (!self.final_support.is_empty()).then(|| {
                self.feet.iter().zip(&self.final_support).filter_map(|(f, s)| Some((f.clone(), (*s)?))).collect()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ramp_interpolates_position_and_rotation_and_holds() {
        let r0 = *Rotation3::from_euler_angles(0.01, -0.02, 0.3).matrix();
        let ramp = Ramp { position: Vector3::new(0.0, 0.0, 0.3), rotation: r0, fraction: 0.5 };
        // A target equal to the start (as a yaw of 0 gives): finite, and the start at every knot.
        for k in 0..10 {
            let (p, r) = ramp.at(k, 10, (ramp.position, r0));
            assert!((p - ramp.position).norm() < 1e-15 && (r - r0).norm() < 1e-12, "knot {k}");
        }
        let target = (Vector3::new(0.2, 0.0, 0.3), *Rotation3::from_euler_angles(0.0, 0.0, 0.5).matrix() * r0);
        let (p, r) = ramp.at(2, 10, target);
        assert!((p.x - 0.08).abs() < 1e-12);
        let half = Rotation3::from_matrix_unchecked(r * r0.transpose()).angle();
        assert!((half - 0.2).abs() < 1e-9, "{half}");
        let (p, r) = ramp.at(7, 10, target);
        assert!((p - target.0).norm() < 1e-15 && (r - target.1).norm() < 1e-12);
    }
}
