//! A scene's learning task as an environment (what BPTT and PPO train on).

use crate::value_error;
use contactlab::learn::task::{Env, ACTION_LIMIT};
use contactlab::learn::Task;
use contactlab::scene::Scene;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use std::path::PathBuf;

/// A learning task of a scene's `learn` section as an environment (what BPTT and PPO train on):
/// `reset(seed)` samples an episode (start, command, pushes) from `seed`; `step(action)` applies
/// joint-target offsets (nu, clamped to +-`ACTION_LIMIT`, scaled by the task's `action_scale`)
/// through the scene's PD for one control period. The reward is minus the task's cost; a step the
/// simulator cannot take (or that diverges) ends the episode with the task's failure cost for the
/// remaining steps, as the learners charge it.
#[pyclass(name = "TaskEnv", module = "contactlab")]
pub(crate) struct PyTaskEnv {
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
        // Through the array view: a strided action is as good as a packed one.
        let owned: Vec<f64> = action.as_array().iter().copied().collect();
        let a = owned.as_slice();
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
