//! ContactLab: hard-contact simulation of floating-base legged robots, with contact
//! sensitivities for optimization and learning through contact.
//!
//! # Layers
//! Imports run one way, each layer using only those to its left:
//!
//! ```text
//! linalg, spatial, validate <- model <- dynamics <- contact <- sim <- diff <- {ocp, learn}
//!     <- scene <- {cli (the binary), app (the `viewer` feature)}
//! ```
//!
//! The library's types are the API: a [`model::Model`] (from a URDF or a builtin), a
//! [`contact::Terrain`], [`sim::StepSettings`] and a start state make a [`sim::Simulation`];
//! [`diff`] differentiates its step with a chosen [`diff::Sensitivity`]; [`ocp::cito`],
//! [`ocp::mpc`] and [`learn`] take their own settings structs (`CitoSettings`, `MpcSettings`,
//! `TaskSettings`, `BpttSettings`, `PpoSettings`), each with documented defaults and a
//! `validate()` that names the bad field. [`scene`] is only an assembler that turns a RON file
//! into those types, as MuJoCo's XML layer does; nothing below it imports it. The reference
//! formulation is `../shared/docs/DESIGN.md`; each module's docs carry its math.
//!
//! # Example
//! ```no_run
//! use contactlab::prelude::*;
//! use nalgebra::{DVector, Vector3};
//! use std::sync::Arc;
//!
//! # fn main() -> anyhow::Result<()> {
//! let model = Arc::new(urdf::load("assets/robots/quadruped.urdf".as_ref(), RootJoint::FreeFlyer)?.model);
//! let mut q = neutral(&model);
//! set_free_flyer(q.as_mut_slice(), &Se3::new(nalgebra::Matrix3::identity(), Vector3::new(0.0, 0.0, 0.4)));
//! let v = DVector::zeros(model.nv);
//! let mut sim = Simulation::new(model.clone(), Terrain::flat(0.8), StepSettings::default(), q, v);
//! sim.controller = Controller::JointPd { kp: 80.0, kd: 2.0, posture: vec![0.0; model.nu] };
//! sim.settle(1.0)?; // drop onto the feet
//! let info = sim.step();
//! println!("{:?}: {} contacts active", info.status, info.active_contacts);
//!
//! // Raise the base 4 cm by contact-implicit trajectory optimization (no contact schedule).
//! let settings = CitoSettings { target_offset: [0.0, 0.0, 0.04], ..CitoSettings::default() };
//! let report = cito::solve(&CitoProblem::from_state(&sim, &settings)?, None, &mut |_| {});
//! println!("{:?}, pose error {:.1} mm", report.info.status, 1e3 * report.pose_error_m);
//! # Ok(())
//! # }
//! ```
//! `examples/quickstart.rs` adds the transition Jacobians and a crouched stance.

#[cfg(feature = "viewer")]
pub mod app;
pub mod contact;
pub mod diff;
pub mod dynamics;
pub mod io;
pub mod learn;
pub mod linalg;
pub mod model;
pub mod ocp;
pub mod plot;
pub mod scene;
pub mod sim;
pub mod spatial;
pub mod validate;

/// The types most programs need: `use contactlab::prelude::*;`.
pub mod prelude {
    pub use crate::contact::Terrain;
    pub use crate::diff::{
        fd_transition, rollout_gradient, transition_jacobians, Sensitivity, SensitivityKind, TransitionInfo,
        TransitionWorkspace,
    };
    pub use crate::learn::{train_bptt, train_ppo, BpttSettings, Policy, PpoSettings, Task, TaskSettings};
    pub use crate::model::configuration::set_free_flyer;
    pub use crate::model::urdf::{self, RootJoint};
    pub use crate::model::{builtin, difference, integrate, neutral, Data, Model};
    pub use crate::ocp::cito::{self, hold_torque, CitoProblem, CitoSettings};
    pub use crate::ocp::mpc::{MpcDriver, MpcSettings};
    pub use crate::sim::{Controller, Pull, Simulation, StepSettings, StepStatus, StepWorkspace};
    pub use crate::spatial::Se3;
    pub use crate::validate::SettingsError;
}
