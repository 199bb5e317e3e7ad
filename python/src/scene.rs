//! Scene files: loading with located errors, the settled simulation, the CITO and MPC sections.

use crate::model::PyModel;
use crate::simulation::PySimulation;
use crate::{from_python, to_python, value_error};
use contactlab::ocp::mpc::{run_closed_loop, MpcSettings};
use contactlab::scene::Scene;
use numpy::PyArray2;
use pyo3::prelude::*;
use std::path::PathBuf;

/// A scene file (RON): robot, initial state, terrain, controller, pulls and task sections.
#[pyclass(name = "Scene", module = "contactlab")]
pub(crate) struct PyScene {
    pub(crate) inner: Scene,
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
