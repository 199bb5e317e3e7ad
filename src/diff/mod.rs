//! Derivatives of the step: transition Jacobians `A = d x+ / d x`, `B = d x+ / d u` in tangent
//! coordinates (`dx = [dq (nv); dv (nv)]`), and the finite-difference reference.

pub mod fd;

pub use fd::{fd_transition, FdWorkspace};
