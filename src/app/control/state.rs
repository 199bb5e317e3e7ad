//! The Control window's resources: the settings it edits, the CITO solve's state and result,
//! and the link to the MPC driver (telemetry out, targets in).

use super::draw::Ghost;
use crate::app::CurrentScene;
use crate::ocp::cito::{CitoReport, CitoSettings};
use crate::ocp::mpc::{CycleInfo, MpcSettings};
use crate::ocp::IterationInfo;
use crate::scene::Scene;
use bevy::prelude::*;
use bevy::tasks::Task;
use nalgebra::{Matrix3, Rotation3, Vector3};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Name of the MPC driver in the top bar (and how the window recognises it).
pub const MPC_DRIVER: &str = "MPC";

/// A base pose: position and rotation (world frame).
pub type Pose = (Vector3<f64>, Matrix3<f64>);

/// The window's settings: the CITO and MPC specs it edits (from the scene's `cito` and `mpc`
/// sections, or their defaults), and how the plans are drawn.
#[derive(Resource, Clone, Debug)]
pub struct ControlSettings {
    pub cito: CitoSettings,
    pub mpc: MpcSettings,
    /// MPC target relative to the base pose at engagement: offset (m) and roll, pitch, yaw (rad).
    pub mpc_offset: [f64; 3],
    pub mpc_rpy: [f64; 3],
    pub show_ghost: bool,
    pub show_traces: bool,
    /// Animate the CITO ghost over its knots (else show `ghost_knot`).
    pub animate: bool,
    pub ghost_knot: usize,
    /// The scene generation the specs were read from.
    generation: Option<u64>,
}

impl ControlSettings {
    pub fn for_scene(scene: &Scene) -> Self {
        // Without an `mpc` section: the relaxation scenes/mpc_pull.ron was tuned with (the
        // defaults' tighter kappa makes one-iteration replans stiffer under pushes).
        let mpc = scene.file.mpc.clone().unwrap_or(MpcSettings { kappa: 1e-3, delta: 1e-2, ..MpcSettings::default() });
        Self {
            cito: scene.file.cito.clone().unwrap_or_default(),
            mpc,
            mpc_offset: [0.0; 3],
            mpc_rpy: [0.0; 3],
            show_ghost: true,
            show_traces: true,
            animate: true,
            ghost_knot: 0,
            generation: None,
        }
    }
}

pub(super) fn sync_settings(
    mut commands: Commands,
    scene: Res<CurrentScene>,
    settings: Option<ResMut<ControlSettings>>,
) {
    if settings.as_ref().is_some_and(|s| s.generation == Some(scene.generation)) {
        return;
    }
    // A new scene: its own `cito` and `mpc` sections (or the defaults).
    let fresh = ControlSettings { generation: Some(scene.generation), ..ControlSettings::for_scene(&scene.scene) };
    match settings {
        Some(mut s) => *s = fresh,
        None => commands.insert_resource(fresh),
    }
}

/// One finished CITO solve, with what the window draws of it.
pub struct CitoRun {
    pub report: CitoReport,
    pub ghost: Ghost,
    /// Target pose (position, rotation) and the start's.
    pub target: Pose,
}

/// A CITO solve on a background task, its streamed iterations, and the last result.
#[derive(Resource, Default)]
pub struct CitoState {
    pub(super) task: Option<Task<Result<CitoRun, String>>>,
    pub(super) cancel: Arc<AtomicBool>,
    /// Accepted iterations of the running (or last) solve.
    pub progress: Arc<Mutex<Vec<IterationInfo>>>,
    /// Target of the running solve (drawn while it runs).
    pub pending_target: Option<Pose>,
    pub result: Option<CitoRun>,
    pub error: Option<String>,
    pub(super) started: Option<Instant>,
    /// Solves finished (tests wait on it).
    pub finished: u64,
    /// Seconds into the ghost's animation.
    pub(super) anim: f64,
}

impl CitoState {
    pub fn busy(&self) -> bool {
        self.task.is_some()
    }

    /// Stops the running solve after its current iteration (its result so far is kept).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Seconds the running solve has taken.
    pub fn elapsed(&self) -> Option<f64> {
        self.started.filter(|_| self.busy()).map(|s| s.elapsed().as_secs_f64())
    }
}

/// What the MPC driver reports back to the window.
#[derive(Default, Debug, Clone)]
pub struct MpcTelemetry {
    pub cycles: VecDeque<CycleInfo>,
    pub total_cycles: u64,
    /// The latest plan as a ghost (every state of the horizon).
    pub plan: Option<Ghost>,
    /// The target in force, and the base pose at engagement (the sliders are relative to it).
    pub target: Option<Pose>,
    pub home: Option<Pose>,
    /// Knot step and simulator steps per control period.
    pub period: f64,
    pub substeps: usize,
}

/// The window's end of the MPC driver: its telemetry. (Targets go to the driver as
/// [`crate::app::sim::SimCommand::SetTarget`], between steps, so recordings see them.)
#[derive(Resource, Clone, Default)]
pub struct MpcLink {
    pub telemetry: Arc<Mutex<MpcTelemetry>>,
}

impl MpcLink {
    pub fn snapshot(&self) -> MpcTelemetry {
        self.telemetry.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

/// `home` moved by `offset` (world frame) and turned by roll, pitch, yaw `rpy` (world frame),
/// as `CitoProblem::from_state` places its target.
pub(super) fn offset_pose(home: &Pose, offset: [f64; 3], rpy: [f64; 3]) -> Pose {
    let [r, p, y] = rpy;
    (home.0 + Vector3::from(offset), Rotation3::from_euler_angles(r, p, y).matrix() * home.1)
}

/// The MPC target of the sliders, relative to the engagement pose.
pub(super) fn slider_target(settings: &ControlSettings, home: &Pose) -> Pose {
    offset_pose(home, settings.mpc_offset, settings.mpc_rpy)
}
