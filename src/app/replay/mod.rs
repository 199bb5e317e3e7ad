//! The ContactNets window: a learned contact model against real cube tosses.
//!
//! A replay takes one toss of the data folder (`../shared/data/cube_tosses`) and one model (the
//! true cube, a model file written by `contactlab contactnets train`, or a polytope trained here
//! in the background), rolls the model out from the toss's first frame for the toss's length
//! ([`eval::toss_rollout`]) and scores it with the metrics `contactlab contactnets eval` reports
//! ([`eval::rollout_metrics`], so the numbers in the window and in `eval.json` are the same
//! code). The real toss and the rollout then play side by side, or overlaid, in the 3D view.
//!
//! Two plugins split the work as [`super::sweep`] and [`super::ui`] do:
//! - [`ReplayPlugin`] (also in the headless tests) owns the settings, the replay and training
//!   tasks on threads of their own ([`super::jobs`]) (each owns its inputs: paths and an `Arc` of the model;
//!   files are read on the task, never on the frame) and the playback clock.
//! - [`ReplayUiPlugin`] (windowed app only) draws the window, the gizmos and aims the camera.
//!
//! The data are in the tosses' scaled units (lengths divided by the half width, board at
//! `z = 0`); the view draws them in metres at `origin + h p` with `h` the half width, the
//! rollout shifted by `separation` along the world y axis, over any scene.
//!
//! One idea per file: `state` (the settings, view and playback clock the window edits, the
//! replay and training state, the window's text fields), `jobs` (rollouts, training and file
//! dialogs on threads of their own, the systems that start and poll them, the clock's tick),
//! `draw` (the two cubes, their traces and the board in the 3D view; aiming the camera) and
//! `window` (the egui panels).
//!
//! [`eval::toss_rollout`]: crate::learn::contactnets::eval::toss_rollout
//! [`eval::rollout_metrics`]: crate::learn::contactnets::eval::rollout_metrics

mod draw;
mod jobs;
mod state;
mod window;

pub use jobs::{drive_replay, drive_training, list_tosses};
pub use state::{
    default_data_dir, ModelSource, Replay, ReplayPlayback, ReplaySettings, ReplayState, ReplayView, TossSource,
    TrainedModel, DEFAULT_DATA,
};

use super::AppSet;
use bevy::prelude::*;

pub struct ReplayPlugin;

impl Plugin for ReplayPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<ReplaySettings>()
            .init_resource::<ReplayView>()
            .init_resource::<ReplayPlayback>()
            .init_resource::<ReplayState>()
            .add_systems(Startup, state::apply_options)
            .add_systems(
                Update,
                (drive_training, drive_replay, jobs::advance_clock).chain().in_set(AppSet::Background),
            );
    }
}

// ---------------------------------------------------------------------------------------------
// Windowed app only: the window, the gizmos, the camera.

/// The ContactNets window and its drawing; added by [`super::run`] only (it needs egui and a
/// renderer).
pub struct ReplayUiPlugin;

impl Plugin for ReplayUiPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<state::ReplayUiState>()
            .add_systems(Startup, state::init_ui_state)
            .add_systems(bevy_egui::EguiPrimaryContextPass, window::window_system)
            .add_systems(Update, (jobs::poll_dialog, (draw::focus_camera, draw::draw).chain().in_set(AppSet::Overlay)));
    }
}
