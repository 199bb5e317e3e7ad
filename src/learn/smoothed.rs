//! BPTT's policy gradient against a **Gaussian-smoothed finite-difference reference** of the
//! simulator's rollout loss: which contact sensitivity's gradient is the derivative of the loss
//! that learning actually sees across lift-offs and touchdowns.
//!
//! The loss `L(theta)` of a hard-contact rollout is piecewise smooth in the policy parameters:
//! every touchdown or lift-off that moves to another step when `theta` changes makes a kink or
//! a jump. Between events, the exact sensitivity's gradient is `L`'s derivative; it cannot see
//! the events. The reference is the derivative at 0 of the loss smoothed along a unit
//! direction `d` with a Gaussian of width `sigma` (Duchi et al. 2012, Suh et al. 2022, "Do
//! differentiable simulators give better policy gradients?"):
//!
//! `D_sigma(d) = d/ds (L(theta + . d) * phi_sigma)(0) = int L(theta + s d) s / sigma^2 phi_sigma(s) ds`,
//!
//! by the trapezoid rule on `points` nodes over `[-4 sigma, 4 sigma]` (one deterministic
//! rollout per node, no sampling noise).
//!
//! **Widths are matched in action space.** A contact event moves when the *actions* change by
//! enough, and a unit direction in parameter space moves the actions by very different amounts:
//! along the gradient of a 2x64-tanh walk policy about 0.5 per unit, along a random direction
//! about 0.03. The same `sigma` in parameter space is therefore a 15-20x narrower smoothing in a
//! random direction. Here `sigma(d) = sigma_a / r(d)`, where `r(d)` is the root mean square over
//! the rollout's steps and joints of `da/ds` (central differences, `h = 1e-6`): every direction
//! is smoothed over the same root-mean-square action change `sigma_a` (policy outputs; times
//! `action_scale` in radians of joint target).
//!
//! The error of a sensitivity's gradient `g` in direction `d` is `|g . d - D| / |D|`.

use super::bptt::rollout_loss;
use super::mlp::{norm, MlpCache};
use super::policy::Policy;
use super::task::{Command, Env, Episode, Task};
use nalgebra::DVector;
use rand::{Rng, RngExt};

/// Half width of the central difference behind the action rate `r(d)`.
const ACTION_RATE_STEP: f64 = 1e-6;

/// `D_sigma(d)` of `f(s) = L(theta + s d)` (module docs): trapezoid rule on `points` (at least
/// 3) nodes over `[-4 sigma, 4 sigma]`. `None` if `f` fails at a node.
pub fn smoothed_derivative(f: &mut dyn FnMut(f64) -> Option<f64>, sigma: f64, points: usize) -> Option<f64> {
    let (a, n) = (4.0 * sigma, points.max(3));
    let h = 2.0 * a / (n - 1) as f64;
    let norm = sigma * (2.0 * std::f64::consts::PI).sqrt();
    let mut sum = 0.0;
    for i in 0..n {
        let s = -a + h * i as f64;
        let w = if i == 0 || i == n - 1 { 0.5 } else { 1.0 };
        let phi = (-0.5 * (s / sigma).powi(2)).exp() / norm;
        sum += w * f(s)? * s / (sigma * sigma) * phi;
    }
    Some(sum * h)
}

/// `policy` with its parameters moved by `s d`.
pub fn moved(policy: &Policy, dir: &[f64], s: f64) -> Policy {
    let mut p = policy.clone();
    for (x, d) in p.mlp.params.iter_mut().zip(dir) {
        *x += s * d;
    }
    p
}

/// The actions (policy outputs, every step, in order) of `policy`'s rollout of `ep`. `None` if
/// a step fails.
pub fn rollout_actions(task: &Task, policy: &Policy, ep: &Episode, env: &mut Env) -> Option<Vec<f64>> {
    env.reset(task, ep);
    let mut cache = MlpCache::default();
    let mut out = Vec::with_capacity(task.steps * task.model.nu);
    for _ in 0..task.steps {
        let obs = env.obs.clone();
        let a = policy.action(&obs, &mut cache);
        env.step(task, &a, None)?;
        out.extend_from_slice(&a);
    }
    Some(out)
}

/// `r(d)`: root mean square of `da/ds` over the rollout (module docs).
pub fn action_rate(task: &Task, policy: &Policy, ep: &Episode, dir: &[f64], env: &mut Env) -> Option<f64> {
    let h = ACTION_RATE_STEP;
    let p = rollout_actions(task, &moved(policy, dir, h), ep, env)?;
    let m = rollout_actions(task, &moved(policy, dir, -h), ep, env)?;
    let ms = p.iter().zip(&m).map(|(a, b)| ((a - b) / (2.0 * h)).powi(2)).sum::<f64>() / p.len().max(1) as f64;
    Some(ms.sqrt())
}

/// One direction's comparison at one action-space width.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DirectionReference {
    /// `sigma_a` and the parameter-space `sigma = sigma_a / r(d)`.
    pub sigma_action: f64,
    pub sigma: f64,
    /// `D_sigma(d)`.
    pub reference: f64,
    /// `g . d` of every compared gradient, in the caller's order.
    pub analytic: Vec<f64>,
}

impl DirectionReference {
    /// `|g . d - D| / |D|` of gradient `i`.
    pub fn rel_error(&self, i: usize) -> f64 {
        (self.analytic[i] - self.reference).abs() / self.reference.abs()
    }
}

/// The reference along unit direction `dir` at every action-space width of `sigma_actions`,
/// with `g . d` for each of `grads`. `None` if a rollout fails.
pub fn compare_along(
    task: &Task,
    policy: &Policy,
    ep: &Episode,
    grads: &[Vec<f64>],
    dir: &[f64],
    sigma_actions: &[f64],
    points: usize,
) -> Option<Vec<DirectionReference>> {
    let mut env = Env::new(task);
    let rate = action_rate(task, policy, ep, dir, &mut env)?;
    let analytic: Vec<f64> = grads.iter().map(|g| g.iter().zip(dir).map(|(a, b)| a * b).sum()).collect();
    sigma_actions
        .iter()
        .map(|&sa| {
            let sigma = sa / rate;
            let mut f = |s: f64| rollout_loss(task, &moved(policy, dir, s), ep, &mut env);
            let reference = smoothed_derivative(&mut f, sigma, points)?;
            Some(DirectionReference { sigma_action: sa, sigma, reference, analytic: analytic.clone() })
        })
        .collect()
}

/// The measured rollout of the walk task (`tests/learn_walk_gradient.rs`,
/// `examples/walk_smoothed.rs`): from the settled stance moving at the 0.4 m/s command, clock
/// phase -0.3, no push. The diagonal pair with phase offset 0 starts its swing after 2-3 steps
/// and lands after about 27; the other pair lifts off then.
pub fn moving_start(task: &Task) -> Episode {
    let mut v0 = DVector::zeros(task.model.nv);
    v0[0] = 0.4;
    Episode {
        q0: task.q_stand.clone(),
        v0,
        command: Command { speed: 0.4, phase: -0.3, ..Command::default() },
        pushes: vec![],
    }
}

/// Lift-offs and touchdowns of the task's feet (normal impulse above 1e-6 N s or not) along
/// `policy`'s rollout of `ep`, every foot counted as on the ground before the first step. A
/// failed step ends the count.
pub fn contact_events(task: &Task, policy: &Policy, ep: &Episode) -> (usize, usize) {
    let mut env = Env::new(task);
    env.reset(task, ep);
    let mut cache = MlpCache::default();
    let (mut lift_offs, mut touchdowns) = (0, 0);
    let mut prev: Vec<bool> = task.feet.iter().map(|_| true).collect();
    for _ in 0..task.steps {
        let a = policy.action(&env.obs.clone(), &mut cache);
        if env.step(task, &a, None).is_none() {
            break;
        }
        for (k, f) in task.feet.iter().enumerate() {
            let c = env.ws.lambda[3 * f.contact] > 1e-6;
            lift_offs += (prev[k] && !c) as usize;
            touchdowns += (!prev[k] && c) as usize;
            prev[k] = c;
        }
    }
    (lift_offs, touchdowns)
}

/// `v / |v|`.
pub fn unit(v: &[f64]) -> Vec<f64> {
    let n = norm(v);
    v.iter().map(|x| x / n).collect()
}

/// A random unit direction in `n` dimensions: uniform in the cube `[-1, 1)^n`, normalized.
pub fn random_direction(n: usize, rng: &mut impl Rng) -> Vec<f64> {
    let r: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    unit(&r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothing_a_kink_gives_the_mean_slope_and_a_smooth_function_its_derivative() {
        // |s| smoothed at 0 has derivative 0; s^3 + 2 s has 2 + 3 sigma^2. The window's cut at
        // 4 sigma loses 0.11 % of the Gaussian's second moment.
        let d = smoothed_derivative(&mut |s: f64| Some(s.abs() + 0.5 * s), 0.1, 161).unwrap();
        assert!((d - 0.5).abs() < 1e-3, "{d}");
        let d = smoothed_derivative(&mut |s: f64| Some(s.powi(3) + 2.0 * s), 0.1, 161).unwrap();
        assert!((d - (2.0 + 3.0 * 0.01)).abs() < 5e-3, "{d}");
        // A unit jump at 0: the smoothed derivative is the Gaussian's density there.
        let d = smoothed_derivative(&mut |s: f64| Some(if s > 0.0 { 1.0 } else { 0.0 }), 0.1, 1601).unwrap();
        assert!((d - 1.0 / (0.1 * (2.0 * std::f64::consts::PI).sqrt())).abs() < 2e-2, "{d}");
        assert!(smoothed_derivative(&mut |_| None, 0.1, 11).is_none());
    }
}
