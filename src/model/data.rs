//! Preallocated workspace for the rigid-body algorithms. `Data::new(&model)` allocates every
//! buffer once; algorithms take `(&Model, &mut Data, ...)` and allocate nothing.

use super::Model;
use crate::spatial::{Inertia, Se3};
use nalgebra::{DMatrix, DVector, Matrix6, Matrix6x3, Vector6};

#[derive(Clone, Debug)]
pub struct Data {
    /// `parentMi` of each body at the current `q` (nbodies).
    pub li_m_i: Vec<Se3>,
    /// `worldMi` of each body (nbodies).
    pub o_m_i: Vec<Se3>,
    /// `worldMf` of each frame (nframes), filled by `update_frame_placements`.
    pub o_m_f: Vec<Se3>,
    /// Body spatial velocity in the body frame (nbodies).
    pub v: Vec<Vector6<f64>>,
    /// Body spatial acceleration in the body frame, gravity included as a fictitious upward
    /// acceleration of the world in RNEA (nbodies).
    pub a: Vec<Vector6<f64>>,
    /// Body force in the body frame (nbodies).
    pub f: Vec<Vector6<f64>>,
    /// Joint torques from `rnea` (nv).
    pub tau: DVector<f64>,
    /// Joint-space inertia matrix from `crba`, full and symmetric (nv x nv).
    pub mass_matrix: DMatrix<f64>,
    /// Sparse factor `L` of `M (+ h D) = L^T L` (`dynamics::ltl`), lower triangle (nv x nv).
    pub mass_ltl: DMatrix<f64>,
    /// Nonlinear effects `C(q, v) v + g(q)` (nv).
    pub nle: DVector<f64>,
    /// Joint accelerations from `aba` (nv).
    pub ddq: DVector<f64>,
    /// Composite rigid-body inertias (nbodies), body frame.
    pub ycrb: Vec<Inertia>,
    /// ABA articulated inertias (nbodies).
    pub ia: Vec<Matrix6<f64>>,
    /// ABA bias forces (nbodies).
    pub pa: Vec<Vector6<f64>>,
    /// ABA velocity-product accelerations (nbodies).
    pub c: Vec<Vector6<f64>>,
    /// ABA `U = IA S` for one-DoF joints (nbodies).
    pub u_vec: Vec<Vector6<f64>>,
    /// ABA `D = S^T U` and `u = tau - S^T pA` for one-DoF joints (nbodies).
    pub d_inv: Vec<f64>,
    pub u_bias: Vec<f64>,
    /// Scratch for a world-aligned 3 x nv point Jacobian.
    pub jac3: DMatrix<f64>,

    // --- Derivatives (`rnea_derivatives`, `aba_derivatives`); world frame, about the world origin.
    /// Body spatial velocity in the world frame (nbodies).
    pub ov: Vec<Vector6<f64>>,
    /// Body spatial acceleration in the world frame, gravity included as in `a` (nbodies).
    pub oa_gf: Vec<Vector6<f64>>,
    /// Body force in the world frame; after the backward pass, the force of the whole subtree
    /// (nbodies).
    pub of: Vec<Vector6<f64>>,
    /// Composite inertia of the subtree of each body, world frame (nbodies, 6 x 6).
    pub o_ycrb: Vec<Matrix6<f64>>,
    /// Composite `sum_l (ov_l x* I_l - I_l ov_l x + (I_l ov_l) x*-matrix)` over the subtree of
    /// each body, world frame (nbodies, 6 x 6): the `v`-linear part of `d f / d(motion)`.
    pub do_ycrb: Vec<Matrix6<f64>>,
    /// Composite over the subtree of each body of the external forces' `Phi` (nbodies, 6 x 3):
    /// how the world-fixed external loads differ from loads carried along by a rotation `w`
    /// (`rnea_derivatives_with_forces`).
    pub o_phi: Vec<Matrix6x3<f64>>,
    /// World-frame motion subspace column of each DoF, `J_j` (nv).
    pub oj: Vec<Vector6<f64>>,
    /// Per DoF `j`: `ov_parent x J_j` (nv).
    pub dvdq: Vec<Vector6<f64>>,
    /// Per DoF `j`: `oa_gf_parent x J_j + ov_parent x (ov_parent x J_j)` (nv).
    pub dadq: Vec<Vector6<f64>>,
    /// Per DoF `j`: `(ov_i + ov_parent) x J_j` (nv).
    pub dadv: Vec<Vector6<f64>>,
    /// `d tau / d q` from `rnea_derivatives`, tangent space (nv x nv).
    pub dtau_dq: DMatrix<f64>,
    /// `d tau / d v` from `rnea_derivatives` (nv x nv).
    pub dtau_dv: DMatrix<f64>,
    /// `d ddq / d q` from `aba_derivatives`, tangent space (nv x nv).
    pub ddq_dq: DMatrix<f64>,
    /// `d ddq / d v` from `aba_derivatives` (nv x nv).
    pub ddq_dv: DMatrix<f64>,
    /// `M(q)^-1` (= `d ddq / d tau`) from `aba_derivatives`, full and symmetric (nv x nv).
    pub minv: DMatrix<f64>,
    /// Scratch of `aba_derivatives`: its right-hand sides by rows (nv x 3nv).
    pub aba_rhs: Vec<f64>,
}

impl Data {
    pub fn new(model: &Model) -> Self {
        let nb = model.nbodies();
        let nv = model.nv;
        Self {
            li_m_i: vec![Se3::identity(); nb],
            o_m_i: vec![Se3::identity(); nb],
            o_m_f: vec![Se3::identity(); model.frames.len()],
            v: vec![Vector6::zeros(); nb],
            a: vec![Vector6::zeros(); nb],
            f: vec![Vector6::zeros(); nb],
            tau: DVector::zeros(nv),
            mass_matrix: DMatrix::zeros(nv, nv),
            mass_ltl: DMatrix::zeros(nv, nv),
            nle: DVector::zeros(nv),
            ddq: DVector::zeros(nv),
            ycrb: vec![Inertia::zero(); nb],
            ia: vec![Matrix6::zeros(); nb],
            pa: vec![Vector6::zeros(); nb],
            c: vec![Vector6::zeros(); nb],
            u_vec: vec![Vector6::zeros(); nb],
            d_inv: vec![0.0; nb],
            u_bias: vec![0.0; nb],
            jac3: DMatrix::zeros(3, nv),
            ov: vec![Vector6::zeros(); nb],
            oa_gf: vec![Vector6::zeros(); nb],
            of: vec![Vector6::zeros(); nb],
            o_ycrb: vec![Matrix6::zeros(); nb],
            do_ycrb: vec![Matrix6::zeros(); nb],
            o_phi: vec![Matrix6x3::zeros(); nb],
            oj: vec![Vector6::zeros(); nv],
            dvdq: vec![Vector6::zeros(); nv],
            dadq: vec![Vector6::zeros(); nv],
            dadv: vec![Vector6::zeros(); nv],
            dtau_dq: DMatrix::zeros(nv, nv),
            dtau_dv: DMatrix::zeros(nv, nv),
            ddq_dq: DMatrix::zeros(nv, nv),
            ddq_dv: DMatrix::zeros(nv, nv),
            minv: DMatrix::zeros(nv, nv),
            aba_rhs: vec![0.0; 3 * nv * nv],
        }
    }
}
