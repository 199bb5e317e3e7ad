//! Time stepping: the hard-contact step (DESIGN 2), external pulls, joint controllers, and a
//! [`Simulation`] that owns a state and advances it.

pub mod controller;
pub mod pulls;
pub mod record;
pub mod simulation;
pub mod snapshot;
pub mod step;

pub use controller::Controller;
pub use pulls::Pull;
pub use simulation::{SettleError, Simulation};
pub use step::{step, StepInfo, StepSettings, StepStatus, StepWorkspace};
