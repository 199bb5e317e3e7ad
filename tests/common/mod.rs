//! Shared set-up of the headless app tests: the app's core plugins on `MinimalPlugins` with
//! manual time (one frame = 1/60 s), and the command queue.
#![allow(dead_code)] // each test file uses a part

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use contactlab::app::sim::{SimCommand, SimCommands};
use contactlab::app::{core_plugins, CurrentScene};
use contactlab::scene::Scene;
use std::path::Path;
use std::time::Duration;

/// Seconds of manual time per frame.
pub const FRAME: f64 = 1.0 / 60.0;

/// The headless app on `scene`, after its first frame.
pub fn app(scene: &str) -> App {
    let scene = Scene::load(Path::new(scene)).expect("scene loads");
    let mut app = App::new();
    app.add_plugins(MinimalPlugins)
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_secs_f64(FRAME)))
        .insert_resource(CurrentScene { scene, generation: 0 });
    core_plugins(&mut app);
    app.update();
    app
}

/// Queues a simulation command, as the UI does.
pub fn push(app: &mut App, c: SimCommand) {
    app.world_mut().resource_mut::<SimCommands>().push(c);
}
