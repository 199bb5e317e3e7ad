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
//! the sparse `M = L^T L` of [`ltl`](super::ltl) (branch-induced sparsity) and its two
//! triangular passes over all `3 nv` right-hand sides `[-d rnea/d q | -d rnea/d v | I]` at once,
//! each pass `O(nv depth)` per column instead of a dense `M^-1` and two dense `nv x nv`
//! products. `q` derivatives are in the tangent space of `integrate`; the base part of `ddq` is
//! the derivative of the body twist, as in `aba`.

use super::aba::aba;
use super::crba::crba;
use super::ltl;
use super::rnea_derivatives::rnea_derivatives;
use crate::model::{Data, Model};
use nalgebra::DVector;

/// `data.ddq = aba(q, v, tau)`, `data.ddq_dq`, `data.ddq_dv` and `data.minv = M(q)^-1`
/// (all nv x nv); `data.dtau_dq`, `data.dtau_dv` hold the RNEA derivatives at `(q, v, ddq)`,
/// `data.mass_matrix` and `data.mass_ltl` hold `M` and its factor `L` (`M = L^T L`).
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
    if !ltl::factor(&data.mass_matrix, None, &model.dof_parent, &mut data.mass_ltl) {
        return false;
    }
    // X = M^-1 [-dtau/dq | -dtau/dv | I], nv x 3nv stored by rows (`ltl`'s multi solves).
    let nv = model.nv;
    let m = 3 * nv;
    let x = &mut data.aba_rhs;
    let (dq, dv) = (data.dtau_dq.as_slice(), data.dtau_dv.as_slice());
    for r in 0..nv {
        let row = &mut x[r * m..(r + 1) * m];
        for c in 0..nv {
            // Column-major sources: entry (r, c) at r + c nv.
            row[c] = -dq[r + c * nv];
            row[nv + c] = -dv[r + c * nv];
            row[2 * nv + c] = if r == c { 1.0 } else { 0.0 };
        }
    }
    ltl::solve_lt_multi(&data.mass_ltl, &model.dof_parent, x, m);
    ltl::solve_l_multi(&data.mass_ltl, &model.dof_parent, x, m);
    let (ddq_dq, ddq_dv, minv) = (data.ddq_dq.as_mut_slice(), data.ddq_dv.as_mut_slice(), data.minv.as_mut_slice());
    for r in 0..nv {
        let row = &x[r * m..(r + 1) * m];
        for c in 0..nv {
            ddq_dq[r + c * nv] = row[c];
            ddq_dv[r + c * nv] = row[nv + c];
            minv[r + c * nv] = row[2 * nv + c];
        }
    }
    true
}
