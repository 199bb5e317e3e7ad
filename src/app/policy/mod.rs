//! The Policy window: a learned policy drives the robot live, commanded from sliders
//! and pushed around with the mouse spring; new policies train in the background while the
//! simulation keeps running.
//!
//! Two plugins. [`PolicyPlugin`] (in [`super::core_plugins`], so headless tests run it) owns
//! [`PolicyState`] and one system, [`drive_policy`], that applies the window's
//! [`PolicyRequest`]s and polls the background work; [`PolicyUiPlugin`] (windowed app only) draws
//! the window, which only edits settings and queues requests.
//!
//! Ownership and threads:
//! * Loading a policy builds the scene's [`Task`] (which settles the stance for a second of
//!   simulated time), so it runs on a thread of its own ([`super::jobs`]) that owns a copy of the scene.
//! * Driving: a [`PolicyDriver`] is handed to the simulation plugin ([`SimCommand::Drive`]) and
//!   runs on the step batch's thread before every step: `Policy::drive` with the current
//!   [`Command`], read from an `Arc<Mutex<Command>>` the sliders write. It reports base height,
//!   orientation error and per-step cost into a shared [`Telemetry`] ring that the window plots.
//!   `engage` keeps the controller it replaces and `release` puts it back, so stopping (or another
//!   driver taking over) returns the robot to the scene's PD.
//! * Training runs on its own `std::thread`, not on the async compute pool: a run takes seconds
//!   (BPTT) to minutes (PPO), and on a 2-core machine that pool has a single thread, which the
//!   simulation's step batches need. Its rayon work goes to a private pool one thread smaller
//!   than the machine, so the app keeps a core. The learner's per-iteration callback appends the
//!   [`IterLog`] to a shared [`TrainProgress`]; the cancel flag is checked between iterations.
//!
//! The learning curves are plotted against simulated training steps, the learners' common
//! budget (`learn::bptt`, `learn::ppo`), with the task's target return (stand: the reference
//! controller's; walk: the scene's PD) as a horizontal line.
//!
//! One idea per file: `state` (the resources the window edits, the requests, the telemetry),
//! `jobs` (the driver, loading and training, and [`drive_policy`], which applies the requests)
//! and `window` (the egui panels). The window draws nothing in 3D.
//!
//! [`Task`]: crate::learn::Task
//! [`SimCommand::Drive`]: super::sim::SimCommand::Drive
//! [`Command`]: crate::learn::Command
//! [`IterLog`]: crate::learn::IterLog

mod jobs;
mod state;
mod window;

pub use jobs::{drive_policy, PolicyDriver, Training};
pub use state::{
    Learner, LoadedPolicy, PolicyRequest, PolicyState, PolicyUi, Sample, Telemetry, TrainProgress, TrainSettings,
    TrainedPolicy, DEFAULT_POLICY,
};

use super::AppSet;
use bevy::prelude::*;

pub struct PolicyPlugin;

impl Plugin for PolicyPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<PolicyState>()
            .add_systems(Startup, state::start_from_options)
            .add_systems(Update, drive_policy.in_set(AppSet::Background));
    }
}

/// The window (windowed app only; the logic is in [`PolicyPlugin`]).
pub struct PolicyUiPlugin;

impl Plugin for PolicyUiPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<PolicyUi>()
            .add_systems(Update, jobs::poll_dialog)
            .add_systems(bevy_egui::EguiPrimaryContextPass, window::policy_window);
    }
}
