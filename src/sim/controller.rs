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
    /// Writes the actuator inputs for state `(q, v)` and step `h` as an explicit part `u` (nu)
    /// and an implicit damping `damping` (nu), meaning `u(v+) = u - damping (v+ - v)`.
    ///
    /// The PD law is evaluated at the end of the step, `kp (q_ref - q - h v+) - kd v+`, which is
    /// `u - (kd + h kp)(v+ - v)` with `u = kp (q_ref - q) - (kd + h kp) v`: unconditionally
    /// stable for any gains, as MuJoCo's implicit damping. A joint whose torque saturates is
    /// treated explicitly (clamped, no implicit term).
    pub fn compute(
        &self,
        model: &Model,
        q: &[f64],
        v: &[f64],
        h: f64,
        u: &mut DVector<f64>,
        damping: &mut DVector<f64>,
    ) {
        damping.fill(0.0);
        match self {
            Controller::None => u.fill(0.0),
            Controller::JointPd { kp, kd, posture } => {
                let mut k = 0;
                for j in &model.joints {
                    if model.actuated_dofs.get(k) != Some(&j.idx_v) {
                        continue;
                    }
                    let d = kd + h * kp;
                    let raw = kp * (posture[k] - q[j.idx_q]) - d * v[j.idx_v];
                    let lim = model.effort_limits[k];
                    if raw.abs() <= lim {
                        u[k] = raw;
                        damping[k] = d;
                    } else {
                        u[k] = raw.clamp(-lim, lim);
                    }
                    k += 1;
                }
            }
        }
    }
}
