//! Rigid-body algorithms on a kinematic tree (Featherstone 2008), in Pinocchio's conventions:
//! forward kinematics and point Jacobians ([`kinematics`]), inverse dynamics ([`rnea`](mod@rnea)), the
//! joint-space inertia matrix ([`crba`](mod@crba)) and forward dynamics ([`aba`](mod@aba)). The contact step
//! factorizes `M + diag(armature) + h D` as the sparse `L^T L` of [`ltl`] (branch-induced sparsity), and so
//! does [`aba_derivatives`](mod@aba_derivatives) for `M^-1`. Their analytical
//! derivatives (Carpentier & Mansard 2018) sit beside them: [`kinematics_derivatives`],
//! [`rnea_derivatives`](mod@rnea_derivatives), [`aba_derivatives`](mod@aba_derivatives). [`reference`](mod@reference) compares all of them with
//! Pinocchio's values (the `check-dynamics` command).

pub mod aba;
pub mod aba_derivatives;
pub mod crba;
pub mod kinematics;
pub mod kinematics_derivatives;
pub mod ltl;
pub mod reference;
pub mod rnea;
pub mod rnea_derivatives;

pub use aba::aba;
pub use aba_derivatives::aba_derivatives;
pub use crba::crba;
pub use kinematics::{
    center_of_mass, forward_kinematics, kinetic_energy, point_jacobian, spatial_momentum, update_frame_placements,
};
pub use kinematics_derivatives::{
    angular_velocity_derivative, contact_velocity_derivatives, jt_force_derivative, point_velocity_derivative,
};
pub use rnea::{nle, rnea};
pub use rnea_derivatives::{
    rnea_derivatives, rnea_derivatives_from_placements, rnea_derivatives_with_forces, PointForce,
};
