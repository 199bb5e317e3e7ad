//! ContactLab: hard-contact simulation of floating-base legged robots, with contact
//! sensitivities for optimisation and learning through contact.
//!
//! Data flows one way: scene file -> [`model::Model`] + state -> [`sim`] step -> results.
//! The reference formulation is `../shared/docs/DESIGN.md`; each module's docs carry its math.

#[cfg(feature = "viewer")]
pub mod app;
pub mod check_dynamics;
pub mod contact;
pub mod diff;
pub mod dynamics;
pub mod gradcheck;
pub mod io;
pub mod learn;
pub mod linalg;
pub mod model;
pub mod ocp;
pub mod optimize;
pub mod plot;
pub mod scene;
pub mod sim;
pub mod spatial;
