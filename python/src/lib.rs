//! Python bindings of ContactLab (PyO3, NumPy): models, scenes, the hard-contact simulation,
//! the transition Jacobians of a step under each contact sensitivity, and batch rollouts on all
//! cores with the GIL released. Arrays are float64; states are `x = (q, v)` with the
//! free-flyer's quaternion `(x, y, z, w)` in `q` (Pinocchio's convention), Jacobians are in the
//! tangent space `dx = (dq, dv)` of size `2 nv`.

mod contactnets;
mod control;
mod gradient;

use contactlab::contact::Terrain;
use contactlab::diff::fd::{fd_transition as rust_fd_transition, FdWorkspace};
use contactlab::diff::{
    transition_jacobians as rust_transition_jacobians, Sensitivity, TransitionStatus, TransitionWorkspace,
};
use contactlab::learn::task::{Env, ACTION_LIMIT};
use contactlab::learn::Task;
use contactlab::model::builtin;
use contactlab::model::configuration::neutral;
use contactlab::model::urdf::{load, RootJoint};
use contactlab::model::{ContactPoint, Model};
use contactlab::ocp::cito::{solve as cito_solve, CitoProblem, CitoSettings};
use contactlab::ocp::mpc::{run_closed_loop, MpcSettings};
use contactlab::scene::Scene;
use contactlab::sim::{step, Pull, Simulation, StepSettings, StepWorkspace};
use nalgebra::{DMatrix, DVector};
use numpy::{
    PyArray1, PyArray2, PyArray3, PyArray4, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `(A, B, info)` of [`transition_jacobians`].
type Jacobians<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyDict>);
/// `(states, A, B, steps)` of [`rollout_jacobians`].
type JacobianRollouts<'py> =
    (Bound<'py, PyArray3<f64>>, Bound<'py, PyArray4<f64>>, Bound<'py, PyArray4<f64>>, Bound<'py, PyArray1<u64>>);
/// `(A, B, step status)` of [`fd_transition`].
type FdJacobians<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, String);
/// `(summary, xs, us)` of [`cito_py`].
type Plan<'py> = (Bound<'py, PyAny>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);
/// `(states, steps)` of [`rollout`].
type Rollouts<'py> = (Bound<'py, PyArray3<f64>>, Bound<'py, PyArray1<u64>>);

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

/// The pairs of legs of a builtin name `legged<N>`.
fn legged_pairs(name: &str) -> PyResult<usize> {
    let unknown =
        || value_error(format!("unknown builtin robot `{name}`: quadruped, hopper or legged<N> (N = 4, 6, ..., 20)"));
    let legs: usize = name.strip_prefix("legged").and_then(|n| n.parse().ok()).ok_or_else(unknown)?;
    if !legs.is_multiple_of(2) || !builtin::LEG_PAIRS.contains(&(legs / 2)) {
        return Err(unknown());
    }
    Ok(legs / 2)
}

/// The URDF text of a builtin robot (`Model.builtin`'s names; the quadruped without the trunk
/// corners the builtin adds as contact points), e.g. to load the same robot into another
/// simulator.
#[pyfunction]
fn builtin_urdf(name: &str) -> PyResult<String> {
    match name {
        "quadruped" => Ok(builtin::QUADRUPED_URDF.to_string()),
        "hopper" => Ok(builtin::HOPPER_URDF.to_string()),
        other => builtin::legged_urdf(legged_pairs(other)?).map_err(value_error),
    }
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

/// One entry of `Model.from_urdf(contacts=...)`: a frame name, or a dict with `frame`,
/// `position` and `radius` (the fields of a scene's `robot.contacts`).
struct ContactEntry {
    frame: String,
    position: [f64; 3],
    radius: f64,
}

impl ContactEntry {
    fn parse(entry: &Bound<'_, PyAny>) -> Result<Self, String> {
        if let Ok(frame) = entry.extract::<String>() {
            return Ok(Self { frame, position: [0.0; 3], radius: 0.0 });
        }
        let Ok(d) = entry.cast::<PyDict>() else {
            return Err("expected a frame name or a dict {frame, position, radius}".into());
        };
        for key in d.keys() {
            let key: String = key.extract().map_err(|_| "keys must be strings".to_string())?;
            if !["frame", "position", "radius"].contains(&key.as_str()) {
                return Err(format!("unknown field `{key}`; fields: frame, position, radius"));
            }
        }
        let frame: String = match d.get_item("frame").map_err(|e| e.to_string())? {
            Some(f) => f.extract().map_err(|_| "frame: expected a string".to_string())?,
            None => return Err("frame: missing".into()),
        };
        let position: [f64; 3] = match d.get_item("position").map_err(|e| e.to_string())? {
            Some(p) => p.extract().map_err(|_| "position: expected 3 numbers".to_string())?,
            None => [0.0; 3],
        };
        if position.iter().any(|x| !x.is_finite()) {
            return Err("position: every value must be finite".into());
        }
        let radius: f64 = match d.get_item("radius").map_err(|e| e.to_string())? {
            Some(r) => r.extract().map_err(|_| "radius: expected a number".to_string())?,
            None => 0.0,
        };
        if !(radius.is_finite() && radius >= 0.0) {
            return Err(format!("radius: must be finite and >= 0, got {radius}"));
        }
        Ok(Self { frame, position, radius })
    }
}

/// A robot: kinematic tree, inertias, actuators and contact points (immutable).
#[pyclass(name = "Model", module = "contactlab", frozen)]
#[derive(Clone)]
struct PyModel {
    inner: Arc<Model>,
}

#[pymethods]
impl PyModel {
    /// A robot that ships with ContactLab: "quadruped" (12 DoF, point feet), "hopper", or
    /// "legged<N>" (the scaling family: N = 4, 6, ..., 20 legs of the quadruped's, 6 + 3 N DoF).
    #[staticmethod]
    fn builtin(name: &str) -> PyResult<Self> {
        let loaded = match name {
            "quadruped" => builtin::quadruped(),
            "hopper" => builtin::hopper(),
            other => builtin::legged(legged_pairs(other)?),
        }
        .map_err(value_error)?;
        Ok(Self { inner: Arc::new(loaded.model) })
    }

    /// A robot from a URDF file; `floating` adds a free-flyer root (else the root link is fixed).
    /// Contact points: by default every link whose name ends in `foot`, with the radius of its
    /// first collision sphere. `contacts` replaces that choice, as a scene's `robot.contacts`
    /// does: a list whose entries are a link or frame name (a point at its origin) or a dict
    /// `{"frame": name, "position": [x, y, z] (m, in that frame), "radius": r (m)}`. Errors name
    /// the file and element, or the entry.
    #[staticmethod]
    #[pyo3(signature = (path, floating = true, contacts = None))]
    fn from_urdf(path: PathBuf, floating: bool, contacts: Option<Vec<Bound<'_, PyAny>>>) -> PyResult<Self> {
        let root = if floating { RootJoint::FreeFlyer } else { RootJoint::Fixed };
        let mut model = load(&path, root).map_err(value_error)?.model;
        if let Some(list) = contacts {
            let mut points = Vec::with_capacity(list.len());
            for (i, entry) in list.iter().enumerate() {
                let spec = ContactEntry::parse(entry).map_err(|e| value_error(format!("contacts[{i}]: {e}")))?;
                let Some((body, placement)) = model.resolve_body_or_frame(&spec.frame) else {
                    return Err(value_error(format!(
                        "contacts[{i}].frame: no link or frame named `{}` in {}",
                        spec.frame,
                        path.display()
                    )));
                };
                points.push(ContactPoint {
                    name: spec.frame,
                    body,
                    position: placement.act_point(&nalgebra::Vector3::from(spec.position)),
                    radius: spec.radius,
                });
            }
            model.contact_points = points;
        }
        Ok(Self { inner: Arc::new(model) })
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    /// Configuration size (quaternion of a free-flyer counted as 4).
    #[getter]
    fn nq(&self) -> usize {
        self.inner.nq
    }
    /// Velocity (tangent) size.
    #[getter]
    fn nv(&self) -> usize {
        self.inner.nv
    }
    /// Actuated degrees of freedom.
    #[getter]
    fn nu(&self) -> usize {
        self.inner.nu
    }
    /// Body names (the names pulls and point costs use).
    #[getter]
    fn body_names(&self) -> Vec<String> {
        self.inner.body_names.clone()
    }
    /// Names of the actuated joints, in the order of `u` (nu).
    #[getter]
    fn actuated_joints(&self) -> Vec<String> {
        self.inner
            .actuated_dofs
            .iter()
            .map(|&dof| {
                let j = self.inner.joints.iter().find(|j| j.idx_v == dof).expect("an actuated dof has a joint");
                j.name.clone()
            })
            .collect()
    }
    /// Names of the contact candidates, in the order of `Simulation.contacts()`.
    #[getter]
    fn contact_names(&self) -> Vec<String> {
        self.inner.contact_points.iter().map(|c| c.name.clone()).collect()
    }
    /// The neutral configuration (nq).
    fn neutral<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_vec(py, neutral(&self.inner).as_slice().to_vec())
    }
    fn __repr__(&self) -> String {
        format!("Model({:?}: nq {}, nv {}, nu {})", self.inner.name, self.inner.nq, self.inner.nv, self.inner.nu)
    }
}

/// A scene file (RON): robot, initial state, terrain, controller, pulls and task sections.
#[pyclass(name = "Scene", module = "contactlab")]
struct PyScene {
    inner: Scene,
}

#[pymethods]
impl PyScene {
    /// Loads a scene; a bad file raises ValueError naming the file, line and field.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Ok(Self { inner: Scene::load(&path).map_err(value_error)? })
    }
    #[getter]
    fn name(&self) -> String {
        self.inner.file.name.clone()
    }
    #[getter]
    fn model(&self) -> PyModel {
        PyModel { inner: self.inner.model.clone() }
    }
    /// The scene's `cito` section (a dict: the fields of `CitoSettings`).
    fn cito_settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.cito_settings().map_err(value_error)?)
    }
    /// The scene's `mpc` section (a dict: the fields of `MpcSettings`).
    fn mpc_settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.mpc_settings().map_err(value_error)?)
    }
    /// Closed-loop MPC with `settings` (the `mpc` section's fields; default: the scene's) from
    /// the settled start under the scene's pulls, GIL released: `(summary, trace)`, the summary a
    /// dict and the trace one row per simulator step `(t, base x, y, z, base error)`.
    #[pyo3(signature = (settings = None))]
    fn run_mpc<'py>(
        &self,
        py: Python<'py>,
        settings: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyArray2<f64>>)> {
        let settings: MpcSettings = match settings {
            Some(d) => from_python(&d, "MPC settings")?,
            None => self.inner.mpc_settings().map_err(value_error)?,
        };
        settings.validate().map_err(value_error)?;
        let sim = self.inner.settled(settings.settle).map_err(value_error)?;
        let (name, pulls) = (self.inner.file.name.clone(), self.inner.pulls.clone());
        let r = py.detach(|| run_closed_loop(&name, sim, &pulls, &settings, None, &mut |_| {})).map_err(value_error)?;
        let rows: Vec<Vec<f64>> = r.trace.iter().map(|(t, p, e)| vec![*t, p[0], p[1], p[2], *e]).collect();
        let trace = if rows.is_empty() {
            PyArray2::zeros(py, [0, 5], false)
        } else {
            PyArray2::from_vec2(py, &rows).map_err(value_error)?
        };
        Ok((to_python(py, &r.summary)?, trace))
    }
    /// The scene's simulation at its initial state (its controller and pulls included).
    fn simulation(&self) -> PySimulation {
        PySimulation::wrap(self.inner.simulation())
    }
    /// The scene's simulation after `seconds` under its own controller, pulls removed.
    fn settled(&self, seconds: f64) -> PyResult<PySimulation> {
        Ok(PySimulation::wrap(self.inner.settled(seconds).map_err(value_error)?))
    }
}

/// A running simulation: state, control, terrain and the step's workspace.
#[pyclass(name = "Simulation", module = "contactlab")]
struct PySimulation {
    inner: Simulation,
    initial: (DVector<f64>, DVector<f64>, f64),
}

impl PySimulation {
    fn wrap(inner: Simulation) -> Self {
        let initial = (inner.q.clone(), inner.v.clone(), inner.t);
        Self { inner, initial }
    }
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

#[pymethods]
impl PySimulation {
    /// A torque-controlled simulation of `model` on flat ground (no controller: `control` is the
    /// joint torque), from `q` (default: the neutral configuration; placing a floating base
    /// above the ground is up to the caller) and `v` (default: zero).
    #[new]
    #[pyo3(signature = (model, dt = 0.002, friction = 0.8, q = None, v = None))]
    fn new(
        model: &PyModel,
        dt: f64,
        friction: f64,
        q: Option<PyReadonlyArray1<'_, f64>>,
        v: Option<PyReadonlyArray1<'_, f64>>,
    ) -> PyResult<Self> {
        let m = model.inner.clone();
        let settings = StepSettings { dt, ..StepSettings::default() };
        settings.validate().map_err(value_error)?;
        check_friction(friction)?;
        let q = match q {
            Some(q) => vector("q", &q, m.nq)?,
            None => neutral(&m),
        };
        let v = match v {
            Some(v) => vector("v", &v, m.nv)?,
            None => DVector::zeros(m.nv),
        };
        Ok(Self::wrap(Simulation::new(m, Terrain::flat(friction), settings, q, v)))
    }

    #[getter]
    fn model(&self) -> PyModel {
        PyModel { inner: self.inner.model.clone() }
    }
    /// Simulated time (s).
    #[getter]
    fn t(&self) -> f64 {
        self.inner.t
    }
    /// Time step (s).
    #[getter]
    fn dt(&self) -> f64 {
        self.inner.settings.dt
    }
    /// Configuration (nq), a copy.
    #[getter]
    fn q<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, self.inner.q.as_slice())
    }
    #[setter]
    fn set_q(&mut self, q: PyReadonlyArray1<'_, f64>) -> PyResult<()> {
        self.inner.q = vector("q", &q, self.inner.model.nq)?;
        self.inner.ws.reset_warm_start();
        Ok(())
    }
    /// Velocity (nv), a copy.
    #[getter]
    fn v<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, self.inner.v.as_slice())
    }
    #[setter]
    fn set_v(&mut self, v: PyReadonlyArray1<'_, f64>) -> PyResult<()> {
        self.inner.v = vector("v", &v, self.inner.model.nv)?;
        self.inner.ws.reset_warm_start();
        Ok(())
    }
    /// Control offset (nu, N m): added to the controller's torque; with no controller, the torque.
    #[getter]
    fn control<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, self.inner.u_offset.as_slice())
    }
    #[setter]
    fn set_control(&mut self, u: PyReadonlyArray1<'_, f64>) -> PyResult<()> {
        self.inner.u_offset = vector("control", &u, self.inner.model.nu)?;
        Ok(())
    }
    /// The torque applied in the last step (nu), implicit damping included.
    #[getter]
    fn u<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, self.inner.u.as_slice())
    }

    /// One step; returns its status: "Ok", "SolverNotConverged" (advanced with the solver's last
    /// iterate), or a failure ("SingularMassMatrix", "NonFinite", "SolverFailed", "Diverged")
    /// after which the state is unchanged.
    fn step(&mut self) -> String {
        format!("{:?}", self.inner.step().status)
    }
    /// Up to `n` steps, stopping at the first that fails; returns how many advanced.
    fn step_n(&mut self, py: Python<'_>, n: usize) -> usize {
        let sim = &mut self.inner;
        py.detach(|| (0..n).take_while(|_| sim.step().status.advanced()).count())
    }
    /// Adds an external force `force` (N, world frame) on body `body` at `point` (m, body frame)
    /// acting from simulated time `start` for `duration` seconds (a push on the trunk, say).
    #[pyo3(signature = (body, force, start, duration, point = None))]
    fn add_pull(
        &mut self,
        body: &str,
        force: PyReadonlyArray1<'_, f64>,
        start: f64,
        duration: f64,
        point: Option<PyReadonlyArray1<'_, f64>>,
    ) -> PyResult<()> {
        let m = &self.inner.model;
        let index = m.body_index(body).ok_or_else(|| {
            value_error(format!("{} has no body `{body}`; bodies: {}", m.name, m.body_names.join(", ")))
        })?;
        if !(start.is_finite() && duration.is_finite() && duration >= 0.0) {
            return Err(value_error(format!("start {start} and duration {duration}: finite, duration >= 0")));
        }
        let force = vector("force", &force, 3)?;
        let point = match point {
            Some(p) => vector("point", &p, 3)?,
            None => DVector::zeros(3),
        };
        self.inner.pulls.push(Pull {
            body: index,
            point: nalgebra::Vector3::new(point[0], point[1], point[2]),
            force: nalgebra::Vector3::new(force[0], force[1], force[2]),
            start,
            duration,
        });
        Ok(())
    }
    /// Removes every pull (the scene's included).
    fn clear_pulls(&mut self) {
        self.inner.pulls.clear();
    }
    /// Back to the state it was created at (time, q, v; warm start forgotten).
    fn reset(&mut self) {
        self.inner.q.copy_from(&self.initial.0);
        self.inner.v.copy_from(&self.initial.1);
        self.inner.t = self.initial.2;
        self.inner.ws.reset_warm_start();
    }
    /// The last step's contacts, one entry per candidate (`Model.contact_names` order): `gap`
    /// (k, m, at the start of the step), `impulse` (k x 3, N s: normal, tangent 1, tangent 2),
    /// `mode` (k strings: Separated, Sticking, Sliding).
    fn contacts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let ws = &self.inner.ws;
        let k = ws.contacts.k;
        let d = PyDict::new(py);
        d.set_item("gap", PyArray1::from_slice(py, &ws.contacts.phi[..k]))?;
        let rows: Vec<Vec<f64>> =
            (0..k).map(|i| (0..3).map(|r| ws.lambda.get(3 * i + r).copied().unwrap_or(0.0)).collect()).collect();
        d.set_item("impulse", PyArray2::from_vec2(py, &rows).map_err(value_error)?)?;
        let modes: Vec<String> =
            (0..k).map(|i| ws.modes.get(i).map_or("Separated".into(), |m| format!("{m:?}"))).collect();
        d.set_item("mode", modes)?;
        Ok(d)
    }
}

/// `A = d x+ / d x`, `B = d x+ / d u` (tangent space, `2 nv x 2 nv` and `2 nv x nu`) of one step
/// of `sim`'s raw dynamics (no controller: `u` is the joint torque, default `sim.control`) at its
/// present state (or at `q`, `v` when given; `sim` is not changed), with the named contact
/// sensitivity; and an info dict (`status`, `step_status`, `backward_iterations`, and the step's
/// result `q_next`, `v_next`). The step is taken from a cold start, like the CITO knots.
#[pyfunction]
#[pyo3(signature = (sim, u = None, sensitivity = "relaxed", kappa = 1e-4, delta = 1e-3, q = None, v = None))]
#[allow(clippy::too_many_arguments)]
fn transition_jacobians<'py>(
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
fn fd_transition<'py>(
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

/// The checked inputs of a batch of rollouts: `n` starts (rows of `x0s`, `nx = nq + nv` each)
/// and `t` steps of `nu` torques per start, owned, so the rollouts can run without the GIL.
struct Batch {
    m: Arc<Model>,
    n: usize,
    t: usize,
    nx: usize,
    settings: StepSettings,
    terrain: Terrain,
    x0: Vec<Vec<f64>>,
    controls: Vec<Vec<f64>>,
}

impl Batch {
    fn new(
        model: &PyModel,
        x0s: &PyReadonlyArray2<'_, f64>,
        us: &PyReadonlyArray3<'_, f64>,
        dt: f64,
        friction: f64,
    ) -> PyResult<Self> {
        let m = model.inner.clone();
        let (x0, u) = (x0s.as_array(), us.as_array());
        let (n, nx) = (x0.shape()[0], x0.shape()[1]);
        if nx != m.nq + m.nv {
            return Err(value_error(format!("x0s: expected {} columns (nq + nv), got {nx}", m.nq + m.nv)));
        }
        let (un, t, unu) = (u.shape()[0], u.shape()[1], u.shape()[2]);
        if un != n || unu != m.nu {
            return Err(value_error(format!("us: expected shape ({n}, T, {}), got ({un}, {t}, {unu})", m.nu)));
        }
        let settings = StepSettings { dt, ..StepSettings::default() };
        settings.validate().map_err(value_error)?;
        check_friction(friction)?;
        Ok(Self {
            n,
            t,
            nx,
            settings,
            terrain: Terrain::flat(friction),
            x0: (0..n).map(|i| x0.row(i).to_vec()).collect(),
            controls: (0..n).map(|i| u.index_axis(numpy::ndarray::Axis(0), i).iter().copied().collect()).collect(),
            m,
        })
    }
}

/// Rollouts of `model` on flat ground from `x0s` (N x (nq + nv)) under open-loop torques `us`
/// (N x T x nu), all in parallel on every core with the GIL released. Returns the states
/// (N x (T + 1) x (nq + nv); NaN after a failed step) and the steps each rollout advanced (N).
/// Every step starts cold, so a rollout is a function of its inputs alone.
#[pyfunction]
#[pyo3(signature = (model, x0s, us, dt = 0.002, friction = 0.8))]
fn rollout<'py>(
    py: Python<'py>,
    model: &PyModel,
    x0s: PyReadonlyArray2<'_, f64>,
    us: PyReadonlyArray3<'_, f64>,
    dt: f64,
    friction: f64,
) -> PyResult<Rollouts<'py>> {
    let Batch { m, n, t, nx, settings, terrain, x0, controls } = Batch::new(model, &x0s, &us, dt, friction)?;
    let (nq, nv, nu) = (m.nq, m.nv, m.nu);
    if n.saturating_mul(t + 1).saturating_mul(nx) > 500_000_000 {
        return Err(value_error("rollout: more than 5e8 state values requested"));
    }
    let results: Vec<(Vec<f64>, u64)> = py.detach(|| {
        x0.par_iter()
            .zip(controls.par_iter())
            .map(|(x, c)| {
                let mut ws = StepWorkspace::new(&m);
                let mut states = vec![f64::NAN; (t + 1) * nx];
                states[..nx].copy_from_slice(x);
                let (mut qn, mut vn) = (vec![0.0; nq], vec![0.0; nv]);
                let zeros = vec![0.0; nv];
                let mut advanced = 0u64;
                for k in 0..t {
                    let (cur, next) = states.split_at_mut((k + 1) * nx);
                    let cur = &cur[k * nx..];
                    ws.reset_warm_start();
                    let info = step(
                        &m,
                        &terrain,
                        &settings,
                        &mut ws,
                        &cur[..nq],
                        &cur[nq..],
                        &c[k * nu..(k + 1) * nu],
                        &zeros,
                        &mut qn,
                        &mut vn,
                    );
                    if !info.status.advanced() {
                        break;
                    }
                    next[..nq].copy_from_slice(&qn);
                    next[nq..nx].copy_from_slice(&vn);
                    advanced += 1;
                }
                (states, advanced)
            })
            .collect()
    });
    let flat: Vec<f64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    let steps: Vec<u64> = results.iter().map(|r| r.1).collect();
    let states = PyArray1::from_vec(py, flat).reshape([n, t + 1, nx]).map_err(value_error)?;
    Ok((states, PyArray1::from_vec(py, steps)))
}

/// Contact-implicit trajectory optimization from `sim`'s present state (settle it first):
/// `settings` is a dict of the `cito` section's fields (any subset; unknown fields are an
/// error), e.g. `Scene.cito_settings()`; `callback(iteration, cost)` is called after every
/// accepted DDP iteration. Returns `(summary, xs, us)`: the summary dict of `contactlab cito`'s
/// `summary.json`, the replayed plan's states (T + 1 x (nq + nv)) and torques (T x nu).
#[pyfunction(name = "cito_solve")]
#[pyo3(signature = (sim, settings = None, callback = None))]
fn cito_py<'py>(
    py: Python<'py>,
    sim: &PySimulation,
    settings: Option<Bound<'py, PyAny>>,
    callback: Option<Bound<'py, PyAny>>,
) -> PyResult<Plan<'py>> {
    let settings: CitoSettings = match settings {
        Some(d) => from_python(&d, "CITO settings")?,
        None => CitoSettings::default(),
    };
    let problem = CitoProblem::from_state(&sim.inner, &settings).map_err(value_error)?;
    // A callback that raises (or Ctrl-C) cancels the solve at its next iteration.
    let cancel = AtomicBool::new(false);
    let mut failure = None;
    let report = cito_solve(&problem, Some(&cancel), &mut |it| {
        if failure.is_some() {
            return;
        }
        let called = match &callback {
            Some(cb) => cb.call1((it.iteration, it.cost)).map(|_| ()),
            None => Ok(()),
        };
        if let Err(e) = called.and_then(|_| py.check_signals()) {
            failure = Some(e);
            cancel.store(true, Ordering::Relaxed);
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let summary = to_python(py, &report.summary("python"))?;
    let xs = PyArray2::from_vec2(py, &report.xs).map_err(value_error)?;
    let us = PyArray2::from_vec2(py, &report.us).map_err(value_error)?;
    Ok((summary, xs, us))
}

/// A learning task of a scene's `learn` section as an environment (what BPTT and PPO train on):
/// `reset(seed)` samples an episode (start, command, pushes) from `seed`; `step(action)` applies
/// joint-target offsets (nu, clamped to +-`ACTION_LIMIT`, scaled by the task's `action_scale`)
/// through the scene's PD for one control period. The reward is minus the task's cost; a step the
/// simulator cannot take (or that diverges) ends the episode with the task's failure cost for the
/// remaining steps, as the learners charge it.
#[pyclass(name = "TaskEnv", module = "contactlab")]
struct PyTaskEnv {
    task: Task,
    env: Env,
}

impl PyTaskEnv {
    fn of(sc: Scene) -> PyResult<Self> {
        let settings = sc.learn_settings().map_err(value_error)?;
        let task = sc.task(settings).map_err(value_error)?;
        let env = Env::new(&task);
        Ok(Self { task, env })
    }
}

#[pymethods]
impl PyTaskEnv {
    /// The task of the scene's `learn` section (errors name the file and field).
    #[new]
    fn new(scene: PathBuf) -> PyResult<Self> {
        Self::of(Scene::load(&scene).map_err(value_error)?)
    }
    /// A shipped task, compiled in: "stand" (scenes/learn_stand.ron) or "walk"
    /// (scenes/learn_walk.ron).
    #[staticmethod]
    fn builtin(task: &str) -> PyResult<Self> {
        let (text, path) = match task {
            "stand" => (include_str!("../../scenes/learn_stand.ron"), "scenes/learn_stand.ron"),
            "walk" => (include_str!("../../scenes/learn_walk.ron"), "scenes/learn_walk.ron"),
            other => return Err(value_error(format!("unknown task `{other}`: stand or walk"))),
        };
        Self::of(Scene::from_str(text, std::path::Path::new(path)).map_err(value_error)?)
    }
    #[getter]
    fn obs_dim(&self) -> usize {
        self.task.obs_dim()
    }
    #[getter]
    fn act_dim(&self) -> usize {
        self.task.act_dim()
    }
    /// Steps per episode.
    #[getter]
    fn steps(&self) -> usize {
        self.task.steps
    }
    /// Actions are clamped to +- this.
    #[getter]
    fn action_limit(&self) -> f64 {
        ACTION_LIMIT
    }
    /// Control period (s).
    #[getter]
    fn dt(&self) -> f64 {
        self.task.settings.dt
    }
    /// Starts the episode of `seed`; returns the observation (obs_dim).
    fn reset<'py>(&mut self, py: Python<'py>, seed: u64) -> Bound<'py, PyArray1<f64>> {
        let ep = self.task.episodes(1, seed).remove(0);
        self.env.reset(&self.task, &ep);
        PyArray1::from_slice(py, &self.env.obs)
    }
    /// One control period: `(observation, reward, terminated, truncated)`.
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        action: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<(Bound<'py, PyArray1<f64>>, f64, bool, bool)> {
        let a = action.as_slice().map_err(value_error)?;
        if a.len() != self.task.act_dim() || a.iter().any(|x| !x.is_finite()) {
            return Err(value_error(format!("action: expected {} finite values", self.task.act_dim())));
        }
        let t = self.env.step_index;
        let (reward, terminated) = match self.env.step(&self.task, a, None) {
            Some(r) => (-r.cost, false),
            None => (-self.task.failure_cost(t), true),
        };
        let truncated = !terminated && self.env.step_index >= self.task.steps;
        Ok((PyArray1::from_slice(py, &self.env.obs), reward, terminated, truncated))
    }
}

/// [`rollout`] that also returns every step's transition Jacobians with the named sensitivity:
/// `(states, A, B, steps)` with `A` N x T x 2nv x 2nv and `B` N x T x 2nv x nu (NaN after a failed
/// step, and at a step whose sensitivity system failed). The states are those of [`rollout`],
/// bit for bit (the same cold steps).
#[pyfunction]
#[pyo3(signature = (model, x0s, us, sensitivity = "relaxed", kappa = 1e-4, delta = 1e-3, dt = 0.002, friction = 0.8))]
#[allow(clippy::too_many_arguments)]
fn rollout_jacobians<'py>(
    py: Python<'py>,
    model: &PyModel,
    x0s: PyReadonlyArray2<'_, f64>,
    us: PyReadonlyArray3<'_, f64>,
    sensitivity: &str,
    kappa: f64,
    delta: f64,
    dt: f64,
    friction: f64,
) -> PyResult<JacobianRollouts<'py>> {
    let sens = parse_sensitivity(sensitivity, kappa, delta)?;
    let Batch { m, n, t, nx, settings, terrain, x0, controls } = Batch::new(model, &x0s, &us, dt, friction)?;
    let (nq, nv, nu) = (m.nq, m.nv, m.nu);
    let per = 2 * nv * (2 * nv + nu);
    if n.saturating_mul(t).saturating_mul(per) > 200_000_000 {
        return Err(value_error("rollout_jacobians: more than 2e8 Jacobian entries requested"));
    }
    type One = (Vec<f64>, Vec<f64>, Vec<f64>, u64);
    let results: Vec<One> = py.detach(|| {
        x0.par_iter()
            .zip(controls.par_iter())
            .map(|(x, c)| {
                let mut ws = StepWorkspace::new(&m);
                let mut tw = TransitionWorkspace::new(&m);
                let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
                let mut states = vec![f64::NAN; (t + 1) * nx];
                let mut aa = vec![f64::NAN; t * 4 * nv * nv];
                let mut bb = vec![f64::NAN; t * 2 * nv * nu];
                states[..nx].copy_from_slice(x);
                let zeros = vec![0.0; nv];
                let mut advanced = 0u64;
                for k in 0..t {
                    let (cur, next) = states.split_at_mut((k + 1) * nx);
                    let cur = &cur[k * nx..];
                    ws.reset_warm_start();
                    let info = rust_transition_jacobians(
                        &m,
                        &terrain,
                        &settings,
                        &mut ws,
                        &mut tw,
                        (&cur[..nq], &cur[nq..], &c[k * nu..(k + 1) * nu], &zeros),
                        sens,
                        &mut a,
                        &mut b,
                    );
                    if !info.step.status.advanced() {
                        break;
                    }
                    // A step that advanced but whose sensitivity system failed leaves A, B
                    // unspecified: those knots keep their NaN.
                    let usable = matches!(info.status, TransitionStatus::Ok | TransitionStatus::BackwardNotConverged)
                        && a.iter().chain(b.iter()).all(|x| x.is_finite());
                    next[..nq].copy_from_slice(tw.q_next.as_slice());
                    next[nq..nx].copy_from_slice(tw.v_next.as_slice());
                    // Row-major blocks, as NumPy lays them out.
                    for r in (0..2 * nv).filter(|_| usable) {
                        for col in 0..2 * nv {
                            aa[k * 4 * nv * nv + r * 2 * nv + col] = a[(r, col)];
                        }
                        for col in 0..nu {
                            bb[k * 2 * nv * nu + r * nu + col] = b[(r, col)];
                        }
                    }
                    advanced += 1;
                }
                (states, aa, bb, advanced)
            })
            .collect()
    });
    let flat = |f: &dyn Fn(&One) -> &Vec<f64>| results.iter().flat_map(|r| f(r).iter().copied()).collect::<Vec<f64>>();
    let states = PyArray1::from_vec(py, flat(&|r| &r.0)).reshape([n, t + 1, nx]).map_err(value_error)?;
    let a = PyArray1::from_vec(py, flat(&|r| &r.1)).reshape([n, t, 2 * nv, 2 * nv]).map_err(value_error)?;
    let b = PyArray1::from_vec(py, flat(&|r| &r.2)).reshape([n, t, 2 * nv, nu]).map_err(value_error)?;
    let steps: Vec<u64> = results.iter().map(|r| r.3).collect();
    Ok((states, a, b, PyArray1::from_vec(py, steps)))
}

#[pymodule]
fn _contactlab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyModel>()?;
    m.add_class::<PyScene>()?;
    m.add_class::<PySimulation>()?;
    m.add_class::<PyTaskEnv>()?;
    m.add_function(wrap_pyfunction!(transition_jacobians, m)?)?;
    m.add_function(wrap_pyfunction!(rollout, m)?)?;
    m.add_function(wrap_pyfunction!(cito_py, m)?)?;
    m.add_function(wrap_pyfunction!(fd_transition, m)?)?;
    m.add_function(wrap_pyfunction!(rollout_jacobians, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_urdf, m)?)?;
    m.add_function(wrap_pyfunction!(gradient::rollout_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(gradient::rollout_cost, m)?)?;
    m.add_class::<control::PyMpc>()?;
    m.add_class::<contactnets::PyDataset>()?;
    m.add_class::<contactnets::PyContactModel>()?;
    m.add_function(wrap_pyfunction!(contactnets::train, m)?)?;
    m.add_function(wrap_pyfunction!(contactnets::evaluate, m)?)?;
    Ok(())
}
