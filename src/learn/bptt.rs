//! Policy learning by backpropagation through time (BPTT) through the hard-contact simulator,
//! with the transition Jacobians of a chosen contact sensitivity (DESIGN 3, 6).
//!
//! One rollout of `T` steps from an episode's start (`learn::task`):
//! `o_t = o(x_t)`, `a_t = pi_theta((o_t - m)/s)`, `u_t = PD(x_t, r(a_t))`,
//! `x_{t+1} = F(x_t, u_t)`, loss `L = (1/T) sum_t c(o_{t+1}, a_t)`. The forward pass stores
//! `A_t = dx+/dx`, `B_t = dx+/du` (of the chosen sensitivity; the implicit PD damping is in
//! them), the PD's direct gain `K_t = du/dx`, the observation Jacobians `O_t` and the network's
//! activations. The backward pass is the adjoint recursion of `diff::rollout` with the policy
//! added:
//!
//! ```text
//! lambda_T = (1/T) O_T^T dc_{T-1}/do
//! for t = T-1 .. 0:
//!   g_u = B_t^T lambda_{t+1}                                   (dL/du_t)
//!   g_a = (1/T) dc_t/da + kp sigma mask_t o g_u                (dL/da_t; mask: unsaturated, unclamped)
//!   dL/dtheta += g_a^T da_t/dtheta,  g_o = (g_a^T da_t/dn) / s  (MLP vector-Jacobian products)
//!   lambda_t = A_t^T lambda_{t+1} + K_t^T g_u + O_t^T (g_o + (1/T) dc_{t-1}/do)   (the last for t >= 1)
//! ```
//!
//! A batch of rollouts runs in parallel (rayon); the batch gradient (mean over rollouts) is
//! clipped to a maximum norm and applied by Adam. A step whose chosen sensitivity fails takes its
//! Jacobians from a fallback (`task::Env::step`, counted); a rollout whose simulator step fails,
//! whose Jacobians all fail or whose gradient is not finite is dropped from the batch and
//! counted, so no NaN ever reaches the parameters.

use super::mlp::{clip_norm, Activation, Adam, MlpCache};
use super::policy::Policy;
use super::task::{Env, Episode, JacobianRequest, Task};
use crate::diff::Sensitivity;
use nalgebra::{DMatrix, DVector};
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// BPTT settings (defaults in brackets).
#[derive(Clone, Debug, Serialize)]
pub struct BpttSettings {
    /// Seed of the initialization and the episodes \[0\].
    pub seed: u64,
    /// Budget of simulated (training) steps [100 000].
    pub sim_steps: usize,
    /// Rollouts per iteration \[16\].
    pub batch: usize,
    /// Adam learning rate [1e-3] and maximum gradient norm \[1\].
    pub lr: f64,
    pub clip: f64,
    #[serde(skip)]
    pub sensitivity: Sensitivity,
    pub hidden: Vec<usize>,
    #[serde(skip)]
    pub activation: Activation,
    /// Evaluate every this many iterations \[1\].
    pub eval_every: usize,
}

impl BpttSettings {
    pub fn validate(&self) -> Result<(), crate::validate::SettingsError> {
        crate::validate::Checker::new("BpttSettings")
            .count("sim_steps", self.sim_steps, 1, usize::MAX)
            .count("batch", self.batch, 1, 1 << 20)
            .positive("lr", self.lr)
            .positive("clip", self.clip)
            .check(self.sensitivity.check().is_ok(), "sensitivity", || {
                self.sensitivity.check().err().map(|e| e.to_string()).unwrap_or_default()
            })
            .widths("hidden", &self.hidden)
            .count("eval_every", self.eval_every, 1, usize::MAX)
            .finish()
    }

    /// The defaults with the task's network, sensitivity, batch, learning rate and budget.
    pub fn for_task(task: &Task) -> Self {
        Self {
            sim_steps: task.spec.bptt.steps,
            batch: task.spec.bptt.batch,
            lr: task.spec.bptt.lr,
            sensitivity: task.spec.sensitivity(),
            hidden: task.spec.hidden.clone(),
            activation: task.spec.activation.parse().unwrap_or_default(),
            ..Self::default()
        }
    }
}

impl Default for BpttSettings {
    /// The values in brackets above, on the default task's network (64 x 64, tanh) with the
    /// default relaxed sensitivity.
    fn default() -> Self {
        Self {
            seed: 0,
            sim_steps: 100_000,
            batch: 16,
            lr: 1e-3,
            clip: 1.0,
            sensitivity: Sensitivity::default(),
            hidden: vec![64, 64],
            activation: Activation::Tanh,
            eval_every: 1,
        }
    }
}

/// One training iteration's record (both learners).
#[derive(Clone, Debug, Default, Serialize)]
pub struct IterLog {
    pub iteration: usize,
    /// Simulated training steps so far (evaluation steps are not counted).
    pub sim_steps: usize,
    /// Wall-clock time since training started (s), evaluation included.
    pub wall_s: f64,
    /// Mean per-step cost of the batch (BPTT's loss; PPO: of its rollouts).
    pub loss: f64,
    /// Mean return of the batch's episodes.
    pub train_return: f64,
    /// Mean return of the deterministic policy on the evaluation episodes (NaN when not
    /// evaluated this iteration).
    pub eval_return: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Rollouts dropped (simulator failure, no usable Jacobians, non-finite gradient).
    pub failed_rollouts: usize,
    /// Steps whose Jacobians came from a fallback sensitivity.
    pub fallback_steps: usize,
}

/// How a training run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TrainStatus {
    /// The simulated-step budget was used.
    Finished,
    /// The cancel flag was raised.
    Cancelled,
}

/// Result of a training run (both learners).
#[derive(Clone, Debug)]
pub struct TrainResult {
    pub policy: Policy,
    pub logs: Vec<IterLog>,
    pub status: TrainStatus,
    /// Mean evaluation return of the final policy, simulated steps and wall time (s).
    pub final_return: f64,
    pub sim_steps: usize,
    pub seconds: f64,
}

/// Buffers of one BPTT rollout.
pub struct BpttWork {
    pub env: Env,
    a: Vec<DMatrix<f64>>,
    b: Vec<DMatrix<f64>>,
    k: Vec<DMatrix<f64>>,
    oj: Vec<DMatrix<f64>>,
    caches: Vec<MlpCache>,
    /// `(1/T) dc_{t-1}/do` at `o_t` (index t = 1..T) and `(1/T) dc_t/da` (index t).
    go: Vec<Vec<f64>>,
    ga: Vec<Vec<f64>>,
    active: Vec<Vec<bool>>,
}

impl BpttWork {
    pub fn new(task: &Task) -> Self {
        let (nv, nu, no, t) = (task.model.nv, task.model.nu, task.obs_dim(), task.steps);
        Self {
            env: Env::new(task),
            a: vec![DMatrix::zeros(2 * nv, 2 * nv); t],
            b: vec![DMatrix::zeros(2 * nv, nu); t],
            k: vec![DMatrix::zeros(nu, 2 * nv); t],
            oj: vec![DMatrix::zeros(no, 2 * nv); t + 1],
            caches: vec![MlpCache::default(); t],
            go: vec![vec![0.0; no]; t + 1],
            ga: vec![vec![0.0; nu]; t],
            active: vec![vec![false; nu]; t],
        }
    }
}

/// Outcome of one rollout with its gradient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RolloutOutcome {
    /// Loss `(1/T) sum c_t` (NaN if the rollout failed).
    pub loss: f64,
    pub ok: bool,
    pub fallback_steps: usize,
}

/// Rolls out `policy` on `ep` for the task's `T` steps with `sensitivity` and adds
/// `dL/dtheta` to `grad` (n_params) when the rollout succeeds (module docs).
pub fn rollout_gradient(
    task: &Task,
    policy: &Policy,
    ep: &Episode,
    sensitivity: Sensitivity,
    w: &mut BpttWork,
    grad: &mut [f64],
) -> RolloutOutcome {
    let t_steps = task.steps;
    let inv_t = 1.0 / t_steps as f64;
    let (nv, nu) = (task.model.nv, task.model.nu);
    let fail = RolloutOutcome { loss: f64::NAN, ok: false, fallback_steps: 0 };
    w.env.reset(task, ep);
    let mut loss = 0.0;
    let mut fallbacks = 0;
    for t in 0..t_steps {
        w.env.obs_jacobian(task, &mut w.oj[t]);
        let obs = w.env.obs.clone();
        let a = policy.action(&obs, &mut w.caches[t]);
        let req = JacobianRequest { sensitivity, a: &mut w.a[t], b: &mut w.b[t], k: &mut w.k[t] };
        let Some(rep) = w.env.step(task, &a, Some(req)) else { return fail };
        if rep.jacobian_failed {
            return RolloutOutcome { fallback_steps: fallbacks, ..fail };
        }
        fallbacks += rep.fallback as usize;
        loss += inv_t * rep.cost;
        w.go[t + 1].fill(0.0);
        w.ga[t].fill(0.0);
        task.cost(&w.env.obs, &a, Some((&mut w.go[t + 1], &mut w.ga[t], inv_t)));
        w.active[t].copy_from_slice(&w.env.active);
    }
    w.env.obs_jacobian(task, &mut w.oj[t_steps]);

    let mut g = vec![0.0; grad.len()];
    let mut lambda = w.oj[t_steps].tr_mul(&DVector::from_column_slice(&w.go[t_steps]));
    let gain = task.kp * policy.action_scale;
    let mut ga = vec![0.0; nu];
    let mut go = DVector::zeros(task.obs_dim());
    for t in (0..t_steps).rev() {
        let gu = w.b[t].tr_mul(&lambda);
        for k in 0..nu {
            ga[k] = w.ga[t][k] + if w.active[t][k] { gain * gu[k] } else { 0.0 };
        }
        let gn = policy.mlp.backward(&w.caches[t], &ga, &mut g);
        for i in 0..go.len() {
            go[i] = gn[i] / policy.obs_std[i] + if t >= 1 { w.go[t][i] } else { 0.0 };
        }
        let mut next = w.a[t].tr_mul(&lambda);
        next.gemv_tr(1.0, &w.k[t], &gu, 1.0);
        next.gemv_tr(1.0, &w.oj[t], &go, 1.0);
        lambda = next;
    }
    debug_assert_eq!(lambda.len(), 2 * nv);
    if !(loss.is_finite() && g.iter().all(|x| x.is_finite())) {
        return RolloutOutcome { fallback_steps: fallbacks, ..fail };
    }
    for (a, b) in grad.iter_mut().zip(&g) {
        *a += b;
    }
    RolloutOutcome { loss, ok: true, fallback_steps: fallbacks }
}

/// The loss `(1/T) sum c_t` of the same rollout through the plain step (no Jacobians): the
/// reference of the finite-difference checks. `None` if a step fails.
pub fn rollout_loss(task: &Task, policy: &Policy, ep: &Episode, env: &mut Env) -> Option<f64> {
    env.reset(task, ep);
    let mut loss = 0.0;
    let mut cache = MlpCache::default();
    for _ in 0..task.steps {
        let obs = env.obs.clone();
        let a = policy.action(&obs, &mut cache);
        loss += env.step(task, &a, None)?.cost;
    }
    Some(loss / task.steps as f64)
}

/// Mean return (`-sum c_t`) of the deterministic policy over `episodes` (in parallel) and the
/// number of episodes whose simulation failed (charged `task.failure_cost`).
pub fn evaluate(task: &Task, policy: &Policy, episodes: &[Episode]) -> (f64, usize) {
    let r: Vec<(f64, bool)> = episodes
        .par_iter()
        .map_init(
            || (Env::new(task), MlpCache::default()),
            |(env, cache), ep| {
                env.reset(task, ep);
                let mut ret = 0.0;
                for t in 0..task.steps {
                    let obs = env.obs.clone();
                    let a = policy.action(&obs, cache);
                    match env.step(task, &a, None) {
                        Some(s) => ret -= s.cost,
                        None => return (ret - task.failure_cost(t), false),
                    }
                }
                (ret, true)
            },
        )
        .collect();
    let n = r.len().max(1) as f64;
    (r.iter().map(|x| x.0).sum::<f64>() / n, r.iter().filter(|x| !x.1).count())
}

/// One BPTT iteration on a batch of episodes: returns (mean loss, gradient, failed rollouts,
/// fallback steps). The gradient is the mean over the successful rollouts.
pub fn batch_gradient(
    task: &Task,
    policy: &Policy,
    episodes: &[Episode],
    sensitivity: Sensitivity,
) -> (f64, Vec<f64>, usize, usize) {
    let n = policy.mlp.n_params();
    let parts: Vec<(RolloutOutcome, Vec<f64>)> = episodes
        .par_iter()
        .map_init(
            || BpttWork::new(task),
            |w, ep| {
                let mut g = vec![0.0; n];
                let o = rollout_gradient(task, policy, ep, sensitivity, w, &mut g);
                (o, g)
            },
        )
        .collect();
    let mut grad = vec![0.0; n];
    let (mut loss, mut ok, mut fallbacks) = (0.0, 0usize, 0usize);
    for (o, g) in &parts {
        fallbacks += o.fallback_steps;
        if o.ok {
            ok += 1;
            loss += o.loss;
            for (a, b) in grad.iter_mut().zip(g) {
                *a += b;
            }
        }
    }
    if ok > 0 {
        let s = 1.0 / ok as f64;
        grad.iter_mut().for_each(|x| *x *= s);
        loss *= s;
    } else {
        loss = f64::NAN;
    }
    (loss, grad, episodes.len() - ok, fallbacks)
}

/// Trains a fresh policy by BPTT until `cfg.sim_steps` simulated steps are used or `cancel`
/// is raised; `on_iter` receives every iteration's record (the app plots them live).
pub fn train_bptt(
    task: &Task,
    cfg: &BpttSettings,
    cancel: &AtomicBool,
    mut on_iter: impl FnMut(&IterLog, &Policy),
) -> TrainResult {
    let start = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut policy = Policy::new(task, &cfg.hidden, cfg.activation, &mut rng);
    policy.algorithm = format!("bptt-{}", cfg.sensitivity.name());
    let mut adam = Adam::new(policy.mlp.n_params(), cfg.lr);
    let eval_eps = task.eval_episodes();
    let per_iter = cfg.batch * task.steps;
    let iterations = cfg.sim_steps.div_ceil(per_iter.max(1)).max(1);
    let mut logs = Vec::new();
    let mut status = TrainStatus::Finished;
    let (r0, _) = evaluate(task, &policy, &eval_eps);
    let log0 = IterLog { eval_return: r0, wall_s: start.elapsed().as_secs_f64(), ..Default::default() };
    on_iter(&log0, &policy);
    logs.push(log0);
    let mut sim_steps = 0;
    for it in 1..=iterations {
        if cancel.load(Ordering::Relaxed) {
            status = TrainStatus::Cancelled;
            break;
        }
        let eps: Vec<Episode> = (0..cfg.batch).map(|_| task.sample_episode(&mut rng)).collect();
        let (loss, mut grad, failed, fallbacks) = batch_gradient(task, &policy, &eps, cfg.sensitivity);
        sim_steps += per_iter;
        let norm = clip_norm(&mut grad, cfg.clip);
        if failed < eps.len() && grad.iter().all(|x| x.is_finite()) {
            adam.step(&mut policy.mlp.params, &grad);
        }
        let eval_return = if it % cfg.eval_every.max(1) == 0 || it == iterations {
            evaluate(task, &policy, &eval_eps).0
        } else {
            f64::NAN
        };
        let log = IterLog {
            iteration: it,
            sim_steps,
            wall_s: start.elapsed().as_secs_f64(),
            loss,
            train_return: -loss * task.steps as f64,
            eval_return,
            grad_norm: norm,
            failed_rollouts: failed,
            fallback_steps: fallbacks,
        };
        on_iter(&log, &policy);
        logs.push(log);
    }
    let (final_return, _) = evaluate(task, &policy, &eval_eps);
    TrainResult { policy, logs, status, final_return, sim_steps, seconds: start.elapsed().as_secs_f64() }
}
