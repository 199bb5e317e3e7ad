//! The running simulation: state, controls, pulls, one step or many, and the contacts of the last step.

use crate::model::PyModel;
use crate::{check_friction, value_error, vector};
use contactlab::contact::Terrain;
use contactlab::model::configuration::neutral;
use contactlab::sim::{Pull, Simulation, StepSettings};
use nalgebra::DVector;
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A running simulation: state, control, terrain and the step's workspace.
#[pyclass(name = "Simulation", module = "contactlab")]
pub(crate) struct PySimulation {
    pub(crate) inner: Simulation,
    pub(crate) initial: (DVector<f64>, DVector<f64>, f64),
}

impl PySimulation {
    pub(crate) fn wrap(inner: Simulation) -> Self {
        let initial = (inner.q.clone(), inner.v.clone(), inner.t);
        Self { inner, initial }
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
    /// Up to `n` steps, stopping at the first that fails; returns how many advanced. The GIL is
    /// released while it runs; Ctrl-C stops it within 10 000 steps (raising KeyboardInterrupt).
    fn step_n(&mut self, py: Python<'_>, n: usize) -> PyResult<usize> {
        // In chunks, so that Ctrl-C (checked between chunks) stops a long run.
        const CHUNK: usize = 10_000;
        let mut done = 0;
        while done < n {
            let m = CHUNK.min(n - done);
            let sim = &mut self.inner;
            let advanced = py.detach(|| (0..m).take_while(|_| sim.step().status.advanced()).count());
            done += advanced;
            if advanced < m {
                break;
            }
            py.check_signals()?;
        }
        Ok(done)
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
    /// The last step's contacts, one entry per contact point's nearest contact
    /// (`Model.contact_names` order; a second contact in a concave corner is not listed): `gap`
    /// (k, m, at the start of the step), `impulse` (k x 3, N s: normal, tangent 1, tangent 2),
    /// `mode` (k strings: Separated, Sticking, Sliding).
    fn contacts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let ws = &self.inner.ws;
        let k = ws.contacts.points;
        let d = PyDict::new(py);
        d.set_item("gap", PyArray1::from_slice(py, &ws.contacts.phi[..k]))?;
        let flat: Vec<f64> = (0..3 * k).map(|j| ws.lambda.get(j).copied().unwrap_or(0.0)).collect();
        d.set_item("impulse", PyArray1::from_vec(py, flat).reshape([k, 3]).map_err(value_error)?)?;
        let modes: Vec<String> =
            (0..k).map(|i| ws.modes.get(i).map_or("Separated".into(), |m| format!("{m:?}"))).collect();
        d.set_item("mode", modes)?;
        Ok(d)
    }
}
