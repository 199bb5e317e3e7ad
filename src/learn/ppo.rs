//! Proximal Policy Optimization (Schulman et al. 2017), the model-free baseline, on the same
//! task, cost and forward simulator as BPTT (`learn::task`), with the same policy network for
//! the mean.
//!
//! * Policy: `a ~ N(mu_theta(n), diag(exp(2 l)))` with a state-independent learned log standard
//!   deviation `l` (initialized to `init_log_std`); the environment applies the sampled action
//!   (clamped to `[-3, 3]` like every action, `learn::task`), the log-probability is that of the
//!   unclamped sample. Value function: a separate MLP of the same hidden sizes.
//! * Observation normalization: running mean and variance over every observation collected so
//!   far (frozen while an update's batch is collected, saved in the policy file), with the
//!   standard deviation floored at 1 % of the task's fixed scale so a constant entry (the clock
//!   at a fixed phase) does not blow up.
//! * Rewards `r_t = -c_t` scaled by a running standard deviation of the discounted return
//!   (as `VecNormalize`; Engstrom et al. 2020 show it matters); returns are reported unscaled.
//! * Rollouts: `steps_per_update` steps as whole episodes of `T` steps from the task's reset
//!   distribution, in parallel (rayon; each episode has its own seeded random stream, so runs
//!   are reproducible). Episodes end at the time limit: the last value is bootstrapped
//!   (`V(s_T)`, time-limit truncation, Pardo et al. 2018); a failed simulator step ends the
//!   episode as terminal.
//! * GAE(`gamma`, `lambda`) advantages, normalized per minibatch; `epochs` passes of shuffled
//!   minibatches; loss `-min(rho A, clip(rho, 1 - eps, 1 + eps) A) + c_v (V - R)^2 - c_e H`;
//!   one global gradient-norm clip over all parameters; Adam.
//!
//! Defaults are the usual continuous-control ones (Stable-Baselines3 / the PPO paper's MuJoCo
//! settings): 4096 steps per update, 10 epochs, minibatch 512, lr 3e-4, gamma 0.99, lambda
//! 0.95, clip 0.2, c_v 0.5, c_e 0, max gradient norm 0.5; `init_log_std` -1 (a standard
//! deviation of 0.37 action units = 0.11 rad of joint target: with the usual 0 (0.3 rad of
//! fresh noise every 10 ms) joints reach 100+ rad/s and a few episodes in a hundred diverge).

use super::bptt::{evaluate, IterLog, TrainResult, TrainStatus};
use super::mlp::{clip_norm, Activation, Adam, Mlp, MlpCache};
use super::policy::Policy;
use super::task::{Env, Task};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// PPO settings (defaults: module docs).
#[derive(Clone, Debug, Serialize)]
pub struct PpoSettings {
    pub seed: u64,
    /// Budget of simulated (training) steps [1 000 000].
    pub sim_steps: usize,
    pub steps_per_update: usize,
    pub epochs: usize,
    pub minibatch: usize,
    pub lr: f64,
    pub gamma: f64,
    pub lambda: f64,
    pub clip: f64,
    pub value_coef: f64,
    pub entropy_coef: f64,
    pub max_grad_norm: f64,
    pub init_log_std: f64,
    pub hidden: Vec<usize>,
    #[serde(skip)]
    pub activation: Activation,
    /// Evaluate every this many updates \[1\].
    pub eval_every: usize,
}

impl PpoSettings {
    pub fn validate(&self) -> Result<(), crate::validate::SettingsError> {
        crate::validate::Checker::new("PpoSettings")
            .count("sim_steps", self.sim_steps, 1, usize::MAX)
            .count("steps_per_update", self.steps_per_update, 1, usize::MAX)
            .count("epochs", self.epochs, 1, 10_000)
            .count("minibatch", self.minibatch, 1, self.steps_per_update.max(1))
            .positive("lr", self.lr)
            .check((0.0..=1.0).contains(&self.gamma), "gamma", || {
                format!("{} is out of range: allowed [0, 1]", self.gamma)
            })
            .check((0.0..=1.0).contains(&self.lambda), "lambda", || {
                format!("{} is out of range: allowed [0, 1]", self.lambda)
            })
            .positive("clip", self.clip)
            .non_negative("value_coef", self.value_coef)
            .non_negative("entropy_coef", self.entropy_coef)
            .positive("max_grad_norm", self.max_grad_norm)
            .finite("init_log_std", self.init_log_std)
            .widths("hidden", &self.hidden)
            .count("eval_every", self.eval_every, 1, usize::MAX)
            .finish()
    }

    /// The defaults with the task's network.
    pub fn for_task(task: &Task) -> Self {
        Self {
            hidden: task.spec.hidden.clone(),
            activation: task.spec.activation.parse().unwrap_or_default(),
            ..Self::default()
        }
    }
}

impl Default for PpoSettings {
    /// Standard PPO settings (Schulman et al. 2017; the MuJoCo settings of its paper, 4096-step
    /// updates) except the initial log-std (-1, see the module docs), on the default task's
    /// network (64 x 64, tanh).
    fn default() -> Self {
        Self {
            seed: 0,
            sim_steps: 1_000_000,
            steps_per_update: 4096,
            epochs: 10,
            minibatch: 512,
            lr: 3e-4,
            gamma: 0.99,
            lambda: 0.95,
            clip: 0.2,
            value_coef: 0.5,
            entropy_coef: 0.0,
            max_grad_norm: 0.5,
            init_log_std: -1.0,
            hidden: vec![64, 64],
            activation: Activation::Tanh,
            eval_every: 1,
        }
    }
}

/// Running mean and variance (Chan et al.'s parallel update).
#[derive(Clone, Debug)]
struct RunningStats {
    mean: Vec<f64>,
    var: Vec<f64>,
    count: f64,
}

impl RunningStats {
    fn new(n: usize) -> Self {
        Self { mean: vec![0.0; n], var: vec![1.0; n], count: 1e-4 }
    }
    fn update(&mut self, xs: &[Vec<f64>]) {
        if xs.is_empty() {
            return;
        }
        let n = xs.len() as f64;
        for i in 0..self.mean.len() {
            let m = xs.iter().map(|x| x[i]).sum::<f64>() / n;
            let v = xs.iter().map(|x| (x[i] - m) * (x[i] - m)).sum::<f64>() / n;
            let d = m - self.mean[i];
            let tot = self.count + n;
            self.mean[i] += d * n / tot;
            self.var[i] = (self.var[i] * self.count + v * n + d * d * self.count * n / tot) / tot;
        }
        self.count += n;
    }
}

/// One collected step.
#[derive(Clone, Debug)]
struct Sample {
    n: Vec<f64>,
    a: Vec<f64>,
    logp: f64,
    value: f64,
    reward: f64,
}

/// One collected episode: its samples, the bootstrap value after the last one (0 when
/// terminal), its unscaled return and whether the simulator failed.
struct Trajectory {
    samples: Vec<Sample>,
    bootstrap_n: Option<Vec<f64>>,
    ret: f64,
    failed: bool,
}

const LOG_2PI: f64 = 1.8378770664093453;

fn log_prob(a: &[f64], mu: &[f64], log_std: &[f64]) -> f64 {
    a.iter()
        .zip(mu)
        .zip(log_std)
        .map(|((a, m), l)| {
            let z = (a - m) / l.exp();
            -0.5 * z * z - l - 0.5 * LOG_2PI
        })
        .sum()
}

/// Trains a fresh policy by PPO until `cfg.sim_steps` simulated steps are used or `cancel` is
/// raised; `on_iter` receives every update's record.
pub fn train_ppo(
    task: &Task,
    cfg: &PpoSettings,
    cancel: &AtomicBool,
    mut on_iter: impl FnMut(&IterLog, &Policy),
) -> TrainResult {
    let start = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut policy = Policy::new(task, &cfg.hidden, cfg.activation, &mut rng);
    policy.algorithm = "ppo".into();
    let nu = task.act_dim();
    let no = task.obs_dim();
    let mut log_std = vec![cfg.init_log_std; nu];
    let mut vsizes = vec![no];
    vsizes.extend_from_slice(&cfg.hidden);
    vsizes.push(1);
    let mut value = Mlp::with_activation(&vsizes, cfg.activation, &mut rng, 1.0);
    let mut adam_pi = Adam::new(policy.mlp.n_params(), cfg.lr);
    let mut adam_std = Adam::new(nu, cfg.lr);
    let mut adam_v = Adam::new(value.n_params(), cfg.lr);
    let scale = task.obs_scale();
    let mut obs_stats = RunningStats::new(no);
    let mut ret_stats = RunningStats::new(1);
    let eval_eps = task.eval_episodes();
    let episodes_per_update = cfg.steps_per_update.div_ceil(task.steps).max(1);
    let per_update = episodes_per_update * task.steps;
    let updates = cfg.sim_steps.div_ceil(per_update).max(1);
    let mut logs = Vec::new();
    let mut status = TrainStatus::Finished;
    policy.log_std = Some(log_std.clone());
    let (r0, _) = evaluate(task, &policy, &eval_eps);
    let log0 = IterLog { eval_return: r0, wall_s: start.elapsed().as_secs_f64(), ..Default::default() };
    on_iter(&log0, &policy);
    logs.push(log0);
    let mut sim_steps = 0;
    for it in 1..=updates {
        if cancel.load(Ordering::Relaxed) {
            status = TrainStatus::Cancelled;
            break;
        }
        // Collect whole episodes in parallel, each with its own random stream.
        let seeds: Vec<u64> = (0..episodes_per_update).map(|_| rng.random::<u64>()).collect();
        let trajs: Vec<Trajectory> = seeds
            .par_iter()
            .map_init(
                || (Env::new(task), MlpCache::default(), MlpCache::default()),
                |(env, cache, vcache), &seed| {
                    let mut r = ChaCha8Rng::seed_from_u64(seed);
                    let ep = task.sample_episode(&mut r);
                    env.reset(task, &ep);
                    let mut samples = Vec::with_capacity(task.steps);
                    let mut ret = 0.0;
                    let mut n = vec![0.0; no];
                    for t in 0..task.steps {
                        policy.normalize(&env.obs, &mut n);
                        let mu = policy.mlp.forward(&n, cache);
                        let v = value.forward(&n, vcache)[0];
                        let a: Vec<f64> = (0..nu).map(|k| mu[k] + log_std[k].exp() * standard_normal(&mut r)).collect();
                        let logp = log_prob(&a, &mu, &log_std);
                        let sample_n = n.clone();
                        match env.step(task, &a, None) {
                            Some(s) => {
                                ret -= s.cost;
                                samples.push(Sample { n: sample_n, a, logp, value: v, reward: -s.cost });
                            }
                            None => {
                                // Terminal: charged the failure cost of the remaining steps.
                                let c = task.failure_cost(t);
                                samples.push(Sample { n: sample_n, a, logp, value: v, reward: -c });
                                return Trajectory { samples, bootstrap_n: None, ret: ret - c, failed: true };
                            }
                        }
                    }
                    policy.normalize(&env.obs, &mut n);
                    Trajectory { samples, bootstrap_n: Some(n), ret, failed: false }
                },
            )
            .collect();
        let collected: usize = trajs.iter().map(|t| t.samples.len()).sum();
        sim_steps += collected;
        let failed = trajs.iter().filter(|t| t.failed).count();
        let train_return = trajs.iter().map(|t| t.ret).sum::<f64>() / trajs.len() as f64;

        // Reward scaling by the running std of the discounted return.
        let mut disc = Vec::with_capacity(collected);
        for t in &trajs {
            let mut g = 0.0;
            for s in &t.samples {
                g = cfg.gamma * g + s.reward;
                disc.push(vec![g]);
            }
        }
        ret_stats.update(&disc);
        let rscale = 1.0 / (ret_stats.var[0] + 1e-8).sqrt();

        // GAE per episode.
        let mut batch: Vec<(usize, usize, f64, f64)> = Vec::with_capacity(collected); // (traj, step, adv, ret)
        for (ti, t) in trajs.iter().enumerate() {
            let last_v = t.bootstrap_n.as_ref().map_or(0.0, |n| value.eval(n)[0]);
            let mut adv = 0.0;
            let len = t.samples.len();
            let mut out = vec![(0.0, 0.0); len];
            for i in (0..len).rev() {
                let next_v = if i + 1 < len { t.samples[i + 1].value } else { last_v };
                let delta = t.samples[i].reward * rscale + cfg.gamma * next_v - t.samples[i].value;
                adv = delta + cfg.gamma * cfg.lambda * adv;
                out[i] = (adv, adv + t.samples[i].value);
            }
            for (i, (a, r)) in out.into_iter().enumerate() {
                batch.push((ti, i, a, r));
            }
        }

        // Epochs of shuffled minibatches.
        let mut idx: Vec<usize> = (0..batch.len()).collect();
        let mut norms = Vec::new();
        for _ in 0..cfg.epochs {
            shuffle(&mut idx, &mut rng);
            for chunk in idx.chunks(cfg.minibatch.max(1)) {
                let advs: Vec<f64> = chunk.iter().map(|&i| batch[i].2).collect();
                let m = advs.iter().sum::<f64>() / advs.len() as f64;
                let sd = (advs.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / advs.len() as f64).sqrt() + 1e-8;
                let bsz = chunk.len() as f64;
                let (np, nv) = (policy.mlp.n_params(), value.n_params());
                let grads = chunk
                    .par_chunks(64)
                    .map(|part| {
                        let mut gp = vec![0.0; np];
                        let mut gs = vec![0.0; nu];
                        let mut gv = vec![0.0; nv];
                        let (mut cache, mut vcache) = (MlpCache::default(), MlpCache::default());
                        for &i in part {
                            let (ti, si, adv, ret) = batch[i];
                            let s = &trajs[ti].samples[si];
                            let adv = (adv - m) / sd;
                            let mu = policy.mlp.forward(&s.n, &mut cache);
                            let logp = log_prob(&s.a, &mu, &log_std);
                            let rho = (logp - s.logp).exp();
                            let clipped = (adv >= 0.0 && rho > 1.0 + cfg.clip) || (adv < 0.0 && rho < 1.0 - cfg.clip);
                            if !clipped {
                                // d(-rho A)/d logp = -rho A.
                                let c = -rho * adv / bsz;
                                let mut gmu = vec![0.0; nu];
                                for k in 0..nu {
                                    let var = (2.0 * log_std[k]).exp();
                                    let z = s.a[k] - mu[k];
                                    gmu[k] = c * z / var;
                                    gs[k] += c * (z * z / var - 1.0);
                                }
                                policy.mlp.backward(&cache, &gmu, &mut gp);
                            }
                            let v = value.forward(&s.n, &mut vcache)[0];
                            value.backward(&vcache, &[cfg.value_coef * 2.0 * (v - ret) / bsz], &mut gv);
                        }
                        (gp, gs, gv)
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
                    // Summed in chunk order, so a run does not depend on the thread schedule.
                    .fold((vec![0.0; np], vec![0.0; nu], vec![0.0; nv]), |mut a, b| {
                        a.0.iter_mut().zip(&b.0).for_each(|(x, y)| *x += y);
                        a.1.iter_mut().zip(&b.1).for_each(|(x, y)| *x += y);
                        a.2.iter_mut().zip(&b.2).for_each(|(x, y)| *x += y);
                        a
                    });
                let (mut gp, mut gs, mut gv) = grads;
                for g in gs.iter_mut() {
                    *g -= cfg.entropy_coef;
                }
                let mut all: Vec<f64> = gp.iter().chain(&gs).chain(&gv).copied().collect();
                let norm = clip_norm(&mut all, cfg.max_grad_norm);
                if !all.iter().all(|x| x.is_finite()) {
                    continue;
                }
                norms.push(norm);
                gp.copy_from_slice(&all[..np]);
                gs.copy_from_slice(&all[np..np + nu]);
                gv.copy_from_slice(&all[np + nu..]);
                adam_pi.step(&mut policy.mlp.params, &gp);
                adam_std.step(&mut log_std, &gs);
                adam_v.step(&mut value.params, &gv);
            }
        }
        // Observation statistics: update with this batch; they take effect from the next
        // collection (the networks adapt to the slow drift, as in VecNormalize).
        let obs: Vec<Vec<f64>> = trajs
            .iter()
            .flat_map(|t| {
                t.samples
                    .iter()
                    .map(|s| s.n.iter().enumerate().map(|(i, x)| x * policy.obs_std[i] + policy.obs_mean[i]).collect())
            })
            .collect();
        obs_stats.update(&obs);
        for i in 0..no {
            policy.obs_mean[i] = obs_stats.mean[i];
            policy.obs_std[i] = (obs_stats.var[i] + (0.01 * scale[i]).powi(2)).sqrt();
        }
        policy.log_std = Some(log_std.clone());
        let eval_return = if it % cfg.eval_every.max(1) == 0 || it == updates {
            evaluate(task, &policy, &eval_eps).0
        } else {
            f64::NAN
        };
        let log = IterLog {
            iteration: it,
            sim_steps,
            wall_s: start.elapsed().as_secs_f64(),
            loss: -train_return / task.steps as f64,
            train_return,
            eval_return,
            grad_norm: if norms.is_empty() { f64::NAN } else { norms.iter().sum::<f64>() / norms.len() as f64 },
            failed_rollouts: failed,
            fallback_steps: 0,
        };
        on_iter(&log, &policy);
        logs.push(log);
    }
    let (final_return, _) = evaluate(task, &policy, &eval_eps);
    TrainResult { policy, logs, status, final_return, sim_steps, seconds: start.elapsed().as_secs_f64() }
}

/// A standard normal sample (Box-Muller).
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Fisher-Yates.
fn shuffle(v: &mut [usize], rng: &mut ChaCha8Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.random_range(0..=i);
        v.swap(i, j);
    }
}
