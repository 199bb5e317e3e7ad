//! External pulls: a world-frame force applied at a point of a body during a time window.
//! Its generalized force is `tau_ext = J_p^T f` with `J_p` the point's LOCAL_WORLD_ALIGNED
//! linear Jacobian.

use crate::dynamics::point_jacobian;
use crate::model::{Data, Model};
use nalgebra::{DVector, Vector3};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pull {
    pub body: usize,
    /// Application point in the body frame (m).
    pub point: Vector3<f64>,
    /// Force in the world frame (N).
    pub force: Vector3<f64>,
    /// Start time (s).
    pub start: f64,
    /// Duration (s).
    pub duration: f64,
}

impl Pull {
    /// Whether the pull acts during the step that starts at `t`.
    pub fn active(&self, t: f64) -> bool {
        t >= self.start && t < self.start + self.duration
    }

    /// Adds this pull's generalized force to `tau_ext`. Needs `forward_kinematics`; uses
    /// `data.jac3` as scratch.
    pub fn add_generalized_force(&self, model: &Model, data: &mut Data, tau_ext: &mut DVector<f64>) {
        let p = data.o_m_i[self.body].act_point(&self.point);
        point_jacobian(model, &data.o_m_i, self.body, &p, &mut data.jac3);
        tau_ext.gemv_tr(1.0, &data.jac3, &self.force, 1.0);
    }
}
