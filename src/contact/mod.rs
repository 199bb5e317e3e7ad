//! Contact: terrain, contact detection and Jacobians, and the forward cone-complementarity
//! solver.

pub mod detection;
pub mod solver;
pub mod terrain;

pub use solver::{ContactMode, ContactSolver};
pub use terrain::Terrain;
