//! Evaluation by full-toss rollouts from the first frame (ContactNets, section V).
//!
//! For a toss of `T + 1` frames the model rolls out `T` steps from frame 0 with no correction
//! from the data, and over frames `k = 1..T`:
//!
//! ```text
//! position_error_pct = mean_k ||p_sim,k - p_real,k|| / W * 100
//! angle_error_deg    = mean_k angle(q_sim,k^-1 q_real,k)  (degrees)
//! penetration_pct    = mean_k max(0, -min_i z_i,k) / W * 100
//! ```
//! with `W = 2` the full block width in scaled units (ContactNets reports % of block width) and
//! `z_i,k` the heights of the **true** cube corners at the simulated pose (so a model cannot
//! hide penetration behind its own geometry). The report's numbers are means over tosses. A
//! rollout the simulator cannot continue keeps its last pose for the remaining frames and is
//! flagged.

use super::data::Toss;
use super::model::{LearnedModel, Pose};
use nalgebra::Vector3;
use serde::{Deserialize, Serialize};

/// Metrics of one toss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TossMetrics {
    pub name: String,
    pub steps: usize,
    pub position_error_pct: f64,
    pub angle_error_deg: f64,
    pub penetration_pct: f64,
    /// Why the rollout stopped early, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Means over tosses and the per-toss values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub method: String,
    pub tosses: usize,
    pub position_error_pct: f64,
    pub angle_error_deg: f64,
    pub penetration_pct: f64,
    pub failed_rollouts: usize,
    pub per_toss: Vec<TossMetrics>,
}

/// The rollout of one toss from its first frame, `T + 1` poses: a rollout the simulator could
/// not continue is padded with its last pose, and the reason is returned with it.
pub fn toss_rollout(model: &LearnedModel, toss: &Toss) -> (Vec<Pose>, Option<String>) {
    let steps = toss.frames.len() - 1;
    let (mut poses, failure) = match model.rollout(&toss.frames[0], steps) {
        Ok(p) => (p, None),
        Err(e) => {
            // Re-run to the failure step to keep the prefix that did advance.
            let done = match &e {
                super::model::RolloutError::Step { step, .. } | super::model::RolloutError::NonFinite { step } => *step,
                _ => 0,
            };
            let prefix = model
                .rollout(&toss.frames[0], done)
                .unwrap_or_else(|_| vec![Pose { p: toss.frames[0].p, q: toss.frames[0].q }]);
            (prefix, Some(e.to_string()))
        }
    };
    let last = *poses.last().expect("a rollout has its first pose");
    poses.resize(steps + 1, last);
    (poses, failure)
}

/// The metrics of a rollout `poses` (from [`toss_rollout`]) against the toss.
pub fn rollout_metrics(model: &LearnedModel, toss: &Toss, poses: &[Pose], failure: Option<String>) -> TossMetrics {
    let steps = toss.frames.len() - 1;
    assert_eq!(poses.len(), steps + 1, "a rollout of {} has one pose per frame", toss.name);
    let w = model.body.block_width();
    let corners: Vec<Vector3<f64>> = model.body.vertices.iter().map(|v| Vector3::from(*v)).collect();
    let (mut pos, mut ang, mut pen) = (0.0, 0.0, 0.0);
    for (pose, frame) in poses.iter().zip(&toss.frames).skip(1) {
        pos += (pose.p - frame.p).norm() / w * 100.0;
        ang += pose.q.angle_to(&frame.q).to_degrees();
        let r = pose.q.to_rotation_matrix();
        let zmin = corners.iter().map(|c| pose.p.z + (r * c).z).fold(f64::INFINITY, f64::min);
        pen += (-zmin).max(0.0) / w * 100.0;
    }
    let n = steps.max(1) as f64;
    TossMetrics {
        name: toss.name.clone(),
        steps,
        position_error_pct: pos / n,
        angle_error_deg: ang / n,
        penetration_pct: pen / n,
        failure,
    }
}

/// Rolls out one toss and compares it with the data.
pub fn toss_metrics(model: &LearnedModel, toss: &Toss) -> TossMetrics {
    let (poses, failure) = toss_rollout(model, toss);
    rollout_metrics(model, toss, &poses, failure)
}

/// Rolls out every toss (on `threads` scoped threads) and averages.
pub fn evaluate(model: &LearnedModel, tosses: &[&Toss], threads: usize) -> EvalReport {
    let chunk = tosses.len().div_ceil(threads.max(1)).max(1);
    let per_toss: Vec<TossMetrics> = std::thread::scope(|s| {
        let hs: Vec<_> = tosses
            .chunks(chunk)
            .map(|c| s.spawn(move || c.iter().map(|t| toss_metrics(model, t)).collect::<Vec<_>>()))
            .collect();
        hs.into_iter().flat_map(|h| h.join().expect("rollout worker panicked")).collect()
    });
    let n = per_toss.len().max(1) as f64;
    let mean = |f: &dyn Fn(&TossMetrics) -> f64| per_toss.iter().map(f).sum::<f64>() / n;
    EvalReport {
        method: model.method.name().into(),
        tosses: per_toss.len(),
        position_error_pct: mean(&|t| t.position_error_pct),
        angle_error_deg: mean(&|t| t.angle_error_deg),
        penetration_pct: mean(&|t| t.penetration_pct),
        failed_rollouts: per_toss.iter().filter(|t| t.failure.is_some()).count(),
        per_toss,
    }
}

/// Largest distance between learned vertex `i` and true corner `i` (training starts vertex `i`
/// from corner `i`), in scaled units, i.e. as a fraction of the half width.
pub fn vertex_error(model: &LearnedModel) -> f64 {
    model.vertices().iter().zip(&model.body.vertices).map(|(v, t)| (v - Vector3::from(*t)).norm()).fold(0.0, f64::max)
}
