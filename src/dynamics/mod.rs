//! Rigid-body algorithms on a kinematic tree (Featherstone 2008), in Pinocchio's conventions:
//! forward kinematics and point Jacobians ([`kinematics`]), inverse dynamics ([`rnea`]), the
//! joint-space inertia matrix ([`crba`]), forward dynamics ([`aba`]) and the dense Cholesky
//! factorization of `M` used by the contact step ([`cholesky`]). Their analytical derivatives
//! (Carpentier & Mansard 2018) sit beside them: [`kinematics_derivatives`],
//! [`rnea_derivatives`], [`aba_derivatives`].

pub mod aba;
pub mod aba_derivatives;
pub mod cholesky;
pub mod crba;
pub mod kinematics;
pub mod kinematics_derivatives;
pub mod ltl;
pub mod rnea;
pub mod rnea_derivatives;

pub use aba::aba;
pub use aba_derivatives::aba_derivatives;
pub use crba::crba;
pub use kinematics::{
    center_of_mass, forward_kinematics, kinetic_energy, point_jacobian, spatial_momentum, update_frame_placements,
};
pub use kinematics_derivatives::{
    angular_velocity_derivative, jt_force_derivative, jt_torque_derivative, point_velocity_derivative,
};
pub use rnea::{nle, rnea};
pub use rnea_derivatives::{rnea_derivatives, rnea_derivatives_with_forces, PointForce};
