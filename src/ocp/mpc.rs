//! Contact-implicit MPC (DESIGN 5): a receding horizon of contact-simulator knots, replanned
//! every control period (one knot) from the measured state with a fixed DDP iteration budget,
//! warm-started by shifting the previous solution one knot.
//!
//! Between replans the simulator (at its own, finer step) applies the plan's first control with
//! its feedback gain, `u = u_0 + K_0 (x (-) x_nom(s))`, where `x_nom(s) = x_0 (+) s (x_1 (-) x_0)`
//! interpolates the plan's first knot at the fraction `s` of the period; clamped to the effort
//! limits. The controls are torques (the knots have no PD: `ContactAction`'s convention), so the
//! simulation runs with `Controller::None` and the torque as its control offset.
//!
//! [`MpcDriver`] is that loop as a controller of a running [`Simulation`], one simulator step at a
//! time: it takes over from the simulation's controller at its present state (target: the
//! present base pose, or one set later), and gives the controller back on release. The app's
//! Control window drives the robot with it; [`run_closed_loop`] runs it against a
//! [`Simulation`] with the scene's pulls, which MPC does not know about (an unmodelled
//! disturbance), and measures the base's tracking error.
//! A replan that fails (its rollout or derivatives non-finite, from the shifted warm start and
//! again from the hold-the-stance guess) does not stop the loop: MPC keeps its previous plan,
//! shifted one knot (states, controls and feedback gains), follows it, and counts the failure
//! (`CycleInfo::kept_previous`, `MpcSummary::failed_replans`). A simulator step that fails ends
//! a closed-loop run as not recovered (`MpcSummary::failed_steps`) instead of discarding it.
//!
//! **Step sampling** (`MpcSettings::step_sampling`, off by default). A DDP of a few iterations
//! from a standing warm start does not find a step: lifting a foot raises the cost before the
//! step pays off, so the plan leans and slides instead. With sampling on, each replan also rolls
//! out eight trots of the scene's joint PD (the controller MPC replaced) from the measured state,
//! each leg's posture reference lifting it in turn as [`super::cito::trot_guess`] does for
//! CITO: either diagonal pair first, with a sideways hip sweep `+-side` or a fore-aft thigh
//! sweep `+-stride`, on a gait clock that runs from engagement (so a trot chosen at one replan
//! continues at the next). Each torque sequence is rolled out open loop through the horizon's knots,
//! and DDP starts from the cheapest of them and the shifted plan (a one-step predictive
//! sampling: Howell et al., *Predictive Sampling: Real-time Behaviour Synthesis with MuJoCo*,
//! 2022, sample around the nominal plan with noise; here the samples are gait primitives). The
//! cost is eight PD rollouts and eight cost rollouts per replan.
//!
//! **Budgeted replans** (three settings, all off by default), for a replan that must fit the
//! control period. `warm_start_contacts` starts every knot's contact solve from that knot's
//! last solution (the interior-point solver's warm start) instead of cold; CITO keeps them cold
//! so that replaying a plan's controls reproduces its states bit for bit, which MPC never does.
//! `stop_at_rejection` ends a replan at its first rejected line search: the next iteration
//! would only raise the regularization and try nearly the same steps (`super::ddp`, "Budgeted
//! solves"). `trial_abort` stops a line-search trial whose running cost already exceeds that
//! multiple of the plan's cost (it could only be rejected).
//!
//! **Lean replans** (four more, also off by default) cut the trials and the contact solves
//! themselves. `relative_tolerance` ends a replan once a full step's expected gain is below that
//! fraction of the plan's cost: at the steady stance the model predicts gains of a few 1e-6 of
//! the cost that the rollouts cannot confirm, and each such line search cost four rejected
//! trials. `adaptive_step` starts every line search from twice the last accepted step, kept from
//! replan to replan: through a shove successive iterations accept similar short steps (`1/8`,
//! `1/8`, `1/4`), each otherwise found by three or four halvings from 1. `contact_tolerance`
//! loosens the horizon model's contact solves (the warm-started interior point then stops a
//! couple of iterations earlier); the simulated robot keeps the scene's solver. The first two
//! are in `super::ddp`, "Budgeted solves"; all are in `scenes/mpc_step_lean.ron`.
//!
//! `contact_warm_start_mu` re-centers each warm-started horizon contact solve at a larger
//! complementarity. A knot's last solution belongs to the previous iterate's state, not this
//! one's: re-centered at the solver's default `1e-6` (normalized) the interior point starts
//! near the cone boundaries of the wrong active set, and the horizon's contact solves took 8.1
//! iterations on average, more than the 6.4 of the same run with warm starts off (the lean
//! scene's own run, first 1.5 s). Re-centered at `1e-2` they take 6.2, and fewer warm starts
//! fail into a cold restart (56 against 97 of about 26 000). The plant's warm starts
//! (consecutive 2 ms steps, 3.4 iterations) keep the default.
//!
//! **Feedback warm starts** (`feedback_warm_start`, off by default). A replan starts from the
//! previous plan shifted one knot. Rolled out open loop from the measured state, its controls
//! drift away from the states they were planned for as soon as the measurement differs from the
//! prediction, as it does through a shove. With `feedback_warm_start` the planned states are
//! shifted too, and the warm start is the previous plan's policy rolled out in closed loop,
//! `u_t = clamp(u_t + K_t (x^_t (-) x_t))` with its feedback gains
//! (`Ddp::roll_out_policy_or_cheapest`: the forward pass at step 0; the sampled trots still
//! compete with it, open loop). DDP then starts nearer its optimum: with two iterations per
//! replan instead of three, the lean scene's own run recovers with it and not without it
//! (`scenes/mpc_step_feedback.ron`; the README's *Feedback warm starts* has its recoveries from
//! perturbed starts and its replan times).
//!
//! *Recovered* means: the base position is within `recovery_tolerance` of its target at every
//! simulator step from at most `recovery_time` after the last pull ends to the end of the run
//! (which must last that long).

use super::cito::{
    check_horizon, default_knot_dt, default_ocp_horizon, default_settle, hold_torque, pose_cost, trot_guess,
    CitoProblem, CitoWeights, TrotGuess,
};
use super::ddp::{shift, Ddp, Settings, Status};
use crate::diff::{Sensitivity, SensitivityKind};
use crate::model::configuration::free_flyer_placement;
use crate::model::JointKind;
use crate::sim::{Controller, Pull, Simulation};
use crate::validate::{Checker, SettingsError};
use nalgebra::{DVector, Matrix3, Vector3};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

fn default_mpc_duration() -> f64 {
    4.0
}
fn default_mpc_iterations() -> usize {
    1
}
fn default_recovery_tolerance() -> f64 {
    0.02
}
fn default_recovery_time() -> f64 {
    2.0
}

/// Closed-loop MPC: hold (or move to) a base pose against disturbances, replanning every knot.
/// A scene's `mpc` section is this struct, field for field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MpcSettings {
    /// Simulated time under the scene's controller before MPC takes over (s) \[1\]; the pulls'
    /// `start` counts from the moment MPC takes over.
    #[serde(default = "default_settle", deserialize_with = "crate::validate::non_negative")]
    pub settle: f64,
    /// Receding horizon (s) [0.3] and knot step (s) [0.01]; the control period is one knot.
    #[serde(default = "default_ocp_horizon", deserialize_with = "crate::validate::positive")]
    pub horizon: f64,
    #[serde(default = "default_knot_dt", deserialize_with = "crate::validate::time_step")]
    pub knot_dt: f64,
    /// DDP iterations per control period \[1\].
    #[serde(default = "default_mpc_iterations")]
    pub iterations: usize,
    /// Closed-loop duration (s) \[4\].
    #[serde(default = "default_mpc_duration", deserialize_with = "crate::validate::positive")]
    pub duration: f64,
    #[serde(default)]
    pub weights: CitoWeights,
    #[serde(default)]
    pub sensitivity: SensitivityKind,
    #[serde(default = "crate::diff::sensitivity::default_kappa", deserialize_with = "crate::validate::positive")]
    pub kappa: f64,
    #[serde(default = "crate::diff::sensitivity::default_delta", deserialize_with = "crate::validate::non_negative")]
    pub delta: f64,
    /// Recovered: the base is within this distance of its target (m) [0.02] ...
    #[serde(default = "default_recovery_tolerance", deserialize_with = "crate::validate::positive")]
    pub recovery_tolerance: f64,
    /// ... from at most this long after the last pull ends until the end of the run (s) \[2\].
    #[serde(default = "default_recovery_time", deserialize_with = "crate::validate::positive")]
    pub recovery_time: f64,
    /// Stepping warm starts sampled at every replan \[none\] (module docs, "Step sampling").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_sampling: Option<StepSampling>,
    /// Warm-start each knot's contact solve from its last solution \[false\] (module docs,
    /// "Budgeted replans").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warm_start_contacts: bool,
    /// End a replan at its first rejected line search \[false\].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop_at_rejection: bool,
    /// Stop a line-search trial once its running cost exceeds this multiple of the plan's
    /// cost, at least `ddp::MIN_TRIAL_ABORT` (1.01) \[none\].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial_abort: Option<f64>,
    /// Also end a replan when a full step's expected improvement is below this fraction of the
    /// plan's cost \[none\] (`ddp::Settings::relative_tolerance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_tolerance: Option<f64>,
    /// Start each line search from twice the last accepted step, kept from replan to replan
    /// \[false\] (`ddp::Settings::adaptive_step`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adaptive_step: bool,
    /// Convergence tolerance of the horizon model's contact solves, in place of the scene's
    /// (`contact::solver::Settings::tolerance`, default 1e-8) \[none\]. The simulated plant keeps
    /// the scene's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_tolerance: Option<f64>,
    /// Complementarity a warm-started horizon contact solve is re-centered at, in place of the
    /// scene's (`contact::solver::Settings::warm_start_mu`, default 1e-6) \[none\] (module docs,
    /// "Lean replans"). The simulated plant keeps the scene's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_warm_start_mu: Option<f64>,
    /// Start each replan from the previous plan's policy rolled out in closed loop from the
    /// measured state, `u_t + K_t (x^_t (-) x_t)` along the shifted states, instead of its
    /// controls open loop \[false\] (module docs, "Feedback warm starts").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub feedback_warm_start: bool,
}

/// Predictive sampling of stepping warm starts (module docs): at every replan the scene's joint
/// PD trots from the measured state in each of `2 x 4` ways (either diagonal pair first; a
/// sideways hip sweep of `+-side` or a fore-aft thigh sweep of `+-stride`, as
/// [`super::cito::TrotGuess`]), and DDP starts from the cheapest of those torque sequences and
/// the shifted plan.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StepSampling {
    /// Steps per second of each leg (Hz) \[3\].
    pub frequency: f64,
    /// Thigh lift (rad) \[0.4\].
    pub lift: f64,
    /// Hip abduction sweep (rad) \[0.3\].
    pub side: f64,
    /// Thigh fore-aft sweep (rad) \[0.3\].
    pub stride: f64,
    /// Trots rolled out per replan, 1 to 8 \[8: all\]; fewer take the eight in turn (replan `r`
    /// rolls out `r per_replan`, ... modulo 8), which the gait clock keeps consistent.
    pub per_replan: usize,
}

impl Default for StepSampling {
    fn default() -> Self {
        Self { frequency: 3.0, lift: 0.4, side: 0.3, stride: 0.3, per_replan: 8 }
    }
}

impl StepSampling {
    /// The trots sampled at time `t` (s since MPC took over), in order: their gait clock runs
    /// from engagement, so a trot chosen at one replan continues at the next instead of lifting
    /// its first pair again.
    pub fn candidates(&self, t: f64) -> Vec<TrotGuess> {
        let mut out = Vec::with_capacity(8);
        let clock = std::f64::consts::TAU * self.frequency * t;
        for phase in [clock, clock + std::f64::consts::PI] {
            for (side, stride) in [(self.side, 0.0), (-self.side, 0.0), (0.0, self.stride), (0.0, -self.stride)] {
                out.push(TrotGuess { frequency: self.frequency, lift: self.lift, stride, side, phase });
            }
        }
        out
    }

    /// The torque sequences of [`StepSampling::candidates`] at time `t`: `sim`'s controller (a
    /// joint PD) trotting from its present state over `knots` knots of `knot_dt`, pulls removed;
    /// none if the controller is not a joint PD or the legs are not named as
    /// [`super::cito::trot_guess`] needs.
    pub fn trots(&self, sim: &Simulation, t: f64, knots: usize, knot_dt: f64) -> Vec<Vec<DVector<f64>>> {
        StepSampling { per_replan: 8, ..*self }.trots_at(sim, t, 0, knots, knot_dt).1
    }

    /// The trots replan `replan` rolls out (`per_replan` of them, in turn) as in
    /// [`StepSampling::trots`], each with its index into [`StepSampling::candidates`].
    pub fn trots_at(
        &self,
        sim: &Simulation,
        t: f64,
        replan: usize,
        knots: usize,
        knot_dt: f64,
    ) -> (Vec<usize>, Vec<Vec<DVector<f64>>>) {
        let all = self.candidates(t);
        let n = self.per_replan.clamp(1, all.len());
        let (mut index, mut trots) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for j in 0..n {
            let i = (replan * n + j) % all.len();
            if let Ok(u) = trot_guess(sim, knots, knot_dt, all[i]) {
                index.push(i);
                trots.push(u);
            }
        }
        (index, trots)
    }
}

/// The defaults (those of an empty `mpc: ()` in a scene file).
impl Default for MpcSettings {
    fn default() -> Self {
        Self {
            settle: default_settle(),
            horizon: default_ocp_horizon(),
            knot_dt: default_knot_dt(),
            iterations: default_mpc_iterations(),
            duration: default_mpc_duration(),
            weights: CitoWeights::default(),
            sensitivity: SensitivityKind::default(),
            kappa: crate::diff::DEFAULT_KAPPA,
            delta: crate::diff::DEFAULT_DELTA,
            recovery_tolerance: default_recovery_tolerance(),
            recovery_time: default_recovery_time(),
            step_sampling: None,
            warm_start_contacts: false,
            stop_at_rejection: false,
            trial_abort: None,
            relative_tolerance: None,
            adaptive_step: false,
            contact_tolerance: None,
            contact_warm_start_mu: None,
            feedback_warm_start: false,
        }
    }
}

impl MpcSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        let mut c = Checker::new("MpcSettings");
        c.non_negative("settle", self.settle)
            .count("iterations", self.iterations, 1, 10_000)
            .positive("duration", self.duration)
            .positive("kappa", self.kappa)
            .non_negative("delta", self.delta)
            .positive("recovery_tolerance", self.recovery_tolerance)
            .positive("recovery_time", self.recovery_time);
        check_horizon(&mut c, self.horizon, self.knot_dt);
        if let Some(t) = &self.step_sampling {
            c.positive("step_sampling.frequency", t.frequency)
                .non_negative("step_sampling.lift", t.lift)
                .finite("step_sampling.side", t.side)
                .finite("step_sampling.stride", t.stride)
                .count("step_sampling.per_replan", t.per_replan, 1, 8);
        }
        if let Some(f) = self.trial_abort {
            c.check(super::ddp::valid_trial_abort(Some(f)), "trial_abort", || {
                format!("{f} is out of range: allowed [{}, inf) or none", super::ddp::MIN_TRIAL_ABORT)
            });
        }
        if let Some(r) = self.relative_tolerance {
            c.check(super::ddp::valid_relative_tolerance(Some(r)), "relative_tolerance", || {
                format!("{r} is out of range: allowed (0, 1) or none")
            });
        }
        if let Some(t) = self.contact_tolerance {
            // The solver's own range, and its central-path target must stay below it.
            let solver = crate::contact::solver::Settings::default();
            c.check(t > 0.0 && t < 1.0 && t >= solver.kappa_target, "contact_tolerance", || {
                format!("{t} is out of range: allowed [{}, 1) or none", solver.kappa_target)
            });
        }
        if let Some(m) = self.contact_warm_start_mu {
            c.check(crate::contact::solver::valid_warm_start_mu(m), "contact_warm_start_mu", || {
                format!("{m} is out of range: allowed (0, 1] or none")
            });
        }
        c.finish()?;
        self.weights.validate().map_err(|e| e.within("MpcSettings", "weights"))
    }

    /// The sensitivity the settings name, with their `kappa` and `delta`.
    pub fn sensitivity(&self) -> Sensitivity {
        self.sensitivity.with(self.kappa, self.delta)
    }

    /// Sets the sensitivity (family and parameters).
    pub fn set_sensitivity(&mut self, s: Sensitivity) {
        s.store(&mut self.sensitivity, &mut self.kappa, &mut self.delta);
    }
}

/// Why MPC could not take over or go on.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MpcError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("MPC needs an actuated floating-base robot; `{0}` is not one")]
    Robot(String),
    #[error("the knot step {knot_dt} s is not a multiple of the simulation's time step {dt} s")]
    KnotStep { knot_dt: f64, dt: f64 },
    #[error("MPC has not been engaged")]
    NotEngaged,
}

/// Simulator steps per knot: `knot_dt / dt`, which must be a whole number.
fn substeps(knot_dt: f64, dt: f64) -> Result<usize, MpcError> {
    let n = (knot_dt / dt).round().max(1.0) as usize;
    if ((n as f64) * dt - knot_dt).abs() > 1e-9 {
        return Err(MpcError::KnotStep { knot_dt, dt });
    }
    Ok(n)
}

/// The values in ascending order.
fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The nearest-rank `p` quantile of the ascending `sorted` (NaN if empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        f64::NAN
    } else {
        sorted[((p * (sorted.len() - 1) as f64).round()) as usize]
    }
}

/// How long after `pull_end` the base error stayed within `settings.recovery_tolerance` for
/// good (module docs), given `(time, base error)` per simulator step from the moment control
/// took over; `None` if it did not recover within `settings.recovery_time` or the trace ends
/// before `pull_end + recovery_time`. The same measure applies to any controller (the tests
/// hold the scene's own PD to it).
pub fn recovery_time(errors: &[(f64, f64)], pull_end: f64, settings: &MpcSettings) -> Option<f64> {
    let end = errors.last().map_or(0.0, |e| e.0);
    let last_bad =
        errors.iter().filter(|e| e.1 > settings.recovery_tolerance).map(|e| e.0).fold(f64::NEG_INFINITY, f64::max);
    let recovery = (last_bad - pull_end).max(0.0);
    (end + 1e-9 >= pull_end + settings.recovery_time && recovery <= settings.recovery_time).then_some(recovery)
}

/// One replan.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CycleInfo {
    /// Simulated time at the replan (s, from the MPC's start).
    pub t: f64,
    pub status: Status,
    pub iterations: usize,
    /// Cost of the plan after the replan.
    pub cost: f64,
    /// Wall time of the replan (ms).
    pub solve_ms: f64,
    /// Base position error at the replan (m).
    pub base_error_m: f64,
    /// Knot derivatives of the replan from a fallback sensitivity, or from an unconverged
    /// backward solve (`ocp::Info`).
    #[serde(default)]
    pub fallback_jacobians: usize,
    #[serde(default)]
    pub unconverged_jacobians: usize,
    /// The replan failed and MPC follows its previous plan, shifted (module docs).
    #[serde(default)]
    pub kept_previous: bool,
    /// Forward passes of the replan's line searches (`ocp::Info::line_search_trials`): each
    /// costs a rollout of the horizon, so beyond the iterations they are where a replan's time
    /// varies.
    #[serde(default)]
    pub line_search_trials: usize,
    /// The sampled trot the replan started from (index into [`StepSampling::candidates`]), if
    /// one beat the shifted plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_start: Option<usize>,
}

/// The receding-horizon controller: the shooting problem and its warm start.
#[derive(Clone)]
pub struct Mpc {
    pub ddp: Ddp,
    /// DDP iterations per replan.
    pub iterations: usize,
    /// Control period = knot step (s).
    pub period: f64,
    /// The fallback guess (nu).
    pub u_hold: DVector<f64>,
    /// Start each replan from the shifted policy rolled out in closed loop (module docs,
    /// "Feedback warm starts"); default false: the shifted controls, open loop.
    pub feedback_warm_start: bool,
    /// The horizon problem (for reports of the plan).
    problem: CitoProblem,
}

impl Mpc {
    /// A controller over `problem`'s horizon (its `x0` and `u_guess` start the warm start;
    /// `warmup` iterations are run on that first problem).
    pub fn new(problem: &CitoProblem, iterations: usize, warmup: usize) -> Mpc {
        let mut ddp = Ddp::new(problem.shooting(), Settings { max_iterations: warmup.max(1), ..problem.ddp });
        let guess = vec![problem.u_guess.clone(); problem.knots];
        ddp.solve(Some(&guess), None);
        ddp.settings.max_iterations = iterations.max(1);
        Mpc {
            ddp,
            iterations: iterations.max(1),
            period: problem.settings.dt,
            u_hold: problem.u_guess.clone(),
            feedback_warm_start: false,
            problem: problem.clone(),
        }
    }

    /// Shifts the previous solution one knot (the last control repeated) and replans from `x`.
    /// A replan whose rollout or derivatives fail (`NonFinite`) is retried once from the
    /// hold-the-stance guess; if that fails too, the previous plan, shifted one knot, is put
    /// back (status still `NonFinite`: the caller counts it and follows the kept plan).
    pub fn replan(&mut self, x: &DVector<f64>, cancel: Option<&AtomicBool>) -> super::Info {
        self.replan_sampled(x, &[], cancel).0
    }

    /// [`Mpc::replan`] that first compares the shifted plan with the torque sequences
    /// `candidates` by their rolled-out cost from `x` and starts DDP from the cheapest; returns
    /// the index of the candidate it started from, if one beat the shifted plan.
    pub fn replan_sampled(
        &mut self,
        x: &DVector<f64>,
        candidates: &[Vec<DVector<f64>>],
        cancel: Option<&AtomicBool>,
    ) -> (super::Info, Option<usize>) {
        let kept = (self.ddp.xs.clone(), self.ddp.us.clone(), self.ddp.gains().to_vec());
        self.shift_to(x);
        let (info, chosen) = if candidates.is_empty() && !self.feedback_warm_start {
            (self.ddp.solve(None, cancel), None)
        } else {
            // The shifted plan first (its controls open loop, or with a feedback warm start its
            // policy in closed loop), so it wins ties; the kept rollout is the solve's start.
            let shifted = self.ddp.us.clone();
            let cheapest = if self.feedback_warm_start {
                let starts: Vec<&[DVector<f64>]> = candidates.iter().map(|c| &c[..]).collect();
                self.ddp.roll_out_policy_or_cheapest(&starts)
            } else {
                let starts: Vec<&[DVector<f64>]> =
                    std::iter::once(&shifted[..]).chain(candidates.iter().map(|c| &c[..])).collect();
                self.ddp.roll_out_cheapest(&starts)
            };
            match cheapest {
                Some((j, _)) => (self.ddp.solve_rolled_out(cancel), j.checked_sub(1)),
                // Every start failed: the solve reports it from the shifted plan.
                None => (self.ddp.solve(Some(&shifted), cancel), None),
            }
        };
        if info.status != Status::NonFinite {
            return (info, chosen);
        }
        let guess = vec![self.u_hold.clone(); self.ddp.us.len()];
        let info = self.ddp.solve(Some(&guess), cancel);
        if info.status == Status::NonFinite {
            let (mut xs, mut us, mut gains) = kept;
            shift(&mut xs);
            shift(&mut us);
            shift(&mut gains);
            self.ddp.restore(&xs, &us, &gains);
        }
        (info, chosen)
    }

    /// The warm start of a replan from `x`: the previous controls and gains (and, for a
    /// feedback warm start, the states they track) shifted one knot.
    fn shift_to(&mut self, x: &DVector<f64>) {
        if self.feedback_warm_start {
            shift(&mut self.ddp.xs);
        }
        shift(&mut self.ddp.us);
        self.ddp.shift_gains();
        self.ddp.problem.x0.copy_from(x);
        self.ddp.settings.max_iterations = self.iterations;
    }

    /// Moves the base-pose target; the warm start is kept, so the next replans walk the plan
    /// toward the new target.
    pub fn set_target(&mut self, position: Vector3<f64>, rotation: Matrix3<f64>) {
        self.problem.cost.base_position = position;
        self.problem.cost.base_rotation = rotation;
        let shooting = self.problem.shooting();
        self.ddp.problem.running = shooting.running;
        self.ddp.problem.terminal = shooting.terminal;
    }

    /// The base-pose target.
    pub fn target(&self) -> (Vector3<f64>, Matrix3<f64>) {
        (self.problem.cost.base_position, self.problem.cost.base_rotation)
    }

    /// Knots in the horizon.
    pub fn knots(&self) -> usize {
        self.problem.knots
    }

    /// The feedback control at state `x`, a fraction `s` in `[0, 1)` into the period (module
    /// docs), into `u` (nu).
    pub fn control(&self, x: &DVector<f64>, s: f64, u: &mut DVector<f64>) {
        let m = &self.ddp.problem.running[0];
        let (x0, x1) = (&self.ddp.xs[0], &self.ddp.xs[1]);
        let mut d = DVector::zeros(m.ndx());
        m.difference(x0, x1, &mut d);
        let mut nominal = DVector::zeros(m.nx());
        m.integrate(x0, &(d * s), &mut nominal);
        let mut dx = DVector::zeros(m.ndx());
        m.difference(&nominal, x, &mut dx);
        u.copy_from(&self.ddp.us[0]);
        if let Some(k) = self.ddp.gains().first() {
            if k.nrows() == u.len() && k.ncols() == dx.len() {
                *u += k * dx;
            }
        }
        if u.iter().any(|x| !x.is_finite()) {
            // No usable plan (a warm-up and every replan since failed): hold the stance.
            u.copy_from(&self.u_hold);
        }
        if let Some((lo, hi)) = m.control_bounds() {
            for j in 0..u.len() {
                u[j] = u[j].clamp(lo[j], hi[j]);
            }
        }
    }

    /// The plan's states (T + 1), e.g. to draw the planned base poses.
    pub fn planned_states(&self) -> &[DVector<f64>] {
        &self.ddp.xs
    }

    /// The current plan replayed from its start through the knot step: base pose, foot
    /// positions, gaps, impulses and contact flags per knot (as [`super::cito::evaluate`]).
    pub fn planned_knots(&self) -> Vec<super::cito::Knot> {
        let mut p = self.problem.clone();
        p.x0.copy_from(&self.ddp.problem.x0);
        let info = super::Info {
            status: Status::MaxIterations,
            iterations: 0,
            cost: self.ddp.cost(),
            history: vec![],
            fallback_jacobians: 0,
            unconverged_jacobians: 0,
            line_search_trials: 0,
        };
        super::cito::evaluate(&p, &self.ddp.xs, &self.ddp.us, info, 0.0).knots
    }
}

/// MPC driving a running [`Simulation`] (module docs): call [`MpcDriver::engage`] once, then
/// [`MpcDriver::before_step`] before every `sim.step()`; it replans every `knot_dt` and writes
/// the feedback torque into `sim.u_offset` at every step.
#[derive(Clone)]
pub struct MpcDriver {
    pub spec: MpcSettings,
    pub sensitivity: Sensitivity,
    mpc: Option<Mpc>,
    /// Simulator steps per control period, and steps since the last replan.
    substeps: usize,
    phase: usize,
    /// Simulated time at engagement (s), and replans since.
    t0: f64,
    replans: usize,
    /// A target set before engagement or since the last replan.
    pending: Option<(Vector3<f64>, Matrix3<f64>)>,
    /// The controller and control offset MPC replaced.
    replaced: Option<(Controller, DVector<f64>)>,
    x: DVector<f64>,
    u: DVector<f64>,
}

impl MpcDriver {
    /// A driver with `settings` (checked at [`MpcDriver::engage`]).
    pub fn new(settings: MpcSettings) -> Self {
        Self {
            sensitivity: settings.sensitivity(),
            spec: settings,
            mpc: None,
            substeps: 1,
            phase: 0,
            t0: 0.0,
            replans: 0,
            pending: None,
            replaced: None,
            x: DVector::zeros(0),
            u: DVector::zeros(0),
        }
    }

    /// Takes over at the simulation's present state: builds the horizon problem toward the
    /// present base pose (or the target set so far), warms it up and switches the simulation's
    /// controller off (the torques come from the plan).
    pub fn engage(&mut self, sim: &mut Simulation) -> Result<(), MpcError> {
        self.spec.validate()?;
        let m = &*sim.model;
        if m.nq < 7 || m.nv < 6 || m.nu == 0 {
            return Err(MpcError::Robot(m.name.clone()));
        }
        let substeps = substeps(self.spec.knot_dt, sim.settings.dt)?;
        let u_hold = hold_torque(sim);
        let mut problem = horizon_problem(sim, &u_hold, &self.spec, self.sensitivity);
        if let Some((p, r)) = self.pending.take() {
            problem.cost.base_position = p;
            problem.cost.base_rotation = r;
        }
        let mut mpc = Mpc::new(&problem, self.spec.iterations, 10);
        mpc.feedback_warm_start = self.spec.feedback_warm_start;
        self.mpc = Some(mpc);
        self.substeps = substeps;
        self.phase = 0;
        self.t0 = sim.t;
        self.replans = 0;
        self.x = DVector::zeros(m.nq + m.nv);
        self.u = DVector::zeros(m.nu);
        self.replaced = Some((sim.controller.clone(), sim.u_offset.clone()));
        sim.controller = Controller::None;
        Ok(())
    }

    /// Sets the torque for the next step, replanning first at the start of a control period
    /// (the replan's report is returned then). A failed replan keeps the previous plan
    /// (`CycleInfo::kept_previous`); this fails only when MPC is not engaged.
    pub fn before_step(
        &mut self,
        sim: &mut Simulation,
        cancel: Option<&AtomicBool>,
    ) -> Result<Option<CycleInfo>, MpcError> {
        let Some(mpc) = self.mpc.as_mut() else {
            return Err(MpcError::NotEngaged);
        };
        let (nq, nv) = (sim.model.nq, sim.model.nv);
        self.x.rows_mut(0, nq).copy_from(&sim.q);
        self.x.rows_mut(nq, nv).copy_from(&sim.v);
        let mut cycle = None;
        if self.phase == 0 {
            if let Some((p, r)) = self.pending.take() {
                mpc.set_target(p, r);
            }
            let started = Instant::now();
            let candidates = match (&self.spec.step_sampling, &self.replaced) {
                (Some(sampling), Some((pd, offset))) => {
                    // The trots are the replaced controller's, rolled out from the present state.
                    let own = std::mem::replace(&mut sim.controller, pd.clone());
                    let own_offset = std::mem::replace(&mut sim.u_offset, offset.clone());
                    let t = sim.t - self.t0;
                    let sampled = sampling.trots_at(sim, t, self.replans, mpc.knots(), self.spec.knot_dt);
                    sim.controller = own;
                    sim.u_offset = own_offset;
                    sampled
                }
                _ => (Vec::new(), Vec::new()),
            };
            self.replans += 1;
            let (info, chosen) = mpc.replan_sampled(&self.x, &candidates.1, cancel);
            let sampled_start = chosen.map(|j| candidates.0[j]);
            let target = mpc.target().0;
            cycle = Some(CycleInfo {
                t: sim.t - self.t0,
                status: info.status,
                iterations: info.iterations,
                cost: info.cost,
                solve_ms: 1e3 * started.elapsed().as_secs_f64(),
                base_error_m: (Vector3::new(sim.q[0], sim.q[1], sim.q[2]) - target).norm(),
                fallback_jacobians: info.fallback_jacobians,
                unconverged_jacobians: info.unconverged_jacobians,
                kept_previous: info.status == Status::NonFinite,
                line_search_trials: info.line_search_trials,
                sampled_start,
            });
        }
        mpc.control(&self.x, self.phase as f64 / self.substeps as f64, &mut self.u);
        sim.u_offset.copy_from(&self.u);
        self.phase = (self.phase + 1) % self.substeps;
        Ok(cycle)
    }

    /// Moves the base-pose target (applied at the next replan).
    pub fn set_target(&mut self, position: Vector3<f64>, rotation: Matrix3<f64>) {
        self.pending = Some((position, rotation));
    }

    /// Switches feedback warm starts ([`MpcSettings::feedback_warm_start`]) from the next replan
    /// on, keeping the plan: a clone switched the other way replans from the same state and the
    /// same previous plan, so the two warm starts can be compared replan by replan.
    pub fn set_feedback_warm_start(&mut self, on: bool) {
        self.spec.feedback_warm_start = on;
        if let Some(m) = self.mpc.as_mut() {
            m.feedback_warm_start = on;
        }
    }

    /// The target in force (a pending one first), if engaged or set.
    pub fn target(&self) -> Option<(Vector3<f64>, Matrix3<f64>)> {
        self.pending.or_else(|| self.mpc.as_ref().map(|m| m.target()))
    }

    /// Gives the controls back: the replaced controller and control offset.
    pub fn release(&mut self, sim: &mut Simulation) {
        if let Some((c, u)) = self.replaced.take() {
            sim.controller = c;
            sim.u_offset = u;
        }
        self.mpc = None;
    }

    /// The current plan's states (T + 1; empty before engagement).
    pub fn planned_states(&self) -> &[DVector<f64>] {
        self.mpc.as_ref().map_or(&[], |m| m.planned_states())
    }

    /// Knots in the horizon (0 before engagement).
    pub fn knots(&self) -> usize {
        self.mpc.as_ref().map_or(0, |m| m.knots())
    }

    /// Simulator steps per control period.
    pub fn substeps(&self) -> usize {
        self.substeps
    }

    /// The plan replayed (as [`Mpc::planned_knots`]; empty before engagement).
    pub fn planned_knots(&self) -> Vec<super::cito::Knot> {
        self.mpc.as_ref().map_or_else(Vec::new, |m| m.planned_knots())
    }
}

/// A closed-loop run's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MpcReport {
    pub cycles: Vec<CycleInfo>,
    /// Per simulator step: time (s, from the MPC's start), base position (m), base error (m).
    pub trace: Vec<(f64, [f64; 3], f64)>,
    /// Per simulator step: the state `(q, v)` after it (for replays of the run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<(Vec<f64>, Vec<f64>)>,
    /// The last plan, replayed (base poses and foot positions per knot).
    pub last_plan: Vec<super::cito::Knot>,
    pub summary: MpcSummary,
}

/// `summary.json` of `contactlab mpc`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MpcSummary {
    pub scene: String,
    pub sensitivity: String,
    pub recovered: bool,
    /// Time after the last pull's end from which the base stayed within tolerance (s).
    pub recovery_time_s: Option<f64>,
    pub max_base_error_m: f64,
    pub final_base_error_m: f64,
    pub solve_ms_median: f64,
    pub solve_ms_p95: f64,
    pub solve_ms_max: f64,
    /// Line-search forward passes per replan (`CycleInfo::line_search_trials`): median, p95,
    /// max.
    #[serde(default)]
    pub line_search_trials_median: f64,
    #[serde(default)]
    pub line_search_trials_p95: f64,
    #[serde(default)]
    pub line_search_trials_max: usize,
    /// Simulated time over wall time of the loop (replans and simulator steps).
    pub realtime_factor: f64,
    pub cycles: usize,
    /// Simulated time (s).
    pub duration_s: f64,
    pub horizon_knots: usize,
    pub iterations_per_cycle: usize,
    /// Whether a foot left the ground (gap above 5 mm) during the run.
    pub stepped: bool,
    pub cancelled: bool,
    /// Knot derivatives over all replans from a fallback sensitivity, or from an unconverged
    /// backward solve.
    pub fallback_jacobians: usize,
    pub unconverged_jacobians: usize,
    /// Replans that failed, after which MPC followed its previous plan (module docs).
    #[serde(default)]
    pub failed_replans: usize,
    /// Replans that started from a sampled trot rather than the shifted plan (`step_sampling`).
    #[serde(default)]
    pub sampled_starts: usize,
    /// Simulator steps that failed (the run ends at the first).
    #[serde(default)]
    pub failed_steps: usize,
    /// The failed step's status and the time it was taken from (s after control took over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_step: Option<(crate::sim::StepStatus, f64)>,
    /// Footfalls per foot over the run: lift-off of at least 1 cm, then touchdown (gap at most
    /// 5 mm), as `cito::footfalls` counts them.
    #[serde(default)]
    pub footfalls: std::collections::BTreeMap<String, usize>,
    /// Whether a contact candidate other than a foot (a trunk corner) touched the ground
    /// (gap at most 1 mm).
    #[serde(default)]
    pub trunk_touched: bool,
    /// Largest excursion of a joint beyond its URDF range over the run (rad or m; 0 inside).
    #[serde(default)]
    pub joint_range_excess: f64,
}

/// What the feet, the trunk and the joints did over a closed-loop run, step by step: footfalls
/// per foot, any foot off the ground (gap above 5 mm), any other contact candidate touching (gap
/// at most 1 mm), and the largest excursion of a joint beyond its URDF range (the simulator does
/// not enforce position limits, so a controller can use a range the robot does not have).
pub struct ContactWatch {
    feet: Vec<usize>,
    others: Vec<usize>,
    pub counter: super::cito::FootfallCounter,
    pub stepped: bool,
    pub trunk_touched: bool,
    /// Largest `max(q_j - hi_j, lo_j - q_j, 0)` over the steps and the 1-dof joints (rad or m).
    pub joint_range_excess: f64,
}

impl ContactWatch {
    pub fn new(sim: &Simulation) -> Self {
        let cps = &sim.model.contact_points;
        let (feet, others): (Vec<usize>, Vec<usize>) = (0..cps.len()).partition(|&i| cps[i].name.ends_with("foot"));
        Self {
            counter: super::cito::FootfallCounter::new(feet.len()),
            feet,
            others,
            stepped: false,
            trunk_touched: false,
            joint_range_excess: 0.0,
        }
    }

    /// Records the simulation's contact gaps after a step.
    pub fn record(&mut self, sim: &Simulation) {
        let phi = &sim.ws.contacts.phi;
        if phi.len() < self.feet.len() + self.others.len() {
            return;
        }
        self.counter.record(self.feet.iter().map(|&k| phi[k]));
        self.stepped |= self.feet.iter().any(|&k| phi[k] > 0.005);
        self.trunk_touched |= self.others.iter().any(|&k| phi[k] <= 1e-3);
        for j in sim.model.joints.iter().filter(|j| j.kind != JointKind::FreeFlyer) {
            let q = sim.q[j.idx_q];
            self.joint_range_excess = self.joint_range_excess.max(q - j.limits.upper).max(j.limits.lower - q);
        }
    }

    /// Footfalls per foot name.
    pub fn footfalls(&self, sim: &Simulation) -> std::collections::BTreeMap<String, usize> {
        self.feet
            .iter()
            .map(|&k| sim.model.contact_points[k].name.clone())
            .zip(self.counter.counts.iter().copied())
            .collect()
    }
}

/// The MPC's horizon problem of `spec` from the simulation's state (target: the current base
/// pose).
pub fn horizon_problem(
    sim: &Simulation,
    u_hold: &DVector<f64>,
    spec: &MpcSettings,
    sensitivity: Sensitivity,
) -> CitoProblem {
    let m = &*sim.model;
    let base = free_flyer_placement(&sim.q.as_slice()[..7]);
    let mut x0 = DVector::zeros(m.nq + m.nv);
    x0.rows_mut(0, m.nq).copy_from(&sim.q);
    x0.rows_mut(m.nq, m.nv).copy_from(&sim.v);
    let mut settings = sim.settings;
    settings.dt = spec.knot_dt;
    if let Some(t) = spec.contact_tolerance {
        settings.solver.tolerance = t;
        settings.solver.kappa_target = settings.solver.kappa_target.min(t);
    }
    if let Some(m) = spec.contact_warm_start_mu {
        settings.solver.warm_start_mu = m;
    }
    CitoProblem {
        model: sim.model.clone(),
        terrain: sim.terrain.clone(),
        settings,
        x0,
        u_guess: u_hold.clone(),
        cost: pose_cost(&sim.q, base.trans, base.rot, &spec.weights),
        terminal_weight: spec.weights.terminal,
        knots: (spec.horizon / spec.knot_dt).round().max(1.0) as usize,
        sensitivity,
        ddp: Settings {
            max_iterations: spec.iterations,
            max_rejected_line_searches: spec.stop_at_rejection.then_some(1),
            trial_abort: spec.trial_abort,
            relative_tolerance: spec.relative_tolerance,
            adaptive_step: spec.adaptive_step,
            ..Default::default()
        },
        clearance: super::cito::clearance(&spec.weights),
        ramp: None,
        guess: None,
        warm_start_contacts: spec.warm_start_contacts,
    }
}

/// Runs MPC with `settings` in closed loop on `sim` (module docs): MPC takes over at the
/// simulation's present state (settle it first) and runs `settings.duration`; `pulls` are timed
/// from that moment and are unknown to MPC. `name` labels the summary; `observe` sees every
/// replan.
pub fn run_closed_loop(
    name: &str,
    mut sim: Simulation,
    pulls: &[Pull],
    settings: &MpcSettings,
    cancel: Option<&AtomicBool>,
    observe: &mut dyn FnMut(&CycleInfo),
) -> Result<MpcReport, MpcError> {
    settings.validate()?;
    let spec = settings;
    let duration = spec.duration;
    let sensitivity = spec.sensitivity();
    let substeps = substeps(spec.knot_dt, sim.settings.dt)?;
    let mut driver = MpcDriver::new(spec.clone());
    driver.engage(&mut sim)?;
    let target = driver.target().expect("engaged").0;
    // MPC takes over: pulls timed from now.
    let t0 = sim.t;
    sim.pulls = pulls.iter().map(|p| Pull { start: p.start + t0, ..*p }).collect();
    let pull_end = pulls.iter().map(|p| p.start + p.duration).fold(0.0, f64::max);
    let mut watch = ContactWatch::new(&sim);
    let (mut cycles, mut trace, mut states) = (Vec::new(), Vec::new(), Vec::new());
    let mut cancelled = false;
    let mut failed_step = None;
    let n_steps = (duration / spec.knot_dt).round() as usize * substeps;
    let started = Instant::now();
    let error = |q: &DVector<f64>| (Vector3::new(q[0], q[1], q[2]) - target).norm();
    for _ in 0..n_steps {
        if cancel.is_some_and(|f| f.load(Ordering::Relaxed)) {
            cancelled = true;
            break;
        }
        if let Some(cycle) = driver.before_step(&mut sim, cancel)? {
            observe(&cycle);
            cycles.push(cycle);
        }
        let status = sim.step().status;
        if !status.advanced() {
            failed_step = Some((status, sim.t - t0));
            break;
        }
        watch.record(&sim);
        trace.push((sim.t - t0, [sim.q[0], sim.q[1], sim.q[2]], error(&sim.q)));
        states.push((sim.q.as_slice().to_vec(), sim.v.as_slice().to_vec()));
    }
    let wall = started.elapsed().as_secs_f64();
    let simulated = trace.last().map(|t| t.0).unwrap_or(0.0);
    let ms = sorted(cycles.iter().map(|c| c.solve_ms));
    let trials = sorted(cycles.iter().map(|c| c.line_search_trials as f64));
    let errors: Vec<(f64, f64)> = trace.iter().map(|t| (t.0, t.2)).collect();
    let failed_steps = usize::from(failed_step.is_some());
    let recovery = if cancelled || failed_steps > 0 { None } else { recovery_time(&errors, pull_end, spec) };
    let recovered = recovery.is_some();
    let summary = MpcSummary {
        scene: name.to_string(),
        sensitivity: sensitivity.name().into(),
        recovered,
        recovery_time_s: recovery,
        max_base_error_m: trace.iter().map(|t| t.2).fold(0.0, f64::max),
        final_base_error_m: trace.last().map(|t| t.2).unwrap_or(f64::NAN),
        solve_ms_median: percentile(&ms, 0.5),
        solve_ms_p95: percentile(&ms, 0.95),
        solve_ms_max: ms.last().copied().unwrap_or(f64::NAN),
        line_search_trials_median: percentile(&trials, 0.5),
        line_search_trials_p95: percentile(&trials, 0.95),
        line_search_trials_max: trials.last().map_or(0, |&t| t as usize),
        realtime_factor: simulated / wall.max(1e-12),
        cycles: cycles.len(),
        duration_s: simulated,
        horizon_knots: driver.knots(),
        iterations_per_cycle: spec.iterations,
        stepped: watch.stepped,
        cancelled,
        fallback_jacobians: cycles.iter().map(|c| c.fallback_jacobians).sum(),
        unconverged_jacobians: cycles.iter().map(|c| c.unconverged_jacobians).sum(),
        failed_replans: cycles.iter().filter(|c| c.kept_previous).count(),
        sampled_starts: cycles.iter().filter(|c| c.sampled_start.is_some()).count(),
        failed_steps,
        failed_step,
        footfalls: watch.footfalls(&sim),
        trunk_touched: watch.trunk_touched,
        joint_range_excess: watch.joint_range_excess,
    };
    Ok(MpcReport { cycles, trace, states, last_plan: driver.planned_knots(), summary })
}
