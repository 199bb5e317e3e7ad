//! The forward step: semi-implicit, velocity-level hard contact (Stewart & Trinkle 1996;
//! Anitescu 2006), as in DESIGN 2.
//!
//! ```text
//! M(q) (v+ - v) = h (S u + tau_ext - c(q, v)) + J^T lambda,     q+ = integrate(q, h v+)
//! v_free = v + h M^-1 (S u + tau_ext - c)
//! G = J M^-1 J^T,   b = J v_free + [phi/h; 0; 0] per contact,   w = G lambda + b
//! v+ = v_free + M^-1 J^T lambda
//! ```
//! with `lambda_i` in the friction cone, Signorini on the normal and maximal dissipation on the
//! tangent, solved exactly by [`crate::contact::solver`]. The step is a chain of named stages
//! (`stage_dynamics`, `stage_contacts`, `stage_free_velocity`, `stage_delassus`, `stage_solve`,
//! `stage_integrate`), each callable on its own so derivatives and finite differences can reuse
//! them. Nothing here allocates after [`StepWorkspace::new`].

use crate::contact::detection::Contacts;
use crate::contact::solver::{self, classify, ContactMode, ContactSolver};
use crate::contact::Terrain;
use crate::dynamics::crba::crba_from_placements;
use crate::dynamics::{ltl, nle};
use crate::model::{integrate, Data, Model};
use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Settings of the step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSettings {
    /// Time step `h` (s). Default 0.002.
    #[serde(deserialize_with = "crate::validate::time_step")]
    pub dt: f64,
    /// Contact solver settings.
    #[serde(default)]
    pub solver: solver::Settings,
    /// Contact candidates with a gap below this enter the contact problem (m). Default 0.05.
    #[serde(default = "default_margin", deserialize_with = "crate::validate::non_negative")]
    pub contact_margin: f64,
    /// A step whose resulting velocity has a component above this (m/s or rad/s) is not taken
    /// ([`StepStatus::Diverged`]). Default 1000: far above anything a legged robot does, far
    /// below where the explicit Coriolis term `h C(q, v) v`, quadratic in `v`, feeds on itself
    /// (a light link driven at its torque limit can spin up to that regime within a few steps,
    /// and the state then reaches 1e20 in three more).
    #[serde(default = "default_max_speed", deserialize_with = "crate::validate::positive")]
    pub max_speed: f64,
}

fn default_margin() -> f64 {
    0.05
}

fn default_max_speed() -> f64 {
    1e3
}

impl Default for StepSettings {
    fn default() -> Self {
        Self {
            dt: 0.002,
            solver: solver::Settings::default(),
            contact_margin: default_margin(),
            max_speed: default_max_speed(),
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum StepSettingsError {
    #[error("dt: {0} is out of range: allowed [1e-6, 0.1] s")]
    Dt(f64),
    #[error("contact_margin: must be finite and >= 0 m, got {0}")]
    Margin(f64),
    #[error("max_speed: must be finite and > 0, got {0}")]
    MaxSpeed(f64),
    #[error("solver: {0}")]
    Solver(String),
}

impl StepSettings {
    pub fn validate(&self) -> Result<(), StepSettingsError> {
        if !crate::validate::time_step_ok(self.dt) {
            return Err(StepSettingsError::Dt(self.dt));
        }
        if !(self.contact_margin.is_finite() && self.contact_margin >= 0.0) {
            return Err(StepSettingsError::Margin(self.contact_margin));
        }
        if !(self.max_speed.is_finite() && self.max_speed > 0.0) {
            return Err(StepSettingsError::MaxSpeed(self.max_speed));
        }
        self.solver.validate().map_err(|e| StepSettingsError::Solver(e.to_string()))
    }
}

/// Outcome of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepStatus {
    /// The contact problem was solved to tolerance.
    Ok,
    /// The contact solver stopped without converging (its iteration limit, or a Newton matrix
    /// still singular after a cold, more regularized retry: the solver info says which); the
    /// state was advanced with its last iterate (inside the friction cone).
    SolverNotConverged,
    /// The mass matrix was not positive definite; the state was not advanced.
    SingularMassMatrix,
    /// NaN or infinity in the input or the result; the state was not advanced.
    NonFinite,
    /// The contact solver rejected its input or could not factorize its Newton matrix before
    /// its first step; the state was not advanced.
    SolverFailed,
    /// The resulting velocity exceeds `StepSettings::max_speed`: the state was not advanced.
    Diverged,
}

impl StepStatus {
    /// Whether the produced state can be used.
    pub fn advanced(&self) -> bool {
        matches!(self, StepStatus::Ok | StepStatus::SolverNotConverged)
    }
}

/// Diagnostics of one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepInfo {
    pub status: StepStatus,
    /// The contact solver's report.
    pub solver: solver::Info,
    /// `max(0, -min_i phi_i)` at the start of the step (m).
    pub penetration: f64,
    /// Number of contacts with a nonzero impulse (not separated).
    pub active_contacts: usize,
    /// Number of candidates in the contact problem (gap below the margin).
    pub candidates_in_problem: usize,
}

/// Preallocated buffers of the step.
#[derive(Clone)]
pub struct StepWorkspace {
    /// Rigid-body workspace.
    pub data: Data,
    /// Contact geometry, active set and Jacobian (`3k x nv`, first `3 ka` rows used).
    pub contacts: Contacts,
    /// Generalized force `S u + tau_ext - c(q, v)` (nv).
    pub force: DVector<f64>,
    /// Free velocity (nv).
    pub v_free: DVector<f64>,
    /// `Y = L^-T J^T` with `M + A + h D = L^T L` (`A` the armature), so that `G = Y^T Y` and
    /// `M^-1 J^T = L^-1 Y`. Contact `a`'s three columns are zero off its chain of dofs, so only
    /// the chain is kept: `y_chain[a * nv + p]` holds them at the `p`-th dof of
    /// `contacts.dofs[contacts.active[a]]` (fourth lane zero; first `ka` chains used).
    pub y_chain: Vec<[f64; 4]>,
    /// Delassus matrix `G = J M^-1 J^T` (3k x 3k, top-left `3 ka` block used).
    pub delassus: DMatrix<f64>,
    /// Free-contact term `b` of the active contacts (3k, first `3 ka` used).
    pub b: DVector<f64>,
    /// Friction coefficients of the active contacts (k, first `ka` used).
    pub mu: Vec<f64>,
    /// Solver impulses and velocities of the active contacts, and the warm start gathered for
    /// them (3k each, first `3 ka` used).
    pub lambda_active: DVector<f64>,
    pub w_active: DVector<f64>,
    pub warm_active: DVector<f64>,
    /// Contact impulses `lambda` of every candidate, `(l_n, l_t1, l_t2)`, zero when not in the
    /// problem (3k).
    pub lambda: DVector<f64>,
    /// Contact velocities after the step `w = G lambda + b` of every candidate, zero when not in
    /// the problem (3k).
    pub w: DVector<f64>,
    /// Impulses of the previous step per candidate, for the warm start (3k).
    pub lambda_warm: DVector<f64>,
    pub has_warm_start: bool,
    /// Realized mode per candidate (k); `Separated` when not in the problem.
    pub modes: Vec<ContactMode>,
    /// Scratch tangent vector `h v+` (nv).
    pub dq: DVector<f64>,
    /// Implicit actuator damping `D` (nu): the step uses `u = u_explicit - D (v+ - v)`, which
    /// adds `h D` to the actuated diagonal of `M` (MuJoCo's implicit damping). Set by the
    /// controller; zero for open-loop torques.
    pub actuator_damping: DVector<f64>,
    /// `diag(armature) + h D` at the `v` indices (nv): what the step adds to `M`'s diagonal.
    pub mass_shift: DVector<f64>,
    pub solver: ContactSolver,
}

impl StepWorkspace {
    pub fn new(model: &Model) -> Self {
        let (nv, k) = (model.nv, Contacts::capacity(model));
        Self {
            data: Data::new(model),
            contacts: Contacts::new(model),
            force: DVector::zeros(nv),
            v_free: DVector::zeros(nv),
            y_chain: vec![[0.0; 4]; nv * k],
            delassus: DMatrix::zeros(3 * k, 3 * k),
            b: DVector::zeros(3 * k),
            mu: vec![0.0; k],
            lambda_active: DVector::zeros(3 * k),
            w_active: DVector::zeros(3 * k),
            warm_active: DVector::zeros(3 * k),
            lambda: DVector::zeros(3 * k),
            w: DVector::zeros(3 * k),
            lambda_warm: DVector::zeros(3 * k),
            has_warm_start: false,
            modes: vec![ContactMode::Separated; k],
            dq: DVector::zeros(nv),
            actuator_damping: DVector::zeros(model.nu),
            mass_shift: DVector::zeros(nv),
            solver: ContactSolver::new(k.max(1)),
        }
    }

    /// Forgets the warm start (after a reset or a jump in state).
    pub fn reset_warm_start(&mut self) {
        self.has_warm_start = false;
    }
}

/// Stage 1: `M(q)`, the Cholesky factor of `M + diag(armature) + h D` (rotor inertia,
/// `Model::armature`, and implicit actuator damping), and
/// `c(q, v)`. Returns `false` if the matrix is not positive definite.
pub fn stage_dynamics(model: &Model, ws: &mut StepWorkspace, q: &[f64], v: &[f64], h: f64) -> bool {
    nle(model, &mut ws.data, q, v);
    crba_from_placements(model, &mut ws.data);
    ws.mass_shift.as_mut_slice().copy_from_slice(&model.armature);
    for (k, &dof) in model.actuated_dofs.iter().enumerate() {
        ws.mass_shift[dof] += h * ws.actuator_damping[k];
    }
    ltl::factor(&ws.data.mass_matrix, Some(ws.mass_shift.as_slice()), &model.dof_parent, &mut ws.data.mass_ltl)
}

/// Stage 2: gaps, contact frames, the active set and its stacked Jacobian. Needs body
/// placements (stage 1).
pub fn stage_contacts(model: &Model, terrain: &Terrain, ws: &mut StepWorkspace, margin: f64) {
    ws.contacts.detect(model, &ws.data, terrain, margin);
    ws.contacts.jacobian(model, &mut ws.data);
}

/// Stage 3: `v_free = v + h M^-1 (S u + tau_ext - c)`.
pub fn stage_free_velocity(model: &Model, ws: &mut StepWorkspace, v: &[f64], u: &[f64], tau_ext: &[f64], h: f64) {
    for i in 0..model.nv {
        ws.force[i] = tau_ext[i] - ws.data.nle[i];
    }
    for (k, &dof) in model.actuated_dofs.iter().enumerate() {
        ws.force[dof] += u[k];
    }
    ws.v_free.copy_from(&ws.force);
    ltl::solve(&ws.data.mass_ltl, &model.dof_parent, ws.v_free.as_mut_slice());
    for i in 0..model.nv {
        ws.v_free[i] = v[i] + h * ws.v_free[i];
    }
}

/// Stage 4: for the `ka` active contacts, `Y = L^-T J^T`, `G = J M^-1 J^T = Y^T Y` and
/// `b = J v_free + [phi/h; 0; 0]`.
pub fn stage_delassus(ws: &mut StepWorkspace, h: f64) {
    // The chain solves are inlined into the AVX2 copy.
    crate::linalg::avx2_dispatch!(delassus, (ws: &mut StepWorkspace, h: f64))
}

#[inline(always)]
fn delassus(ws: &mut StepWorkspace, h: f64) {
    let ka = ws.contacts.n_active();
    let nv = ws.v_free.len();
    let rows = ws.contacts.jac.nrows();
    let jac = ws.contacts.jac.as_slice();
    let vf = ws.v_free.as_slice();
    let (active, dofs) = (&ws.contacts.active, &ws.contacts.dofs);
    // Each contact's three columns of Y live on its chain of dofs: they are built and solved
    // in `y_chain`, one `[f64; 4]` per chain position (the three columns side by side, a
    // fourth lane of zeros), so that a row update is one 4-wide operation and no index is
    // gathered per column (`ltl::solve_lt_chain_packed`); `G`'s blocks are then contiguous
    // passes over two chains' common prefix.
    for a in 0..ka {
        let chain = &dofs[active[a]];
        let ya = &mut ws.y_chain[a * nv..a * nv + chain.len()];
        let mut bb = [0.0; 3];
        for (yp, &c) in ya.iter_mut().zip(chain) {
            let jc = &jac[c * rows + 3 * a..c * rows + 3 * a + 3];
            *yp = [jc[0], jc[1], jc[2], 0.0];
            for k in 0..3 {
                bb[k] += jc[k] * vf[c];
            }
        }
        ws.b[3 * a] = bb[0] + ws.contacts.phi[active[a]] / h;
        ws.b[3 * a + 1] = bb[1];
        ws.b[3 * a + 2] = bb[2];
        ws.mu[a] = ws.contacts.mu[active[a]];
        ltl::solve_lt_chain_packed(&ws.data.mass_ltl, chain, ya);
    }
    // G = Y^T Y, a 3 x 3 block per pair of contacts. `Y_i . Y_j` only runs over the dofs the
    // two branches share: the common prefix of their root-first dof lists, the same positions
    // in both chains.
    let g = ws.delassus.as_mut_slice();
    let gr = 3 * ws.contacts.k;
    let yc = &ws.y_chain;
    for ca in 0..ka {
        let da = &dofs[active[ca]];
        for cb in ca..ka {
            let db = &dofs[active[cb]];
            let s = da.iter().zip(db.iter()).take_while(|(a, b)| a == b).count();
            let (ya, yb) = (&yc[ca * nv..ca * nv + s], &yc[cb * nv..cb * nv + s]);
            // From -0.0, as `Iterator::sum` starts, so that an all-zero sum keeps its sign.
            let mut acc = [[-0.0; 4]; 3];
            for (pa, pb) in ya.iter().zip(yb) {
                for k in 0..3 {
                    for l in 0..4 {
                        acc[k][l] += pa[k] * pb[l];
                    }
                }
            }
            for k in 0..3 {
                for l in 0..3 {
                    let (i, j) = (3 * ca + k, 3 * cb + l);
                    g[i + j * gr] = acc[k][l];
                    g[j + i * gr] = acc[k][l];
                }
            }
        }
    }
}

/// Stage 5: the contact problem of the active contacts, warm-started from the previous step's
/// impulses of the same candidates, scattered back per candidate with the realized modes.
pub fn stage_solve(ws: &mut StepWorkspace, settings: &solver::Settings) -> solver::Info {
    let ka = ws.contacts.n_active();
    let n = 3 * ka;
    for (a, &i) in ws.contacts.active.iter().enumerate() {
        for r in 0..3 {
            ws.warm_active[3 * a + r] = ws.lambda_warm[3 * i + r];
        }
    }
    let warm = if ws.has_warm_start { Some(&ws.warm_active.as_slice()[..n]) } else { None };
    let info = ws.solver.solve(
        settings,
        ws.delassus.view((0, 0), (n, n)),
        &ws.b.as_slice()[..n],
        &ws.mu[..ka],
        warm,
        &mut ws.lambda_active.as_mut_slice()[..n],
        &mut ws.w_active.as_mut_slice()[..n],
    );
    ws.lambda.as_mut_slice().fill(0.0);
    ws.w.as_mut_slice().fill(0.0);
    ws.modes.fill(ContactMode::Separated);
    for (a, &i) in ws.contacts.active.iter().enumerate() {
        for r in 0..3 {
            ws.lambda[3 * i + r] = ws.lambda_active[3 * a + r];
            ws.w[3 * i + r] = ws.w_active[3 * a + r];
        }
        let r = 3 * a..3 * a + 3;
        let g_nn = ws.delassus[(3 * a, 3 * a)];
        ws.modes[i] = classify(&ws.lambda_active.as_slice()[r.clone()], &ws.w_active.as_slice()[r], g_nn, settings);
    }
    info
}

/// Stage 6: `v+ = v_free + M^-1 J^T lambda`, `q+ = integrate(q, h v+)`.
pub fn stage_integrate(
    model: &Model,
    ws: &mut StepWorkspace,
    q: &[f64],
    h: f64,
    q_next: &mut [f64],
    v_next: &mut [f64],
) {
    // M^-1 J^T lambda = L^-1 (Y lambda), computed in `dq` as scratch.
    let nv = model.nv;
    let dq = ws.dq.as_mut_slice();
    dq.fill(0.0);
    for (a, &i) in ws.contacts.active.iter().enumerate() {
        let chain = &ws.contacts.dofs[i];
        let l = &ws.lambda_active.as_slice()[3 * a..3 * a + 3];
        for (yp, &c) in ws.y_chain[a * nv..a * nv + chain.len()].iter().zip(chain) {
            dq[c] += yp[0] * l[0];
            dq[c] += yp[1] * l[1];
            dq[c] += yp[2] * l[2];
        }
    }
    ltl::solve_l(&ws.data.mass_ltl, &model.dof_parent, ws.dq.as_mut_slice());
    for i in 0..model.nv {
        v_next[i] = ws.v_free[i] + ws.dq[i];
        ws.dq[i] = h * v_next[i];
    }
    integrate(model, q, ws.dq.as_slice(), q_next);
}

/// One step from `(q, v)` with actuator inputs `u` (nu, the explicit part when
/// `ws.actuator_damping` is nonzero) and external generalized forces `tau_ext` (nv). Writes `(q_next, v_next)` when the returned status says it advanced.
#[allow(clippy::too_many_arguments)]
pub fn step(
    model: &Model,
    terrain: &Terrain,
    settings: &StepSettings,
    ws: &mut StepWorkspace,
    q: &[f64],
    v: &[f64],
    u: &[f64],
    tau_ext: &[f64],
    q_next: &mut [f64],
    v_next: &mut [f64],
) -> StepInfo {
    let h = settings.dt;
    let finite = |x: &[f64]| x.iter().all(|a| a.is_finite());
    let mut info = StepInfo {
        status: StepStatus::Ok,
        solver: solver::Info::not_run(),
        penetration: 0.0,
        active_contacts: 0,
        candidates_in_problem: 0,
    };
    if !(finite(q) && finite(v) && finite(u) && finite(tau_ext)) {
        info.status = StepStatus::NonFinite;
        return info;
    }
    if !stage_dynamics(model, ws, q, v, h) {
        info.status = StepStatus::SingularMassMatrix;
        return info;
    }
    stage_contacts(model, terrain, ws, settings.contact_margin);
    info.penetration = ws.contacts.phi.iter().fold(0.0f64, |m, &p| m.max(-p));
    stage_free_velocity(model, ws, v, u, tau_ext, h);
    info.candidates_in_problem = ws.contacts.n_active();
    if ws.contacts.n_active() == 0 {
        // Nothing within reach: forget impulses so a later touchdown starts cold.
        ws.lambda.fill(0.0);
        ws.w.fill(0.0);
        ws.modes.fill(ContactMode::Separated);
        ws.lambda_warm.fill(0.0);
    } else {
        stage_delassus(ws, h);
        info.solver = stage_solve(ws, &settings.solver);
        match info.solver.status {
            solver::Status::Converged => {}
            solver::Status::MaxIterations => info.status = StepStatus::SolverNotConverged,
            solver::Status::NonFinite => {
                info.status = StepStatus::NonFinite;
                ws.has_warm_start = false;
                return info;
            }
            // A Newton matrix singular at an interior iterate after every retry: the solver
            // hands back that iterate (finite, inside the cones), used like a `MaxIterations`
            // answer and reported as not converged; the solver's info keeps the cause.
            solver::Status::LinearSolveFailed
                if info.solver.iterations > 0
                    && ws.lambda_active.as_slice()[..3 * ws.contacts.n_active()].iter().all(|x| x.is_finite()) =>
            {
                info.status = StepStatus::SolverNotConverged
            }
            solver::Status::LinearSolveFailed | solver::Status::InvalidInput => {
                info.status = StepStatus::SolverFailed;
                ws.has_warm_start = false;
                return info;
            }
        }
        ws.lambda_warm.copy_from(&ws.lambda);
        ws.has_warm_start = true;
        info.active_contacts = ws.modes.iter().filter(|m| **m != ContactMode::Separated).count();
    }
    stage_integrate(model, ws, q, h, q_next, v_next);
    if !(finite(q_next) && finite(v_next)) {
        info.status = StepStatus::NonFinite;
    } else if v_next.iter().any(|x| x.abs() > settings.max_speed) {
        info.status = StepStatus::Diverged;
    }
    info
}
