//! The ContactNets loss of one transition against a horizontal plane `z = 0`, and its gradient
//! with respect to the contact geometry by the envelope theorem.
//!
//! # Geometry
//! Contact `i` is a point `c_i` of the body (body frame). With `R` the rotation body -> world
//! and `p_z` the height of the centre, `d_a = R^T e_a` the world axes in the body frame,
//!
//! ```text
//! phi_i(q) = p_z + c_i . d_z                          (gap)
//! J_n,i    = [e_z^T,     (c_i x d_z)^T]                (1 x 6, nu = (v_world, w_body))
//! J_t,i    = mu [e_x^T,  (c_i x d_x)^T; e_y^T, (c_i x d_y)^T]    (2 x 6)
//! ```
//! The learned friction coefficient scales the tangent Jacobian (ContactNets' "tangent
//! scaling"), so that the cone below is the unit cone `||l_t|| <= l_n` and the physical friction
//! impulse is `mu l_t`. `phi`, `J` are evaluated at the start of the step; `phi'` is the gap at
//! the observed next configuration.
//!
//! # Inner problem (ContactNets, section IV, with their `block3d` weights)
//! Unknowns per contact: `lambda_i = (l_n, l_t)` (3) and a penetration slack `s_i`. With
//! `M = diag(m I, I I)`, `v_free = nu + dt (0, 0, -g, 0, 0, 0)` and the predicted velocity
//! `v(lambda) = v_free + M^-1 J^T lambda`,
//!
//! ```text
//! min  w_cn  sum_i phi'_i^2 l_n,i^2                        (normal complementarity)
//!    + w_ct  sum_i phi'_i^2 ||l_t,i||^2                    (tangential complementarity)
//!    + w_m   ||v(lambda) - nu'||^2                         (impulse-induced velocity change
//!                                                           matches the observed one)
//!    + w_d   sum_i ||vt_i l_n,i + n(vt_i) l_t,i||^2        (maximum dissipation)
//!    + w_s   sum_i s_i^2                                   (penetration slack)
//! s.t. ||l_t,i|| <= l_n,i                                  (friction cone, second-order)
//!      phi_i + dt J_n,i v(lambda) + s_i >= 0               (predicted non-penetration)
//! ```
//! `vt_i = J_t,i nu'` is the observed sliding velocity and `n(x) = sqrt(||x||^2 + eps^2)` a
//! smoothed norm; the dissipation term vanishes exactly when `l_t` points against the sliding
//! velocity with `||l_t|| = l_n` (the sliding branch of maximal dissipation), the convex squared
//! form of the original. Complementarity is squared (`(phi' l_n)^2`) rather than linear so the
//! whole objective is a convex quadratic in the unknowns (phi' is data here). Default weights:
//! `w_cn = w_ct = 1`, `w_d = 1`, `w_s = 1` as in the original `block3d` experiment, and
//! `w_m = 0.01` instead of its 0.1: on the real tosses (64 tosses, seeds 0-2) 0.1 learns a polytope
//! shrunk and shifted along body `-z` (max corner error 0.09-0.12 half widths, the `+z` face at
//! 0.89-0.96 while the data's resting heights put every face at 0.976-0.981), 0.01 learns corners
//! within 0.07-0.085 with the faces at 0.94-0.99 and better rollouts; 0.003 is about the same as
//! 0.01. A low match weight lets the complementarity terms, which see the geometry directly,
//! dominate the velocity residual that restitution and filtered velocities leave. Only contacts with `phi'_i` below [`LossSettings::margin`] enter the problem: a
//! corner that far from the ground carries no impulse at the optimum (its complementarity
//! weight `phi'^2` is large), and dropping it keeps the problem at 4 to 8 unknowns per corner in
//! contact instead of 32.
//!
//! The problem is a QP with second-order cones, solved by Clarabel (Goulart & Chen 2024) with
//! tightened tolerances.
//!
//! # Gradient (envelope theorem)
//! With Clarabel's form `min 1/2 x^T P x + q^T x  s.t.  A x + s = b, s in K` and its dual `z`,
//! the Lagrangian is `L = f(x) + z^T (A x - b)`. The optimal value `V(theta)` has
//! `dV/dtheta = dL/dtheta (x*, z*)`, the partial derivative at the fixed optimum (Danskin; the
//! envelope theorem for convex programs, e.g. Bonnans & Shapiro 2000, 4.3). The cone constraints
//! do not depend on `theta`; the non-penetration rows `g_i = phi_i + dt J_n,i v(lambda) + s_i >= 0`
//! do, through `phi_i` and `J`, so their multipliers `z_i` enter: `dV = df - sum_i z_i dg_i`.
//! [`transition_loss`] returns the adjoints with respect to the per-contact points at the start
//! and at the end of the step and to `mu`; [`crate::learn::contactnets::model`] chains them to
//! the parameters. tests/contactnets.rs checks them against central differences of the optimal
//! value.

use super::data::{Body, Transition};
use crate::validate::{Checker, SettingsError};
use clarabel::algebra::CscMatrix;
use clarabel::solver::{DefaultSettings, DefaultSolver, IPSolver, SolverStatus, SupportedConeT};
use nalgebra::{DMatrix, Matrix3, Vector2, Vector3, Vector6};
use serde::{Deserialize, Serialize};

/// Weights of the inner objective (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossWeights {
    /// Normal complementarity `(phi' l_n)^2`. Default 1.
    pub comp_n: f64,
    /// Tangential complementarity `(phi' ||l_t||)^2`. Default 1.
    pub comp_t: f64,
    /// Velocity match `||v(lambda) - nu'||^2`. Default 0.01.
    pub matching: f64,
    /// Maximum dissipation. Default 1.
    pub dissipation: f64,
    /// Penetration slack `s^2`. Default 1.
    pub slack: f64,
}

impl Default for LossWeights {
    fn default() -> Self {
        Self { comp_n: 1.0, comp_t: 1.0, matching: 0.01, dissipation: 1.0, slack: 1.0 }
    }
}

/// Settings of the loss.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossSettings {
    pub weights: LossWeights,
    /// Contacts whose next gap is below this enter the problem (scaled units). Default 1 (half
    /// the block width).
    pub margin: f64,
    /// Smoothing `eps` of the sliding-speed norm (scaled units / s). Default 1e-2.
    pub eps: f64,
    /// Clarabel's feasibility and gap tolerances. Default 1e-10.
    pub tolerance: f64,
    /// Clarabel's iteration limit. Default 100.
    pub max_iterations: u32,
}

impl Default for LossSettings {
    fn default() -> Self {
        Self { weights: LossWeights::default(), margin: 1.0, eps: 1e-2, tolerance: 1e-10, max_iterations: 100 }
    }
}

impl LossSettings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        let w = &self.weights;
        Checker::new("LossSettings")
            .non_negative("weights.comp_n", w.comp_n)
            .non_negative("weights.comp_t", w.comp_t)
            .non_negative("weights.matching", w.matching)
            .non_negative("weights.dissipation", w.dissipation)
            .positive("weights.slack", w.slack)
            .positive("margin", self.margin)
            .positive("eps", self.eps)
            .check(self.tolerance > 0.0 && self.tolerance < 1e-3, "tolerance", || {
                format!("{} is out of range: allowed (0, 1e-3)", self.tolerance)
            })
            .count("max_iterations", self.max_iterations as usize, 1, 100_000)
            .finish()
    }
}

/// Outcome of the inner solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InnerStatus {
    /// No contact within the margin: the value is the match term at `lambda = 0`.
    NoContact,
    Solved,
    /// Clarabel stopped at its reduced tolerances; value and gradient are usable.
    AlmostSolved,
    /// Clarabel failed; the value is the `lambda = 0` bound and the gradient is zero.
    Failed,
}

/// Value, terms and adjoints of one transition's loss.
#[derive(Clone, Debug, PartialEq)]
pub struct TransitionLoss {
    /// Optimal value of the inner problem.
    pub value: f64,
    /// Its terms at the optimum: comp_n, comp_t, matching, dissipation, slack.
    pub terms: [f64; 5],
    pub status: InnerStatus,
    /// Contacts in the problem.
    pub contacts: usize,
    /// `dV / dc_i` for the contact points used at the start of the step (body frame), one per
    /// input point.
    pub grad_start: Vec<Vector3<f64>>,
    /// `dV / dc'_i` for the points used at the end of the step (only through `phi'`).
    pub grad_end: Vec<Vector3<f64>>,
    /// `dV / dmu`.
    pub grad_mu: f64,
    /// Optimal impulses `(l_n, l_t1, l_t2)` per input point (zero outside the problem).
    pub impulses: Vec<Vector3<f64>>,
}

/// Per-contact geometry at the optimum.
struct ContactGeom {
    index: usize,
    /// Rows `(n, t1, t2)` of `J_i` (with `mu` in the tangent rows).
    jac: [Vector6<f64>; 3],
    /// Body-frame world axes `d_z, d_x, d_y` matching the rows.
    axes: [Vector3<f64>; 3],
    phi: f64,
    phi_next: f64,
    /// `J_t,i nu'`.
    vt: Vector2<f64>,
}

fn jac_row(axis_world: usize, d: &Vector3<f64>, c: &Vector3<f64>, scale: f64) -> Vector6<f64> {
    let a = c.cross(d);
    let mut r = Vector6::zeros();
    r[axis_world] = 1.0;
    r[3] = a.x;
    r[4] = a.y;
    r[5] = a.z;
    r * scale
}

/// The loss of one transition for contact points `start[i]` (used at the start of the step for
/// `phi` and `J`) and `end[i]` (for `phi'`; the same points for a polytope), friction `mu > 0`.
pub fn transition_loss(
    body: &Body,
    settings: &LossSettings,
    tr: &Transition,
    start: &[Vector3<f64>],
    end: &[Vector3<f64>],
    mu: f64,
) -> TransitionLoss {
    assert_eq!(start.len(), end.len(), "one end point per start point");
    let w = &settings.weights;
    let dt = body.dt;
    let mdiag = body.mass_diag();
    let minv = mdiag.map(|x| 1.0 / x);
    let mut v_free = tr.nu0;
    v_free[2] -= dt * body.g;
    let d0: [Vector3<f64>; 3] = axes(&tr.r0);
    let dz1 = tr.r1.row(2).transpose();

    let mut geo = Vec::new();
    for (i, (c, c1)) in start.iter().zip(end).enumerate() {
        let phi_next = tr.pz1 + c1.dot(&dz1);
        if phi_next >= settings.margin {
            continue;
        }
        let jac = [jac_row(2, &d0[0], c, 1.0), jac_row(0, &d0[1], c, mu), jac_row(1, &d0[2], c, mu)];
        let vt = Vector2::new(jac[1].dot(&tr.nu1), jac[2].dot(&tr.nu1));
        geo.push(ContactGeom { index: i, jac, axes: d0, phi: tr.pz0 + c.dot(&d0[0]), phi_next, vt });
    }
    let n_pts = start.len();
    let delta0 = v_free - tr.nu1;
    let mut out = TransitionLoss {
        value: w.matching * delta0.norm_squared(),
        terms: [0.0, 0.0, w.matching * delta0.norm_squared(), 0.0, 0.0],
        status: InnerStatus::NoContact,
        contacts: geo.len(),
        grad_start: vec![Vector3::zeros(); n_pts],
        grad_end: vec![Vector3::zeros(); n_pts],
        grad_mu: 0.0,
        impulses: vec![Vector3::zeros(); n_pts],
    };
    let k = geo.len();
    if k == 0 {
        return out;
    }

    // B = M^-1 J^T (6 x 3k).
    let nl = 3 * k;
    let n = 4 * k;
    let mut bmat = DMatrix::<f64>::zeros(6, nl);
    for (a, g) in geo.iter().enumerate() {
        for r in 0..3 {
            for c in 0..6 {
                bmat[(c, 3 * a + r)] = g.jac[r][c] * minv[c];
            }
        }
    }
    // Objective x^T Q x + c^T x + const.
    let mut qm = DMatrix::<f64>::zeros(n, n);
    let mut cv = vec![0.0; n];
    let btb = bmat.transpose() * &bmat;
    let btd = bmat.transpose() * delta0;
    for i in 0..nl {
        for j in 0..nl {
            qm[(i, j)] += w.matching * btb[(i, j)];
        }
        cv[i] += 2.0 * w.matching * btd[i];
    }
    let constant = w.matching * delta0.norm_squared();
    for (a, g) in geo.iter().enumerate() {
        let p2 = g.phi_next * g.phi_next;
        qm[(3 * a, 3 * a)] += w.comp_n * p2;
        qm[(3 * a + 1, 3 * a + 1)] += w.comp_t * p2;
        qm[(3 * a + 2, 3 * a + 2)] += w.comp_t * p2;
        // r = C lambda_a with C = [vt, n I2] (2 x 3).
        let nn = (g.vt.norm_squared() + settings.eps * settings.eps).sqrt();
        let cm = nalgebra::Matrix2x3::new(g.vt.x, nn, 0.0, g.vt.y, 0.0, nn);
        let ctc = cm.transpose() * cm;
        for r in 0..3 {
            for c in 0..3 {
                qm[(3 * a + r, 3 * a + c)] += w.dissipation * ctc[(r, c)];
            }
        }
        qm[(nl + a, nl + a)] += w.slack;
    }

    // Constraints: k SOC blocks (-lambda_a + s = 0), then k non-negative rows.
    let mut am = DMatrix::<f64>::zeros(4 * k, n);
    let mut bv = vec![0.0; 4 * k];
    for i in 0..nl {
        am[(i, i)] = -1.0;
    }
    for (a, g) in geo.iter().enumerate() {
        let row = nl + a;
        let jn_b = g.jac[0].transpose() * &bmat; // 1 x 3k
        for j in 0..nl {
            am[(row, j)] = -dt * jn_b[j];
        }
        am[(row, nl + a)] = -1.0;
        bv[row] = g.phi + dt * g.jac[0].dot(&v_free);
    }
    let p = upper_csc(&(2.0 * &qm));
    let a_csc = dense_csc(&am);
    let mut cones: Vec<SupportedConeT<f64>> = (0..k).map(|_| SupportedConeT::SecondOrderConeT(3)).collect();
    cones.push(SupportedConeT::NonnegativeConeT(k));
    // A tight tolerance occasionally stalls (Clarabel's InsufficientProgress) on an
    // ill-conditioned transition; the solve is then repeated at 1e-8 and reported AlmostSolved.
    let mut attempt = None;
    for (tol, status) in
        [(settings.tolerance, InnerStatus::Solved), (settings.tolerance.max(1e-8), InnerStatus::AlmostSolved)]
    {
        if let Some((x, z, almost)) = solve_qp(&p, &cv, &a_csc, &bv, &cones, tol, settings.max_iterations) {
            attempt = Some((x, z, if almost { InnerStatus::AlmostSolved } else { status }));
            break;
        }
    }
    let Some((x, z, status)) = attempt else {
        out.status = InnerStatus::Failed;
        return out;
    };
    out.status = status;
    let lam = nalgebra::DVector::from_column_slice(&x[..nl]);
    let e = delta0 + &bmat * &lam; // v(lambda) - nu'
    let v_pred = v_free + &bmat * &lam;

    // Value and terms at the optimum.
    let mut terms = [0.0; 5];
    terms[2] = w.matching * e.norm_squared();
    for (a, g) in geo.iter().enumerate() {
        let l = Vector3::new(x[3 * a], x[3 * a + 1], x[3 * a + 2]);
        let p2 = g.phi_next * g.phi_next;
        terms[0] += w.comp_n * p2 * l.x * l.x;
        terms[1] += w.comp_t * p2 * (l.y * l.y + l.z * l.z);
        let nn = (g.vt.norm_squared() + settings.eps * settings.eps).sqrt();
        let r = g.vt * l.x + nn * Vector2::new(l.y, l.z);
        terms[3] += w.dissipation * r.norm_squared();
        terms[4] += w.slack * x[nl + a] * x[nl + a];
        out.impulses[g.index] = l;
    }
    let _ = constant;
    out.terms = terms;
    out.value = terms.iter().sum();

    // Adjoints of the Lagrangian at the optimum.
    let minv_e = e.component_mul(&minv);
    // u = sum_j z_j J_n,j^T, the multiplier-weighted normal directions.
    let mut u = Vector6::zeros();
    for (a, g) in geo.iter().enumerate() {
        u += z[nl + a] * g.jac[0];
    }
    let minv_u = u.component_mul(&minv);
    for (a, g) in geo.iter().enumerate() {
        let l = Vector3::new(x[3 * a], x[3 * a + 1], x[3 * a + 2]);
        let za = z[nl + a];
        let lt = Vector2::new(l.y, l.z);
        // dV/dJ_a rows (3 x 6).
        let mut gj = [Vector6::zeros(); 3];
        for r in 0..3 {
            gj[r] += 2.0 * w.matching * l[r] * minv_e - dt * l[r] * minv_u;
        }
        gj[0] -= za * dt * v_pred;
        let nn = (g.vt.norm_squared() + settings.eps * settings.eps).sqrt();
        let rr = g.vt * l.x + nn * lt;
        let d_vt = 2.0 * w.dissipation * (l.x * rr + rr.dot(&lt) * g.vt / nn);
        gj[1] += d_vt.x * tr.nu1;
        gj[2] += d_vt.y * tr.nu1;
        let g_phi = -za;
        let g_phi_next = 2.0 * g.phi_next * (w.comp_n * l.x * l.x + w.comp_t * lt.norm_squared());
        // J rows: angular part s_r (c x d_r), so d/dc of (c x d_r) . a = d_r x a.
        let scales = [1.0, mu, mu];
        let mut gc = g.axes[0] * g_phi;
        for r in 0..3 {
            let ang = Vector3::new(gj[r][3], gj[r][4], gj[r][5]);
            gc += scales[r] * g.axes[r].cross(&ang);
        }
        out.grad_start[g.index] = gc;
        out.grad_end[g.index] = dz1 * g_phi_next;
        if mu > 0.0 {
            out.grad_mu += (gj[1].dot(&g.jac[1]) + gj[2].dot(&g.jac[2])) / mu;
        }
    }
    out
}

/// Clarabel on `min 1/2 x^T P x + q^T x  s.t.  A x + s = b, s in K` at tolerance `tol`: the
/// primal and dual solutions and whether it only reached the reduced tolerances, or `None`.
fn solve_qp(
    p: &CscMatrix<f64>,
    q: &[f64],
    a: &CscMatrix<f64>,
    b: &[f64],
    cones: &[SupportedConeT<f64>],
    tol: f64,
    max_iter: u32,
) -> Option<(Vec<f64>, Vec<f64>, bool)> {
    let cs = DefaultSettings {
        verbose: false,
        tol_gap_abs: tol,
        tol_gap_rel: tol,
        tol_feas: tol,
        tol_ktratio: tol.sqrt().min(1e-6),
        max_iter,
        ..DefaultSettings::default()
    };
    let mut solver = DefaultSolver::new(p, q, a, b, cones, cs).ok()?;
    solver.solve();
    let almost = match solver.solution.status {
        SolverStatus::Solved => false,
        SolverStatus::AlmostSolved => true,
        _ => return None,
    };
    let (x, z) = (solver.solution.x.clone(), solver.solution.z.clone());
    if !x.iter().chain(z.iter()).all(|v| v.is_finite()) {
        return None;
    }
    Some((x, z, almost))
}

/// `(d_z, d_x, d_y) = R^T (e_z, e_x, e_y)`: the rows of `R`.
fn axes(r: &Matrix3<f64>) -> [Vector3<f64>; 3] {
    [r.row(2).transpose(), r.row(0).transpose(), r.row(1).transpose()]
}

/// Upper triangle of a dense symmetric matrix, as Clarabel's `P`.
fn upper_csc(m: &DMatrix<f64>) -> CscMatrix<f64> {
    let n = m.ncols();
    let (mut colptr, mut rowval, mut nzval) = (vec![0], vec![], vec![]);
    for c in 0..n {
        for r in 0..=c {
            let v = 0.5 * (m[(r, c)] + m[(c, r)]);
            if v != 0.0 {
                rowval.push(r);
                nzval.push(v);
            }
        }
        colptr.push(rowval.len());
    }
    CscMatrix::new(n, n, colptr, rowval, nzval)
}

fn dense_csc(m: &DMatrix<f64>) -> CscMatrix<f64> {
    let (nr, nc) = m.shape();
    let (mut colptr, mut rowval, mut nzval) = (vec![0], vec![], vec![]);
    for c in 0..nc {
        for r in 0..nr {
            if m[(r, c)] != 0.0 {
                rowval.push(r);
                nzval.push(m[(r, c)]);
            }
        }
        colptr.push(rowval.len());
    }
    CscMatrix::new(nr, nc, colptr, rowval, nzval)
}
