//! Derivatives of the step: transition Jacobians `A = d x+ / d x`, `B = d x+ / d u` in tangent
//! coordinates (`dx = [dq (nv); dv (nv)]`): the analytic ones and the finite-difference
//! reference.

pub mod fd;
pub mod signorini;
pub mod transition;

pub use fd::{fd_transition, FdWorkspace};
pub use transition::{transition_jacobians, Sensitivity, TransitionInfo, TransitionStatus, TransitionWorkspace};
