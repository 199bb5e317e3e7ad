//! Analytic transition Jacobians of the step (DESIGN 3): `A = d x+ / d x` (2nv x 2nv) and
//! `B = d x+ / d u` (2nv x nu) in tangent coordinates `dx = [dq; dv]`, with the exact,
//! mode-dependent contact sensitivity. Checked against [`fd_transition`](super::fd_transition).
//!
//! # Smooth part at fixed impulses
//! With `M~ = M + A + h D` (the constant rotor inertia `A = diag(armature)` and implicit
//! actuator damping) the step residual is
//!
//! ```text
//! F = M(q)(v+ - v) + (A + h D) (v+ - v) + h c(q, v) - h (S u + tau_ext) - J(q)^T lambda = 0.
//! ```
//!
//! `M(q)(v+ - v) + h c(q, v) - J^T lambda = h tau(q, v)` with
//! `tau = rnea(q, v, a*) - sum_i J_pi^T f_i`, `a* = (v+ - v)/h`, `f_i = C_i lambda_i / h` and
//! `C_i = [n t1 t2]`. The contact point of a sphere foot `p = c - r n` is not a material point
//! (it slides over the sphere as the body turns, `n` fixed in the world), so `J_p^T f` is
//! written as the force `f` at the material centre `c` plus the world-fixed pure torque
//! `tau_i = -r n x f` (`J_p = J_c + r [n]x J_w`), both world-fixed loads of
//! [`rnea_derivatives_with_forces`](crate::dynamics::rnea_derivatives_with_forces), which folds
//! them into its passes. `tau_ext` is an input vector of the step, held fixed, so it has no
//! derivative. Then
//!
//! ```text
//! dv+_fixed = -M~^-1 (h dtau/dq dq + (h dtau/dv - M~) dv - h S du).
//! ```
//!
//! # Contact velocity
//! `w = J v+ + [phi/h; 0; 0]`. Row `a` in `{n, t1, t2}` of a contact reads
//! `a . v_c + (r a x n) . omega`, so at fixed `v+`
//! `d w / d q = a^T d v_c/dq + (r a x n)^T d omega/dq + (1/h) e_n n^T J_c`
//! ([`point_velocity_derivative`](crate::dynamics::point_velocity_derivative),
//! [`angular_velocity_derivative`](crate::dynamics::angular_velocity_derivative), both at once in
//! [`contact_velocity_derivatives`]; `n^T J_c = n^T J_p`), and
//! `dw = G dlambda + dw_fixed` with `dw_fixed = J dv+_fixed + dw/dq dq`. Flat terrain is
//! assumed: the derivatives of the contact frame `C` on curved terrain are neglected.
//!
//! # Contact law (exact sensitivity)
//! The realized mode of each contact is linearized as `R_lambda dlambda + R_w dw = 0`:
//! separated `dlambda_i = 0`; sticking `dw_i = 0`; sliding `dw_n = 0` and
//! `dl_t + mu t_hat dl_n + mu l_n (I - t_hat t_hat^T)/||w_t|| dw_t = 0`, `t_hat = w_t/||w_t||`.
//! Hence `(R_lambda + R_w G) dlambda = -R_w dw_fixed` (3ka x 3ka, all `2nv + nu` columns at
//! once), `dv+ = dv+_fixed + M~^-1 J^T dlambda` and `dq+ = d_dq dq + d_ddq h dv+` with
//! `(d_dq, d_ddq)` the Jacobians of `integrate(q, h v+)`.
//!
//! # Relaxed sensitivities
//! Both keep the forward trajectory (and the smooth part above, evaluated at the forward
//! impulses) and replace only the contact law's linearization, solving their own relaxed
//! system first by a Newton iteration warm-started from the forward solution:
//!
//! - **Signorini-relaxed** (DESIGN 3.2, [`SignoriniSolver`]): `gamma w_n = kappa` for every
//!   contact in the problem (separated ones included), friction as in the exact law for the
//!   forward mode. Its normal row is `w_n dgamma + gamma dw_n = 0`, i.e. `R_lambda = w_n e_n^T`,
//!   `R_w = gamma e_n^T` (scaled by `1 / (w_n + gamma max G_jj)` for the pivoting).
//! - **Relaxed (ours)** (DESIGN 3.3): the forward solver's central path at fixed `kappa` with
//!   `b_n + delta` ([`ContactSolver::solve_central_path`]). At its answer, `dw_i = -Lambda_i
//!   dlambda_i` with the solver's reduced Newton matrix `N~ = G~ + Lambda~` (normalized units), so
//!   `R_lambda + R_w G = g N~` (`g = V / L`) and `R_w = I`.
//!
//!   Which central path: DESIGN 3.3 writes it as `lambda_i o w_hat_i = kappa e` (the Jordan
//!   product of the impulse with De Saxce's modified velocity). The code follows Dojo's
//!   nonlinear-friction-cone central path instead (Howell et al. 2022; the forward solver's own
//!   formulation, [`crate::contact::solver`]): `gamma s = kappa` with `s = w_n + delta` and
//!   `beta o eta = kappa e` with `beta = (mu gamma, l_t)`, `eta = (psi, w_t)`. Both are exact
//!   Coulomb at `kappa = 0` and relax the whole cone complementarity; they spread the
//!   relaxation differently over the normal and tangential parts. Dojo's form is used so that
//!   the backward solve is the forward solver's Newton iteration, warm start and matrix.
//!
//! The backward solve's iterations and status are reported in [`TransitionInfo::backward`];
//! a backward solve that hits its iteration limit still yields `A`, `B` (status
//! `BackwardNotConverged`). As `kappa, delta -> 0` both tend to the exact sensitivity where the
//! modes are locally constant (tests/sensitivities.rs: relative distance about `kappa / 1e-3`).
//!
//! A rank-deficient `G` (more contact rows than the body has dofs, e.g. a box on four corners)
//! makes the exact system singular; it is then solved with a Tikhonov shift of `1e-9 max G_jj`,
//! which selects the smallest-norm impulse split; `v+` and so `A`, `B` are unique.

use super::signorini::{friction_linearization, SignoriniSolver};
use crate::contact::solver::{ContactMode, ContactSolver, Info as SolverInfo, Status as SolverStatus};
use crate::contact::Terrain;
use crate::dynamics::kinematics_derivatives::contact_velocity_derivatives;
use crate::dynamics::ltl;
use crate::dynamics::rnea_derivatives::{rnea_derivatives_from_placements, PointForce};
use crate::model::configuration::integrate_jacobian_blocks;
use crate::model::{Data, Model};
use crate::sim::step::{step, StepInfo, StepSettings, StepWorkspace};
use nalgebra::{DMatrix, DVector, Dyn, Vector3};

pub use super::sensitivity::Sensitivity;

/// Outcome of [`transition_jacobians`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionStatus {
    /// `A` and `B` were computed.
    Ok,
    /// The forward step did not advance (see the step info); `A`, `B` are unspecified.
    StepFailed,
    /// The relaxed sensitivity's backward Newton iteration hit its iteration limit; `A`, `B`
    /// were computed at its last iterate.
    BackwardNotConverged,
    /// The relaxed sensitivity's backward solve failed (see `backward`), or `delta` was
    /// negative or not finite; `A`, `B` are unspecified.
    BackwardFailed,
    /// The linearized contact system `R_lambda + R_w G` was singular; `A`, `B` unspecified.
    SingularContactSystem,
}

/// Diagnostics of [`transition_jacobians`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransitionInfo {
    pub status: TransitionStatus,
    /// The forward step's info.
    pub step: StepInfo,
    /// The relaxed sensitivities' backward Newton solve (iterations, status, residual);
    /// `not_run` for the exact sensitivity or when no contact is in the problem.
    pub backward: SolverInfo,
}

/// Preallocated buffers of [`transition_jacobians`].
#[derive(Clone)]
pub struct TransitionWorkspace {
    /// Rigid-body workspace for the derivatives (the step keeps its own).
    pub data: Data,
    /// Next state of the forward step (nq, nv).
    pub q_next: DVector<f64>,
    pub v_next: DVector<f64>,
    /// `a* = (v+ - v)/h` (nv).
    a_star: DVector<f64>,
    /// Contact forces at the sphere centres (up to k).
    forces: Vec<PointForce>,
    /// `d v+` for the columns `[dq, dv, du, ds]`, first the right-hand side, **stored
    /// transposed** ((2nv + nu + 1) x nv: column `r` holds row `r`), so that the row
    /// operations of the triangular solves and of `J^T dlambda` run over contiguous memory.
    dv: DMatrix<f64>,
    /// `dw_fixed`, then `dlambda`, transposed like `dv` ((2nv + nu + 1) x 3k, first `3 ka`
    /// columns used).
    dw: DMatrix<f64>,
    /// `R_lambda + R_w G` (3k x 3k, top-left `3 ka` block used).
    kmat: DMatrix<f64>,
    /// LU factors of the `3 ka x 3 ka` block of `kmat` (row-major, stride `3 ka`; 9k^2) and its
    /// row pivots (3k), for [`crate::linalg::lu_factor`].
    klu: Vec<f64>,
    pivots: Vec<usize>,
    /// Inverse of the contact system (3k x 3k, top-left `3 ka` block used).
    kinv: DMatrix<f64>,
    /// `d v_c / d q` and `d omega / d q` at fixed `v+` (3 x nv each).
    dvc: DMatrix<f64>,
    domega: DMatrix<f64>,
    /// Jacobians of `integrate(q, h v+)` (nv x nv each).
    d_dq: DMatrix<f64>,
    d_ddq: DMatrix<f64>,
    /// Scratch (nv).
    col: DVector<f64>,
    /// `dw_fixed` kept while `dw` is overwritten (transposed like `dw`).
    dw_fixed: DMatrix<f64>,
    /// Forward modes of the active contacts (k).
    modes: Vec<ContactMode>,
    /// Backward solvers of the relaxed sensitivities and their answers (3k each).
    signorini: SignoriniSolver,
    central: ContactSolver,
    b_shift: DVector<f64>,
    lam_r: DVector<f64>,
    w_r: DVector<f64>,
    /// Central-path Newton matrix (row-major, 9k^2).
    nmat: Vec<f64>,
}

impl TransitionWorkspace {
    /// `d lambda / d (dq, dv, du)` of the last call that returned `Ok` with `ka` contacts in
    /// the problem: `3 ka x (2nv + nu)`, three rows `(n, t1, t2)` per active contact in the
    /// order of the step workspace's `contacts.active`.
    pub fn dlambda(&self, ka: usize, nv: usize, nu: usize) -> nalgebra::DMatrixView<'_, f64, Dyn, Dyn> {
        // `dw` holds the transpose: (r, c) is at `c + r * rows`.
        let rows = self.dw.nrows();
        nalgebra::DMatrixView::from_slice_with_strides(
            &self.dw.as_slice()[..3 * ka * rows],
            3 * ka,
            2 * nv + nu,
            rows,
            1,
        )
    }

    pub fn new(model: &Model) -> Self {
        let (nq, nv, nu, k) = (model.nq, model.nv, model.nu, crate::contact::detection::Contacts::capacity(model));
        let ncols = 2 * nv + nu + 1;
        Self {
            data: Data::new(model),
            q_next: DVector::zeros(nq),
            v_next: DVector::zeros(nv),
            a_star: DVector::zeros(nv),
            forces: Vec::with_capacity(k + model.nbodies() + 16),
            dv: DMatrix::zeros(ncols, nv),
            dw: DMatrix::zeros(ncols, 3 * k),
            kmat: DMatrix::zeros(3 * k, 3 * k),
            klu: vec![0.0; 9 * k * k],
            pivots: vec![0; 3 * k],
            kinv: DMatrix::zeros(3 * k, 3 * k),
            dvc: DMatrix::zeros(3, nv),
            domega: DMatrix::zeros(3, nv),
            d_dq: DMatrix::zeros(nv, nv),
            d_ddq: DMatrix::zeros(nv, nv),
            col: DVector::zeros(nv),
            dw_fixed: DMatrix::zeros(ncols, 3 * k),
            modes: vec![ContactMode::Separated; k],
            signorini: SignoriniSolver::new(k.max(1)),
            central: ContactSolver::new(k.max(1)),
            b_shift: DVector::zeros(3 * k),
            lam_r: DVector::zeros(3 * k),
            w_r: DVector::zeros(3 * k),
            nmat: vec![0.0; 9 * k * k],
        }
    }
}

/// Runs the step at `(q, v, u, tau_ext)` (so `ws` holds the forward solution and `tw.q_next`,
/// `tw.v_next` the next state) and writes its transition Jacobians `a` (2nv x 2nv) and `b`
/// (2nv x nu) with the requested contact sensitivity. Flat terrain is assumed for the contact
/// frame derivatives (module docs).
#[allow(clippy::too_many_arguments)]
pub fn transition_jacobians(
    model: &Model,
    terrain: &Terrain,
    settings: &StepSettings,
    ws: &mut StepWorkspace,
    tw: &mut TransitionWorkspace,
    x: (&[f64], &[f64], &[f64], &[f64]),
    sensitivity: Sensitivity,
    a: &mut DMatrix<f64>,
    b: &mut DMatrix<f64>,
) -> TransitionInfo {
    transition_jacobians_ext(model, terrain, settings, ws, tw, x, &[], None, sensitivity, a, b, None)
}

/// [`transition_jacobians`] with external loads and a parameter direction.
///
/// `loads` are the world-frame point forces whose generalized force `sum J_p^T f` is in
/// `tau_ext` (pulls): their configuration dependence is added to `A` (`tau_ext` itself is an
/// input of the step, so without them `A` treats it as constant). `direction` is a generalized
/// force direction `d tau_ext / ds` (nv) of a scalar parameter `s`; its column `d x+ / ds`
/// (2nv) is written to `c`, contact response included.
#[allow(clippy::too_many_arguments)]
pub fn transition_jacobians_ext(
    model: &Model,
    terrain: &Terrain,
    settings: &StepSettings,
    ws: &mut StepWorkspace,
    tw: &mut TransitionWorkspace,
    (q, v, u, tau_ext): (&[f64], &[f64], &[f64], &[f64]),
    loads: &[PointForce],
    direction: Option<&[f64]>,
    sensitivity: Sensitivity,
    a: &mut DMatrix<f64>,
    b: &mut DMatrix<f64>,
    c_out: Option<&mut DVector<f64>>,
) -> TransitionInfo {
    let step_info =
        step(model, terrain, settings, ws, q, v, u, tau_ext, tw.q_next.as_mut_slice(), tw.v_next.as_mut_slice());
    transition_jacobians_after_step(
        model,
        settings,
        ws,
        tw,
        (q, v),
        step_info,
        loads,
        direction,
        sensitivity,
        a,
        b,
        c_out,
    )
}

/// The derivative part of [`transition_jacobians_ext`] for a step that was already taken:
/// `ws` must hold the forward solution of the step from `(q, v)` (with the controls and
/// `tau_ext` it was taken with), `step_info` its report and `tw.q_next`, `tw.v_next` its next
/// state. Lets a caller that steps anyway (a DDP rollout) skip the second identical step.
#[allow(clippy::too_many_arguments)]
pub fn transition_jacobians_after_step(
    model: &Model,
    settings: &StepSettings,
    ws: &mut StepWorkspace,
    tw: &mut TransitionWorkspace,
    qv: (&[f64], &[f64]),
    step_info: StepInfo,
    loads: &[PointForce],
    direction: Option<&[f64]>,
    sensitivity: Sensitivity,
    a: &mut DMatrix<f64>,
    b: &mut DMatrix<f64>,
    c_out: Option<&mut DVector<f64>>,
) -> TransitionInfo {
    let args = (model, settings, ws, tw, qv, step_info, loads, direction, sensitivity, a, b, c_out);
    // Its passes over all `2 nv + nu + 1` columns, and the inverse solve and block products
    // inlined into it, run four entries per instruction in the AVX2 copy.
    crate::linalg::avx2_dispatch!(after_step, (args: AfterStepArgs<'_>) -> TransitionInfo)
}

/// The argument list of [`transition_jacobians_after_step`], passed on whole.
type AfterStepArgs<'a> = (
    &'a Model,
    &'a StepSettings,
    &'a mut StepWorkspace,
    &'a mut TransitionWorkspace,
    (&'a [f64], &'a [f64]),
    StepInfo,
    &'a [PointForce],
    Option<&'a [f64]>,
    Sensitivity,
    &'a mut DMatrix<f64>,
    &'a mut DMatrix<f64>,
    Option<&'a mut DVector<f64>>,
);

#[inline(always)]
fn after_step(
    (model, settings, ws, tw, (_q, v), step_info, loads, direction, sensitivity, a, b, c_out): AfterStepArgs,
) -> TransitionInfo {
    let (nv, nu, h) = (model.nv, model.nu, settings.dt);
    assert_eq!(a.shape(), (2 * nv, 2 * nv), "transition_jacobians: a must be 2nv x 2nv");
    assert_eq!(b.shape(), (2 * nv, nu), "transition_jacobians: b must be 2nv x nu");
    assert!(direction.is_none_or(|e| e.len() == nv), "transition_jacobians: direction must have nv entries");
    assert!(c_out.as_ref().is_none_or(|c| c.len() == 2 * nv), "transition_jacobians: c must have 2nv entries");
    let mut info = TransitionInfo { status: TransitionStatus::Ok, step: step_info, backward: SolverInfo::not_run() };
    if !step_info.status.advanced() {
        info.status = TransitionStatus::StepFailed;
        return info;
    }
    // Columns [dq | dv | du | ds]; the last is zero without a parameter direction.
    let ncols = 2 * nv + nu + 1;
    let ka = ws.contacts.n_active();
    let n = 3 * ka;

    // Smooth part: dtau/dq, dtau/dv of rnea(q, v, a*) - sum J_p^T f at the forward solution.
    for i in 0..nv {
        tw.a_star[i] = (tw.v_next[i] - v[i]) / h;
    }
    tw.forces.clear();
    for (c, &i) in ws.contacts.active.iter().enumerate() {
        let cp = &model.contact_points[ws.contacts.point_of(i)];
        let f = contact_force(ws, c, i) / h;
        let nrm = ws.contacts.normal[i];
        let centre = ws.contacts.point[i] + cp.radius * nrm;
        // The force at the contact point is the force at the centre and the torque -r n x f.
        let torque = -(cp.radius * nrm.cross(&f));
        tw.forces.push(PointForce { body: cp.body, point: centre, force: f, torque });
    }
    // External loads act like contact forces here: tau = rnea - sum J^T f, f world-fixed.
    tw.forces.extend_from_slice(loads);
    // The step left the body placements at q in its workspace.
    tw.data.li_m_i.copy_from_slice(&ws.data.li_m_i);
    tw.data.o_m_i.copy_from_slice(&ws.data.o_m_i);
    rnea_derivatives_from_placements(model, &mut tw.data, v, tw.a_star.as_slice(), &tw.forces);

    // Right-hand side -(h dtau/dq | h dtau/dv - M~ | -h S), then z = L^-T rhs (M~ = L^T L):
    // dv+_fixed = L^-1 z, dw_fixed = J dv+_fixed + .. = Y^T z + .. with Y = L^-T J^T, and
    // dv+ = L^-1 (z + Y dlambda), two half solves per column instead of three.
    // (`tw.dv` is stored transposed: `tw.dv[(c, r)]` is entry (r, c).)
    // Column c of each nv x nv block is contiguous; entry (r, c) of the right-hand side goes to
    // `dv[c + r * ncols]`, a stride of ncols (plain slices: nalgebra's checked 2-D indexing
    // cost more than the arithmetic here).
    {
        let (m, dq, dv) = (ws.data.mass_matrix.as_slice(), tw.data.dtau_dq.as_slice(), tw.data.dtau_dv.as_slice());
        let z = tw.dv.as_mut_slice();
        // A transpose with a strided read: unchecked, because a bounds check per entry cost
        // more than the arithmetic (about 9 instructions an entry with checks).
        assert!(ncols >= 2 * nv && z.len() >= nv * ncols && dq.len() >= nv * nv && dv.len() >= nv * nv);
        assert!(m.len() >= nv * nv);
        for r in 0..nv {
            let zr = &mut z[r * ncols..r * ncols + 2 * nv];
            for c in 0..nv {
                // SAFETY: `r, c < nv`, so `r + c * nv < nv * nv <= len` of `dq`, `dv`, `m`
                // (asserted above), and `nv + c < 2 nv = zr.len()`.
                unsafe {
                    let k = r + c * nv;
                    *zr.get_unchecked_mut(c) = -h * dq.get_unchecked(k);
                    *zr.get_unchecked_mut(nv + c) = m.get_unchecked(k) - h * dv.get_unchecked(k);
                }
            }
        }
    }
    {
        // Row by row: `tw.dv` holds the right-hand side's rows contiguously.
        let z = tw.dv.as_mut_slice();
        for (r, zr) in z.chunks_exact_mut(ncols).take(nv).enumerate() {
            zr[nv + r] += ws.mass_shift[r];
            zr[2 * nv..2 * nv + nu].fill(0.0);
            zr[ncols - 1] = direction.map_or(0.0, |e| h * e[r]);
        }
        for (c, &d) in model.actuated_dofs.iter().enumerate() {
            z[2 * nv + c + d * ncols] = h;
        }
    }
    ltl::solve_lt_multi(&ws.data.mass_ltl, &model.dof_parent, tw.dv.as_mut_slice(), ncols);

    if n > 0 {
        // dw_fixed = Y^T z + [dw/dq | 0 | 0]; column r of Y lives on contact r/3's chain.
        // Row r of dw is the combination of z's rows on contact r/3's chain with the chain's
        // entries of Y's column r, a contact's three rows at once (`chain_rows_times_z`).
        // Y's entries come packed by chain position (`StepWorkspace::y_chain`).
        let z = tw.dv.as_slice();
        let dw = tw.dw.as_mut_slice();
        for a in 0..ka {
            let chain = &ws.contacts.dofs[ws.contacts.active[a]];
            let ya = &ws.y_chain[a * nv..a * nv + chain.len()];
            chain_rows_times_z(chain, ya, z, ncols, &mut dw[3 * a * ncols..(3 * a + 3) * ncols]);
        }
        for (c, &i) in ws.contacts.active.iter().enumerate() {
            let cp = &model.contact_points[ws.contacts.point_of(i)];
            let centre = tw.forces[c].point;
            let nrm = ws.contacts.normal[i];
            contact_velocity_derivatives(
                model,
                &tw.data.o_m_i,
                cp.body,
                &centre,
                tw.v_next.as_slice(),
                &mut tw.dvc,
                &mut tw.domega,
            );
            let axes = [nrm, ws.contacts.t1[i], ws.contacts.t2[i]];
            // Plain slices: `dvc`, `domega` are 3 x nv column-major, `dw` holds row `row` of
            // dw_fixed contiguously, the Jacobian's row `row` is strided by its row count.
            let (dvc, dom) = (tw.dvc.as_slice(), tw.domega.as_slice());
            let (jac, jrows) = (ws.contacts.jac.as_slice(), ws.contacts.jac.nrows());
            let dwn = tw.dw.nrows();
            // Only the chain's columns: the others of `dvc`, `domega` and the Jacobian's row are
            // zero, and adding a zero leaves the entry as it is.
            let chain = &ws.contacts.dofs[i];
            for (r, axis) in axes.iter().enumerate() {
                let sigma: Vector3<f64> = cp.radius * axis.cross(&nrm);
                let row = 3 * c + r;
                let dw_row = &mut tw.dw.as_mut_slice()[row * dwn..row * dwn + nv];
                for &j in chain {
                    let mut d = dot3(axis, &dvc[3 * j..3 * j + 3]) + dot3(&sigma, &dom[3 * j..3 * j + 3]);
                    if r == 0 {
                        d += jac[row + j * jrows] / h;
                    }
                    dw_row[j] += d;
                }
            }
        }

        // The contact law's linearization R_lambda dlambda + R_w dw = 0 at the point the
        // sensitivity asks for, then (R_lambda + R_w G) dlambda = -R_w dw_fixed.
        // Both are ncols x 3k: columns 0..n are one contiguous block.
        tw.dw_fixed.as_mut_slice()[..n * ncols].copy_from_slice(&tw.dw.as_slice()[..n * ncols]);
        for (c, &i) in ws.contacts.active.iter().enumerate() {
            tw.modes[c] = ws.modes[i];
        }
        let g = ws.delassus.view((0, 0), (n, n));
        let (mu, modes) = (&ws.mu[..ka], &tw.modes[..ka]);
        let mut law = Law::Modes { relaxed_normal: false };
        match sensitivity {
            Sensitivity::Exact => {}
            Sensitivity::SignoriniRelaxed { kappa } => {
                // The forward scales, unless kappa sets a larger velocity: `gamma w_n = kappa`
                // balances at `w_n = sqrt(kappa g)` (with every contact separated the forward
                // scales can be ~1e-9 and would blow kappa up to ~1e15 normalized).
                let (vs, ls) = (step_info.solver.velocity_scale, step_info.solver.impulse_scale);
                let gs = if vs > 0.0 && ls > 0.0 { vs / ls } else { (0..n).map(|j| g[(j, j)]).fold(0.0, f64::max) };
                let v = vs.max((kappa * gs).sqrt());
                let scales = (v, v / gs);
                info.backward = tw.signorini.solve(
                    &settings.solver,
                    g,
                    &ws.b.as_slice()[..n],
                    mu,
                    modes,
                    &ws.lambda_active.as_slice()[..n],
                    kappa,
                    scales,
                    &mut tw.lam_r.as_mut_slice()[..n],
                    &mut tw.w_r.as_mut_slice()[..n],
                );
                law = Law::Modes { relaxed_normal: true };
            }
            Sensitivity::Relaxed { kappa, delta } => {
                if !(delta >= 0.0 && delta.is_finite()) {
                    info.status = TransitionStatus::BackwardFailed;
                    return info;
                }
                for r in 0..n {
                    tw.b_shift[r] = ws.b[r] + if r % 3 == 0 { delta } else { 0.0 };
                }
                info.backward = tw.central.solve_central_path(
                    &settings.solver,
                    g,
                    &tw.b_shift.as_slice()[..n],
                    mu,
                    Some(&ws.lambda_active.as_slice()[..n]),
                    kappa,
                    &mut tw.lam_r.as_mut_slice()[..n],
                    &mut tw.w_r.as_mut_slice()[..n],
                );
                law = Law::CentralPath;
            }
        }
        match info.backward.status {
            SolverStatus::Converged => {}
            SolverStatus::MaxIterations => info.status = TransitionStatus::BackwardNotConverged,
            _ => {
                info.status = TransitionStatus::BackwardFailed;
                return info;
            }
        }
        let (lam, w) = match sensitivity {
            Sensitivity::Exact => (&ws.lambda_active.as_slice()[..n], &ws.w_active.as_slice()[..n]),
            _ => (&tw.lam_r.as_slice()[..n], &tw.w_r.as_slice()[..n]),
        };
        // A rank-deficient G (a box on four sticking corners: 12 rows, 6 dofs) makes the exact
        // system singular; the impulse split is then not unique but v+ is. A Tikhonov shift
        // picks the smallest-norm split; its effect on dv+ is of the order of the shift.
        let mut solved = false;
        for shift in [0.0, SINGULAR_SHIFT] {
            match law {
                Law::Modes { relaxed_normal } => {
                    assemble_modes(&mut tw.kmat, &mut tw.dw, &tw.dw_fixed, g, lam, w, mu, modes, relaxed_normal, shift)
                }
                Law::CentralPath => {
                    // N~ = G~ + Lambda~ maps normalized dlambda~ to -dw~; physically the
                    // system matrix is g N~ with g = V / L, and R_w = I.
                    tw.central.newton_matrix(&mut tw.nmat);
                    let (vs, ls) = tw.central.scales();
                    let gs = vs / ls;
                    let diag = (0..n).map(|j| g[(j, j)]).fold(0.0f64, f64::max);
                    for r in 0..n {
                        for c in 0..n {
                            tw.kmat[(r, c)] = gs * tw.nmat[r * n + c];
                        }
                        tw.kmat[(r, r)] += shift * diag;
                    }
                    // Both are ncols x 3k: columns 0..n are one contiguous block.
                    let len = n * ncols;
                    for (d, &f) in tw.dw.as_mut_slice()[..len].iter_mut().zip(&tw.dw_fixed.as_slice()[..len]) {
                        *d = -f;
                    }
                }
            }
            if solve_by_inverse(&tw.kmat, n, &mut tw.klu, &mut tw.pivots, &tw.dw, &mut tw.kinv, &mut tw.dw_fixed) {
                // dlambda was written over dw_fixed (no longer needed): make it `dw`.
                std::mem::swap(&mut tw.dw, &mut tw.dw_fixed);
                solved = true;
                break;
            }
        }
        if !solved {
            info.status = TransitionStatus::SingularContactSystem;
            return info;
        }

        // z += Y dlambda, a contact (three columns of Y on one chain) at a time, so each
        // entry of z is loaded and stored once per contact rather than once per row.
        let z = tw.dv.as_mut_slice();
        let dl = tw.dw.as_slice();
        for a in 0..ka {
            let chain = &ws.contacts.dofs[ws.contacts.active[a]];
            let r0 = 3 * a;
            let (l0, l1, l2) = (
                &dl[r0 * ncols..(r0 + 1) * ncols],
                &dl[(r0 + 1) * ncols..(r0 + 2) * ncols],
                &dl[(r0 + 2) * ncols..(r0 + 3) * ncols],
            );
            for (&d, yp) in chain.iter().zip(&ws.y_chain[a * nv..a * nv + chain.len()]) {
                let (y0, y1, y2) = (yp[0], yp[1], yp[2]);
                for (c, zv) in z[d * ncols..(d + 1) * ncols].iter_mut().enumerate() {
                    *zv += y0 * l0[c] + y1 * l1[c] + y2 * l2[c];
                }
            }
        }
    }
    ltl::solve_l_multi(&ws.data.mass_ltl, &model.dof_parent, tw.dv.as_mut_slice(), ncols);

    // dq+ = d_dq dq + d_ddq h dv+,   dv+ as computed.
    for i in 0..nv {
        tw.col[i] = h * tw.v_next[i];
    }
    // Both Jacobians are block diagonal per joint and only their blocks are read: multiply
    // block by block.
    integrate_jacobian_blocks(model, tw.col.as_slice(), &mut tw.d_dq, &mut tw.d_ddq);
    for j in &model.joints {
        let (iv, w) = (j.idx_v, j.nv());
        let blk = tw.d_ddq.view((iv, iv), (w, w));
        block_times_rows(h, blk, &tw.dv, iv, 0, a.as_mut_slice(), (2 * nv, iv, 2 * nv));
        block_times_rows(h, blk, &tw.dv, iv, 2 * nv, b.as_mut_slice(), (2 * nv, iv, nu));
        let mut a_qq = a.view_mut((iv, iv), (w, w));
        a_qq += tw.d_dq.view((iv, iv), (w, w));
    }
    // Row r of dv+ (all columns) is contiguous in `tw.dv`; it becomes row nv + r of A and B.
    {
        let z = tw.dv.as_slice();
        let (a_s, b_s) = (a.as_mut_slice(), b.as_mut_slice());
        let ld = 2 * nv;
        assert!(a_s.len() == ld * ld && b_s.len() == ld * nu && ncols >= ld + nu && z.len() >= nv * ncols);
        for r in 0..nv {
            let row = &z[r * ncols..(r + 1) * ncols];
            // SAFETY: `nv + r < ld`, so `nv + r + c * ld < ld * ld` for `c < ld` and
            // `< ld * nu` for `c < nu` (asserted lengths); `ld + c < ncols = row.len()`.
            unsafe {
                for c in 0..ld {
                    *a_s.get_unchecked_mut(nv + r + c * ld) = *row.get_unchecked(c);
                }
                for c in 0..nu {
                    *b_s.get_unchecked_mut(nv + r + c * ld) = *row.get_unchecked(ld + c);
                }
            }
        }
    }
    if let Some(c) = c_out {
        for j in &model.joints {
            let (iv, w) = (j.idx_v, j.nv());
            let blk = tw.d_ddq.view((iv, iv), (w, w));
            for r in 0..w {
                c[iv + r] = h * (0..w).map(|k| blk[(r, k)] * tw.dv[(ncols - 1, iv + k)]).sum::<f64>();
            }
        }
        for r in 0..nv {
            c[nv + r] = tw.dv[(ncols - 1, r)];
        }
    }
    info
}

/// The three rows of `Y^T Z` of one contact: `out_j = sum_p y_p[j] z_(chain_p)` (`j < 3`, rows
/// of `out` and of `z` contiguous, `ncols` long), the chain's even and odd positions summed
/// apart and added at the end (as a dot product with two accumulators would: the chain is short
/// and one sum would be a dependent chain per column). Four columns at a time with the six
/// partial sums in registers, so each row of `z` is loaded once for the three rows instead of
/// once per row, and the sums are stored once.
#[inline(always)]
fn chain_rows_times_z(chain: &[usize], y: &[[f64; 4]], z: &[f64], ncols: usize, out: &mut [f64]) {
    let full = ncols / 4 * 4;
    for c0 in (0..full).step_by(4) {
        chain_rows_block::<4>(chain, y, z, ncols, c0, out);
    }
    for c0 in full..ncols {
        chain_rows_block::<1>(chain, y, z, ncols, c0, out);
    }
}

/// Columns `c0..c0 + W` of [`chain_rows_times_z`] (a constant width, so that the sums stay in
/// registers; a closure over a runtime width was compiled apart, without AVX2).
#[inline(always)]
fn chain_rows_block<const W: usize>(
    chain: &[usize],
    y: &[[f64; 4]],
    z: &[f64],
    ncols: usize,
    c0: usize,
    out: &mut [f64],
) {
    let (mut even, mut odd) = ([[0.0; W]; 3], [[0.0; W]; 3]);
    let mut terms = chain.iter().zip(y);
    while let Some((&d, yp)) = terms.next() {
        chain_rows_add::<W>(&mut even, &z[d * ncols + c0..d * ncols + c0 + W], yp);
        let Some((&d, yp)) = terms.next() else { break };
        chain_rows_add::<W>(&mut odd, &z[d * ncols + c0..d * ncols + c0 + W], yp);
    }
    for (j, (e, od)) in even.iter().zip(&odd).enumerate() {
        for (c, x) in out[j * ncols + c0..j * ncols + c0 + W].iter_mut().enumerate() {
            *x = e[c] + od[c];
        }
    }
}

#[inline(always)]
fn chain_rows_add<const W: usize>(acc: &mut [[f64; W]; 3], zd: &[f64], yp: &[f64; 4]) {
    for (j, acc) in acc.iter_mut().enumerate() {
        for (a, &zv) in acc.iter_mut().zip(zd) {
            *a += yp[j] * zv;
        }
    }
}

/// `a . b` summed as nalgebra's `dot` of a `Vector3` sums it (left to right), so that the
/// numbers do not change with the slices.
#[inline(always)]
fn dot3(a: &Vector3<f64>, b: &[f64]) -> f64 {
    a.x * b[0] + a.y * b[1] + a.z * b[2]
}

/// Tikhonov shift (relative to the largest diagonal of G) used when the contact system is
/// singular.
const SINGULAR_SHIFT: f64 = 1e-9;

/// How the contact law is linearized.
#[derive(Clone, Copy)]
enum Law {
    /// Per realized mode (DESIGN 3.1); with `relaxed_normal` the normal rows are those of
    /// `gamma w_n = kappa` (DESIGN 3.2).
    Modes { relaxed_normal: bool },
    /// The central-path Newton matrix of the backward solver (DESIGN 3.3).
    CentralPath,
}

/// Writes `R_lambda + R_w G (+ shift max_j G_jj I)` into `kmat` and `-R_w dw_fixed` into `dw` for
/// the per-mode law at `(lambda, w)` (module docs).
#[allow(clippy::too_many_arguments)]
fn assemble_modes(
    kmat: &mut DMatrix<f64>,
    dw: &mut DMatrix<f64>,
    dw_fixed: &DMatrix<f64>,
    g: nalgebra::DMatrixView<'_, f64>,
    lam: &[f64],
    w: &[f64],
    mu: &[f64],
    modes: &[ContactMode],
    relaxed_normal: bool,
    shift: f64,
) {
    let n = lam.len();
    let ncols = dw.nrows();
    let diag = (0..n).map(|j| g[(j, j)]).fold(0.0f64, f64::max);
    for (c, &mode) in modes.iter().enumerate() {
        let r0 = 3 * c;
        // Normal row.
        if relaxed_normal {
            // gamma dw_n + w_n dgamma = 0, scaled to O(1) for the pivoting.
            let (gam, wn) = (lam[r0], w[r0]);
            let scale = 1.0 / (wn.abs() + gam * diag).max(f64::MIN_POSITIVE);
            for j in 0..n {
                kmat[(r0, j)] = scale * gam * g[(r0, j)];
            }
            kmat[(r0, r0)] += scale * wn;
            for j in 0..ncols {
                dw[(j, r0)] = -scale * gam * dw_fixed[(j, r0)];
            }
        } else if mode == ContactMode::Separated {
            kmat.row_mut(r0).columns_mut(0, n).fill(0.0);
            kmat[(r0, r0)] = 1.0;
            dw.column_mut(r0).fill(0.0);
        } else {
            for j in 0..n {
                kmat[(r0, j)] = g[(r0, j)];
            }
            for j in 0..ncols {
                dw[(j, r0)] = -dw_fixed[(j, r0)];
            }
        }
        // Tangential rows: rl dlambda_i + rw (G_t dlambda + dw_fixed_t) = 0.
        let lin = friction_linearization(mode, mu[c], &lam[r0..r0 + 3], &w[r0..r0 + 3]);
        for a in 0..2 {
            let r = r0 + 1 + a;
            let (p, q) = (lin.rw[a][0], lin.rw[a][1]);
            for j in 0..n {
                kmat[(r, j)] = p * g[(r0 + 1, j)] + q * g[(r0 + 2, j)];
            }
            for (jj, &x) in lin.rl[a].iter().enumerate() {
                kmat[(r, r0 + jj)] += x;
            }
            for j in 0..ncols {
                dw[(j, r)] = -(p * dw_fixed[(j, r0 + 1)] + q * dw_fixed[(j, r0 + 2)]);
            }
        }
        if shift > 0.0 {
            for r in r0..r0 + 3 {
                kmat[(r, r)] += shift * diag;
            }
        }
    }
}

/// World impulse `C_i lambda_i` of active contact `c` (candidate `i`).
fn contact_force(ws: &StepWorkspace, c: usize, i: usize) -> Vector3<f64> {
    let l = &ws.lambda_active;
    ws.contacts.normal[i] * l[3 * c] + ws.contacts.t1[i] * l[3 * c + 1] + ws.contacts.t2[i] * l[3 * c + 2]
}

/// Solves `K X = B` for the top-left `n x n` block of `k`, with `B` and `X` stored transposed
/// (the first `n` columns of `b` and `out` hold the rows of `B` and `X`): the block is copied
/// into the row-major `lu` (at least `n^2`) and factored there with partial pivoting, the
/// explicit inverse goes into `inv` (n right-hand sides), then one dense product, each row of
/// `X` a combination of the rows of `B` (contiguous passes over all 49 columns of the
/// quadruped). Allocation-free; `false` if singular.
#[inline(always)]
fn solve_by_inverse(
    k: &DMatrix<f64>,
    n: usize,
    lu: &mut [f64],
    piv: &mut [usize],
    b: &DMatrix<f64>,
    inv: &mut DMatrix<f64>,
    out: &mut DMatrix<f64>,
) -> bool {
    let lu = &mut lu[..n * n];
    for (r, row) in lu.chunks_exact_mut(n).enumerate() {
        for (c, x) in row.iter_mut().enumerate() {
            *x = k[(r, c)];
        }
    }
    // Relative pivots: a pivot below 1e-14 of the largest entry is taken as a singular system (a
    // rank-deficient G, more contact rows than dofs), and the caller retries with a Tikhonov
    // shift; an absolute rule would accept the rounding residue of an exactly singular matrix and
    // return huge impulses instead.
    if !crate::linalg::lu_factor(lu, n, &mut piv[..n], crate::linalg::PivotRule::Relative(1e-14)) {
        return false;
    }
    // K^-1, every column at once (each as `lu_solve` would give it).
    let rows = inv.nrows();
    crate::linalg::lu_inverse(lu, n, &piv[..n], inv.as_mut_slice(), rows);
    // Row r of X = sum_k inv_rk (row k of B), accumulated in the order of k from zero, sixteen
    // columns at a time in registers (a pass over the whole row per k loaded and stored the
    // row's sums once per k).
    let cols = b.nrows();
    let (bs, os) = (b.as_slice(), out.as_mut_slice());
    let full = cols / 16 * 16;
    for r in 0..n {
        let o = &mut os[r * cols..(r + 1) * cols];
        let ir = |k: usize| inv[(r, k)];
        for c0 in (0..full).step_by(16) {
            combine_rows_block::<16>(n, ir, bs, cols, c0, o);
        }
        for c0 in full..cols {
            combine_rows_block::<1>(n, ir, bs, cols, c0, o);
        }
    }
    true
}

/// Columns `c0..c0 + W` of `o = sum_k coef(k) (row k of B)` (`B`'s rows contiguous, `cols`
/// long), summed in the order of `k` from zero.
#[inline(always)]
fn combine_rows_block<const W: usize>(
    n: usize,
    coef: impl Fn(usize) -> f64,
    bs: &[f64],
    cols: usize,
    c0: usize,
    o: &mut [f64],
) {
    let mut acc = [0.0; W];
    for k in 0..n {
        let v = coef(k);
        for (x, &bv) in acc.iter_mut().zip(&bs[k * cols + c0..k * cols + c0 + W]) {
            *x += bv * v;
        }
    }
    o[c0..c0 + W].copy_from_slice(&acc);
}

/// `out = alpha * blk * R` for the `w x w` block `blk` and the rows `row0..row0 + w` of the
/// matrix `R` stored transposed in `rt` (row `row0 + k` of `R` is column `row0 + k` of `rt`),
/// restricted to `R`'s columns `col0..col0 + ncols`, written into the rows `out_row0..` of
/// the column-major `out` (leading dimension `ld_out`). Entries are summed as
/// [`crate::linalg::gemm_into`] sums them (zeros of `R` skipped). Inlined so that it is
/// compiled with its caller's AVX2.
#[inline(always)]
fn block_times_rows(
    alpha: f64,
    blk: nalgebra::DMatrixView<'_, f64>,
    rt: &DMatrix<f64>,
    row0: usize,
    col0: usize,
    out: &mut [f64],
    (ld_out, out_row0, ncols): (usize, usize, usize),
) {
    // A joint has at most six DoFs (`JointKind::nv`): the block on the stack, a column of
    // the product in registers.
    const MAX: usize = 6;
    let w = blk.nrows();
    assert!(w <= MAX, "block_times_rows: a joint block is at most 6 x 6");
    let (rs, ld) = (rt.as_slice(), rt.nrows());
    assert!(out_row0 + w <= ld_out && ncols * ld_out <= out.len(), "block_times_rows: output out of range");
    // `out` is column-major with leading dimension `ld_out`: entry (r, c) of the block at
    // `out_row0 + r + c * ld_out` (plain indices: a view's checked 2-D indexing cost more).
    if w == 1 {
        // A revolute or prismatic joint (twelve of the quadruped's thirteen): a scaled row.
        let b = blk[(0, 0)];
        let src = &rs[col0 + row0 * ld..col0 + row0 * ld + ncols];
        for (c, &rc) in src.iter().enumerate() {
            // SAFETY: `out_row0 < ld_out` and `c < ncols`, so the index is below
            // `ncols * ld_out <= out.len()` (asserted above).
            unsafe {
                *out.get_unchecked_mut(out_row0 + c * ld_out) = if rc != 0.0 { (alpha * rc) * b } else { 0.0 };
            }
        }
        return;
    }
    let mut bl = [0.0; MAX * MAX];
    for k in 0..w {
        for r in 0..w {
            bl[r + MAX * k] = blk[(r, k)];
        }
    }
    for c in 0..ncols {
        let mut acc = [0.0; MAX];
        for k in 0..w {
            let rkc = rs[(col0 + c) + (row0 + k) * ld];
            if rkc != 0.0 {
                let s = alpha * rkc;
                for (a, &b) in acc[..w].iter_mut().zip(&bl[MAX * k..MAX * k + w]) {
                    *a += s * b;
                }
            }
        }
        out[out_row0 + c * ld_out..out_row0 + c * ld_out + w].copy_from_slice(&acc[..w]);
    }
}
