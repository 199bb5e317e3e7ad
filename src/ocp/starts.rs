//! CITO from perturbed starts: the same task solved from `N` seeded perturbations of the
//! settled stance, so that a comparison of sensitivities reports a mean and a spread instead of
//! one run. Start `k` draws from the seed `seed + k`, so every sensitivity sees the same `N`
//! starts: joint offsets (uniform in `+-joints` rad on every one-dof joint, clamped to its
//! limits) applied to the *initial* state, which then settles under its controller (offsets
//! applied to a settled stance would push the feet into the ground: an impact, not a start),
//! and a base twist (uniform in `+-base_linear_velocity` m/s and `+-base_angular_velocity`
//! rad/s per body axis) added to the settled state, which the plan's first knots must absorb. A run *succeeds* when its final pose is within 1 cm and
//! 3 degrees of the target, penetration stays at most 1e-4 m and no impulse leaves its cone
//! (by more than 1e-9 N s).

use super::cito::CitoSummary;
use crate::sim::{SettleError, Simulation};
use crate::validate::{Checker, SettingsError};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Size of the perturbations (defaults in brackets).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartNoise {
    /// Joint offsets (rad) [0.05].
    pub joints: f64,
    /// Base linear (m/s) [0.02] and angular (rad/s) [0.05] velocity per body axis.
    pub base_linear_velocity: f64,
    pub base_angular_velocity: f64,
}

impl Default for StartNoise {
    fn default() -> Self {
        Self { joints: 0.05, base_linear_velocity: 0.02, base_angular_velocity: 0.05 }
    }
}

impl StartNoise {
    pub fn validate(&self) -> Result<(), SettingsError> {
        Checker::new("StartNoise")
            .non_negative("joints", self.joints)
            .non_negative("base_linear_velocity", self.base_linear_velocity)
            .non_negative("base_angular_velocity", self.base_angular_velocity)
            .finish()
    }
}

/// The start of seed `seed` (module docs): `initial` (an initial state, its pulls removed by
/// the caller) with its joints perturbed, settled for `settle` seconds, then given a base twist.
pub fn perturbed(initial: &Simulation, settle: f64, noise: &StartNoise, seed: u64) -> Result<Simulation, SettleError> {
    let mut out = initial.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draw = |a: f64| if a > 0.0 { rng.random_range(-a..a) } else { 0.0 };
    let m = &*initial.model;
    for j in m.joints.iter().filter(|j| j.nq() == 1 && j.nv() == 1) {
        let q = out.q[j.idx_q] + draw(noise.joints);
        out.q[j.idx_q] = q.clamp(j.limits.lower, j.limits.upper);
    }
    out.settle(settle)?;
    if m.has_free_flyer() {
        for i in 0..3 {
            out.v[i] += draw(noise.base_linear_velocity);
        }
        for i in 3..6 {
            out.v[i] += draw(noise.base_angular_velocity);
        }
    }
    Ok(out)
}

/// Footfalls every foot must take for a successful run to count as *stepping*.
pub const STEPPING_FOOTFALLS: usize = 2;

/// Whether a run met the task (module docs).
pub fn succeeded(s: &CitoSummary) -> bool {
    s.pose_error_m <= 0.01 && s.pose_error_deg <= 3.0 && s.max_penetration_m <= 1e-4 && s.max_cone_violation <= 1e-9
}

/// Mean and sample standard deviation (0 for fewer than two values).
fn mean_std(x: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = x.clone().count() as f64;
    let mean = x.clone().sum::<f64>() / n;
    let var = if n > 1.0 { x.map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

/// One sensitivity's runs over the starts, summarized.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartsRow {
    pub sensitivity: String,
    pub starts: usize,
    pub succeeded: usize,
    pub final_cost_mean: f64,
    pub final_cost_std: f64,
    pub pose_error_mm_mean: f64,
    pub pose_error_mm_std: f64,
    pub pose_error_deg_mean: f64,
    pub iterations_mean: f64,
    pub iterations_std: f64,
    pub solve_time_s_mean: f64,
    /// Runs that repositioned at least one foot.
    pub repositioned_runs: usize,
    /// Knot derivatives from a fallback sensitivity, and unconverged ones, over all runs.
    pub fallback_jacobians: usize,
    pub unconverged_jacobians: usize,
    /// Mean footfalls per foot, and the runs that succeeded with at least
    /// [`STEPPING_FOOTFALLS`] on every foot.
    #[serde(default)]
    pub footfalls_mean: BTreeMap<String, f64>,
    #[serde(default)]
    pub succeeded_stepping: usize,
    /// Mean height of each foot at the final knot (m).
    #[serde(default)]
    pub final_foot_height_mean: BTreeMap<String, f64>,
    /// On terrain with steps: runs whose every front foot (a contact point named `F*_foot`)
    /// stood last on a raised primitive (a step or heightfield, not the ground).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_feet_raised: Option<usize>,
}

/// Whether a run ends with every front foot on raised terrain (`StartsRow::front_feet_raised`);
/// `None` on flat ground.
pub fn front_feet_raised(s: &CitoSummary) -> Option<bool> {
    let support = s.final_foot_support.as_ref()?;
    let front: Vec<&String> = s.footfalls.keys().filter(|f| f.starts_with('F') && f.ends_with("foot")).collect();
    Some(!front.is_empty() && front.iter().all(|f| support.get(*f).is_some_and(|&p| p > 0)))
}

/// Mean over `runs` of a per-foot value, per foot name of the first run.
fn per_foot(runs: &[CitoSummary], value: impl Fn(&CitoSummary, &str) -> Option<f64>) -> BTreeMap<String, f64> {
    runs[0]
        .footfalls
        .keys()
        .map(|f| {
            let v: Vec<f64> = runs.iter().filter_map(|r| value(r, f)).collect();
            (f.clone(), v.iter().sum::<f64>() / v.len().max(1) as f64)
        })
        .collect()
}

/// Summarizes one sensitivity's runs (all of the same sensitivity; at least one).
pub fn summarize(runs: &[CitoSummary]) -> StartsRow {
    assert!(!runs.is_empty(), "summarize: no runs");
    let (final_cost_mean, final_cost_std) = mean_std(runs.iter().map(|r| r.final_cost));
    let (pose_error_mm_mean, pose_error_mm_std) = mean_std(runs.iter().map(|r| 1e3 * r.pose_error_m));
    let (iterations_mean, iterations_std) = mean_std(runs.iter().map(|r| r.iterations as f64));
    StartsRow {
        sensitivity: runs[0].sensitivity.clone(),
        starts: runs.len(),
        succeeded: runs.iter().filter(|r| succeeded(r)).count(),
        final_cost_mean,
        final_cost_std,
        pose_error_mm_mean,
        pose_error_mm_std,
        pose_error_deg_mean: mean_std(runs.iter().map(|r| r.pose_error_deg)).0,
        iterations_mean,
        iterations_std,
        solve_time_s_mean: mean_std(runs.iter().map(|r| r.solve_time_s)).0,
        repositioned_runs: runs.iter().filter(|r| !r.feet_repositioned.is_empty()).count(),
        fallback_jacobians: runs.iter().map(|r| r.fallback_jacobians).sum(),
        unconverged_jacobians: runs.iter().map(|r| r.unconverged_jacobians).sum(),
        footfalls_mean: per_foot(runs, |r, f| r.footfalls.get(f).map(|&n| n as f64)),
        succeeded_stepping: runs
            .iter()
            .filter(|r| {
                succeeded(r) && !r.footfalls.is_empty() && r.footfalls.values().all(|&n| n >= STEPPING_FOOTFALLS)
            })
            .count(),
        final_foot_height_mean: per_foot(runs, |r, f| r.final_foot_height.get(f).copied()),
        front_feet_raised: runs[0]
            .final_foot_support
            .is_some()
            .then(|| runs.iter().filter(|r| front_feet_raised(r) == Some(true)).count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_deviation() {
        let (m, s) = mean_std([1.0, 2.0, 3.0, 4.0].into_iter());
        assert_eq!(m, 2.5);
        assert!((s - (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!(mean_std([7.0].into_iter()), (7.0, 0.0));
    }
}
