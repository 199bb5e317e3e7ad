//! Optimal control through contact (DESIGN 5): action models (one knot: dynamics and cost with
//! derivatives) separate from the solvers that use them, the shooting problem, and DDP/iLQR with
//! control limits.

pub mod action;
pub mod boxqp;
pub mod ddp;

pub use action::{ActionData, ActionModel, Lqr};
pub use ddp::{Ddp, Info, IterationInfo, Settings, ShootingProblem, Status};
pub mod contact;

pub use contact::{ContactAction, FootClearance, PoseCost};
pub mod cito;
pub mod cito_plot;
pub mod mpc;
pub mod pull_sweep;
pub mod starts;
