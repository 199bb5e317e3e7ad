//! The Control window: contact-implicit trajectory optimization (CITO) and contact-implicit MPC
//! on the robot on screen (DESIGN 5; the library side is [`crate::ocp`]).
//!
//! - **CITO** plans from the state on screen toward a base-pose target (offset and roll, pitch,
//!   yaw relative to the present base pose) with no contact schedule. The solve runs on a
//!   background task that owns a copy of the simulation; each accepted DDP iteration is streamed
//!   to the window (cost per iteration, live). The result is drawn as a ghost robot (a stick
//!   figure from forward kinematics of the planned states, scrubbed or animated over the knots),
//!   the feet's traces, and the contact schedule that emerged; the report's pose error,
//!   penetration and cone violation are the same numbers `contactlab cito` writes.
//! - **MPC** takes over the simulation's controls through the simulation plugin's
//!   [`Driver`] hook: [`MpcControl`] wraps [`MpcDriver`], so replans run on the step batch's
//!   thread, one every knot step, between simulator steps. The base-pose target can be moved
//!   while it runs (sliders, or Shift + left drag on the ground plane in the 3D view), the mouse
//!   spring (Ctrl + left drag on a body) is the disturbance it must reject, and the window plots
//!   solve time per cycle against the control period and the base error. The plan is drawn as a
//!   ghost over the horizon.
//!
//! Data flow as elsewhere in the app: the window writes intent (a solve request, a
//! [`SimCommand::Drive`], a target in [`MpcLink::inbox`]); results come back through the task or
//! the link's telemetry; nothing here mutates the physics of the running simulation.
//!
//! One idea per file: `state` (the settings the window edits, the CITO state, the MPC link),
//! `jobs` (the CITO task, the MPC driver, the systems that start and poll them), `draw` (ghosts,
//! traces and targets in the 3D view, and the target drag) and `window` (the egui panels).
//!
//! [`Driver`]: super::sim::Driver
//! [`MpcDriver`]: crate::ocp::mpc::MpcDriver
//! [`SimCommand::Drive`]: super::sim::SimCommand::Drive

mod draw;
mod jobs;
mod state;
mod window;

pub use draw::Ghost;
pub use jobs::{displayed_simulation, MpcControl};
pub use state::{CitoRun, CitoState, ControlSettings, MpcLink, MpcTelemetry, Pose, MPC_DRIVER};

use super::AppSet;
use bevy::prelude::*;

/// Headless part: settings per scene, polling the CITO task, `--open control --start`.
pub struct ControlPlugin;

impl Plugin for ControlPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<CitoState>().init_resource::<MpcLink>().add_systems(
            Update,
            (state::sync_settings, jobs::poll_cito, jobs::autostart).chain().in_set(AppSet::Background),
        );
    }
}

/// The window and the 3D drawing (windowed app only).
pub struct ControlUiPlugin;

impl Plugin for ControlUiPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<draw::TargetDrag>()
            .add_systems(bevy_egui::EguiPrimaryContextPass, window::window_system)
            .add_systems(Update, (draw::drag_target.in_set(AppSet::Input), draw::draw.in_set(AppSet::Overlay)));
    }
}
