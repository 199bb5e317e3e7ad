//! Contact-implicit control from Python: trajectory optimization (`cito_solve`) and MPC as an
//! object: it drives a `Simulation` one step at a time (the
//! user's own loop, pulls and measurements in between) or for a duration with a callback per
//! replan (`contactlab::ocp::mpc::MpcDriver`).

use crate::simulation::PySimulation;
use crate::{from_python, to_python, value_error, vector};
use contactlab::ocp::cito::{solve as cito_solve, CitoProblem, CitoSettings};
use contactlab::ocp::mpc::{CycleInfo, MpcDriver, MpcSettings};
use nalgebra::{Matrix3, Vector3};
use numpy::{PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// `(summary, xs, us)` of [`cito_py`].
pub(crate) type Plan<'py> = (Bound<'py, PyAny>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// Closed-loop contact-implicit MPC (DDP over the contact simulator, no contact schedule):
/// `Mpc(settings)` with a dict of the `mpc` section's fields (any subset, e.g.
/// `Scene.mpc_settings()`; unknown fields are an error). `engage(sim)` builds the horizon toward
/// the present base pose and takes the simulation's torques over; then `step(sim)` replans at
/// the start of every control period (`knot_dt`) and steps once, or `run(sim, seconds, callback)`
/// does that for a duration. A failed replan keeps the previous plan, shifted (`kept_previous`).
/// An `Mpc` belongs to the thread that made it (it is not `Send`): use it from that thread.
#[pyclass(name = "Mpc", module = "contactlab", unsendable)]
pub(crate) struct PyMpc {
    driver: MpcDriver,
}

/// `(position (3), rotation (3 x 3))` of [`PyMpc::target`].
pub(crate) type Pose<'py> = (Bound<'py, PyAny>, Bound<'py, PyArray2<f64>>);

pub(crate) fn cycle_dict<'py>(py: Python<'py>, c: &CycleInfo) -> PyResult<Bound<'py, PyAny>> {
    to_python(py, c)
}

#[pymethods]
impl PyMpc {
    #[new]
    #[pyo3(signature = (settings = None))]
    fn new(settings: Option<Bound<'_, PyAny>>) -> PyResult<Self> {
        let settings: MpcSettings = match settings {
            Some(d) => from_python(&d, "MPC settings")?,
            None => MpcSettings::default(),
        };
        settings.validate().map_err(value_error)?;
        Ok(Self { driver: MpcDriver::new(settings) })
    }

    /// The settings (a dict).
    #[getter]
    fn settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.driver.spec)
    }

    /// Takes over `sim` at its present state (settle it first): warms the plan up and switches
    /// the simulation's controller off. Raises if the robot has no actuated floating base or
    /// `knot_dt` is not a multiple of the simulation's `dt`.
    fn engage(&mut self, sim: &mut PySimulation) -> PyResult<()> {
        self.driver.engage(&mut sim.inner).map_err(value_error)
    }

    /// Gives the controller and control offset back to `sim`.
    fn release(&mut self, sim: &mut PySimulation) {
        self.driver.release(&mut sim.inner);
    }

    /// Sets `sim`'s torque for its next step (replanning first at the start of a control
    /// period), then steps. Returns `(step status, cycle)`, the cycle a dict of the replan (`t`,
    /// `status`, `iterations`, `cost`, `solve_ms`, `base_error_m`, `fallback_jacobians`,
    /// `unconverged_jacobians`, `kept_previous`) or None between replans.
    fn step<'py>(&mut self, py: Python<'py>, sim: &mut PySimulation) -> PyResult<(String, Option<Bound<'py, PyAny>>)> {
        let cycle = self.driver.before_step(&mut sim.inner, None).map_err(value_error)?;
        let status = format!("{:?}", sim.inner.step().status);
        Ok((status, cycle.map(|c| cycle_dict(py, &c)).transpose()?))
    }

    /// Runs `seconds` of closed loop on `sim`; `callback(cycle)` (a dict, as `step` returns)
    /// after every replan. A callback that raises, or Ctrl-C, stops the run and re-raises.
    /// Returns a dict: `steps` taken, `cycles` (list of dicts), `failed_replans`, and
    /// `failed_step` (the status of a step that could not be taken, else None).
    #[pyo3(signature = (sim, seconds, callback = None))]
    fn run<'py>(
        slf: Bound<'py, Self>,
        py: Python<'py>,
        sim: Bound<'py, PySimulation>,
        seconds: f64,
        callback: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(value_error(format!("seconds: must be finite and >= 0, got {seconds}")));
        }
        let n = (seconds / sim.borrow().inner.settings.dt).round() as usize;
        let cancel = AtomicBool::new(false);
        let (mut cycles, mut steps, mut failed) = (Vec::new(), 0usize, None);
        for _ in 0..n {
            // The controller and the simulation are borrowed only for the step, so the callback
            // may read both (the plan, the state).
            let (cycle, status) = {
                let mut s = sim.borrow_mut();
                let cycle = slf.borrow_mut().driver.before_step(&mut s.inner, Some(&cancel)).map_err(value_error)?;
                (cycle, s.inner.step().status)
            };
            if let Some(c) = cycle {
                let d = cycle_dict(py, &c)?;
                if let Some(cb) = &callback {
                    if let Err(e) = cb.call1((d.clone(),)) {
                        cancel.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
                py.check_signals()?;
                cycles.push(d);
            }
            if !status.advanced() {
                failed = Some(format!("{status:?}"));
                break;
            }
            steps += 1;
        }
        let out = pyo3::types::PyDict::new(py);
        let failed_replans = cycles
            .iter()
            .filter(|d| d.get_item("kept_previous").and_then(|v| v.extract::<bool>()).unwrap_or(false))
            .count();
        out.set_item("steps", steps)?;
        out.set_item("cycles", cycles)?;
        out.set_item("failed_replans", failed_replans)?;
        out.set_item("failed_step", failed)?;
        Ok(out.into_any())
    }

    /// Moves the base-pose target (applied at the next replan): `position` (3, m, world) and
    /// `rotation` (3 x 3, world from base; default: the present target's).
    #[pyo3(signature = (position, rotation = None))]
    fn set_target(
        &mut self,
        position: PyReadonlyArray1<'_, f64>,
        rotation: Option<PyReadonlyArray2<'_, f64>>,
    ) -> PyResult<()> {
        let p = vector("position", &position, 3)?;
        let r = match rotation {
            Some(r) => {
                let a = r.as_array();
                if a.shape() != [3, 3] || a.iter().any(|x| !x.is_finite()) {
                    return Err(value_error("rotation: expected a finite 3 x 3 array"));
                }
                let m = Matrix3::from_fn(|i, j| a[[i, j]]);
                if (m.transpose() * m - Matrix3::identity()).norm() > 1e-6 || m.determinant() < 0.0 {
                    return Err(value_error("rotation: not a rotation matrix (R^T R = I, det R = 1)"));
                }
                m
            }
            None => self.driver.target().map_or_else(Matrix3::identity, |t| t.1),
        };
        self.driver.set_target(Vector3::new(p[0], p[1], p[2]), r);
        Ok(())
    }

    /// The target in force, `(position (3), rotation (3 x 3))`, or None before engagement.
    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Option<Pose<'py>>> {
        let Some((p, r)) = self.driver.target() else { return Ok(None) };
        let rows: Vec<Vec<f64>> = (0..3).map(|i| (0..3).map(|j| r[(i, j)]).collect()).collect();
        let p = numpy::PyArray1::from_slice(py, p.as_slice()).into_any();
        Ok(Some((p, PyArray2::from_vec2(py, &rows).map_err(value_error)?)))
    }

    /// The current plan's states (knots + 1 x (nq + nv); empty before engagement).
    #[getter]
    fn planned_states<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let xs = self.driver.planned_states();
        if xs.is_empty() {
            return Ok(PyArray2::zeros(py, [0, 0], false));
        }
        let rows: Vec<Vec<f64>> = xs.iter().map(|x| x.iter().copied().collect()).collect();
        PyArray2::from_vec2(py, &rows).map_err(value_error)
    }

    /// Knots in the horizon (0 before engagement).
    #[getter]
    fn knots(&self) -> usize {
        self.driver.knots()
    }

    /// Simulator steps per control period.
    #[getter]
    fn substeps(&self) -> usize {
        self.driver.substeps()
    }
}

/// Contact-implicit trajectory optimization from `sim`'s present state (settle it first):
/// `settings` is a dict of the `cito` section's fields (any subset; unknown fields are an
/// error), e.g. `Scene.cito_settings()`; `callback(iteration, cost)` is called after every
/// accepted DDP iteration (it may read `sim`, not assign to it: the solve borrows it). Returns
/// `(summary, xs, us)`: the summary dict of `contactlab cito`'s
/// `summary.json`, the replayed plan's states (T + 1 x (nq + nv)) and torques (T x nu).
#[pyfunction(name = "cito_solve")]
#[pyo3(signature = (sim, settings = None, callback = None))]
pub(crate) fn cito_py<'py>(
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
