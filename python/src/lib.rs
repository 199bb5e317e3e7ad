//! Python bindings of ContactLab (PyO3, NumPy): models, scenes, the hard-contact simulation,
//! the transition Jacobians of a step under each contact sensitivity, and batch rollouts on all
//! cores with the GIL released. Arrays are float64; states are `x = (q, v)` with the
//! free-flyer's quaternion `(x, y, z, w)` in `q` (Pinocchio's convention), Jacobians are in the
//! tangent space `dx = (dq, dv)` of size `2 nv`.
//!
//! One module per part of the API: `model`, `scene`, `simulation`, `jacobians` (one step),
//! `rollout` (batches), `gradient` (rollout adjoints), `control` (CITO, MPC), `learn` (the task
//! environment) and `contactnets`; this file keeps the conversions they share.

mod contactnets;
mod control;
mod gradient;
mod jacobians;
mod learn;
mod model;
mod rollout;
mod scene;
mod simulation;

use contactlab::diff::Sensitivity;
use nalgebra::{DMatrix, DVector};
use numpy::{PyArray2, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A serializable Rust value as plain Python data (dicts, lists, numbers), through JSON.
fn to_python<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(value_error)?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Plain Python data (a dict of settings) as a Rust value, through JSON; `what` names it in errors.
fn from_python<T: serde::de::DeserializeOwned>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let text: String = obj.py().import("json")?.call_method1("dumps", (obj,))?.extract()?;
    serde_json::from_str(&text).map_err(|e| value_error(format!("{what}: {e}")))
}

/// `default` with the fields of the dict `obj` put over it (any subset; an unknown field is an
/// error naming the fields), for settings whose serde form has no defaults of its own.
fn settings_over_default<T: serde::Serialize + serde::de::DeserializeOwned>(
    default: &T,
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<T> {
    let mut base = serde_json::to_value(default).map_err(value_error)?;
    let text: String = obj.py().import("json")?.call_method1("dumps", (obj,))?.extract()?;
    let given: serde_json::Value = serde_json::from_str(&text).map_err(|e| value_error(format!("{what}: {e}")))?;
    let (Some(fields), Some(given)) = (base.as_object_mut(), given.as_object()) else {
        return Err(value_error(format!("{what}: expected a dict")));
    };
    for (k, v) in given {
        if !fields.contains_key(k) {
            let names: Vec<&str> = fields.keys().map(String::as_str).collect();
            return Err(value_error(format!("{what}: unknown field `{k}`; fields: {}", names.join(", "))));
        }
        fields.insert(k.clone(), v.clone());
    }
    serde_json::from_value(base).map_err(|e| value_error(format!("{what}: {e}")))
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn vector(name: &str, a: &PyReadonlyArray1<'_, f64>, n: usize) -> PyResult<DVector<f64>> {
    // Through the array view: a strided (non-contiguous) array is as good as a packed one.
    let owned: Vec<f64> = a.as_array().iter().copied().collect();
    let s = owned.as_slice();
    if s.len() != n {
        return Err(value_error(format!("{name}: expected {n} values, got {}", s.len())));
    }
    if s.iter().any(|x| !x.is_finite()) {
        return Err(value_error(format!("{name}: every value must be finite")));
    }
    Ok(DVector::from_column_slice(s))
}

fn check_friction(friction: f64) -> PyResult<()> {
    if friction.is_finite() && friction >= 0.0 {
        Ok(())
    } else {
        Err(value_error(format!("friction: must be finite and >= 0, got {friction}")))
    }
}

fn matrix<'py>(py: Python<'py>, m: &DMatrix<f64>) -> Bound<'py, PyArray2<f64>> {
    let rows: Vec<Vec<f64>> = (0..m.nrows()).map(|i| m.row(i).iter().copied().collect()).collect();
    PyArray2::from_vec2(py, &rows).expect("rectangular")
}

fn parse_sensitivity(name: &str, kappa: f64, delta: f64) -> PyResult<Sensitivity> {
    if !(kappa.is_finite() && kappa > 0.0) {
        return Err(value_error(format!("kappa: must be finite and > 0, got {kappa}")));
    }
    if !(delta.is_finite() && delta >= 0.0) {
        return Err(value_error(format!("delta: must be finite and >= 0, got {delta}")));
    }
    match name {
        "exact" => Ok(Sensitivity::Exact),
        "signorini" => Ok(Sensitivity::SignoriniRelaxed { kappa }),
        "relaxed" => Ok(Sensitivity::Relaxed { kappa, delta }),
        other => Err(value_error(format!("unknown sensitivity `{other}`: exact, signorini or relaxed"))),
    }
}

#[pymodule]
fn _contactlab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<model::PyModel>()?;
    m.add_class::<scene::PyScene>()?;
    m.add_class::<simulation::PySimulation>()?;
    m.add_class::<learn::PyTaskEnv>()?;
    m.add_function(wrap_pyfunction!(jacobians::transition_jacobians, m)?)?;
    m.add_function(wrap_pyfunction!(rollout::rollout, m)?)?;
    m.add_function(wrap_pyfunction!(control::cito_py, m)?)?;
    m.add_function(wrap_pyfunction!(jacobians::fd_transition, m)?)?;
    m.add_function(wrap_pyfunction!(rollout::rollout_jacobians, m)?)?;
    m.add_function(wrap_pyfunction!(model::builtin_urdf, m)?)?;
    m.add_function(wrap_pyfunction!(gradient::rollout_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(gradient::rollout_cost, m)?)?;
    m.add_class::<control::PyMpc>()?;
    m.add_class::<contactnets::PyDataset>()?;
    m.add_class::<contactnets::PyContactModel>()?;
    m.add_function(wrap_pyfunction!(contactnets::train, m)?)?;
    m.add_function(wrap_pyfunction!(contactnets::evaluate, m)?)?;
    Ok(())
}
