//! DDP / iLQR on a shooting problem (DESIGN 5): Gauss-Newton backward pass (no second-order
//! dynamics terms), Levenberg-Marquardt regularization of `Q_uu`, backtracking line search on
//! the actual-to-expected improvement ratio, optional control box limits (Tassa, Mansard,
//! Todorov, "Control-limited differential dynamic programming", ICRA 2014).
//!
//! # Backward pass
//! With `V_x`, `V_xx` of the next knot (tangent coordinates):
//!
//! ```text
//! Q_x = l_x + f_x^T V_x          Q_u = l_u + f_u^T V_x
//! Q_xx = l_xx + f_x^T V_xx f_x   Q_uu = l_uu + f_u^T V_xx f_u + mu I   Q_ux = l_ux + f_u^T V_xx f_x
//! k = argmin_{lo <= u + k <= hi} 0.5 k^T Q_uu k + Q_u^T k       (box QP; Q_uu^-1 Q_u without bounds)
//! K = -Q_uu,ff^-1 Q_ux,f  (free rows; clamped rows 0)
//! V_x = Q_x + K^T Q_uu k + K^T Q_u + Q_ux^T k
//! V_xx = Q_xx + K^T Q_uu K + K^T Q_ux + Q_ux^T K       (= Q_xx + K^T Q_ux with no control clamped)
//! ```
//!
//! A `Q_uu` that is not positive definite raises `mu` (x `mu_factor`) and restarts the pass.
//!
//! # Forward pass
//! `x^_0 = x_0`, `u^_t = clamp(u_t + alpha k_t + K_t (x^_t (-) x_t))`, `x^_{t+1} = f(x^_t, u^_t)`;
//! the step is accepted when the actual improvement is at least `armijo` times the expected
//! `alpha sum k^T Q_u + alpha^2 / 2 sum k^T Q_uu k` (in absolute value). Accepted steps lower `mu`
//! (/ `mu_factor`, floored at `mu_min`), rejected line searches raise it. Converged when the
//! expected improvement of a full step is below `tolerance` (absolute, cost units).
//!
//! # Cutting a line search that cannot succeed
//! With derivatives that are not those of the rollout (a relaxed contact sensitivity is biased
//! on purpose), the model can predict a descent along a step whose true directional derivative
//! is positive: then `actual(alpha) = -s alpha + O(alpha^2)` with `s > 0`, and no step passes
//! `actual >= armijo * expected > 0` however short. Halving through `alpha_min` costs a rollout
//! per halving (ten of them at the default 1/1024) for nothing. So when three successive trial
//! steps `4a, 2a, a` all raised the cost and each rise was half the previous one to within 10 %
//! (the cost is first order in `alpha` there, with positive slope), the search stops as
//! rejected, as it would have at `alpha_min` (`Settings::cut_first_order_ascent`, on by
//! default). Near a relaxed optimum this is the common case: at MPC's steady stance the third
//! DDP iteration's full step predicts a decrease of 1.5e-6 and the cost rises by 1.0e-5,
//! 5.0e-6, 2.5e-6, ... at `alpha = 1, 1/2, 1/4, ...`.
//!
//! # Budgeted solves
//! Two options for a solver that must finish within a control period (MPC), both off by
//! default. A rejected line search leaves the trajectory and its derivatives as they were and
//! only multiplies `mu` by `mu_factor`; while `mu` is small against `Q_uu` the next iteration
//! tries nearly the same steps and is rejected again (in 300 one-trot MPC replans of
//! `scenes/mpc_step_fast.ron` with warm-started contacts, 111 iterations followed a rejected
//! one and all 111 were rejected: a fifth of all trial rollouts). So
//! `max_rejected_line_searches` ends the solve after that many rejections in a row.
//! `trial_abort = f` stops a trial rollout as soon as its running cost exceeds `f` times the
//! current cost, when every model's cost is non-negative: the trial could only end above it
//! and be rejected, so the accepted steps are the ones the full rollouts would accept. What
//! changes is that such a trial reports no cost, so the ascent cut above cannot use it (it
//! needs three exact cost changes); trials that raise the cost `f`-fold are rarely part of a
//! first-order ascent.
//!
//! Two more cut the trials themselves. `relative_tolerance = r` also ends a solve as converged
//! when a full step's expected improvement is below `r` times the current cost: near a relaxed
//! optimum the model predicts gains of a few 1e-6 of the cost that the rollouts, whose contact
//! solves carry their own tolerance, cannot confirm (at MPC's steady stance every such line
//! search was rejected after four trials). `adaptive_step` starts each line search from twice
//! the last accepted step length, at most 1, kept across solves of the same `Ddp` (a receding
//! horizon's successive replans), instead of from 1 (Nocedal & Wright, *Numerical
//! Optimization*, 2nd ed., section 3.5, on choosing the initial step from the previous one): a
//! contact transition makes successive iterations accept similar short steps (one-trot MPC
//! through a shove accepted `1/8, 1/8, 1/4` and the like), each found by three or four halvings
//! from 1. The price is that a step longer than twice the last is never tried, so a search can
//! accept a shorter step than the one it would have found from 1.
//!
//! # Threads
//! A knot's derivatives depend on that knot's state and control alone, so `Settings::threads`
//! above 1 differentiates the knots on that many threads (Crocoddyl does the same with OpenMP).
//! The backward pass needs the knots from the last one down, each only once it is
//! differentiated, so after a rollout the knots are claimed one at a time from the last down,
//! and the calling thread runs the backward pass over each as soon as it is ready, taking a
//! knot to differentiate itself whenever the pass would wait: the backward pass (a fifth of an
//! iteration's instructions) runs beside the derivatives (two fifths) instead of after them.
//! The pass does the same operations on the same knots in the same order, so the result is the
//! same bit for bit; if a knot's derivatives turn out not finite, the gains the pass changed
//! are put back and the solve stops as it does on one thread (`Status::NonFinite`). A backward
//! pass that meets a `Q_uu` that is not positive definite stops there, as on one thread, and
//! the next ones (at a larger `mu`) run on the calling thread alone. A model that panics while
//! its knot is differentiated marks the knot done first, so that the pass does not wait for it
//! forever; the panic reaches the caller when the sweep ends.
//!
//! Where every model's rollout depends on its state and control alone
//! ([`ActionModel::history_free`]: no warm start from what a knot's buffers held before), two
//! more things run beside the calling thread. The solve's initial rollout hands each knot over
//! as soon as it has stepped it (and its next state is finite), and the other threads
//! differentiate those knots from the first up while the rollout goes on; the knots left when
//! it ends are claimed from the last down as above. A knot's `calc` and then its `calc_diff`
//! run on its own buffers in the same order as on one thread, so the result is the same bit for
//! bit. A rollout that fails (or panics) stops the others' claims; the knots they finished are
//! not used.
//!
//! And a line search that rejects its first trial takes the next at half the step: the trial
//! at `alpha / 2` is rolled out on another thread into a second set of trial buffers while the
//! one at `alpha` runs, and the two are taken in order: the second is used only if the search
//! would have tried it, and `Info::line_search_trials` counts the trials the search took, not
//! the ones rolled out. An accepted first trial wastes the second (on a core that would have
//! idled). With warm-started models a trial's solves start from the previous trial's and the
//! trials run one at a time, as on one thread.
//!
//! The other threads are a pool of `threads - 1` made at the first sweep that needs them and
//! kept with the solver: spawning a thread for each sweep and joining it cost about 60 us
//! here, twice per iteration, against about 12 us to hand a job to a pool worker that is awake
//! (45 us to one that went to sleep; scratch, `std::thread::scope` against
//! `rayon::ThreadPool::in_place_scope`). Since waking a sleeping thread costs that much here,
//! neither side sleeps within an iteration: a worker done with the derivatives spins (yielding
//! every 64 turns) until the calling thread's backward pass is over, so that it is awake for
//! the line search's trial, and the calling thread spins at the end of a pair of trials until
//! the other one is in. Guards end those waits when a model panics. The evidence is mixed, and
//! the choice follows the harness the README's rounds use: in `examples/peer_rounds.rs` the
//! spinning won 10 of 12 alternating runs (medians 1.41 against 1.61 ms), and 21 paired rounds
//! gave 1.41 ms with it (fb76d73) against 1.50 ms without (f851a9c, reverted); a scratch
//! harness's twelve runs had it slower (1.73 against 1.43 ms), and with a busy loop on one of the
//! two cores it is slower (3.28 against 2.85 ms: the spinning worker spends the share of the core
//! it needs for the trial). With the second core busy, two threads are slower than one in every
//! variant (2.4-2.7 ms on one).
//!
//! Measured on the iteration of `examples/ddp_profile.rs` (`scenes/cito_raise.ron`, 30 knots,
//! exact sensitivity, two line-search trials), in interleaved runs of 400 solves (scratch): on
//! two threads with the knots differentiated in two contiguous blocks and the backward pass
//! after them, medians 1.85-2.27 ms, fastest 1.80-2.01 ms; with the backward pass beside the
//! derivatives 1.68-1.76 / 1.64-1.67 ms; with the trials in pairs as well 1.45-1.51 ms (one run
//! of four 2.36), fastest 1.40-1.42 ms (1.68 in that run); one thread 2.09-2.33 / 2.04-2.11 ms
//! throughout. Then, at a busier moment of the machine (medians of eight interleaved runs of
//! 280 solves): threads spawned per sweep 1.94 ms (fastest 1.73); with the knots
//! differentiated behind the initial rollout 1.86 (1.52); with the pool as well 1.57 (1.39);
//! no thread sleeping within the iteration took a further 5 % (median ratio of ten interleaved
//! pairs of runs; see above for the rest of the evidence). In 21 paired rounds at fb76d73
//! (`scripts/reproduce perf`, README, *Against MuJoCo*): 1.41 ms on two threads, 2.55 ms on
//! one (medians).
//! Earlier still, with a pool of two rayon workers (on this two-core machine) instead of threads
//! spawned per sweep, a criterion run took 3.29 ms against 2.42 ms on one thread; the pool now
//! has one worker beside the calling thread.

use super::action::{ActionData, ActionModel};
use crate::linalg::gemm;
use crate::validate::{Checker, SettingsError};
use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

/// A knot's derivatives in [`Ddp::differentiate`]: not yet computed, finite, or not.
const KNOT_PENDING: u8 = 0;
const KNOT_FINITE: u8 = 1;
const KNOT_NOT_FINITE: u8 = 2;
/// The stages of [`Ddp::differentiate`] that the other threads follow: the rollout under way,
/// over with every knot handed over, or over without (a model failed or panicked, or a state
/// was not finite); then the sweep over on the calling thread.
const ROLLING: u8 = 0;
const ROLLED: u8 = 1;
const ABANDONED: u8 = 2;
const SWEPT: u8 = 3;

/// Stores its value into the flag when dropped, however the scope it guards ends (a panic
/// included), so that the threads waiting on the flag stop waiting.
struct StoreOnDrop<'a>(&'a AtomicU8, u8);

impl Drop for StoreOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(self.1, Ordering::Release);
    }
}

/// One step of waiting for another thread's work, tens of microseconds away: a pool worker
/// that went to sleep instead takes about 45 us to wake here (module docs, "Threads").
fn spin(waits: &mut u32) {
    *waits += 1;
    if waits.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// A lock whose holder may have panicked: a knot's data is whole between calls of its model.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shooting problem: initial state, running models (one per knot) and a terminal model.
#[derive(Clone)]
pub struct ShootingProblem {
    pub x0: DVector<f64>,
    pub running: Vec<Arc<dyn ActionModel>>,
    pub terminal: Arc<dyn ActionModel>,
}

impl ShootingProblem {
    pub fn horizon(&self) -> usize {
        self.running.len()
    }
}

/// Solver settings; check with [`Settings::validate`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Iteration limit. Default 100.
    pub max_iterations: usize,
    /// Converged when the expected improvement of a full step is below this. Default 1e-9.
    pub tolerance: f64,
    /// Initial, smallest and largest Levenberg-Marquardt regularization, and its factor.
    pub mu_init: f64,
    pub mu_min: f64,
    pub mu_max: f64,
    pub mu_factor: f64,
    /// Smallest line-search step before the search fails. Default 1/1024.
    pub alpha_min: f64,
    /// Accepted when actual >= armijo * expected improvement. Default 1e-4.
    pub armijo: f64,
    /// Stop a line search whose trial steps raise the cost in proportion to the step (module
    /// docs). Default true.
    pub cut_first_order_ascent: bool,
    /// Stop the solve (`LineSearchFailed`) after this many line searches in a row were
    /// rejected (module docs, "Budgeted solves"). Default `None`: only `mu_max` stops it.
    pub max_rejected_line_searches: Option<usize>,
    /// Stop a trial forward pass, as rejected, once its running cost exceeds this multiple of
    /// the current cost, where every model's cost is non-negative
    /// ([`ActionModel::nonnegative_cost`]; module docs, "Budgeted solves"). Default `None`:
    /// every trial runs to the end.
    pub trial_abort: Option<f64>,
    /// Also converged when the expected improvement of a full step is below this fraction of
    /// the current cost (module docs, "Budgeted solves"). Default `None`: `tolerance` alone.
    pub relative_tolerance: Option<f64>,
    /// Start each line search from twice the last accepted step length, at most 1, kept across
    /// solves of the same `Ddp` (module docs, "Budgeted solves"). Default false: every line
    /// search starts from 1.
    pub adaptive_step: bool,
    /// Threads that differentiate the knots (each knot's `calc_diff` is independent of the
    /// others'), with the first backward pass after them running beside them; where the models
    /// allow, they also differentiate the initial rollout's knots behind it and roll out a line
    /// search's trials two at a time (module docs, "Threads"). Each rollout is sequential.
    /// Default 1. The result does not depend on it, bit for bit. The first sweep on more than
    /// one thread makes the pool, and the first pair of trials a second set of trial buffers:
    /// one `create_data` per knot, 19 ms for the 30 knots of `scenes/cito_raise.ron` (1.2 MB of
    /// workspaces each, sized for every contact candidate), which a single short solve notices
    /// (that raise converges in 7.3 ms on two threads, 11.6 on one, after a first solve of 27.7
    /// ms on two; scratch).
    pub threads: usize,
}

/// Smallest `Settings::trial_abort` (and `MpcSettings::trial_abort`): a margin above 1 so that a
/// trial stopped there ends above the current cost by more than rounding.
pub const MIN_TRIAL_ABORT: f64 = 1.01;

/// Whether `f` is an allowed `trial_abort`: none, or finite and at least [`MIN_TRIAL_ABORT`].
pub fn valid_trial_abort(f: Option<f64>) -> bool {
    f.is_none_or(|f| f.is_finite() && f >= MIN_TRIAL_ABORT)
}

/// Whether `r` is an allowed `relative_tolerance`: none, or in `(0, 1)`.
pub fn valid_relative_tolerance(r: Option<f64>) -> bool {
    r.is_none_or(|r| r > 0.0 && r < 1.0)
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_iterations: 100,
            tolerance: 1e-9,
            mu_init: 1e-8,
            mu_min: 1e-10,
            mu_max: 1e8,
            mu_factor: 10.0,
            alpha_min: 1.0 / 1024.0,
            armijo: 1e-4,
            cut_first_order_ascent: true,
            max_rejected_line_searches: None,
            trial_abort: None,
            relative_tolerance: None,
            adaptive_step: false,
            threads: 1,
        }
    }
}

impl Settings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        Checker::new("ddp::Settings")
            .count("max_iterations", self.max_iterations, 1, usize::MAX)
            .count("threads", self.threads, 1, 1024)
            .non_negative("tolerance", self.tolerance)
            .non_negative("mu_min", self.mu_min)
            .check(self.mu_init.is_finite() && self.mu_init >= self.mu_min, "mu_init", || {
                format!("{} is out of range: allowed [mu_min = {}, inf)", self.mu_init, self.mu_min)
            })
            .check(self.mu_max.is_finite() && self.mu_max >= self.mu_init, "mu_max", || {
                format!("{} is out of range: allowed [mu_init = {}, inf)", self.mu_max, self.mu_init)
            })
            .check(self.mu_factor.is_finite() && self.mu_factor > 1.0, "mu_factor", || {
                format!("{} is out of range: allowed (1, inf)", self.mu_factor)
            })
            .check(self.alpha_min > 0.0 && self.alpha_min <= 1.0, "alpha_min", || {
                format!("{} is out of range: allowed (0, 1]", self.alpha_min)
            })
            .check((0.0..1.0).contains(&self.armijo), "armijo", || {
                format!("{} is out of range: allowed [0, 1)", self.armijo)
            })
            .check(self.max_rejected_line_searches != Some(0), "max_rejected_line_searches", || {
                "0 is out of range: allowed 1.. or none".to_string()
            })
            .check(valid_trial_abort(self.trial_abort), "trial_abort", || {
                format!("{:?} is out of range: allowed [{MIN_TRIAL_ABORT}, inf) or none", self.trial_abort)
            })
            .check(valid_relative_tolerance(self.relative_tolerance), "relative_tolerance", || {
                format!("{:?} is out of range: allowed (0, 1) or none", self.relative_tolerance)
            })
            .finish()
    }
}

/// How a solve ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Converged,
    MaxIterations,
    /// `mu` exceeded `mu_max` (the backward pass or the line search kept failing).
    RegularizationLimit,
    /// No step length down to `alpha_min` improved the cost, even at the largest `mu`, or
    /// `max_rejected_line_searches` line searches in a row failed.
    LineSearchFailed,
    Cancelled,
    /// The initial rollout or the derivatives were not finite (or a model reported failure).
    NonFinite,
    InvalidInput,
}

/// One iteration's report.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationInfo {
    pub iteration: usize,
    pub cost: f64,
    /// Expected and actual improvement of the accepted step.
    pub expected: f64,
    pub actual: f64,
    pub mu: f64,
    pub alpha: f64,
    /// Wall time of the iteration (s).
    pub time: f64,
}

/// What a solve did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    pub status: Status,
    pub iterations: usize,
    pub cost: f64,
    pub history: Vec<IterationInfo>,
    /// Knot derivatives of the solve that came from a fallback model, and those whose backward
    /// solve did not converge ([`ActionData::fallback`], [`ActionData::unconverged`]; each
    /// derivative sweep counts every knot once).
    #[serde(default)]
    pub fallback_jacobians: usize,
    #[serde(default)]
    pub unconverged_jacobians: usize,
    /// Forward passes of the line searches (each a rollout of the horizon; the initial
    /// rollout is not one): the number of iterations when every full step is accepted, more
    /// when steps are cut or rejected.
    #[serde(default)]
    pub line_search_trials: usize,
}

impl Info {
    /// A solve's report before its first rollout: no iteration, no cost yet.
    fn before_start() -> Self {
        Self {
            status: Status::MaxIterations,
            iterations: 0,
            cost: f64::NAN,
            history: vec![],
            fallback_jacobians: 0,
            unconverged_jacobians: 0,
            line_search_trials: 0,
        }
    }
}

/// The DDP solver with its trajectory and preallocated per-knot data. A clone is an independent
/// solver in the same state (trajectory, gains, regularization, every knot's workspace and
/// contact warm starts): the same next solve, bit for bit.
#[derive(Clone)]
pub struct Ddp {
    pub problem: ShootingProblem,
    pub settings: Settings,
    /// States (T + 1, representation) and controls (T).
    pub xs: Vec<DVector<f64>>,
    pub us: Vec<DVector<f64>>,
    data: Vec<ActionData>,
    terminal_data: ActionData,
    k: Vec<DVector<f64>>,
    gains: Vec<DMatrix<f64>>,
    /// A line search's trial trajectory, and a second one for the trials rolled out on another
    /// thread (made at first use).
    trial: Trial,
    spare: Option<Box<Trial>>,
    /// Expected improvement terms `[sum k^T Q_u, sum k^T Q_uu k]` of the last backward pass.
    d: [f64; 2],
    pub mu: f64,
    /// Step length of the last accepted line search, kept across solves (`adaptive_step`).
    last_alpha: Option<f64>,
    bw: Backward,
    /// Each knot's `k` and gain before a backward pass that runs beside the derivatives, to be
    /// put back if a knot's derivatives turn out not finite.
    k_backup: Vec<DVector<f64>>,
    gains_backup: Vec<DMatrix<f64>>,
    helpers: Helpers,
}

/// The threads that help a solve on more than one thread (module docs, "Threads"): a pool of
/// `Settings::threads - 1`, made at first use and kept between sweeps. A clone of the solver
/// makes its own.
#[derive(Default)]
struct Helpers(Option<(usize, rayon::ThreadPool)>);

impl Clone for Helpers {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl Helpers {
    /// The pool of `n` threads, or `None` if they cannot be had.
    fn pool(&mut self, n: usize) -> Option<&rayon::ThreadPool> {
        if self.0.as_ref().is_none_or(|(m, _)| *m != n) {
            let pool =
                rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("ddp-helper-{i}")).build();
            self.0 = pool.ok().map(|p| (n, p));
        }
        self.0.as_ref().map(|(_, p)| p)
    }
}

impl Ddp {
    pub fn new(problem: ShootingProblem, settings: Settings) -> Self {
        let t = problem.horizon();
        let data: Vec<ActionData> = problem.running.iter().map(|m| m.create_data()).collect();
        let terminal_data = problem.terminal.create_data();
        let mut xs = vec![problem.x0.clone(); t + 1];
        if t > 0 {
            xs.truncate(t + 1);
        }
        let us: Vec<DVector<f64>> = problem.running.iter().map(|m| DVector::zeros(m.nu())).collect();
        let k = us.clone();
        let gains: Vec<DMatrix<f64>> = problem.running.iter().map(|m| DMatrix::zeros(m.nu(), m.ndx())).collect();
        let (k_backup, gains_backup) = (k.clone(), gains.clone());
        Self {
            trial: Trial::new(&problem),
            spare: None,
            xs,
            us,
            data,
            terminal_data,
            k,
            gains,
            d: [0.0; 2],
            mu: settings.mu_init,
            last_alpha: None,
            bw: Backward::new(),
            k_backup,
            gains_backup,
            helpers: Helpers::default(),
            problem,
            settings,
        }
    }

    /// The total cost of the current trajectory (after a rollout or a solve).
    pub fn cost(&self) -> f64 {
        total_cost(&self.data, &self.terminal_data)
    }

    /// Feedback gains of the last backward pass (for MPC between solves).
    pub fn gains(&self) -> &[DMatrix<f64>] {
        &self.gains
    }

    /// Moves the feedback gains one knot earlier (the last repeated), with a warm start shifted
    /// the same way: a solve that ends before its first backward pass keeps gains that match
    /// its knots.
    pub fn shift_gains(&mut self) {
        shift(&mut self.gains);
    }

    /// Replaces the trajectory and gains (MPC's fall back to its previous plan after a replan
    /// failed); the lengths must be those of the problem.
    pub fn restore(&mut self, xs: &[DVector<f64>], us: &[DVector<f64>], gains: &[DMatrix<f64>]) {
        assert!(xs.len() == self.xs.len() && us.len() == self.us.len() && gains.len() == self.gains.len());
        self.xs.clone_from_slice(xs);
        self.us.clone_from_slice(us);
        self.gains.clone_from_slice(gains);
    }

    /// Rolls each control sequence of `starts` out from `x0` (clamped to the bounds) and keeps
    /// the cheapest as the current trajectory (the first of equal costs; the gains are left as
    /// they were): its index and cost, or `None` if no rollout succeeded with a finite cost (the
    /// current trajectory is then the problem's last successful one, or unchanged). For
    /// choosing among warm starts: [`Ddp::solve_rolled_out`] then starts from the kept rollout
    /// without repeating it. A sequence whose shape is not the problem's counts as failed.
    pub fn roll_out_cheapest(&mut self, starts: &[&[DVector<f64>]]) -> Option<(usize, f64)> {
        self.roll_out_cheaper(starts, 0, None)
    }

    /// [`Ddp::roll_out_cheapest`] with the current policy first (index 0, which wins ties):
    /// the controls and gains along the current states, rolled out in closed loop from `x0`,
    /// `u_t = clamp(u_t + K_t (x^_t (-) x_t))` (the forward pass at step 0), then `starts`
    /// (indices from 1) open loop.
    pub fn roll_out_policy_or_cheapest(&mut self, starts: &[&[DVector<f64>]]) -> Option<(usize, f64)> {
        let best = self.forward(0.0, f64::INFINITY).map(|cost| {
            self.keep_trial();
            (0, cost)
        });
        self.roll_out_cheaper(starts, 1, best)
    }

    /// Rolls out `starts` (numbered from `first`) and keeps the first one cheaper than `best`.
    fn roll_out_cheaper(
        &mut self,
        starts: &[&[DVector<f64>]],
        first: usize,
        mut best: Option<(usize, f64)>,
    ) -> Option<(usize, f64)> {
        for (j, us) in starts.iter().enumerate().map(|(j, us)| (j + first, us)) {
            if !self.fits(us) {
                continue;
            }
            let trial = &mut self.trial;
            for ((d, s), m) in trial.us.iter_mut().zip(us.iter()).zip(&self.problem.running) {
                d.copy_from(s);
                clamp(m.as_ref(), d);
            }
            if !rollout(&self.problem, &trial.us, &mut trial.xs, &mut trial.data, &mut trial.terminal) {
                continue;
            }
            let cost = total_cost(&trial.data, &trial.terminal);
            if cost.is_finite() && best.is_none_or(|(_, c)| cost < c) {
                self.keep_trial();
                best = Some((j, cost));
            }
        }
        best
    }

    /// Makes the trial trajectory (controls, states and their knot data) the current one.
    fn keep_trial(&mut self) {
        std::mem::swap(&mut self.xs, &mut self.trial.xs);
        std::mem::swap(&mut self.us, &mut self.trial.us);
        std::mem::swap(&mut self.data, &mut self.trial.data);
        std::mem::swap(&mut self.terminal_data, &mut self.trial.terminal);
    }

    /// Whether `us` has the problem's shape: one control per knot, each of the knot's size.
    fn fits(&self, us: &[DVector<f64>]) -> bool {
        us.len() == self.us.len() && us.iter().zip(&self.us).all(|(a, b)| a.len() == b.len())
    }

    /// Copies `us` into the current controls; `false` (and nothing copied) if their shapes are
    /// not the problem's.
    fn set_controls(&mut self, us: &[DVector<f64>]) -> bool {
        if !self.fits(us) {
            return false;
        }
        for (d, s) in self.us.iter_mut().zip(us) {
            d.copy_from(s);
        }
        true
    }

    /// Clamps the current controls to the bounds and rolls them out from `x0`: whether every
    /// model succeeded, and the cost.
    fn initial_rollout(&mut self) -> (bool, f64) {
        for (u, m) in self.us.iter_mut().zip(&self.problem.running) {
            clamp(m.as_ref(), u);
        }
        let ok = rollout(&self.problem, &self.us, &mut self.xs, &mut self.data, &mut self.terminal_data);
        (ok, self.cost())
    }

    /// Solves from the initial guess `us` (or the current controls if `None`; states are
    /// rolled out from `x0`). `cancel` is polled between passes.
    pub fn solve(&mut self, us: Option<&[DVector<f64>]>, cancel: Option<&AtomicBool>) -> Info {
        self.solve_observed(us, cancel, &mut |_| {})
    }

    /// [`Ddp::solve`] that hands every accepted iteration's report to `observe` as it happens
    /// (progress output, or a channel to a caller on another thread).
    pub fn solve_observed(
        &mut self,
        us: Option<&[DVector<f64>]>,
        cancel: Option<&AtomicBool>,
        observe: &mut dyn FnMut(&IterationInfo),
    ) -> Info {
        if self.settings.validate().is_err() || us.is_some_and(|us| !self.set_controls(us)) {
            return Info { status: Status::InvalidInput, ..Info::before_start() };
        }
        self.iterate(None, cancel, observe)
    }

    /// [`Ddp::solve`] from the trajectory [`Ddp::roll_out_cheapest`] kept, which must be the
    /// last call that changed the controls, `x0` or the models (it is not rolled out again).
    pub fn solve_rolled_out(&mut self, cancel: Option<&AtomicBool>) -> Info {
        if self.settings.validate().is_err() {
            return Info { status: Status::InvalidInput, ..Info::before_start() };
        }
        let ok = self.xs.iter().all(|x| x.iter().all(|v| v.is_finite()));
        let cost = self.cost();
        self.iterate(Some((ok, cost)), cancel, &mut |_| {})
    }

    /// The iterations of a solve: from the current trajectory, whose rollout ended as `rolled`
    /// says (whether every model succeeded, and the cost), or if `None` after clamping the
    /// current controls and rolling them out from `x0`.
    fn iterate(
        &mut self,
        rolled: Option<(bool, f64)>,
        cancel: Option<&AtomicBool>,
        observe: &mut dyn FnMut(&IterationInfo),
    ) -> Info {
        self.mu = self.settings.mu_init;
        // On more than one thread, where a knot's rollout depends on its state and control
        // alone, the initial rollout's knots are differentiated behind it and the line searches
        // take two trials at a time (module docs, "Threads").
        let history_free_threads = self.settings.threads > 1
            && self.problem.terminal.history_free()
            && self.problem.running.iter().all(|m| m.history_free());
        // The first sweep, when the knots were differentiated behind the rollout.
        let mut first = None;
        let (ok, cost) = match rolled {
            Some(rolled) => rolled,
            None if history_free_threads => {
                let sweep = self.differentiate(true);
                let rolled = sweep.rollout.expect("differentiate rolls out when asked");
                first = Some(sweep);
                rolled
            }
            None => self.initial_rollout(),
        };
        let mut info = Info { cost, ..Info::before_start() };
        if !ok || !info.cost.is_finite() {
            info.status = Status::NonFinite;
            return info;
        }
        // Whether `data` holds the derivatives along the current trajectory: a rejected line
        // search leaves the trajectory (and them) as they were, so the next iteration, which
        // only raises mu, reuses them instead of differentiating the same knots again.
        let mut differentiated = false;
        let mut rejected_in_row = 0;
        for it in 0..self.settings.max_iterations {
            let started = Instant::now();
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                info.status = Status::Cancelled;
                return info;
            }
            // The first backward pass at this mu, when it ran beside the derivatives.
            let mut overlapped = None;
            if !differentiated {
                let sweep = first.take().unwrap_or_else(|| self.differentiate(false));
                overlapped = sweep.overlapped;
                info.fallback_jacobians += self.data.iter().filter(|d| d.fallback).count();
                info.unconverged_jacobians += self.data.iter().filter(|d| d.unconverged).count();
                if !sweep.finite {
                    info.status = Status::NonFinite;
                    return info;
                }
                differentiated = true;
            }
            // Backward pass, raising mu until every Q_uu is positive definite.
            loop {
                if overlapped.take().unwrap_or_else(|| self.backward()) {
                    break;
                }
                self.mu = (self.mu * self.settings.mu_factor).max(self.settings.mu_min.max(1e-12));
                if self.mu > self.settings.mu_max {
                    info.status = Status::RegularizationLimit;
                    return info;
                }
            }
            let expected_full = -(self.d[0] + 0.5 * self.d[1]);
            let relative = self.settings.relative_tolerance.map_or(0.0, |r| r * info.cost.abs());
            if expected_full.abs() <= self.settings.tolerance.max(relative) {
                info.status = Status::Converged;
                info.iterations = it;
                return info;
            }
            // Line search.
            let cost0 = self.cost();
            let abort_above = match self.settings.trial_abort {
                Some(f) if cost0 > 0.0 && self.nonnegative_costs() => f * cost0,
                _ => f64::INFINITY,
            };
            let mut alpha = match self.last_alpha {
                Some(a) if self.settings.adaptive_step => (2.0 * a).min(1.0),
                _ => 1.0,
            };
            let mut accepted = None;
            // Cost changes of the two previous trials (steps 4 alpha and 2 alpha).
            let mut before: [Option<f64>; 2] = [None, None];
            // The trial at half the step, rolled out into the spare buffers beside the last one.
            let mut pending: Option<(f64, Option<f64>)> = None;
            while alpha >= self.settings.alpha_min {
                let expected = -(alpha * self.d[0] + 0.5 * alpha * alpha * self.d[1]);
                let mut change = None;
                info.line_search_trials += 1;
                let (result, spare) = match pending.take() {
                    Some((a, result)) if a == alpha => (result, true),
                    _ if history_free_threads && 0.5 * alpha >= self.settings.alpha_min => {
                        let (first, second) = self.forward_pair(alpha, abort_above);
                        pending = Some((0.5 * alpha, second));
                        (first, false)
                    }
                    _ => (self.forward(alpha, abort_above), false),
                };
                if let Some(cost) = result {
                    let actual = cost0 - cost;
                    if actual.is_finite()
                        && (actual >= self.settings.armijo * expected)
                        && actual >= -1e-14 * cost0.abs()
                    {
                        if spare {
                            self.take_spare_trial();
                        }
                        accepted = Some((alpha, expected, actual, cost));
                        break;
                    }
                    change = Some(actual);
                }
                if self.settings.cut_first_order_ascent && first_order_ascent(before[0], before[1], change) {
                    break;
                }
                before = [before[1], change];
                alpha *= 0.5;
            }
            match accepted {
                Some((alpha, expected, actual, cost)) => {
                    differentiated = false;
                    rejected_in_row = 0;
                    self.last_alpha = Some(alpha);
                    self.keep_trial();
                    info.cost = cost;
                    info.iterations = it + 1;
                    let report = IterationInfo {
                        iteration: it + 1,
                        cost,
                        expected,
                        actual,
                        mu: self.mu,
                        alpha,
                        time: started.elapsed().as_secs_f64(),
                    };
                    observe(&report);
                    info.history.push(report);
                    if alpha == 1.0 {
                        self.mu = (self.mu / self.settings.mu_factor).max(self.settings.mu_min);
                    }
                    // A full step whose improvement is within tolerance: done.
                    if actual.abs() <= self.settings.tolerance && alpha == 1.0 {
                        info.status = Status::Converged;
                        return info;
                    }
                }
                None => {
                    self.mu = (self.mu * self.settings.mu_factor).max(1e-12);
                    rejected_in_row += 1;
                    if self.mu > self.settings.mu_max
                        || self.settings.max_rejected_line_searches.is_some_and(|n| rejected_in_row >= n)
                    {
                        info.status = Status::LineSearchFailed;
                        info.iterations = it + 1;
                        return info;
                    }
                }
            }
        }
        info.status = Status::MaxIterations;
        info.iterations = self.settings.max_iterations;
        info
    }

    /// The derivatives of the terminal model and of every running knot along the current
    /// trajectory, after rolling the current controls out from `x0` if `roll_out` (as
    /// [`Ddp::initial_rollout`]). On more than one thread the rollout's knots are
    /// differentiated behind it as it goes, and the first backward pass at the current `mu`
    /// runs on this thread beside the derivatives (module docs, "Threads"). After a failed
    /// rollout the knots are left as they are.
    fn differentiate(&mut self, roll_out: bool) -> Sweep {
        let t = self.problem.horizon();
        let threads = self.settings.threads.clamp(1, t.max(1));
        if threads == 1 {
            let rollout = roll_out.then(|| self.initial_rollout());
            let mut finite = false;
            if rollout.is_none_or(|(ok, _)| ok) {
                self.problem.terminal.calc_diff(&mut self.terminal_data, &self.xs[t], &DVector::zeros(0));
                finite = self.differentiate_running() && finite_data(&self.terminal_data);
            }
            return Sweep { rollout, finite, overlapped: None };
        }
        let d_before = self.d;
        let pool_threads = self.settings.threads - 1;
        let Ddp { problem, xs, us, data, terminal_data, bw, k, gains, mu, d, k_backup, gains_backup, helpers, .. } =
            self;
        if roll_out {
            for (u, m) in us.iter_mut().zip(&problem.running) {
                clamp(m.as_ref(), u);
            }
        }
        let (running, us, mu) = (&problem.running, &*us, *mu);
        // The knots not yet claimed are `bottom..top`, one word holding both (`bottom` in the
        // high half) so that claims from either end agree. The rollout's knots are claimed from
        // the bottom as it finishes them (`rolled` of them, in order); then the rest from the
        // top down, the backward pass's order.
        let span = AtomicU64::new(t as u64);
        let ends = |s: u64| ((s >> 32) as usize, (s & u64::from(u32::MAX)) as usize);
        let claim_top = || {
            let claim = |s| (ends(s).1 > ends(s).0).then(|| s - 1);
            span.fetch_update(Ordering::AcqRel, Ordering::Acquire, claim).ok().map(|s| ends(s).1 - 1)
        };
        let claim_bottom = |rolled: usize| {
            let claim = |s| (ends(s).0 < ends(s).1.min(rolled)).then(|| s + (1 << 32));
            span.fetch_update(Ordering::AcqRel, Ordering::Acquire, claim).ok().map(|s| ends(s).0)
        };
        let rolled = AtomicUsize::new(if roll_out { 0 } else { t });
        let phase = AtomicU8::new(if roll_out { ROLLING } else { ROLLED });
        let state: Vec<AtomicU8> = (0..t).map(|_| AtomicU8::new(KNOT_PENDING)).collect();
        // A knot's cell is locked by the rollout, then by the thread differentiating it, then by
        // the backward pass once its state says it is done.
        let cells: Vec<Mutex<&mut ActionData>> = data.iter_mut().map(Mutex::new).collect();
        let states: Vec<Mutex<&mut DVector<f64>>> = xs.iter_mut().map(Mutex::new).collect();
        let differentiate_knot = |i: usize| {
            let mut d = lock(&cells[i]);
            // A model that panics marks its knot done (not finite) before the panic goes on, so
            // that the backward pass does not wait for it; the panic reaches the caller when
            // the sweep ends.
            let differentiated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                running[i].calc_diff(&mut d, &lock(&states[i]), &us[i]);
                d.ok && finite_data(&d)
            }));
            let good = differentiated.as_ref().is_ok_and(|&good| good);
            state[i].store(if good { KNOT_FINITE } else { KNOT_NOT_FINITE }, Ordering::Release);
            if let Err(e) = differentiated {
                std::panic::resume_unwind(e);
            }
        };
        // `lowest`: the backward pass has run knots lowest..t; `failed`: a Q_uu on the way was
        // not positive definite (the pass stops there, as the sequential one does).
        let help = || {
            let mut waits = 0;
            loop {
                let p = phase.load(Ordering::Acquire);
                let claimed = match p {
                    ROLLED => claim_top(),
                    ROLLING => claim_bottom(rolled.load(Ordering::Acquire)),
                    _ => break,
                };
                match claimed {
                    Some(i) => differentiate_knot(i),
                    None if p == ROLLED => break,
                    None => spin(&mut waits),
                }
            }
            // Awake until this thread's sweep is over, for the line search's trial that follows.
            while phase.load(Ordering::Acquire) != SWEPT {
                spin(&mut waits);
            }
        };
        let mut here = || {
            let _swept = StoreOnDrop(&phase, SWEPT);
            let rollout = roll_out.then(|| {
                let mut over = StoreOnDrop(&phase, ABANDONED);
                // The costs as `Ddp::cost` would read them after the sequential rollout: the
                // rollout's, and the previous ones past a failed model.
                let mut costs: Vec<f64> = cells.iter().map(|c| lock(c).cost).collect();
                lock(&states[0]).copy_from(&problem.x0);
                // Whether every model succeeded, and whether every state so far is finite: then
                // the knots are handed over as they are rolled out.
                let (mut models_ok, mut finite) = (true, problem.x0.iter().all(|v| v.is_finite()));
                for i in 0..t {
                    let mut d = lock(&cells[i]);
                    running[i].calc(&mut d, &lock(&states[i]), &us[i]);
                    costs[i] = d.cost;
                    if !d.ok {
                        models_ok = false;
                        break;
                    }
                    let mut next = lock(&states[i + 1]);
                    next.clone_from(&d.x_next);
                    finite = finite && next.iter().all(|v| v.is_finite());
                    drop((d, next));
                    if finite {
                        rolled.store(i + 1, Ordering::Release);
                    }
                }
                if models_ok {
                    problem.terminal.calc(terminal_data, &lock(&states[t]), &DVector::zeros(0));
                }
                let ok = models_ok && finite;
                over.1 = if ok { ROLLED } else { ABANDONED };
                drop(over);
                (ok, costs.iter().sum::<f64>() + terminal_data.cost)
            });
            if rollout.is_some_and(|(ok, _)| !ok) {
                return (rollout, t, false, true, false);
            }
            problem.terminal.calc_diff(terminal_data, &lock(&states[t]), &DVector::zeros(0));
            // A terminal model whose derivatives are not finite stops the solve before its
            // backward pass: the knots are differentiated, the pass does not run.
            let passed = finite_data(terminal_data);
            if passed {
                bw.begin(terminal_data);
                *d = [0.0; 2];
            }
            let (mut lowest, mut failed, mut all_finite) = (t, false, true);
            let mut waits = 0u32;
            loop {
                if passed && !failed && all_finite && lowest > 0 {
                    let i = lowest - 1;
                    match state[i].load(Ordering::Acquire) {
                        KNOT_FINITE => {
                            let knot_data = lock(&cells[i]);
                            k_backup[i].clone_from(&k[i]);
                            gains_backup[i].clone_from(&gains[i]);
                            let (m, u) = (running[i].as_ref(), &us[i]);
                            let knot = Knot { d: &knot_data, m, u, k: &mut k[i], gain: &mut gains[i] };
                            failed = !backward_knot(bw, knot, mu, d);
                            lowest = i;
                            continue;
                        }
                        KNOT_NOT_FINITE => all_finite = false,
                        _ => {}
                    }
                }
                if let Some(i) = claim_top() {
                    differentiate_knot(i);
                    continue;
                }
                if !passed || failed || !all_finite || lowest == 0 {
                    // Whatever is still being differentiated ends with the sweep.
                    break;
                }
                spin(&mut waits);
            }
            (rollout, lowest, failed, all_finite, passed)
        };
        // No thread to be had: this one takes every knot.
        let (rollout, lowest, failed, all_finite, passed) = match helpers.pool(pool_threads) {
            Some(pool) => pool.in_place_scope(|scope| {
                for _ in 1..threads {
                    scope.spawn(|_| help());
                }
                here()
            }),
            None => here(),
        };
        let knots_finite = all_finite && state.iter().all(|s| s.load(Ordering::Acquire) == KNOT_FINITE);
        if !passed {
            return Sweep { rollout, finite: false, overlapped: None };
        }
        if !knots_finite {
            // The sequential solve stops before its backward pass: undo this one's.
            for i in lowest..t {
                k[i].clone_from(&k_backup[i]);
                gains[i].clone_from(&gains_backup[i]);
            }
            *d = d_before;
            return Sweep { rollout, finite: false, overlapped: None };
        }
        Sweep { rollout, finite: true, overlapped: Some(!failed && d.iter().all(|x| x.is_finite())) }
    }

    /// `calc_diff` of every running knot along the current trajectory, in order: whether every
    /// knot's model succeeded with finite derivatives.
    fn differentiate_running(&mut self) -> bool {
        let mut finite = true;
        for (i, d) in self.data.iter_mut().enumerate() {
            self.problem.running[i].calc_diff(d, &self.xs[i], &self.us[i]);
            finite &= d.ok && finite_data(d);
        }
        finite
    }

    /// Gauss-Newton backward pass at the current `mu`; `false` if a `Q_uu` is not positive
    /// definite. All products go into the preallocated [`Backward`] buffers.
    fn backward(&mut self) -> bool {
        self.bw.begin(&self.terminal_data);
        self.d = [0.0; 2];
        for i in (0..self.problem.horizon()).rev() {
            let Ddp { problem, data, bw, k, gains, us, mu, d, .. } = self;
            let knot =
                Knot { d: &data[i], m: problem.running[i].as_ref(), u: &us[i], k: &mut k[i], gain: &mut gains[i] };
            if !backward_knot(bw, knot, *mu, d) {
                return false;
            }
        }
        self.d.iter().all(|x| x.is_finite())
    }

    /// Whether every model's cost is non-negative ([`ActionModel::nonnegative_cost`]).
    fn nonnegative_costs(&self) -> bool {
        self.problem.terminal.nonnegative_cost() && self.problem.running.iter().all(|m| m.nonnegative_cost())
    }

    /// Forward pass with step `alpha` into the trial buffers; the trial cost, or `None` if a
    /// model failed or produced non-finite numbers, or the running cost passed `abort_above`
    /// (which only non-negative costs make safe: the trial can only end above it).
    fn forward(&mut self, alpha: f64, abort_above: f64) -> Option<f64> {
        let Ddp { problem, xs, us, k, gains, trial, .. } = self;
        forward(problem, xs, us, k, gains, alpha, abort_above, trial)
    }

    /// [`Ddp::forward`] at `alpha` on this thread, and at `alpha / 2` into the spare trial
    /// buffers on another (module docs, "Threads"): the two trials a line search takes in a row
    /// when it rejects the first.
    fn forward_pair(&mut self, alpha: f64, abort_above: f64) -> (Option<f64>, Option<f64>) {
        let Ddp { problem, xs, us, k, gains, trial, spare, helpers, settings, .. } = self;
        let spare = spare.get_or_insert_with(|| Box::new(Trial::new(problem)));
        let (p, xs, us, k, gains) = (&*problem, &*xs, &*us, &*k, &*gains);
        let second_trial = |s: &mut Trial| forward(p, xs, us, k, gains, 0.5 * alpha, abort_above, s);
        let mut second = None;
        let done = AtomicU8::new(0);
        let first = match helpers.pool(settings.threads - 1) {
            Some(pool) => pool.in_place_scope(|scope| {
                scope.spawn(|_| {
                    let _done = StoreOnDrop(&done, 1);
                    second = Some(second_trial(spare));
                });
                let first = forward(p, xs, us, k, gains, alpha, abort_above, trial);
                // Not asleep when the other trial ends (module docs, "Threads").
                let mut waits = 0;
                while done.load(Ordering::Acquire) == 0 {
                    spin(&mut waits);
                }
                first
            }),
            None => forward(p, xs, us, k, gains, alpha, abort_above, trial),
        };
        // `None`: no thread to be had.
        (first, second.unwrap_or_else(|| second_trial(spare)))
    }

    /// Makes the spare trial buffers the trial ones (a second trial of [`Ddp::forward_pair`]
    /// was accepted).
    fn take_spare_trial(&mut self) {
        if let Some(s) = self.spare.as_deref_mut() {
            std::mem::swap(&mut self.trial, s);
        }
    }
}

/// What [`Ddp::differentiate`] did.
struct Sweep {
    /// The initial rollout's `(ok, cost)` when it ran one (as [`Ddp::initial_rollout`]'s).
    rollout: Option<(bool, f64)>,
    /// Whether every model succeeded with finite derivatives (the terminal one included).
    finite: bool,
    /// The first backward pass's result (as [`Ddp::backward`]'s) when it ran beside the
    /// derivatives; `None` if it did not run, or met a knot whose derivatives are not finite
    /// (and then left the gains as they were).
    overlapped: Option<bool>,
}

/// A trial trajectory: the states, controls and knot data a forward pass writes.
#[derive(Clone)]
struct Trial {
    xs: Vec<DVector<f64>>,
    us: Vec<DVector<f64>>,
    data: Vec<ActionData>,
    terminal: ActionData,
}

impl Trial {
    fn new(p: &ShootingProblem) -> Self {
        Self {
            xs: vec![p.x0.clone(); p.horizon() + 1],
            us: p.running.iter().map(|m| DVector::zeros(m.nu())).collect(),
            data: p.running.iter().map(|m| m.create_data()).collect(),
            terminal: p.terminal.create_data(),
        }
    }
}

/// The forward pass of [`Ddp::forward`]: the controls `us + alpha k + K (x (-) xs)` rolled out
/// from `x0` into `trial`, with the trial cost.
#[allow(clippy::too_many_arguments)]
fn forward(
    p: &ShootingProblem,
    xs: &[DVector<f64>],
    us: &[DVector<f64>],
    k: &[DVector<f64>],
    gains: &[DMatrix<f64>],
    alpha: f64,
    abort_above: f64,
    trial: &mut Trial,
) -> Option<f64> {
    let t = p.horizon();
    let Trial { xs: xs_try, us: us_try, data: try_data, terminal: try_terminal } = trial;
    xs_try[0].copy_from(&p.x0);
    let mut dx = DVector::zeros(0);
    let mut cost = 0.0;
    for i in 0..t {
        let m = &p.running[i];
        m.difference(&xs[i], &xs_try[i], &mut dx);
        let mut u = &us[i] + alpha * &k[i] + &gains[i] * &dx;
        clamp(m.as_ref(), &mut u);
        us_try[i] = u;
        m.calc(&mut try_data[i], &xs_try[i], &us_try[i]);
        let d = &try_data[i];
        if !d.ok || !d.cost.is_finite() || !d.x_next.iter().all(|x| x.is_finite()) {
            return None;
        }
        cost += d.cost;
        if cost > abort_above {
            return None;
        }
        xs_try[i + 1] = d.x_next.clone();
    }
    p.terminal.calc(try_terminal, &xs_try[t], &DVector::zeros(0));
    cost += try_terminal.cost;
    cost.is_finite().then_some(cost)
}

/// One knot of the backward pass: its data and model, its control and what the pass writes for
/// it, the feedforward step `k` (the box QP's warm start on entry) and the feedback gain.
struct Knot<'a> {
    d: &'a ActionData,
    m: &'a dyn ActionModel,
    u: &'a DVector<f64>,
    k: &'a mut DVector<f64>,
    gain: &'a mut DMatrix<f64>,
}

/// One knot of the backward pass at regularization `mu`: from the next knot's value function in
/// `w` to this knot's (left in `w`), the knot's step and gain, and its terms of the expected
/// improvement added to `d`; `false` if `Q_uu` is not positive definite.
fn backward_knot(w: &mut Backward, knot: Knot<'_>, mu: f64, d: &mut [f64; 2]) -> bool {
    // Its Cholesky factor and solves are inlined into the AVX2 copy.
    crate::linalg::avx2_dispatch!(backward_knot_body, (w: &mut Backward, knot: Knot<'_>, mu: f64, d: &mut [f64; 2]) -> bool)
}

#[inline(always)]
fn backward_knot_body(w: &mut Backward, knot: Knot<'_>, mu: f64, expected: &mut [f64; 2]) -> bool {
    let Knot { d, m, u, k: k_knot, gain } = knot;
    let (nu, ndx) = (m.nu(), m.ndx());
    w.shape(ndx, nu);
    w.qx.copy_from(&d.lx);
    w.qx.gemv_tr(1.0, &d.fx, &w.vx, 1.0);
    w.qu.copy_from(&d.lu);
    w.qu.gemv_tr(1.0, &d.fu, &w.vx, 1.0);
    // Explicit transposes: nalgebra's `tr_mul` / `gemm_tr` are plain dot-product loops,
    // while `linalg::gemm` (matrixmultiply's arithmetic without its packing) runs
    // several times faster at 36 x 36.
    d.fx.transpose_to(&mut w.fxt);
    d.fu.transpose_to(&mut w.fut);
    gemm(&mut w.vxx_fx, &w.vxx, &d.fx, 0.0);
    gemm(&mut w.vxx_fu, &w.vxx, &d.fu, 0.0);
    w.qxx.copy_from(&d.lxx);
    gemm(&mut w.qxx, &w.fxt, &w.vxx_fx, 1.0);
    w.quu.copy_from(&d.luu);
    gemm(&mut w.quu, &w.fut, &w.vxx_fu, 1.0);
    w.qux.copy_from(&d.lux);
    gemm(&mut w.qux, &w.fut, &w.vxx_fx, 1.0);
    for j in 0..nu {
        w.quu[(j, j)] += mu;
    }
    // Box QP for k, free set for K.
    w.chol.resize(nu * nu, 0.0);
    let (k, free) = match m.control_bounds() {
        Some((lo, hi)) => {
            let lower = lo - u;
            let upper = hi - u;
            match super::boxqp::solve(&w.quu, &w.qu, &lower, &upper, k_knot) {
                Some(r) => r,
                None => return false,
            }
        }
        None => {
            if !cholesky(&w.quu, &mut w.chol) {
                return false;
            }
            let mut k = w.qu.clone();
            cholesky_solve(&w.chol, nu, k.as_mut_slice(), &mut w.rows);
            (-k, vec![true; nu])
        }
    };
    gain.fill(0.0);
    let all_free = free.iter().all(|&f| f);
    if all_free {
        // The common case: K = -Q_uu^-1 Q_ux, solved in place (a column of K is
        // contiguous). Without bounds the factor is the one k was solved with.
        if m.control_bounds().is_some() && !cholesky(&w.quu, &mut w.chol) {
            return false;
        }
        gain.copy_from(&w.qux);
        cholesky_solve(&w.chol, nu, gain.as_mut_slice(), &mut w.rows);
        gain.neg_mut();
    } else {
        let idx: Vec<usize> = (0..nu).filter(|&j| free[j]).collect();
        if !idx.is_empty() {
            let qff = DMatrix::from_fn(idx.len(), idx.len(), |a, b| w.quu[(idx[a], idx[b])]);
            let Some(ch) = qff.cholesky() else { return false };
            let qfx = DMatrix::from_fn(idx.len(), ndx, |a, c| w.qux[(idx[a], c)]);
            let kf = -ch.solve(&qfx);
            for (a, &j) in idx.iter().enumerate() {
                gain.row_mut(j).copy_from(&kf.row(a));
            }
        }
    }
    w.quu_k.gemv(1.0, &w.quu, &k, 0.0);
    expected[0] += k.dot(&w.qu);
    expected[1] += k.dot(&w.quu_k);
    // V_x = Q_x + K^T (Q_uu k + Q_u) + Q_ux^T k
    gain.transpose_to(&mut w.gt);
    w.quu_k += &w.qu;
    w.vx.copy_from(&w.qx);
    w.vx.gemv(1.0, &w.gt, &w.quu_k, 1.0);
    w.vx.gemv_tr(1.0, &w.qux, &k, 1.0);
    // V_xx = Q_xx + K^T Q_uu K + K^T Q_ux + Q_ux^T K, symmetrized. With every control
    // free, Q_uu K = -Q_ux (same regularized Q_uu), so it is Q_xx + K^T Q_ux.
    gemm(&mut w.kt_qux, &w.gt, &w.qux, 0.0);
    w.vxx.copy_from(&w.qxx);
    if all_free {
        w.vxx += &w.kt_qux;
    } else {
        gemm(&mut w.gt_quu, &w.gt, &w.quu, 0.0);
        gemm(&mut w.vxx, &w.gt_quu, gain, 1.0);
        w.vxx += &w.kt_qux;
        w.kt_qux.transpose_to(&mut w.fxt);
        w.vxx += &w.fxt;
    }
    let v = w.vxx.as_mut_slice();
    for c in 0..ndx {
        for r in 0..c {
            let a = 0.5 * (v[r + c * ndx] + v[c + r * ndx]);
            v[r + c * ndx] = a;
            v[c + r * ndx] = a;
        }
    }
    *k_knot = k;
    true
}

/// Whether three successive rejected trials at steps `4a, 2a, a`, whose cost changes
/// (`cost0 - cost`) were `at_4a`, `at_2a`, `at_a`, all raised the cost, each rise half the one
/// before to within 10 % (module docs).
fn first_order_ascent(at_4a: Option<f64>, at_2a: Option<f64>, at_a: Option<f64>) -> bool {
    let halves = |big: f64, small: f64| big < 0.0 && small < 0.0 && (small / big - 0.5).abs() <= 0.05;
    matches!((at_4a, at_2a, at_a), (Some(x), Some(y), Some(z)) if halves(x, y) && halves(y, z))
}

/// The Cholesky factor `L` of the symmetric `a` (`n x n`, its lower triangle read) into `l`
/// (column-major, lower triangle written); `false` if a pivot is not positive (or NaN): `a` is
/// not positive definite. Left-looking, on plain slices: at DDP's 12 x 12 `Q_uu` nalgebra's
/// generic views cost more than the arithmetic.
#[inline(always)]
fn cholesky(a: &DMatrix<f64>, l: &mut [f64]) -> bool {
    let n = a.nrows();
    let l = &mut l[..n * n];
    for j in 0..n {
        for r in j..n {
            l[r + j * n] = a[(r, j)];
        }
        for k in 0..j {
            let ljk = l[j + k * n];
            let (left, right) = l.split_at_mut(j * n);
            let (ck, cj) = (&left[k * n + j..k * n + n], &mut right[j..n]);
            for (x, &y) in cj.iter_mut().zip(ck) {
                *x -= y * ljk;
            }
        }
        let d = l[j + j * n];
        if d.is_nan() || d <= 0.0 {
            return false;
        }
        let d = d.sqrt();
        l[j + j * n] = d;
        for x in &mut l[j * n + j + 1..(j + 1) * n] {
            *x /= d;
        }
    }
    true
}

/// Solves `L L^T X = B` in place for every column of `b` (column-major, `n` rows), `l` from
/// [`cholesky`]. The substitutions run on the rows of `B` (copied into `rows`, row-major), so
/// each step is one contiguous `axpy` across all right-hand sides (K's 36 columns at once).
#[inline(always)]
fn cholesky_solve(l: &[f64], n: usize, b: &mut [f64], rows: &mut Vec<f64>) {
    let m = b.len() / n;
    rows.resize(n * m, 0.0);
    for (c, col) in b.chunks_exact(n).enumerate() {
        for (i, &x) in col.iter().enumerate() {
            rows[i * m + c] = x;
        }
    }
    // Forward: L Y = B, row i final once the rows above are subtracted.
    for i in 0..n {
        let (done, rest) = rows.split_at_mut((i + 1) * m);
        let yi = &mut done[i * m..];
        let d = l[i + i * n];
        yi.iter_mut().for_each(|x| *x /= d);
        for (r, row) in rest.chunks_exact_mut(m).enumerate() {
            let f = l[i + 1 + r + i * n];
            for (x, &y) in row.iter_mut().zip(yi.iter()) {
                *x -= f * y;
            }
        }
    }
    // Backward: L^T X = Y, from the last row up.
    for i in (0..n).rev() {
        let (head, below) = rows.split_at_mut((i + 1) * m);
        let xi = &mut head[i * m..];
        for (r, row) in below.chunks_exact(m).enumerate() {
            let f = l[i + 1 + r + i * n];
            for (x, &y) in xi.iter_mut().zip(row) {
                *x -= f * y;
            }
        }
        let d = l[i + i * n];
        xi.iter_mut().for_each(|x| *x /= d);
    }
    for (c, col) in b.chunks_exact_mut(n).enumerate() {
        for (i, x) in col.iter_mut().enumerate() {
            *x = rows[i * m + c];
        }
    }
}

/// The cost of a rollout: its knots' costs and the terminal one.
fn total_cost(data: &[ActionData], terminal: &ActionData) -> f64 {
    data.iter().map(|d| d.cost).sum::<f64>() + terminal.cost
}

fn clamp(m: &dyn ActionModel, u: &mut DVector<f64>) {
    if let Some((lo, hi)) = m.control_bounds() {
        for j in 0..u.len() {
            u[j] = u[j].clamp(lo[j], hi[j]);
        }
    }
}

fn finite_data(d: &ActionData) -> bool {
    let zero = crate::linalg::all_finite;
    d.cost.is_finite()
        && [d.fx.as_slice(), d.fu.as_slice(), d.lx.as_slice(), d.lu.as_slice()].into_iter().all(zero)
        && [d.lxx.as_slice(), d.luu.as_slice(), d.lux.as_slice()].into_iter().all(zero)
}

/// Buffers of the backward pass (one knot at a time), shaped for the knot at hand.
#[derive(Clone)]
struct Backward {
    /// `V_x` (ndx), `V_xx` (ndx x ndx) of the next knot, then of this one.
    vx: DVector<f64>,
    vxx: DMatrix<f64>,
    qx: DVector<f64>,
    qu: DVector<f64>,
    /// `Q_uu k` (+ `Q_u`) (nu).
    quu_k: DVector<f64>,
    fxt: DMatrix<f64>,
    fut: DMatrix<f64>,
    vxx_fx: DMatrix<f64>,
    vxx_fu: DMatrix<f64>,
    qxx: DMatrix<f64>,
    quu: DMatrix<f64>,
    qux: DMatrix<f64>,
    /// `K^T` (ndx x nu), `K^T Q_ux` (ndx x ndx), `K^T Q_uu` (ndx x nu).
    gt: DMatrix<f64>,
    kt_qux: DMatrix<f64>,
    gt_quu: DMatrix<f64>,
    /// Cholesky factor of `Q_uu` (column-major, lower) and the row-major right-hand sides
    /// of its solves.
    chol: Vec<f64>,
    rows: Vec<f64>,
}

impl Backward {
    /// The backward pass's start: the terminal value function (the expected improvement is the
    /// solver's to reset).
    fn begin(&mut self, terminal: &ActionData) {
        self.vx.clone_from(&terminal.lx);
        self.vxx.clone_from(&terminal.lxx);
    }

    fn new() -> Self {
        let (v, m) = (DVector::zeros(0), DMatrix::zeros(0, 0));
        Self {
            vx: v.clone(),
            vxx: m.clone(),
            qx: v.clone(),
            qu: v.clone(),
            quu_k: v,
            fxt: m.clone(),
            fut: m.clone(),
            vxx_fx: m.clone(),
            vxx_fu: m.clone(),
            qxx: m.clone(),
            quu: m.clone(),
            qux: m.clone(),
            gt: m.clone(),
            kt_qux: m.clone(),
            gt_quu: m,
            chol: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Reshapes the per-knot buffers (a no-op when the knot has the previous one's sizes).
    fn shape(&mut self, ndx: usize, nu: usize) {
        fn mat(m: &mut DMatrix<f64>, r: usize, c: usize) {
            if m.shape() != (r, c) {
                *m = DMatrix::zeros(r, c);
            }
        }
        fn vec(v: &mut DVector<f64>, n: usize) {
            if v.len() != n {
                *v = DVector::zeros(n);
            }
        }
        vec(&mut self.qx, ndx);
        vec(&mut self.qu, nu);
        vec(&mut self.quu_k, nu);
        mat(&mut self.fxt, ndx, ndx);
        mat(&mut self.fut, nu, ndx);
        mat(&mut self.vxx_fx, ndx, ndx);
        mat(&mut self.vxx_fu, ndx, nu);
        mat(&mut self.qxx, ndx, ndx);
        mat(&mut self.quu, nu, nu);
        mat(&mut self.qux, nu, ndx);
        mat(&mut self.gt, ndx, nu);
        mat(&mut self.kt_qux, ndx, ndx);
        mat(&mut self.gt_quu, ndx, nu);
    }
}

/// Moves a sequence one knot earlier, repeating its last element (a receding horizon's warm
/// start).
pub fn shift<T: Clone>(v: &mut [T]) {
    if v.len() > 1 {
        v.rotate_left(1);
        let n = v.len();
        v[n - 1] = v[n - 2].clone();
    }
}

/// Rolls `us` out from `x0` into `xs`, filling the data's costs; `false` if a model failed.
fn rollout(
    p: &ShootingProblem,
    us: &[DVector<f64>],
    xs: &mut [DVector<f64>],
    data: &mut [ActionData],
    terminal: &mut ActionData,
) -> bool {
    xs[0].copy_from(&p.x0);
    for i in 0..p.horizon() {
        p.running[i].calc(&mut data[i], &xs[i], &us[i]);
        if !data[i].ok {
            return false;
        }
        xs[i + 1] = data[i].x_next.clone();
    }
    p.terminal.calc(terminal, &xs[p.horizon()], &DVector::zeros(0));
    xs.iter().all(|x| x.iter().all(|v| v.is_finite()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slice Cholesky against nalgebra's on an SPD matrix, and its refusal of an indefinite
    /// or NaN one.
    #[test]
    fn cholesky_solves_like_nalgebra_and_rejects_indefinite() {
        let n = 12;
        let r = DMatrix::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64 / 11.0 - 0.45);
        let a = &r * r.transpose() + DMatrix::identity(n, n) * 0.05;
        let b = DMatrix::from_fn(n, 36, |i, j| ((i + 2 * j) % 5) as f64 - 2.0);
        let mut l = vec![0.0; n * n];
        assert!(cholesky(&a, &mut l));
        let mut x = b.clone();
        cholesky_solve(&l, n, x.as_mut_slice(), &mut Vec::new());
        let reference = a.clone().cholesky().unwrap().solve(&b);
        assert!((&x - &reference).amax() < 1e-10 * reference.amax(), "{}", (&x - &reference).amax());
        assert!((&a * &x - &b).amax() < 1e-10);
        let mut indefinite = a.clone();
        indefinite[(5, 5)] = -1.0;
        assert!(!cholesky(&indefinite, &mut l));
        indefinite[(5, 5)] = f64::NAN;
        assert!(!cholesky(&indefinite, &mut l));
    }

    /// `roll_out_policy_or_cheapest`: the current policy rolled out in closed loop from a moved
    /// `x0`, `u_t + K_t (x^_t - x_t)` at every knot (not the stored controls, which the open-loop
    /// `roll_out_cheapest` replays), ahead of an open-loop start that costs more, and behind one
    /// that costs less.
    #[test]
    fn the_policy_rolls_out_in_closed_loop_and_competes_with_the_starts() {
        use super::super::action::Lqr;
        let (nx, nu, t) = (2, 1, 20);
        let lqr = Lqr {
            a: DMatrix::from_row_slice(2, 2, &[1.0, 0.1, 0.0, 1.0]),
            b: DMatrix::from_row_slice(2, 1, &[0.005, 0.1]),
            c: DVector::zeros(nx),
            q: DMatrix::identity(nx, nx),
            q_lin: DVector::zeros(nx),
            r: DMatrix::identity(nu, nu) * 0.1,
            r_lin: DVector::zeros(nu),
            n: DMatrix::zeros(nu, nx),
        };
        let model: Arc<dyn ActionModel> = Arc::new(lqr.clone());
        let problem = ShootingProblem {
            x0: DVector::from_vec(vec![1.0, 0.0]),
            running: vec![model.clone(); t],
            terminal: model.clone(),
        };
        let mut ddp = Ddp::new(problem, Settings { max_iterations: 10, ..Default::default() });
        ddp.solve(None, None);
        let (xs, us, gains) = (ddp.xs.clone(), ddp.us.clone(), ddp.gains().to_vec());
        assert!(gains[0].amax() > 0.1, "the solve has feedback: {}", gains[0]);
        ddp.problem.x0 = DVector::from_vec(vec![1.3, -0.2]);
        let far: Vec<DVector<f64>> = vec![DVector::from_element(nu, 50.0); t];
        assert_eq!(ddp.roll_out_policy_or_cheapest(&[&far]).map(|(j, _)| j), Some(0));
        let mut x = ddp.problem.x0.clone();
        for i in 0..t {
            let u = &us[i] + &gains[i] * (&x - &xs[i]);
            assert!((&ddp.us[i] - &u).amax() < 1e-12, "knot {i}: {} against {}", ddp.us[i], u);
            assert!((&ddp.xs[i] - &x).amax() < 1e-12, "knot {i}");
            x = &lqr.a * &x + &lqr.b * &u;
        }
        let policy_cost = ddp.cost();
        // The open-loop replay of the same controls from the moved x0 is the old roll-out.
        assert_eq!(ddp.roll_out_cheapest(&[&us]).map(|(j, _)| j), Some(0));
        assert!((&ddp.xs[1] - &(&lqr.a * &ddp.problem.x0 + &lqr.b * &us[0])).amax() < 1e-12);
        // A start that costs less than the policy wins, numbered after it.
        ddp.restore(&xs, &us, &gains);
        let better = ddp.roll_out_cheapest(&[&us]).map(|(_, c)| c).unwrap();
        ddp.restore(&xs, &us, &gains);
        let chosen = ddp.roll_out_policy_or_cheapest(&[&us]).unwrap();
        assert_eq!(chosen.0, usize::from(better < policy_cost), "open loop {better}, policy {policy_cost}");
    }
}
