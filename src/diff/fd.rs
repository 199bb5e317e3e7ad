//! The finite-difference reference for the transition Jacobians (DESIGN 3): central differences
//! through `integrate`, simple and trusted.
//!
//! Column `k` of `A` is `(x+(x ⊕ eps e_k) ⊖ x+(x ⊕ -eps e_k)) / (2 eps)` with `⊕` integrate on
//! the configuration part and `⊖` measured in the tangent space at the nominal `x+`; columns of
//! `B` perturb `u`. Every perturbed step starts from the nominal step's warm start, so the
//! contact solver sees the same initial point; the solver's tolerance bounds the accuracy
//! (about `tolerance / eps`), so use a tight solver tolerance for reference Jacobians.

use crate::contact::Terrain;
use crate::model::{difference, integrate, Model};
use crate::sim::step::{step, StepInfo, StepSettings, StepStatus, StepWorkspace};
use nalgebra::{DMatrix, DVector};

/// Buffers for [`fd_transition`].
#[derive(Clone, Debug)]
pub struct FdWorkspace {
    q_nom: DVector<f64>,
    v_nom: DVector<f64>,
    q_pert: DVector<f64>,
    v_pert: DVector<f64>,
    u_pert: DVector<f64>,
    q_out: DVector<f64>,
    v_out: DVector<f64>,
    tangent: DVector<f64>,
    plus: DVector<f64>,
    warm: DVector<f64>,
}

impl FdWorkspace {
    pub fn new(model: &Model) -> Self {
        let (nq, nv, nu, k) = (model.nq, model.nv, model.nu, crate::contact::detection::Contacts::capacity(model));
        Self {
            q_nom: DVector::zeros(nq),
            v_nom: DVector::zeros(nv),
            q_pert: DVector::zeros(nq),
            v_pert: DVector::zeros(nv),
            u_pert: DVector::zeros(nu),
            q_out: DVector::zeros(nq),
            v_out: DVector::zeros(nv),
            tangent: DVector::zeros(nv),
            plus: DVector::zeros(2 * nv),
            warm: DVector::zeros(3 * k),
        }
    }
}

/// Central-difference transition Jacobians at `(q, v, u)`: `a` (2nv x 2nv), `b` (2nv x nu).
/// Returns the nominal step's info; if any perturbed step fails to advance, its status is
/// returned instead and `a`, `b` are unspecified.
pub fn fd_transition(
    model: &Model,
    terrain: &Terrain,
    settings: &StepSettings,
    ws: &mut StepWorkspace,
    fd: &mut FdWorkspace,
    (q, v, u, tau_ext): (&[f64], &[f64], &[f64], &[f64]),
    eps: f64,
    a: &mut DMatrix<f64>,
    b: &mut DMatrix<f64>,
) -> StepInfo {
    let nv = model.nv;
    let (warm_ok, n_warm) = (ws.has_warm_start, ws.lambda_warm.len());
    fd.warm.rows_mut(0, n_warm).copy_from(&ws.lambda_warm);
    let restore = |ws: &mut StepWorkspace, fd: &FdWorkspace| {
        ws.lambda_warm.copy_from(&fd.warm.rows(0, n_warm));
        ws.has_warm_start = warm_ok;
    };
    let nominal =
        step(model, terrain, settings, ws, q, v, u, tau_ext, fd.q_nom.as_mut_slice(), fd.v_nom.as_mut_slice());
    if !nominal.status.advanced() {
        return nominal;
    }
    // One perturbed step; writes `x+ ⊖ x+_nominal` (2nv) into `out`.
    let run = |fd: &mut FdWorkspace, ws: &mut StepWorkspace, perturb: &dyn Fn(&mut FdWorkspace)| -> StepStatus {
        fd.q_pert.copy_from_slice(q);
        fd.v_pert.copy_from_slice(v);
        fd.u_pert.copy_from_slice(u);
        perturb(fd);
        restore(ws, fd);
        let info = step(
            model,
            terrain,
            settings,
            ws,
            fd.q_pert.as_slice(),
            fd.v_pert.as_slice(),
            fd.u_pert.as_slice(),
            tau_ext,
            fd.q_out.as_mut_slice(),
            fd.v_out.as_mut_slice(),
        );
        difference(model, fd.q_nom.as_slice(), fd.q_out.as_slice(), fd.tangent.as_mut_slice());
        fd.plus.rows_mut(0, nv).copy_from(&fd.tangent);
        for i in 0..nv {
            fd.plus[nv + i] = fd.v_out[i] - fd.v_nom[i];
        }
        info.status
    };
    let ncols = 2 * nv + model.nu;
    for col in 0..ncols {
        for sign in [1.0, -1.0] {
            let h = sign * eps;
            let perturb = |fd: &mut FdWorkspace| {
                if col < nv {
                    fd.tangent.fill(0.0);
                    fd.tangent[col] = h;
                    integrate(model, q, fd.tangent.as_slice(), fd.q_pert.as_mut_slice());
                } else if col < 2 * nv {
                    fd.v_pert[col - nv] += h;
                } else {
                    fd.u_pert[col - 2 * nv] += h;
                }
            };
            let status = run(fd, ws, &perturb);
            if !status.advanced() {
                restore(ws, fd);
                return StepInfo { status, ..nominal };
            }
            let target: &mut DMatrix<f64> = if col < 2 * nv { a } else { b };
            let c = if col < 2 * nv { col } else { col - 2 * nv };
            for r in 0..2 * nv {
                let d = fd.plus[r] / (2.0 * eps);
                if sign > 0.0 {
                    target[(r, c)] = d;
                } else {
                    target[(r, c)] -= d;
                }
            }
        }
    }
    // Leave the workspace as the nominal step left it.
    restore(ws, fd);
    step(model, terrain, settings, ws, q, v, u, tau_ext, fd.q_nom.as_mut_slice(), fd.v_nom.as_mut_slice())
}
