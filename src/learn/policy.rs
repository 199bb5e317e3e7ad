//! A trained policy: the MLP, its observation normalization and action scaling, and (for PPO)
//! the Gaussian's log standard deviation; saved and loaded as JSON.
//!
//! Deterministic action: `a = mlp((o - mean) / std)`, joint targets
//! `r = posture + action_scale clamp(a, -3, 3)` ([`crate::learn::task`]).
//!
//! # Driving a [`Simulation`] with a policy
//! Every control period (the task's `dt`, the scene's step), before `sim.step()`:
//! `policy.drive(&task, &mut sim, &command)`, which sets `sim.controller` to the scene's
//! `JointPd` (its `kp`, `kd`) with `posture = policy.act(&task, &sim, &command)`, and leaves
//! `sim.u_offset` alone (zero). `command` is the episode's [`Command`] (`Command::default()`: the
//! settled stance). Time-dependent observations (walk's clock) read `sim.t`.

use super::mlp::{Activation, Mlp, MlpCache};
use super::task::{Command, Task};
use crate::sim::Simulation;
use rand::rngs::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

/// A policy file (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// `bptt-exact`, `bptt-relaxed`, `bptt-signorini`, `ppo` or `untrained`.
    pub algorithm: String,
    /// Scene and task it was trained on.
    pub scene: String,
    pub task: String,
    /// Mean network: observation (normalized) -> action.
    pub mlp: Mlp,
    /// Observation normalization `n = (o - obs_mean) / obs_std` (obs_dim each).
    pub obs_mean: Vec<f64>,
    pub obs_std: Vec<f64>,
    /// Joint targets `posture + action_scale clamp(a, -3, 3)` (rad; posture in actuator order).
    pub action_scale: f64,
    pub posture: Vec<f64>,
    /// The PD gains the targets are meant for.
    pub kp: f64,
    pub kd: f64,
    /// PPO's state-independent log standard deviation per action (None for BPTT).
    #[serde(default)]
    pub log_std: Option<Vec<f64>>,
    /// Free-form training record (command, seed, steps, returns).
    #[serde(default)]
    pub info: serde_json::Value,
}

#[derive(Debug, Error)]
pub enum PolicyError {
    #[error("{file}: cannot read: {message}")]
    Io { file: String, message: String },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
}

impl Policy {
    /// A fresh policy for `task`: seeded Glorot weights with the last layer scaled by 0.01
    /// (so it starts close to `a = 0`, the scene's PD), the task's fixed observation scales.
    pub fn new(task: &Task, hidden: &[usize], activation: Activation, rng: &mut ChaCha8Rng) -> Self {
        let mut sizes = vec![task.obs_dim()];
        sizes.extend_from_slice(hidden);
        sizes.push(task.act_dim());
        Self {
            algorithm: "untrained".into(),
            scene: task.scene.clone(),
            task: task.spec.task.clone(),
            mlp: Mlp::with_activation(&sizes, activation, rng, 0.01),
            obs_mean: vec![0.0; task.obs_dim()],
            obs_std: task.obs_scale(),
            action_scale: task.spec.action_scale,
            posture: task.posture.clone(),
            kp: task.kp,
            kd: task.kd,
            log_std: None,
            info: serde_json::Value::Null,
        }
    }

    /// Normalized observation.
    pub fn normalize(&self, o: &[f64], n: &mut [f64]) {
        for i in 0..o.len() {
            n[i] = (o[i] - self.obs_mean[i]) / self.obs_std[i];
        }
    }

    /// Deterministic action for observation `o`, keeping the forward pass in `cache`.
    pub fn action(&self, o: &[f64], cache: &mut MlpCache) -> Vec<f64> {
        let mut n = vec![0.0; o.len()];
        self.normalize(o, &mut n);
        self.mlp.forward(&n, cache)
    }

    /// Joint targets (nu, actuator order) for the simulation's current state under `command`.
    pub fn act(&self, task: &Task, sim: &Simulation, command: &Command) -> Vec<f64> {
        let mut o = vec![0.0; task.obs_dim()];
        self.act_observed(task, sim, command, &mut o, &mut MlpCache::default()).1
    }

    /// [`Policy::act`] with the caller's observation buffer (filled, `obs_dim`) and cache;
    /// returns the action with the targets.
    fn act_observed(
        &self,
        task: &Task,
        sim: &Simulation,
        command: &Command,
        o: &mut [f64],
        cache: &mut MlpCache,
    ) -> (Vec<f64>, Vec<f64>) {
        task.observe(sim.q.as_slice(), sim.v.as_slice(), sim.t, command, o, None);
        let a = self.action(o, cache);
        let mut r = vec![0.0; task.act_dim()];
        task.targets(&a, sim.t, command, &mut r);
        (a, r)
    }

    /// Sets `sim.controller` to the scene's PD toward [`Policy::act`]'s targets (module docs).
    pub fn drive(&self, task: &Task, sim: &mut Simulation, command: &Command) {
        let r = self.act(task, sim, command);
        sim.controller = task.controller(&r);
    }

    /// [`Policy::drive`], leaving the observation in `o` (`obs_dim`) and returning the action
    /// (for a caller that also scores the step, such as the app's policy driver).
    pub fn drive_observed(
        &self,
        task: &Task,
        sim: &mut Simulation,
        command: &Command,
        o: &mut [f64],
        cache: &mut MlpCache,
    ) -> Vec<f64> {
        let (a, r) = self.act_observed(task, sim, command, o, cache);
        sim.controller = task.controller(&r);
        a
    }

    /// Checks the policy against a task (sizes, posture) after loading.
    pub fn check(&self, task: &Task) -> Result<(), String> {
        if self.mlp.n_in() != task.obs_dim() || self.mlp.n_out() != task.act_dim() {
            return Err(format!(
                "network is {} -> {}, the task needs {} -> {}",
                self.mlp.n_in(),
                self.mlp.n_out(),
                task.obs_dim(),
                task.act_dim()
            ));
        }
        if self.task != task.spec.task {
            return Err(format!("trained for task `{}`, not `{}`", self.task, task.spec.task));
        }
        Ok(())
    }

    /// Writes the policy as JSON, atomically.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string(self).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        crate::io::write_atomic(path, text.as_bytes())
    }

    /// Reads and validates a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| PolicyError::Io { file: file.clone(), message: e.to_string() })?;
        let mut de = serde_json::Deserializer::from_str(&text);
        let p: Policy = serde_path_to_error::deserialize(&mut de).map_err(|e| PolicyError::Invalid {
            file: file.clone(),
            message: format!("{}: {}", e.path(), e.inner()),
        })?;
        let bad = |m: String| Err(PolicyError::Invalid { file: file.clone(), message: m });
        if !p.mlp.consistent() {
            return bad("mlp: sizes and parameter count disagree, or a parameter is not finite".into());
        }
        let n = p.mlp.n_in();
        if p.obs_mean.len() != n || p.obs_std.len() != n {
            return bad(format!("obs_mean / obs_std: need {n} entries each"));
        }
        if p.obs_std.iter().any(|s| !(s.is_finite() && *s > 0.0)) || p.obs_mean.iter().any(|m| !m.is_finite()) {
            return bad("obs_std: entries must be finite and positive (obs_mean finite)".into());
        }
        if p.posture.len() != p.mlp.n_out() || !(p.action_scale.is_finite() && p.action_scale > 0.0) {
            return bad(format!("posture: needs {} entries; action_scale must be positive", p.mlp.n_out()));
        }
        if p.log_std.as_ref().is_some_and(|l| l.len() != p.mlp.n_out() || l.iter().any(|x| !x.is_finite())) {
            return bad(format!("log_std: needs {} finite entries", p.mlp.n_out()));
        }
        Ok(p)
    }
}
