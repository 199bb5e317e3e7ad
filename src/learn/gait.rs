//! Gait measurements of a walk policy (`learn::task`, walk): what a locomotion researcher
//! checks before calling a motion a gait, measured on the forward (hard-contact) simulator.
//!
//! Per episode (a start, command and pushes from the task; the deterministic policy, or the
//! trot prior alone with `a = 0`), over `steps` control steps of `h`:
//! * **forward speed**: the base displacement along the start's heading (its body `x` axis
//!   projected on the ground) divided by the elapsed time;
//! * per foot and per **gait cycle** (windows of `1/f` from the episode's start; only whole
//!   cycles count): the **lift**, the foot's highest point above its settled-stance height in
//!   the cycle, and the **duty factor**, the fraction of steps in which the foot carries a
//!   normal impulse (above [`CONTACT_IMPULSE`]);
//! * the return (minus the sum of the task's costs) and whether a step failed;
//! * the **cost of transport** `sum_t sum_k |tau_k qd_k| h / (m g d)` with `m` the robot's
//!   mass, `d` the forward distance, `tau_k = u_k - D_k (qd_k,t+1 - qd_k,t)` the torque the
//!   actuator applied (explicit PD torque plus its implicit damping) and `qd_k` at the step's
//!   end (the semi-implicit step's velocity);
//! * the **footfall pattern**: per foot and step, contact or not; the trot synchrony is the
//!   fraction of steps in which each diagonal pair is in the same state.
//!
//! [`evaluate_walk`] is the walking evaluation of a policy in `compare-learning`'s reports: the
//! 24 evaluation episodes at one commanded speed (tracking, gait, cost of transport) and 24
//! pushed episodes (survival).

use super::mlp::MlpCache;
use super::policy::Policy;
use super::task::{Env, Episode, Task};
use crate::model::Data;
use nalgebra::Vector3;
use serde::Serialize;

/// A foot is in contact in a step when its normal impulse exceeds this (N s).
pub const CONTACT_IMPULSE: f64 = 1e-6;

/// Measurements of one episode.
#[derive(Clone, Debug, Serialize)]
pub struct EpisodeGait {
    /// Commanded and realized forward speed (m/s).
    pub command: f64,
    pub speed: f64,
    /// Per foot (task order): the smallest lift over the whole cycles (m), and the duty
    /// factor over them (NaN without a whole cycle).
    pub min_lift: Vec<f64>,
    pub duty: Vec<f64>,
    /// Number of whole cycles measured.
    pub cycles: usize,
    pub ret: f64,
    pub failed: bool,
    /// Steps any trunk corner touched the ground.
    pub trunk_contact_steps: usize,
    /// Forward distance (m), actuator work `sum |tau qd| h` (J) and cost of transport (module
    /// docs; NaN when the robot did not move forward).
    pub distance: f64,
    pub energy: f64,
    pub cost_of_transport: f64,
    /// Per foot, per step taken: `#` in contact, `.` in the air.
    pub footfall: Vec<String>,
    /// Fraction of steps with both diagonal pairs (trot phase offsets equal) in agreement.
    pub trot_sync: f64,
}

/// Runs `policy` (None: zero action, the trot prior alone) on `episodes` for `steps` steps each,
/// with the command's speed replaced by `speed` when given (module docs).
pub fn measure(
    task: &Task,
    policy: Option<&Policy>,
    episodes: &[Episode],
    steps: usize,
    speed: Option<f64>,
) -> Vec<EpisodeGait> {
    let m = &*task.model;
    let h = task.settings.dt;
    let per_cycle = (1.0 / (task.spec.command.gait_frequency * h)).round().max(1.0) as usize;
    let nf = task.feet.len();
    let mut data = Data::new(m);
    let mut env = Env::new(task);
    let mut cache = MlpCache::default();
    let mut out = Vec::new();
    for ep in episodes {
        let mut ep = ep.clone();
        if let Some(s) = speed {
            ep.command.speed = s;
        }
        env.reset(task, &ep);
        let p0 = Vector3::new(env.q[0], env.q[1], env.q[2]);
        let base0 = crate::model::configuration::free_flyer_placement(&env.q.as_slice()[..7]);
        let heading = Vector3::new(base0.rot[(0, 0)], base0.rot[(1, 0)], 0.0).normalize();
        let cycles = steps / per_cycle;
        let mut lift = vec![vec![f64::NEG_INFINITY; cycles]; nf];
        let mut contact_steps = vec![0usize; nf];
        let mut footfall = vec![String::with_capacity(steps); nf];
        let (mut ret, mut failed, mut trunk, mut taken) = (0.0, false, 0, 0);
        let (mut energy, mut sync) = (0.0, 0usize);
        let mut qd_old = vec![0.0; m.nu];
        for t in 0..steps {
            let a = match policy {
                Some(p) => p.action(&env.obs.clone(), &mut cache),
                None => vec![0.0; task.act_dim()],
            };
            for (k, qd) in qd_old.iter_mut().enumerate() {
                *qd = env.v[task.act_v[k]];
            }
            let Some(rep) = env.step(task, &a, None) else {
                failed = true;
                ret -= task.failure_cost(t);
                break;
            };
            ret -= rep.cost;
            taken += 1;
            trunk += env.trunk_contact(task) as usize;
            for (k, qd0) in qd_old.iter().enumerate() {
                let qd = env.v[task.act_v[k]];
                energy += ((env.u[k] - env.damping[k] * (qd - qd0)) * qd).abs() * h;
            }
            let touching: Vec<bool> =
                task.feet.iter().map(|f| env.ws.lambda[3 * f.contact] > CONTACT_IMPULSE).collect();
            for (k, &c) in touching.iter().enumerate() {
                footfall[k].push(if c { '#' } else { '.' });
            }
            let agree = |k: usize| {
                (0..nf).all(|j| task.feet[j].phase_offset != task.feet[k].phase_offset || touching[j] == touching[k])
            };
            sync += (0..nf).all(agree) as usize;
            let c = t / per_cycle;
            if c < cycles {
                crate::dynamics::forward_kinematics(m, &mut data, env.q.as_slice(), None);
                for (k, f) in task.feet.iter().enumerate() {
                    let cp = &m.contact_points[f.contact];
                    let z = data.o_m_i[f.body].act_point(&cp.position).z - f.z_stand;
                    lift[k][c] = lift[k][c].max(z);
                    contact_steps[k] += (env.ws.lambda[3 * f.contact] > CONTACT_IMPULSE) as usize;
                }
            }
        }
        let p1 = Vector3::new(env.q[0], env.q[1], env.q[2]);
        let whole = if failed { 0 } else { cycles };
        let distance = (p1 - p0).dot(&heading);
        let weight = m.total_mass() * m.gravity.norm();
        out.push(EpisodeGait {
            command: ep.command.speed,
            speed: distance / (taken.max(1) as f64 * h),
            min_lift: lift
                .iter()
                .map(|l| if whole > 0 { l.iter().copied().fold(f64::INFINITY, f64::min) } else { f64::NAN })
                .collect(),
            duty: contact_steps
                .iter()
                .map(|&n| if whole > 0 { n as f64 / (whole * per_cycle) as f64 } else { f64::NAN })
                .collect(),
            cycles: whole,
            ret,
            failed,
            trunk_contact_steps: trunk,
            distance,
            energy,
            cost_of_transport: if distance > 0.0 { energy / (weight * distance) } else { f64::NAN },
            footfall,
            trot_sync: sync as f64 / taken.max(1) as f64,
        });
    }
    out
}

/// The acceptance summary of [`measure`]'s episodes.
#[derive(Clone, Debug, Serialize)]
pub struct GaitSummary {
    pub episodes: usize,
    pub failed: usize,
    /// Mean realized speed, mean command, mean and worst `|speed / command - 1|`, and the
    /// episodes within `tolerance` of their command.
    pub speed_mean: f64,
    pub command_mean: f64,
    pub speed_error_mean: f64,
    pub speed_error_worst: f64,
    pub within_tolerance: usize,
    /// Per foot: smallest per-cycle lift over all episodes (m) and mean of the episodes' smallest.
    pub min_lift: Vec<f64>,
    pub mean_min_lift: Vec<f64>,
    /// Per foot: smallest, mean and largest duty factor over the episodes.
    pub duty_min: Vec<f64>,
    pub duty_mean: Vec<f64>,
    pub duty_max: Vec<f64>,
    pub return_mean: f64,
    /// Episodes meeting every criterion: speed within tolerance, every foot lifting at least
    /// `min_lift` in every cycle, every duty factor in `duty`.
    pub walking: usize,
}

/// Summary of `eps` against a speed tolerance (relative), a lift and a duty range.
pub fn summarize(eps: &[EpisodeGait], tolerance: f64, min_lift: f64, duty: [f64; 2]) -> GaitSummary {
    let n = eps.len().max(1) as f64;
    let nf = eps.first().map_or(0, |e| e.min_lift.len());
    let err = |e: &EpisodeGait| (e.speed / e.command - 1.0).abs();
    let per_foot = |f: &dyn Fn(&EpisodeGait, usize) -> f64, fold: fn(f64, f64) -> f64, init: f64| -> Vec<f64> {
        (0..nf).map(|k| eps.iter().map(|e| f(e, k)).fold(init, fold)).collect()
    };
    let ok = |e: &EpisodeGait| {
        !e.failed
            && e.cycles > 0
            && err(e) <= tolerance
            && e.min_lift.iter().all(|&l| l >= min_lift)
            && e.duty.iter().all(|&d| d >= duty[0] && d <= duty[1])
    };
    GaitSummary {
        episodes: eps.len(),
        failed: eps.iter().filter(|e| e.failed).count(),
        speed_mean: eps.iter().map(|e| e.speed).sum::<f64>() / n,
        command_mean: eps.iter().map(|e| e.command).sum::<f64>() / n,
        speed_error_mean: eps.iter().map(err).sum::<f64>() / n,
        speed_error_worst: eps.iter().map(err).fold(0.0, f64::max),
        within_tolerance: eps.iter().filter(|e| err(e) <= tolerance).count(),
        min_lift: per_foot(&|e, k| e.min_lift[k], f64::min, f64::INFINITY),
        mean_min_lift: per_foot(&|e, k| e.min_lift[k] / n, |a, b| a + b, 0.0),
        duty_min: per_foot(&|e, k| e.duty[k], f64::min, f64::INFINITY),
        duty_mean: per_foot(&|e, k| e.duty[k] / n, |a, b| a + b, 0.0),
        duty_max: per_foot(&|e, k| e.duty[k], f64::max, f64::NEG_INFINITY),
        return_mean: eps.iter().map(|e| e.ret).sum::<f64>() / n,
        walking: eps.iter().filter(|e| ok(e)).count(),
    }
}

/// The walking criterion of the reports: speed within 20 % of the command, every foot lifting
/// at least 2 cm in every gait cycle, every duty factor in [0.3, 0.8].
pub const WALK_TOLERANCE: f64 = 0.2;
pub const WALK_MIN_LIFT: f64 = 0.02;
pub const WALK_DUTY: [f64; 2] = [0.3, 0.8];
/// A policy walks (a success in `compare-learning`) when at least this fraction of the
/// evaluation episodes meet the criterion.
pub const WALK_SUCCESS_FRACTION: f64 = 0.9;

/// Survival of the pushed episodes.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct PushSurvival {
    pub episodes: usize,
    /// Episodes without a failed step and without the trunk touching the ground.
    pub survived: usize,
    pub failed: usize,
    pub trunk_contact: usize,
    /// Episodes that also meet the walking criterion.
    pub walking: usize,
    /// The pushes: force (N), start (s) and duration (s) ranges, one push per episode.
    pub force: [f64; 2],
    pub start: [f64; 2],
    pub duration: [f64; 2],
}

/// [`evaluate_walk`]'s report (`walk.json` of a `compare-learning` run).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct WalkEvaluation {
    /// Commanded speed (m/s) and horizon (s) of every episode.
    pub speed: f64,
    pub seconds: f64,
    /// Episodes meeting the walking criterion (of `episodes`) and whether that is a success
    /// ([`WALK_SUCCESS_FRACTION`]).
    pub episodes: usize,
    pub walking: usize,
    pub walks: bool,
    pub failed: usize,
    /// Mean realized speed (m/s), mean and worst relative tracking error `|v / v* - 1|`.
    pub speed_mean: f64,
    pub speed_error_mean: f64,
    pub speed_error_worst: f64,
    /// Foot names (contact points) and per foot: mean duty factor, smallest per-cycle lift (m).
    pub feet: Vec<String>,
    pub duty_mean: Vec<f64>,
    pub min_lift: Vec<f64>,
    /// Mean trot synchrony (module docs) and cost of transport over the episodes.
    pub trot_sync: f64,
    pub cost_of_transport: f64,
    /// Footfall pattern of the first episode's first second, per foot (`#` contact).
    pub footfall: Vec<String>,
    pub pushed: PushSurvival,
}

/// The walking evaluation of `policy` (module docs): the task's evaluation episodes with every
/// command's speed set to `speed`, and the same number of episodes each with one push of the
/// stand task's ranges (`push`: its force, start and duration; probability one), both over
/// `seconds`.
pub fn evaluate_walk(
    task: &Task,
    policy: Option<&Policy>,
    speed: f64,
    seconds: f64,
    push: &crate::learn::PushSettings,
) -> WalkEvaluation {
    let steps = (seconds / task.settings.dt).round() as usize;
    let eps = measure(task, policy, &task.eval_episodes(), steps, Some(speed));
    let s = summarize(&eps, WALK_TOLERANCE, WALK_MIN_LIFT, WALK_DUTY);
    let mut pushed_task = task.clone();
    pushed_task.spec.push = crate::learn::PushSettings { probability: 1.0, ..push.clone() };
    let peps = measure(&pushed_task, policy, &pushed_task.eval_episodes(), steps, Some(speed));
    let ps = summarize(&peps, WALK_TOLERANCE, WALK_MIN_LIFT, WALK_DUTY);
    let n = eps.len().max(1) as f64;
    let per_second = (1.0 / task.settings.dt).round() as usize;
    let cots: Vec<f64> = eps.iter().map(|e| e.cost_of_transport).filter(|c| c.is_finite()).collect();
    WalkEvaluation {
        speed,
        seconds,
        episodes: eps.len(),
        walking: s.walking,
        walks: s.walking as f64 >= WALK_SUCCESS_FRACTION * eps.len() as f64,
        failed: s.failed,
        speed_mean: s.speed_mean,
        speed_error_mean: s.speed_error_mean,
        speed_error_worst: s.speed_error_worst,
        feet: task.feet.iter().map(|f| task.model.contact_points[f.contact].name.clone()).collect(),
        duty_mean: s.duty_mean,
        min_lift: s.min_lift,
        trot_sync: eps.iter().map(|e| e.trot_sync).sum::<f64>() / n,
        cost_of_transport: if cots.is_empty() { f64::NAN } else { cots.iter().sum::<f64>() / cots.len() as f64 },
        footfall: eps
            .first()
            .map_or(Vec::new(), |e| e.footfall.iter().map(|f| f.chars().take(per_second).collect()).collect()),
        pushed: PushSurvival {
            episodes: peps.len(),
            survived: peps.iter().filter(|e| !e.failed && e.trunk_contact_steps == 0).count(),
            failed: ps.failed,
            trunk_contact: peps.iter().filter(|e| e.trunk_contact_steps > 0).count(),
            walking: ps.walking,
            force: push.force,
            start: push.start,
            duration: push.duration,
        },
    }
}
