//! Rollout gradients from Python: the adjoint method over stored transition Jacobians
//! (`contactlab::diff::rollout`), with the cost given as a dict and the parameter by name.
//!
//! The rollout runs the simulation's own closed loop, `u_t = pi(x_t) + control + delta_t`, for
//! `T` steps; `J = sum_t h running (s(x_t) + 0.5 sum w_u u^2) + terminal s(x_T)` with
//! `s(x) = 0.5 sum w_q (q - q_ref)^2 + 0.5 sum w_v v^2 + point costs` (the Rust module docs).

use crate::simulation::PySimulation;
use crate::{value_error, vector};
use contactlab::contact::ContactMode;
use contactlab::diff::rollout::{rollout_cost as rust_rollout_cost, rollout_gradient as rust_rollout_gradient};
use contactlab::diff::rollout::{Cost, Param, PointCost};
use contactlab::model::Model;
use nalgebra::{DVector, Vector3};
use numpy::{PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

const FIELDS: [&str; 7] = ["running", "terminal", "q_ref", "w_q", "w_v", "w_u", "points"];
const POINT_FIELDS: [&str; 6] = ["body", "point", "target", "weight", "linear", "linear_velocity"];

fn keys_within(d: &Bound<'_, PyDict>, allowed: &[&str], what: &str) -> PyResult<()> {
    for key in d.keys() {
        let key: String = key.extract()?;
        if !allowed.contains(&key.as_str()) {
            return Err(value_error(format!("{what}: unknown field `{key}`; fields: {}", allowed.join(", "))));
        }
    }
    Ok(())
}

fn number(d: &Bound<'_, PyDict>, key: &str, what: &str) -> PyResult<f64> {
    let x: f64 = match d.get_item(key)? {
        Some(v) => v.extract().map_err(|_| value_error(format!("{what}.{key}: expected a number")))?,
        None => 0.0,
    };
    if !x.is_finite() {
        return Err(value_error(format!("{what}.{key}: must be finite, got {x}")));
    }
    Ok(x)
}

fn array(d: &Bound<'_, PyDict>, key: &str, n: usize, what: &str) -> PyResult<Option<DVector<f64>>> {
    match d.get_item(key)? {
        Some(v) => {
            let a: PyReadonlyArray1<'_, f64> = v
                .py()
                .import("numpy")?
                .call_method1("asarray", (v, "float64"))?
                .extract()
                .map_err(|_| value_error(format!("{what}.{key}: expected a 1-D array of {n} numbers")))?;
            vector(&format!("{what}.{key}"), &a, n).map(Some)
        }
        None => Ok(None),
    }
}

fn vec3(d: &Bound<'_, PyDict>, key: &str, what: &str) -> PyResult<Vector3<f64>> {
    Ok(array(d, key, 3, what)?.map_or_else(Vector3::zeros, |v| Vector3::new(v[0], v[1], v[2])))
}

/// The cost dict (module docs) as a [`Cost`]: missing weights are zero, `q_ref` defaults to the
/// model's neutral configuration, point costs name their body.
pub(crate) fn cost_from_dict(model: &Model, d: &Bound<'_, PyDict>) -> PyResult<Cost> {
    keys_within(d, &FIELDS, "cost")?;
    let mut c = Cost::zero(model);
    c.running = number(d, "running", "cost")?;
    c.terminal = number(d, "terminal", "cost")?;
    c.q_ref = array(d, "q_ref", model.nq, "cost")?.unwrap_or_else(|| contactlab::model::configuration::neutral(model));
    if let Some(w) = array(d, "w_q", model.nv, "cost")? {
        c.w_q = w;
    }
    if let Some(w) = array(d, "w_v", model.nv, "cost")? {
        c.w_v = w;
    }
    if let Some(w) = array(d, "w_u", model.nu, "cost")? {
        c.w_u = w;
    }
    if let Some(points) = d.get_item("points")? {
        for (i, p) in points.try_iter()?.enumerate() {
            let what = format!("cost.points[{i}]");
            let p = p?;
            let p = p.cast::<PyDict>().map_err(|_| value_error(format!("{what}: expected a dict")))?;
            keys_within(p, &POINT_FIELDS, &what)?;
            let body: String = match p.get_item("body")? {
                Some(b) => b.extract().map_err(|_| value_error(format!("{what}.body: expected a body name")))?,
                None => return Err(value_error(format!("{what}.body: missing"))),
            };
            let body = model.body_index(&body).ok_or_else(|| {
                value_error(format!(
                    "{what}.body: {} has no body `{body}`; bodies: {}",
                    model.name,
                    model.body_names.join(", ")
                ))
            })?;
            c.points.push(PointCost {
                body,
                point: vec3(p, "point", &what)?,
                target: vec3(p, "target", &what)?,
                weight: vec3(p, "weight", &what)?,
                linear: vec3(p, "linear", &what)?,
                linear_velocity: vec3(p, "linear_velocity", &what)?,
            });
        }
    }
    Ok(c)
}

/// `(J, dJ/dx0, dJ/d delta_t, dJ/ds, ...)` of a `steps`-step rollout of `sim`'s closed loop from
/// its present state (the simulation is not modified): returns a dict with `cost`, `grad_x0`
/// (2 nv, tangent: a free-flyer's linear part is in the base frame, as `integrate` moves it), `grad_u` (steps x nu: the gradient with respect to an open-loop torque added
/// at each step), `grad_param` (dJ/ds of the named `param`: `base_x|base_y|base_z` (m),
/// `pull:N` (N), `torque:JOINTS` (N m), 0 without one), `modes` (steps x k, 0 separated,
/// 1 sticking, 2 sliding), `backward_not_converged` (steps whose relaxed backward solve hit its
/// limit), `q_final`, `v_final`. `cost` is a dict (module docs) with `running`, `terminal`,
/// `q_ref` (nq), `w_q`, `w_v` (nv), `w_u` (nu) and `points` (a list of dicts with `body`, and
/// 3-vectors `point`, `target`, `weight`, `linear`, `linear_velocity`). GIL released.
#[pyfunction]
#[pyo3(signature = (sim, steps, cost, sensitivity = "relaxed", kappa = 1e-4, delta = 1e-3, param = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rollout_gradient<'py>(
    py: Python<'py>,
    sim: &PySimulation,
    steps: usize,
    cost: Bound<'py, PyDict>,
    sensitivity: &str,
    kappa: f64,
    delta: f64,
    param: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = &sim.inner;
    let sens = crate::parse_sensitivity(sensitivity, kappa, delta)?;
    let cost = cost_from_dict(&s.model, &cost)?;
    check_steps(steps)?;
    let param = match param {
        Some(name) => Some(Param::resolve(&s.model, &s.pulls, name).map_err(|e| value_error(format!("param: {e}")))?),
        None => None,
    };
    let g = py.detach(|| rust_rollout_gradient(s, &cost, steps, param.as_ref(), sens)).map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("cost", g.cost)?;
    d.set_item("grad_x0", PyArray1::from_slice(py, g.grad_x0.as_slice()))?;
    let rows: Vec<Vec<f64>> = (0..g.grad_u.nrows()).map(|t| g.grad_u.row(t).iter().copied().collect()).collect();
    let grad_u = if rows.is_empty() {
        PyArray2::zeros(py, [0, s.model.nu], false)
    } else {
        PyArray2::from_vec2(py, &rows).map_err(value_error)?
    };
    d.set_item("grad_u", grad_u)?;
    d.set_item("grad_param", g.grad_param)?;
    let k = g.modes.first().map_or(0, Vec::len);
    let modes: Vec<Vec<u8>> = g
        .modes
        .iter()
        .map(|m| {
            m.iter()
                .map(|x| match x {
                    ContactMode::Separated => 0,
                    ContactMode::Sticking => 1,
                    ContactMode::Sliding => 2,
                })
                .collect()
        })
        .collect();
    let modes = if modes.is_empty() || k == 0 {
        PyArray2::zeros(py, [modes.len(), 0], false)
    } else {
        PyArray2::from_vec2(py, &modes).map_err(value_error)?
    };
    d.set_item("modes", modes)?;
    d.set_item("backward_not_converged", g.backward_not_converged)?;
    d.set_item("q_final", PyArray1::from_slice(py, g.q_final.as_slice()))?;
    d.set_item("v_final", PyArray1::from_slice(py, g.v_final.as_slice()))?;
    Ok(d)
}

/// The cost `J` of the same rollout through `Simulation.step` alone (no Jacobians): the
/// reference finite differences are taken of. `sim` is not modified. GIL released.
#[pyfunction]
pub(crate) fn rollout_cost(py: Python<'_>, sim: &PySimulation, steps: usize, cost: Bound<'_, PyDict>) -> PyResult<f64> {
    let s = &sim.inner;
    let cost = cost_from_dict(&s.model, &cost)?;
    check_steps(steps)?;
    py.detach(|| rust_rollout_cost(s, &cost, steps, None)).map(|r| r.0).map_err(value_error)
}

/// The adjoint stores a few Jacobians per step; bound the memory before allocating it.
fn check_steps(steps: usize) -> PyResult<()> {
    if steps == 0 || steps > 1_000_000 {
        return Err(value_error(format!("steps: must be in 1..=1000000, got {steps}")));
    }
    Ok(())
}
