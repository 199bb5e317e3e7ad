//! Pull sweeps: at which force does a controller stop rejecting a push on the trunk? Every pull
//! of a sweep (a force magnitude and a horizontal direction, held `duration` seconds from
//! `start` after control takes over) is applied to the same settled start, once per
//! controller: closed-loop MPC ([`run_closed_loop`]) with each contact sensitivity, and the
//! scene's own joint PD as the baseline.
//!
//! A run *recovers* when the base comes back within `tolerance` of where it started within
//! `recovery_time` after the pull ends and stays there to the end of the run (`hold` seconds
//! more; the measure of [`recovery_time`]), the trunk never touches the ground (no contact
//! candidate other than a foot within 1 mm of it) and no simulator step fails. Each run also
//! reports the footfalls it took ([`ContactWatch`]), its largest base error and, for MPC, the
//! replan times and the replans that failed (after which MPC follows its previous plan).

use super::mpc::{recovery_time, run_closed_loop, ContactWatch, MpcError, MpcSettings};
use crate::diff::Sensitivity;
use crate::sim::{Pull, Simulation};
use crate::validate::{Checker, SettingsError};
use nalgebra::Vector3;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;

/// A horizontal pull direction in the world frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullDirection {
    /// +y: sideways.
    Lateral,
    /// +x: along the trunk.
    Forward,
}

impl PullDirection {
    pub fn unit(self) -> Vector3<f64> {
        match self {
            PullDirection::Lateral => Vector3::y(),
            PullDirection::Forward => Vector3::x(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PullDirection::Lateral => "lateral",
            PullDirection::Forward => "forward",
        }
    }
}

impl std::str::FromStr for PullDirection {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "lateral" => Ok(PullDirection::Lateral),
            "forward" => Ok(PullDirection::Forward),
            other => Err(format!("unknown pull direction `{other}`: expected lateral or forward")),
        }
    }
}

/// A sweep (defaults in brackets).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PullSweepSettings {
    /// Force magnitudes (N).
    pub forces: Vec<f64>,
    pub directions: Vec<PullDirection>,
    /// Pull start after control takes over (s) [0.5] and its duration (s) [0.3].
    pub start: f64,
    pub duration: f64,
    /// Recovered: back within this distance (m) [0.02] ...
    pub tolerance: f64,
    /// ... within this long after the pull (s) \[2\] ...
    pub recovery_time: f64,
    /// ... and still there this long later, when the run ends (s, > 0) [0.5].
    pub hold: f64,
    /// The body pulled (at its origin) \[trunk\].
    pub body: String,
}

impl Default for PullSweepSettings {
    fn default() -> Self {
        Self {
            forces: (1..=10).map(|k| 20.0 * k as f64).collect(),
            directions: vec![PullDirection::Lateral, PullDirection::Forward],
            start: 0.5,
            duration: 0.3,
            tolerance: 0.02,
            recovery_time: 2.0,
            hold: 0.5,
            body: "trunk".into(),
        }
    }
}

impl PullSweepSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        let mut c = Checker::new("PullSweepSettings");
        c.check(!self.forces.is_empty() && self.forces.len() <= 1000, "forces", || {
            format!("{} forces: allowed 1 to 1000", self.forces.len())
        })
        .check(self.forces.iter().all(|f| f.is_finite() && *f >= 0.0), "forces", || {
            "every force must be finite and non-negative".into()
        })
        .check(!self.directions.is_empty(), "directions", || "no direction".into())
        .non_negative("start", self.start)
        .positive("duration", self.duration)
        .positive("tolerance", self.tolerance)
        .positive("recovery_time", self.recovery_time)
        // A run must outlast the recovery window, or a run that is still off at its end counts
        // as recovered (`recovery_time` measures up to the last step).
        .positive("hold", self.hold);
        c.finish()
    }

    /// Closed-loop time of every run (s).
    pub fn run_time(&self) -> f64 {
        self.start + self.duration + self.recovery_time + self.hold
    }

    /// Parses `FROM:TO:STEP` (N) into forces, `TO` included.
    pub fn parse_forces(s: &str) -> Result<Vec<f64>, String> {
        let parts: Vec<f64> = s
            .split(':')
            .map(|p| p.trim().parse::<f64>().map_err(|e| format!("`{p}` in `{s}`: {e}")))
            .collect::<Result<_, _>>()?;
        let [from, to, step] = parts[..] else {
            return Err(format!("`{s}`: expected FROM:TO:STEP, e.g. 20:200:20"));
        };
        if !(from.is_finite() && to.is_finite() && step.is_finite() && step > 0.0 && from >= 0.0 && to >= from) {
            return Err(format!("`{s}`: need 0 <= FROM <= TO and STEP > 0"));
        }
        let n = ((to - from) / step + 1e-9).floor() as usize + 1;
        if n > 1000 {
            return Err(format!("`{s}` gives {n} forces: at most 1000"));
        }
        Ok((0..n).map(|k| from + step * k as f64).collect())
    }
}

/// Who controls a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SweepController {
    /// The simulation's own controller (the scene's joint PD).
    Baseline,
    Mpc(Sensitivity),
}

impl SweepController {
    pub fn name(&self) -> String {
        match self {
            SweepController::Baseline => "joint PD".into(),
            SweepController::Mpc(s) => format!("MPC {}", s.name()),
        }
    }
}

/// One run of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PullOutcome {
    pub controller: String,
    pub direction: PullDirection,
    pub force_n: f64,
    pub recovered: bool,
    /// Time after the pull from which the base stayed within tolerance (s).
    pub recovery_time_s: Option<f64>,
    pub max_base_error_m: f64,
    pub final_base_error_m: f64,
    /// Footfalls over all feet (lift-off of at least 1 cm, then touchdown).
    pub footfalls: usize,
    pub trunk_touched: bool,
    /// Largest excursion of a joint beyond its URDF range (rad or m; `ContactWatch`).
    #[serde(default)]
    pub joint_range_excess: f64,
    pub failed_steps: usize,
    /// The failed step's status and time after control took over (s); the run ended there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_step: Option<(crate::sim::StepStatus, f64)>,
    /// MPC only (0 or NaN for the baseline): replans that failed, replans that started from a
    /// sampled trot (`MpcSettings::step_sampling`), and replan wall times (ms).
    pub failed_replans: usize,
    #[serde(default)]
    pub sampled_starts: usize,
    pub solve_ms_median: f64,
    pub solve_ms_p95: f64,
    pub solve_ms_max: f64,
}

fn pull_of(sim: &Simulation, s: &PullSweepSettings, direction: PullDirection, force: f64) -> Result<Pull, MpcError> {
    let body = sim
        .model
        .body_index(&s.body)
        .ok_or_else(|| MpcError::Robot(format!("{} has no body `{}` to pull", sim.model.name, s.body)))?;
    Ok(Pull { body, point: Vector3::zeros(), force: direction.unit() * force, start: s.start, duration: s.duration })
}

/// The settings `recovery_time` measures a sweep run with.
fn recovery_settings(mpc: &MpcSettings, s: &PullSweepSettings) -> MpcSettings {
    MpcSettings { recovery_tolerance: s.tolerance, recovery_time: s.recovery_time, ..mpc.clone() }
}

/// One run: `controller` on a copy of `start` (settled, pulls removed) under one pull.
pub fn run_pull(
    start: &Simulation,
    controller: SweepController,
    mpc: &MpcSettings,
    s: &PullSweepSettings,
    direction: PullDirection,
    force: f64,
    cancel: Option<&AtomicBool>,
) -> Result<PullOutcome, MpcError> {
    let pull = pull_of(start, s, direction, force)?;
    let measure = recovery_settings(mpc, s);
    let pull_end = s.start + s.duration;
    match controller {
        SweepController::Mpc(sensitivity) => {
            let mut settings = MpcSettings { duration: s.run_time(), ..measure };
            settings.set_sensitivity(sensitivity);
            let r = run_closed_loop("pull sweep", start.clone(), &[pull], &settings, cancel, &mut |_| {})?;
            let m = r.summary;
            Ok(PullOutcome {
                controller: controller.name(),
                direction,
                force_n: force,
                recovered: m.recovered && !m.trunk_touched,
                recovery_time_s: m.recovery_time_s,
                max_base_error_m: m.max_base_error_m,
                final_base_error_m: m.final_base_error_m,
                footfalls: m.footfalls.values().sum(),
                trunk_touched: m.trunk_touched,
                joint_range_excess: m.joint_range_excess,
                failed_steps: m.failed_steps,
                failed_step: m.failed_step,
                failed_replans: m.failed_replans,
                sampled_starts: m.sampled_starts,
                solve_ms_median: m.solve_ms_median,
                solve_ms_p95: m.solve_ms_p95,
                solve_ms_max: m.solve_ms_max,
            })
        }
        SweepController::Baseline => {
            let mut sim = start.clone();
            let t0 = sim.t;
            let target = Vector3::new(sim.q[0], sim.q[1], sim.q[2]);
            sim.pulls = vec![Pull { start: pull.start + t0, ..pull }];
            let mut watch = ContactWatch::new(&sim);
            let steps = (s.run_time() / sim.settings.dt).round() as usize;
            let (mut errors, mut failed_step) = (Vec::with_capacity(steps), None);
            for _ in 0..steps {
                let status = sim.step().status;
                if !status.advanced() {
                    failed_step = Some((status, sim.t - t0));
                    break;
                }
                watch.record(&sim);
                errors.push((sim.t - t0, (Vector3::new(sim.q[0], sim.q[1], sim.q[2]) - target).norm()));
            }
            let failed_steps = usize::from(failed_step.is_some());
            let recovery = if failed_steps > 0 { None } else { recovery_time(&errors, pull_end, &measure) };
            Ok(PullOutcome {
                controller: controller.name(),
                direction,
                force_n: force,
                recovered: recovery.is_some() && !watch.trunk_touched,
                recovery_time_s: recovery,
                max_base_error_m: errors.iter().map(|e| e.1).fold(0.0, f64::max),
                final_base_error_m: errors.last().map_or(f64::NAN, |e| e.1),
                footfalls: watch.counter.total(),
                trunk_touched: watch.trunk_touched,
                joint_range_excess: watch.joint_range_excess,
                failed_steps,
                failed_step,
                failed_replans: 0,
                sampled_starts: 0,
                solve_ms_median: f64::NAN,
                solve_ms_p95: f64::NAN,
                solve_ms_max: f64::NAN,
            })
        }
    }
}

/// Every pull of `s` for every controller, from `start`; `observe` sees each run as it ends.
pub fn pull_sweep(
    start: &Simulation,
    controllers: &[SweepController],
    mpc: &MpcSettings,
    s: &PullSweepSettings,
    cancel: Option<&AtomicBool>,
    observe: &mut dyn FnMut(&PullOutcome),
) -> Result<Vec<PullOutcome>, MpcError> {
    s.validate()?;
    mpc.validate()?;
    let mut start = start.clone();
    start.pulls.clear();
    let mut out = Vec::new();
    for &direction in &s.directions {
        for c in controllers {
            for &f in &s.forces {
                let r = run_pull(&start, *c, mpc, s, direction, f, cancel)?;
                observe(&r);
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// The largest force of `direction` up to which `controller` recovered from every pull (0 if
/// it failed the smallest).
pub fn largest_recovered(outcomes: &[PullOutcome], controller: &str, direction: PullDirection) -> f64 {
    let mut runs: Vec<&PullOutcome> =
        outcomes.iter().filter(|o| o.controller == controller && o.direction == direction).collect();
    runs.sort_by(|a, b| a.force_n.total_cmp(&b.force_n));
    runs.iter().take_while(|o| o.recovered).last().map_or(0.0, |o| o.force_n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_ranges_parse_inclusively_and_reject_nonsense() {
        assert_eq!(PullSweepSettings::parse_forces("20:200:20").unwrap().len(), 10);
        assert_eq!(PullSweepSettings::parse_forces("20:200:20").unwrap()[9], 200.0);
        assert_eq!(PullSweepSettings::parse_forces("50:50:10").unwrap(), vec![50.0]);
        for bad in ["20:200", "20:10:5", "0:10:0", "a:b:c", "0:1e9:1"] {
            assert!(PullSweepSettings::parse_forces(bad).is_err(), "{bad}");
        }
        assert_eq!("lateral".parse::<PullDirection>(), Ok(PullDirection::Lateral));
        assert!("up".parse::<PullDirection>().is_err());
    }
}
