//! ContactNets (Pfrommer, Halm, Posa, "ContactNets: Learning Discontinuous Contact Dynamics with
//! Smooth, Implicit Representations", CoRL 2020, arXiv 2009.11193): learn the gap function
//! `phi(q)` and the contact Jacobians of a rigid body against a plane from observed transitions
//! `(q, v) -> (q', v')`, by a loss that is the optimal value of a small convex problem over the
//! contact impulses (`loss`), rather than by regressing the next state.
//!
//! One algorithm per file:
//! - [`data`]: the cube-toss CSV loader with validation, duplicate detection and seeded splits;
//! - [`loss`]: the inner convex problem (Clarabel) and its envelope-theorem gradient;
//! - [`model`]: the learned models (polytope, deep = polytope + MLP, end-to-end MLP), their
//!   JSON files and rollouts through the repo's hard-contact step;
//! - [`mlp`]: a tiny MLP with vector-Jacobian products and Adam(W);
//! - [`train`]: training with early stopping on the validation loss;
//! - [`eval`]: full-toss rollouts and their metrics;
//! - [`sweep`]: metrics against the number of training tosses, table and PNG.
//!
//! Everything works in the data's scaled units (lengths divided by the cube half width
//! 0.0524 m, so the corners are at `(+-1, +-1, +-1)`, `g = 187.21`, `dt = 1/148` s).
//! The generalized velocity is `nu = (v, w)` with `v` the linear velocity of the centre in the
//! world frame and `w` the angular velocity in the body frame, as in the CSVs; for a body whose
//! centre of mass is its origin and whose inertia is isotropic, the mass matrix in these
//! coordinates is the constant `M = diag(m I3, I I3)` and the Coriolis terms vanish.

pub mod data;
pub mod eval;
pub mod loss;
pub mod mlp;
pub mod model;
pub mod sweep;
pub mod train;

pub use data::{Body, Dataset, Split, SplitSettings, Toss, Transition};
pub use loss::{LossSettings, LossWeights};
pub use model::{load, LearnedModel, Method};
