//! Derivatives of the step: transition Jacobians `A = d x+ / d x`, `B = d x+ / d u` in tangent
//! coordinates (`dx = [dq (nv); dv (nv)]`): the analytic ones and the finite-difference
//! reference.

pub mod fd;
pub mod rollout;
pub mod sensitivity;
pub mod signorini;
pub mod sweep;
pub mod transition;

pub use fd::{fd_transition, FdWorkspace};
pub use rollout::{apply_param, rollout_cost, rollout_gradient, Cost, Param, PointCost, RolloutError, RolloutGradient};
pub use sensitivity::{Sensitivity, SensitivityError, SensitivityKind, DEFAULT_DELTA, DEFAULT_KAPPA};
pub use transition::{
    transition_jacobians, transition_jacobians_after_step, transition_jacobians_ext, TransitionInfo, TransitionStatus,
    TransitionWorkspace,
};
