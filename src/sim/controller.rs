//! Joint-level controllers evaluated once per step before the contact solve (explicit in time).

use crate::model::Model;
use nalgebra::DVector;
use serde::{Deserialize, Serialize};

/// What drives the actuators.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Controller {
    /// Zero torque.
    #[default]
    None,
    /// `u = kp (q_ref - q) - kd qd` per actuated joint, clamped to the joint's effort limit.
    /// `posture` lists the reference position of each actuated joint in actuator order.
    JointPd { kp: f64, kd: f64, posture: Vec<f64> },
}

impl Controller {
    /// Writes the actuator inputs (nu) for state `(q, v)`.
    pub fn compute(&self, model: &Model, q: &[f64], v: &[f64], u: &mut DVector<f64>) {
        match self {
            Controller::None => u.fill(0.0),
            Controller::JointPd { kp, kd, posture } => {
                let mut k = 0;
                for j in &model.joints {
                    if model.actuated_dofs.get(k) != Some(&j.idx_v) {
                        continue;
                    }
                    let raw = kp * (posture[k] - q[j.idx_q]) - kd * v[j.idx_v];
                    let lim = model.effort_limits[k];
                    u[k] = raw.clamp(-lim, lim);
                    k += 1;
                }
            }
        }
    }
}
