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
//! foot clearance), the terminal knot `terminal` times the state part. The initial guess holds the start: the torques of the
//! scene's PD controller at the settled state, at every knot.
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
//!   in the air when the horizon ends.

use super::contact::{ContactAction, FootClearance, PoseCost};
use super::ddp::{Ddp, Info, IterationInfo, Settings, ShootingProblem};
use super::ActionModel;
use crate::contact::Terrain;
use crate::diff::Sensitivity;
use crate::model::configuration::free_flyer_placement;
use crate::model::Model;
use crate::scene::{CitoSpec, CitoWeights, Scene};
use crate::sim::{step, Simulation, StepSettings, StepWorkspace};
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
/// Horizontal displacement of a swung foot that counts as repositioned (m).
pub const REPOSITION_DISTANCE: f64 = 0.03;

/// Parses `exact`, `signorini` or `relaxed` with the relaxation parameters.
pub fn parse_sensitivity(name: &str, kappa: f64, delta: f64) -> Result<Sensitivity, String> {
    match name.trim() {
        "exact" => Ok(Sensitivity::Exact),
        "signorini" => Ok(Sensitivity::SignoriniRelaxed { kappa }),
        "relaxed" => Ok(Sensitivity::Relaxed { kappa, delta }),
        other => Err(format!("unknown sensitivity `{other}`: expected exact, signorini or relaxed")),
    }
}

/// The report name of a sensitivity (`exact`, `signorini`, `relaxed`).
pub fn sensitivity_name(s: &Sensitivity) -> &'static str {
    match s {
        Sensitivity::Exact => "exact",
        Sensitivity::SignoriniRelaxed { .. } => "signorini",
        Sensitivity::Relaxed { .. } => "relaxed",
    }
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
    }
}

/// The scene's simulation advanced `settle` seconds under its own controller (pulls removed):
/// a settled stance (the torques that hold it: [`hold_torque`]).
pub fn settled_start(scene: &Scene, settle: f64) -> Simulation {
    let mut sim = scene.simulation();
    sim.pulls.clear();
    let steps = (settle / sim.settings.dt).round() as usize;
    for _ in 0..steps {
        sim.step();
    }
    sim
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
    /// The problem of the scene's `cito` section from its settled stance, with `sensitivity`
    /// and `iterations` overriding the section's defaults.
    pub fn from_scene(
        scene: &Scene,
        sensitivity: Option<Sensitivity>,
        iterations: Option<usize>,
    ) -> Result<CitoProblem, String> {
        let Some(mut spec) = scene.file.cito.clone() else {
            return Err(format!("{}: the scene has no `cito` section", scene.path.display()));
        };
        if let Some(n) = iterations {
            spec.iterations = n;
        }
        let sim = settled_start(scene, spec.settle);
        CitoProblem::from_state(&sim, &spec, sensitivity)
    }

    /// The problem of `spec` starting from the simulation's present state (its `settle` is not
    /// used): target relative to the present base pose, posture toward the present joints,
    /// guess = the torque its controller applies now ([`hold_torque`]).
    pub fn from_state(
        sim: &Simulation,
        spec: &CitoSpec,
        sensitivity: Option<Sensitivity>,
    ) -> Result<CitoProblem, String> {
        let m = &*sim.model;
        if m.nq < 7 || m.nv < 6 {
            return Err(format!("CITO needs a floating base; `{}` has none", m.name));
        }
        let base = free_flyer_placement(&sim.q.as_slice()[..7]);
        let position = base.trans + Vector3::from(spec.target_offset);
        let r = Rotation3::from_euler_angles(spec.target_rpy[0], spec.target_rpy[1], spec.target_rpy[2]);
        let rotation = r.matrix() * base.rot;
        let cost = pose_cost(&sim.q, position, rotation, &spec.weights);
        let sensitivity = match sensitivity {
            Some(s) => s,
            None => parse_sensitivity(&spec.sensitivity, spec.kappa, spec.delta)?,
        };
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
            knots: (spec.horizon / spec.knot_dt).round().max(1.0) as usize,
            sensitivity,
            ddp: Settings { max_iterations: spec.iterations, ..Default::default() },
            clearance: clearance(&spec.weights),
        })
    }

    /// The shooting problem: `knots` copies of one running model and the terminal model.
    pub fn shooting(&self) -> ShootingProblem {
        let action = |terminal| {
            let mut a = ContactAction::new(
                self.model.clone(),
                self.terrain.clone(),
                self.settings,
                self.sensitivity,
                self.cost.clone(),
                terminal,
            );
            a.clearance = self.clearance;
            a
        };
        let running: Arc<dyn ActionModel> = Arc::new(action(None));
        ShootingProblem {
            x0: self.x0.clone(),
            running: vec![running; self.knots],
            terminal: Arc::new(action(Some(self.terminal_weight))),
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
    pub knots: Vec<Knot>,
    /// States (T + 1) and controls (T) of the plan.
    pub xs: Vec<Vec<f64>>,
    pub us: Vec<Vec<f64>>,
}

/// Solves `p` from its hold-the-start guess. `cancel` stops the solve between passes;
/// `observe` sees every accepted iteration.
pub fn solve(p: &CitoProblem, cancel: Option<&AtomicBool>, observe: &mut dyn FnMut(&IterationInfo)) -> CitoReport {
    let mut ddp = Ddp::new(p.shooting(), p.ddp);
    let guess = vec![p.u_guess.clone(); p.knots];
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
    let mut x = p.x0.clone();
    let mut replayed = vec![x.clone()];
    for i in 0..=us.len() {
        // The final knot has no step of its own: step it with the last control for the
        // contact geometry (its impulse is not reported).
        let u = &us[i.min(us.len() - 1)];
        let (q, v) = (&x.as_slice()[..nq], &x.as_slice()[nq..]);
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
        let contact = gap
            .iter()
            .zip(&impulse)
            .map(|(&g, &l)| g <= CONTACT_GAP && (i == us.len() || l >= CONTACT_IMPULSE))
            .collect();
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
    let pose_error_deg =
        Rotation3::from_matrix_unchecked(p.cost.base_rotation.transpose() * b.rot).angle().to_degrees();
    let names: Vec<String> = feet.iter().map(|&k| m.contact_points[k].name.clone()).collect();
    let feet_repositioned = repositioned(&knots).into_iter().map(|f| names[f].clone()).collect();
    CitoReport {
        sensitivity: sensitivity_name(&p.sensitivity).into(),
        info,
        solve_time,
        pose_error_m,
        pose_error_deg,
        max_penetration_m: max_pen.max(0.0),
        max_cone_violation: max_cone.max(0.0),
        feet: names,
        feet_repositioned,
        knots,
        xs: xs.iter().map(|x| x.as_slice().to_vec()).collect(),
        us: us.iter().map(|u| u.as_slice().to_vec()).collect(),
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
        }
    }
}
