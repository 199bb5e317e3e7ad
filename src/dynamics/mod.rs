//! Rigid-body algorithms on a kinematic tree (Featherstone 2008), in Pinocchio's conventions:
//! forward kinematics and point Jacobians ([`kinematics`]), inverse dynamics ([`rnea`]), the
//! joint-space inertia matrix ([`crba`]), forward dynamics ([`aba`]) and the dense Cholesky
//! factorization of `M` used by the contact step ([`cholesky`]).

pub mod aba;
pub mod cholesky;
pub mod crba;
pub mod kinematics;
pub mod ltl;
pub mod rnea;

pub use aba::aba;
pub use crba::crba;
pub use kinematics::{
    center_of_mass, forward_kinematics, kinetic_energy, point_jacobian, spatial_momentum, update_frame_placements,
};
pub use rnea::{nle, rnea};
