//! One step's transition Jacobians: analytic under a chosen contact sensitivity, and by central differences.

use crate::simulation::PySimulation;
use crate::{matrix, parse_sensitivity, value_error, vector};
use contactlab::diff::fd::{fd_transition as rust_fd_transition, FdWorkspace};
use contactlab::diff::{transition_jacobians as rust_transition_jacobians, TransitionWorkspace};
use contactlab::sim::StepWorkspace;
use nalgebra::DMatrix;
use numpy::{PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `(A, B, info)` of [`transition_jacobians`].
pub(crate) type Jacobians<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyDict>);
/// `(A, B, step status)` of [`fd_transition`].
pub(crate) type FdJacobians<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, String);

/// `A = d x+ / d x`, `B = d x+ / d u` (tangent space, `2 nv x 2 nv` and `2 nv x nu`) of one step
/// of `sim`'s raw dynamics (no controller: `u` is the joint torque, default `sim.control`) at its
/// present state (or at `q`, `v` when given; `sim` is not changed), with the named contact
/// sensitivity; and an info dict (`status`, `step_status`, `backward_iterations`, and the step's
/// result `q_next`, `v_next`). The step is taken from a cold start, like the CITO knots.
#[pyfunction]
#[pyo3(signature = (sim, u = None, sensitivity = "relaxed", kappa = 1e-4, delta = 1e-3, q = None, v = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn transition_jacobians<'py>(
    py: Python<'py>,
    sim: &PySimulation,
    u: Option<PyReadonlyArray1<'_, f64>>,
    sensitivity: &str,
    kappa: f64,
    delta: f64,
    q: Option<PyReadonlyArray1<'_, f64>>,
    v: Option<PyReadonlyArray1<'_, f64>>,
) -> PyResult<Jacobians<'py>> {
    let s = &sim.inner;
    let m = &*s.model;
    let sens = parse_sensitivity(sensitivity, kappa, delta)?;
    let u = match u {
        Some(u) => vector("u", &u, m.nu)?,
        None => s.u_offset.clone(),
    };
    let q = match q {
        Some(q) => vector("q", &q, m.nq)?,
        None => s.q.clone(),
    };
    let v = match v {
        Some(v) => vector("v", &v, m.nv)?,
        None => s.v.clone(),
    };
    let mut ws = StepWorkspace::new(m);
    let mut tw = TransitionWorkspace::new(m);
    let (mut a, mut b) = (DMatrix::zeros(2 * m.nv, 2 * m.nv), DMatrix::zeros(2 * m.nv, m.nu));
    let zeros = vec![0.0; m.nv];
    let info = rust_transition_jacobians(
        m,
        &s.terrain,
        &s.settings,
        &mut ws,
        &mut tw,
        (q.as_slice(), v.as_slice(), u.as_slice(), &zeros),
        sens,
        &mut a,
        &mut b,
    );
    let d = PyDict::new(py);
    d.set_item("status", format!("{:?}", info.status))?;
    d.set_item("step_status", format!("{:?}", info.step.status))?;
    d.set_item("backward_iterations", info.backward.iterations)?;
    d.set_item("q_next", PyArray1::from_slice(py, tw.q_next.as_slice()))?;
    d.set_item("v_next", PyArray1::from_slice(py, tw.v_next.as_slice()))?;
    Ok((matrix(py, &a), matrix(py, &b), d))
}

/// `A`, `B` of one step by central differences through `integrate` (the reference the analytic
/// Jacobians are checked against), at `sim`'s state with torque `u` (default: `sim.control`);
/// returns `(A, B, step status)`. Cold steps.
#[pyfunction]
#[pyo3(signature = (sim, u = None, eps = 1e-6))]
pub(crate) fn fd_transition<'py>(
    py: Python<'py>,
    sim: &PySimulation,
    u: Option<PyReadonlyArray1<'_, f64>>,
    eps: f64,
) -> PyResult<FdJacobians<'py>> {
    let s = &sim.inner;
    let m = &*s.model;
    if !(eps.is_finite() && eps > 0.0) {
        return Err(value_error(format!("eps: must be finite and > 0, got {eps}")));
    }
    let u = match u {
        Some(u) => vector("u", &u, m.nu)?,
        None => s.u_offset.clone(),
    };
    let mut ws = StepWorkspace::new(m);
    let mut fd = FdWorkspace::new(m);
    let (mut a, mut b) = (DMatrix::zeros(2 * m.nv, 2 * m.nv), DMatrix::zeros(2 * m.nv, m.nu));
    let zeros = vec![0.0; m.nv];
    let info = rust_fd_transition(
        m,
        &s.terrain,
        &s.settings,
        &mut ws,
        &mut fd,
        (s.q.as_slice(), s.v.as_slice(), u.as_slice(), &zeros),
        eps,
        &mut a,
        &mut b,
    );
    Ok((matrix(py, &a), matrix(py, &b), format!("{:?}", info.status)))
}
