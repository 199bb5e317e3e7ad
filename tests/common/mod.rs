//! Shared set-up of the headless app tests: the app's core plugins on `MinimalPlugins` with
//! manual time (one frame = 1/60 s), and the command queue.
#![allow(dead_code)] // each test file uses a part

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use contactlab::app::sim::{SimCommand, SimCommands, SimControl, SimHistory, SimWorker};
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

/// Frames until the newest snapshot reaches time `t` (the step task keeps up with manual time
/// at its own pace: each frame owes 1/60 s, and waits for the batch that is running).
pub fn run_until(app: &mut App, t: f64) {
    let now = |app: &App| app.world().resource::<SimHistory>().snapshots.back().map_or(0.0, |s| s.t);
    for _ in 0..200_000 {
        app.update();
        if now(app) >= t {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let c = app.world().resource::<SimControl>();
    panic!("simulation did not reach t = {t} (at {}, playing {}, message {:?})", now(app), c.playing, c.message);
}

/// Pauses and runs frames until the step task is idle with no command queued.
pub fn idle(app: &mut App) {
    push(app, SimCommand::Pause);
    for _ in 0..100_000 {
        app.update();
        if !app.world().resource::<SimWorker>().busy() && app.world().resource::<SimCommands>().0.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the step task did not finish");
}
