//! Scenes: RON files under `scenes/` that say which robot, where it starts, on what terrain,
//! with which time step, solver settings, controller and scheduled pulls.
//!
//! `scene` is the assembler that turns a file into the library's types, as MuJoCo's XML layer
//! is, and nothing below it imports it: the library's types ([`Model`], [`Terrain`],
//! [`StepSettings`], [`CitoSettings`], [`MpcSettings`], [`TaskSettings`], [`SweepSettings`]) are
//! the API, and a caller that builds them by hand needs no scene. The format is in `file.rs`;
//! turning it into a [`Scene`] (robot, initial state, controller, pulls, the checks that need the
//! model) is in `build.rs`.
//!
//! ```ron
//! Scene(
//!     name: "quadruped_stand",
//!     robot: Builtin(Quadruped),            // or Urdf(path: "x.urdf", floating: true), Box(size: (..), mass: ..)
//!     initial: (
//!         base_position: (0.0, 0.0, 0.33),
//!         base_rpy: (0.0, 0.0, 0.0),
//!         joints: {"*_thigh_joint": 0.8, "*_calf_joint": -1.6},
//!     ),
//!     terrain: (ground: (friction: 0.8), boxes: []),
//!     dt: 0.002,
//!     controller: JointPd(kp: 80.0, kd: 2.0, posture: {"*_thigh_joint": 0.8, "*_calf_joint": -1.6}),
//!     pulls: [(body: "trunk", point: (0.0, 0.0, 0.0), force: (0.0, 60.0, 0.0), start: 1.0, duration: 0.2)],
//!     duration: 3.0,
//! )
//! ```
//! Joint maps take joint names, or `*suffix` patterns that set every joint whose name ends in
//! `suffix`; exact names win over patterns. Base velocities are given in the world frame and
//! stored as the body twist (`v_lin = R^T pdot`, `w_body = R^T w_world`).
//!
//! Every error names the file, the line and column, the field path and the allowed range.

mod build;
mod file;
pub mod guess;

pub use file::{BuiltinRobot, ContactSpec, ControllerSpec, InitialState, PullSpec, RobotSpec, SceneFile};

use crate::contact::Terrain;
use crate::diff::sweep::{SweepOverrides, SweepSettings, SweepSpec};
use crate::learn::{Task, TaskError, TaskSettings};
use crate::model::urdf;
use crate::model::Model;
use crate::ocp::cito::{CitoError, CitoProblem, CitoSettings};
use crate::ocp::mpc::MpcSettings;
use crate::sim::{Controller, Pull, Simulation, StepSettings};
use nalgebra::DVector;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SceneError {
    #[error("{file}: cannot read: {message}")]
    Io { file: PathBuf, message: String },
    #[error("{file}:{line}:{column}: {field}: {message}")]
    Invalid { file: PathBuf, line: usize, column: usize, field: String, message: String },
    #[error(transparent)]
    Urdf(#[from] urdf::UrdfError),
    /// A task built from the scene could not be set up (a missing section, a stance that does
    /// not settle, a robot the task cannot drive).
    #[error("{file}: {section}: {message}")]
    Task { file: PathBuf, section: String, message: String },
}

/// A loaded scene, ready to simulate.
#[derive(Clone, Debug)]
pub struct Scene {
    pub path: PathBuf,
    pub file: SceneFile,
    pub model: Arc<Model>,
    pub terrain: Terrain,
    pub settings: StepSettings,
    pub q0: DVector<f64>,
    pub v0: DVector<f64>,
    pub controller: Controller,
    pub pulls: Vec<Pull>,
    /// Warnings from model import.
    pub warnings: Vec<String>,
}

impl Scene {
    /// Reads and parses the scene file at `path`.
    pub fn load(path: &Path) -> Result<Scene, SceneError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SceneError::Io { file: path.to_path_buf(), message: e.to_string() })?;
        Self::from_str(&text, path)
    }

    /// Parses scene text; `path` is used in messages and to resolve relative URDF paths.
    pub fn from_str(text: &str, path: &Path) -> Result<Scene, SceneError> {
        let file = path.to_path_buf();
        let spanned = |e: ron::error::SpannedError, field: String| SceneError::Invalid {
            file: file.clone(),
            line: e.span.start.line,
            column: e.span.start.col,
            field: if field.is_empty() || field == "." { "scene".into() } else { field },
            message: e.code.to_string(),
        };
        // `implicit_some` lets optional fields be written as plain values (`duration: 3.0`).
        let options = ron::Options::default().with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME);
        let mut de = ron::Deserializer::from_str_with_options(text, &options).map_err(|e| spanned(e, String::new()))?;
        let parsed: Result<SceneFile, _> = serde_path_to_error::deserialize(&mut de);
        let sf = match parsed {
            Ok(sf) => sf,
            Err(e) => {
                let field = e.path().to_string();
                let err = de.span_error(e.into_inner());
                return Err(spanned(err, field));
            }
        };
        de.end().map_err(|e| spanned(de.span_error(e), "scene".into()))?;
        Self::from_file(sf, text, path)
    }

    /// A simulation at the scene's initial state.
    pub fn simulation(&self) -> Simulation {
        let mut sim =
            Simulation::new(self.model.clone(), self.terrain.clone(), self.settings, self.q0.clone(), self.v0.clone());
        sim.controller = self.controller.clone();
        sim.pulls = self.pulls.clone();
        sim
    }

    /// The scene's simulation advanced `seconds` under its own controller with the pulls
    /// removed: a settled stance (CITO, MPC and the learning tasks start from it).
    pub fn settled(&self, seconds: f64) -> Result<Simulation, SceneError> {
        let mut sim = self.simulation();
        sim.pulls.clear();
        sim.settle(seconds).map_err(|e| self.task_error("settle", e.to_string()))?;
        Ok(sim)
    }

    fn task_error(&self, section: &str, message: String) -> SceneError {
        SceneError::Task { file: self.path.clone(), section: section.into(), message }
    }

    fn section<T: Clone>(&self, section: &str, value: &Option<T>) -> Result<T, SceneError> {
        value.clone().ok_or_else(|| self.task_error(section, format!("the scene has no `{section}` section")))
    }

    /// The scene's `cito` section.
    pub fn cito_settings(&self) -> Result<CitoSettings, SceneError> {
        self.section("cito", &self.file.cito)
    }

    /// The scene's `mpc` section.
    pub fn mpc_settings(&self) -> Result<MpcSettings, SceneError> {
        self.section("mpc", &self.file.mpc)
    }

    /// The scene's `learn` section.
    pub fn learn_settings(&self) -> Result<TaskSettings, SceneError> {
        self.section("learn", &self.file.learn)
    }

    /// The scene's `gradcheck` section.
    pub fn sweep_settings(&self) -> Result<SweepSettings, SceneError> {
        self.section("gradcheck", &self.file.gradcheck)
    }

    /// A CITO problem with `settings` (usually [`Scene::cito_settings`], possibly edited) from
    /// the scene's stance settled for `settings.settle`.
    pub fn cito_problem(&self, settings: &CitoSettings) -> Result<CitoProblem, SceneError> {
        let sim = self.settled(settings.settle)?;
        CitoProblem::from_state(&sim, settings).map_err(|e: CitoError| self.task_error("cito", e.to_string()))
    }

    /// The learning task of `settings` on the scene's robot, PD and pushes.
    pub fn task(&self, settings: TaskSettings) -> Result<Task, SceneError> {
        Task::new(&self.file.name, &self.simulation(), settings)
            .map_err(|e: TaskError| self.task_error("learn", e.to_string()))
    }

    /// The scene's `gradcheck` sweep with `o` applied, and the simulation it starts from.
    pub fn sweep(&self, o: &SweepOverrides) -> Result<(SweepSpec, Simulation), SceneError> {
        let g = self.sweep_settings()?;
        SweepSpec::from_state(&self.file.name, &g, o, self.simulation())
            .map_err(|e| self.task_error("gradcheck", e.to_string()))
    }

    /// Writes the scene's file form atomically.
    pub fn save(file: &SceneFile, path: &Path) -> std::io::Result<()> {
        let text = ron::ser::to_string_pretty(file, ron::ser::PrettyConfig::default())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        crate::io::write_atomic(path, text.as_bytes())
    }
}
