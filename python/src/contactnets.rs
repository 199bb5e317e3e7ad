//! ContactNets from Python (`contactlab::learn::contactnets`): load the cube tosses, train a
//! learned contact model on a seeded split with a progress callback, evaluate it by full-toss
//! rollouts, and read or write its JSON file.
//!
//! Units are the data's scaled units (lengths in cube half widths, the corners at `(+-1, +-1,
//! +-1)`); quaternions are `(x, y, z, w)` as elsewhere in the package.

use crate::{settings_over_default, to_python, value_error};
use contactlab::learn::contactnets::eval::{evaluate as rust_evaluate, toss_rollout, vertex_error};
use contactlab::learn::contactnets::model::{load as rust_load, LearnedModel};
use contactlab::learn::contactnets::train::{train_on_split, TrainMonitor, TrainSettings};
use contactlab::learn::contactnets::Dataset;
use numpy::PyArray2;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A folder of cube tosses (`toss_*.csv` and `params.json`), loaded and validated; a bad file
/// raises ValueError naming the file, line and field.
#[pyclass(name = "TossDataset", module = "contactlab.contactnets", frozen)]
pub(crate) struct PyDataset {
    inner: Dataset,
}

#[pymethods]
impl PyDataset {
    #[staticmethod]
    fn load(dir: PathBuf) -> PyResult<Self> {
        Ok(Self { inner: Dataset::load(&dir).map_err(value_error)? })
    }
    fn __len__(&self) -> usize {
        self.inner.tosses.len()
    }
    /// Toss names (file stems), in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.inner.tosses.iter().map(|t| t.name.clone()).collect()
    }
    /// The observed frames of toss `index`: `(t (T), position (T x 3), quaternion (T x 4,
    /// x y z w), velocity (T x 3, world), angular velocity (T x 3, body))`.
    fn toss<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyAny>> {
        let toss =
            self.inner.tosses.get(index).ok_or_else(|| {
                value_error(format!("index {index}: the dataset has {} tosses", self.inner.tosses.len()))
            })?;
        let f = &toss.frames;
        let t: Vec<f64> = f.iter().map(|x| x.t).collect();
        let rows = |g: &dyn Fn(&contactlab::learn::contactnets::data::Frame) -> Vec<f64>| -> PyResult<_> {
            PyArray2::from_vec2(py, &f.iter().map(g).collect::<Vec<_>>()).map_err(value_error)
        };
        let p = rows(&|x| x.p.iter().copied().collect())?;
        let q = rows(&|x| x.q.coords.iter().copied().collect())?;
        let v = rows(&|x| x.v.iter().copied().collect())?;
        let w = rows(&|x| x.w.iter().copied().collect())?;
        Ok((numpy::PyArray1::from_vec(py, t), p, q, v, w).into_pyobject(py)?.into_any())
    }
    fn __repr__(&self) -> String {
        format!("TossDataset({}, {} tosses)", self.inner.dir.display(), self.inner.tosses.len())
    }
}

/// A learned contact model (polytope, deep or end-to-end), as `contactlab contactnets train`
/// writes it.
#[pyclass(name = "ContactModel", module = "contactlab.contactnets", frozen)]
pub(crate) struct PyContactModel {
    inner: LearnedModel,
}

#[pymethods]
impl PyContactModel {
    /// Reads and validates a model file (errors name the file, line and field).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Ok(Self { inner: rust_load(&path).map_err(value_error)? })
    }
    /// Writes the model's JSON file (atomically).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.inner.save(&path).map_err(|e| value_error(format!("{}: cannot write: {e}", path.display())))
    }
    /// "poly", "deep" or "e2e".
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method.name()
    }
    /// Learned friction coefficient (poly, deep).
    #[getter]
    fn mu(&self) -> f64 {
        self.inner.mu
    }
    /// Learned vertices (n x 3, body frame, scaled units).
    #[getter]
    fn vertices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let rows: Vec<Vec<f64>> = self.inner.vertices.iter().map(|v| v.to_vec()).collect();
        PyArray2::from_vec2(py, &rows).map_err(value_error)
    }
    /// Largest distance of a learned vertex from its true corner (half widths).
    #[getter]
    fn vertex_error(&self) -> f64 {
        vertex_error(&self.inner)
    }
    /// The training record (tosses, seed, report), a dict.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.info)
    }
    /// Rolls toss `index` of `data` out from its first frame through the hard-contact step with
    /// this model's geometry: `(position (T x 3), quaternion (T x 4, x y z w), failure)`, the
    /// failure a string when the simulator stopped early (the rest padded with its last pose).
    fn rollout<'py>(&self, py: Python<'py>, data: &PyDataset, index: usize) -> PyResult<Bound<'py, PyAny>> {
        let toss =
            data.inner.tosses.get(index).ok_or_else(|| {
                value_error(format!("index {index}: the dataset has {} tosses", data.inner.tosses.len()))
            })?;
        let (poses, failure) = py.detach(|| toss_rollout(&self.inner, toss));
        let p: Vec<Vec<f64>> = poses.iter().map(|x| x.p.iter().copied().collect()).collect();
        let q: Vec<Vec<f64>> = poses.iter().map(|x| x.q.coords.iter().copied().collect()).collect();
        let p = PyArray2::from_vec2(py, &p).map_err(value_error)?;
        let q = PyArray2::from_vec2(py, &q).map_err(value_error)?;
        Ok((p, q, failure).into_pyobject(py)?.into_any())
    }
    fn __repr__(&self) -> String {
        format!(
            "ContactModel({}, mu {:.4}, {} vertices)",
            self.inner.method.name(),
            self.inner.mu,
            self.inner.vertices.len()
        )
    }
}

/// Trains a learned contact model on the first `tosses` training tosses of `data`'s
/// duplicate-aware split seeded by `settings["seed"]` (as `contactlab contactnets train`):
/// `settings` is a dict of `TrainSettings` fields (any subset: method, seed, steps, batch, lr,
/// patience, threads, ...; unknown fields are an error). The training runs on its own threads
/// with the GIL released; `callback(steps_done)` is called about every 50 ms while it runs, and
/// a callback that raises (or Ctrl-C) stops it and re-raises. Returns `(model, report)`, the
/// report a dict (status, steps, best_step, best_valid, history, failed_solves, wall_seconds).
#[pyfunction(name = "contactnets_train")]
#[pyo3(signature = (data, tosses, settings = None, callback = None))]
pub(crate) fn train<'py>(
    py: Python<'py>,
    data: &PyDataset,
    tosses: usize,
    settings: Option<Bound<'py, PyAny>>,
    callback: Option<Bound<'py, PyAny>>,
) -> PyResult<(PyContactModel, Bound<'py, PyAny>)> {
    let settings: TrainSettings = match settings {
        Some(d) => settings_over_default(&TrainSettings::default(), &d, "ContactNets train settings")?,
        None => TrainSettings::default(),
    };
    settings.validate().map_err(value_error)?;
    let (cancel, steps) = (AtomicBool::new(false), AtomicUsize::new(0));
    let monitor = TrainMonitor { cancel: Some(&cancel), steps: Some(&steps) };
    let data = &data.inner;
    let settings = &settings;
    let (run, failure) = std::thread::scope(|s| {
        let worker = s.spawn(move || train_on_split(data, tosses, settings, monitor));
        let mut failure: Option<PyErr> = None;
        let mut seen = usize::MAX;
        while !worker.is_finished() {
            py.detach(|| std::thread::sleep(Duration::from_millis(50)));
            if failure.is_some() {
                continue;
            }
            let done = steps.load(Ordering::Relaxed);
            let called = match &callback {
                Some(cb) if done != seen => cb.call1((done,)).map(|_| ()),
                _ => Ok(()),
            };
            seen = done;
            if let Err(e) = called.and_then(|_| py.check_signals()) {
                failure = Some(e);
                cancel.store(true, Ordering::Relaxed);
            }
        }
        (worker.join(), failure)
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let run = run.map_err(|_| value_error("the training thread panicked"))?.map_err(value_error)?;
    Ok((PyContactModel { inner: run.model }, to_python(py, &run.report)?))
}

/// Full-toss rollouts of `model` on `data`'s tosses (all, or the listed indices) on `threads`
/// threads, GIL released: a dict with the means (`position_error_pct` of the width,
/// `angle_error_deg`, `penetration_pct`), `failed_rollouts` and `per_toss` metrics.
#[pyfunction(name = "contactnets_evaluate")]
#[pyo3(signature = (model, data, tosses = None, threads = 2))]
pub(crate) fn evaluate<'py>(
    py: Python<'py>,
    model: &PyContactModel,
    data: &PyDataset,
    tosses: Option<Vec<usize>>,
    threads: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let all = &data.inner.tosses;
    let picked: Vec<_> = match tosses {
        Some(idx) => idx
            .iter()
            .map(|&i| all.get(i).ok_or_else(|| value_error(format!("tosses: index {i} out of 0..{}", all.len()))))
            .collect::<PyResult<_>>()?,
        None => all.iter().collect(),
    };
    if picked.is_empty() {
        return Err(value_error("tosses: no toss to evaluate"));
    }
    if !(1..=1024).contains(&threads) {
        return Err(value_error(format!("threads: must be in 1..=1024, got {threads}")));
    }
    let report = py.detach(|| rust_evaluate(&model.inner, &picked, threads));
    to_python(py, &report)
}
