//! Derivatives of forward dynamics `ddq = aba(q, v, tau)` (Carpentier & Mansard, RSS 2018,
//! sec. V; Pinocchio `computeABADerivatives`).
//!
//! Differentiating `rnea(q, v, aba(q, v, tau)) = tau` gives
//!
//! ```text
//! d ddq / d q   = -M^-1 d rnea/d q (q, v, ddq)
//! d ddq / d v   = -M^-1 d rnea/d v (q, v, ddq)
//! d ddq / d tau =  M^-1
//! ```
//!
//! so the ABA derivatives cost one `aba`, one [`rnea_derivatives`] at `a = ddq`, one `crba`,
//! a Cholesky factorization and three `nv x nv` products. `q` derivatives are in the tangent
//! space of `integrate`; the base part of `ddq` is the derivative of the body twist, as in `aba`.

use super::aba::aba;
use super::cholesky;
use super::crba::crba;
use super::rnea_derivatives::rnea_derivatives;
use crate::model::{Data, Model};
use nalgebra::DVector;

/// `data.ddq = aba(q, v, tau)`, `data.ddq_dq`, `data.ddq_dv` and `data.minv = M(q)^-1`
/// (all nv x nv); `data.dtau_dq`, `data.dtau_dv` hold the RNEA derivatives at `(q, v, ddq)`,
/// `data.mass_matrix` and `data.mass_chol` hold `M` and its Cholesky factor.
/// Returns `false` when `M` (or an articulated inertia) is not positive definite, leaving the
/// outputs unspecified. Allocation-free.
pub fn aba_derivatives(model: &Model, data: &mut Data, q: &[f64], v: &[f64], tau: &[f64]) -> bool {
    if !aba(model, data, q, v, tau) {
        return false;
    }
    // rnea_derivatives needs `ddq` while borrowing `data` mutably; move it out and back.
    // An empty DVector does not allocate.
    let ddq = std::mem::replace(&mut data.ddq, DVector::zeros(0));
    rnea_derivatives(model, data, q, v, ddq.as_slice());
    data.ddq = ddq;
    crba(model, data, q);
    if !cholesky::factor(&data.mass_matrix, &mut data.mass_chol) {
        return false;
    }
    data.minv.fill_with_identity();
    cholesky::solve_matrix_in_place(&data.mass_chol, &mut data.minv);
    crate::linalg::gemm_into(-1.0, data.minv.as_view(), data.dtau_dq.as_view(), data.ddq_dq.as_view_mut());
    crate::linalg::gemm_into(-1.0, data.minv.as_view(), data.dtau_dv.as_view(), data.ddq_dv.as_view_mut());
    true
}
