//! Hot reload (headless, MinimalPlugins, manual time): editing the open scene file on disk
//! reloads it; an invalid edit keeps the current scene and says where the file is wrong.
#![cfg(feature = "viewer")]

use bevy::prelude::*;
use contactlab::app::notebook::HotReload;
use contactlab::app::sim::SimControl;
use contactlab::app::CurrentScene;
use std::time::Duration;

mod common;

fn frames(app: &mut App, n: usize) {
    for _ in 0..n {
        app.update();
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn editing_the_scene_file_reloads_it_and_a_bad_edit_keeps_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stand.ron");
    let text = std::fs::read_to_string("scenes/quadruped_stand.ron").unwrap();
    std::fs::write(&path, &text).unwrap();
    let mut app = common::app(path.to_str().unwrap());
    frames(&mut app, 40);
    let g0 = app.world().resource::<CurrentScene>().generation;
    assert_eq!(app.world().resource::<CurrentScene>().scene.terrain.ground.friction, 0.8);
    // mtime resolution: make sure the edit is seen as newer.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&path, text.replace("ground: (friction: 0.8)", "ground: (friction: 0.3)")).unwrap();
    frames(&mut app, 80);
    let sc = app.world().resource::<CurrentScene>();
    assert!(sc.generation > g0, "not reloaded");
    assert_eq!(sc.scene.terrain.ground.friction, 0.3);
    let g1 = sc.generation;
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&path, text.replace("dt: 0.002", "dt: -1.0")).unwrap();
    frames(&mut app, 80);
    assert_eq!(app.world().resource::<CurrentScene>().generation, g1, "an invalid file replaced the scene");
    assert_eq!(app.world().resource::<CurrentScene>().scene.terrain.ground.friction, 0.3);
    assert_eq!(app.world().resource::<HotReload>().failures, 1);
    let msg = app.world().resource::<SimControl>().message.clone().unwrap_or_default();
    assert!(msg.contains("stand.ron") && msg.contains("dt"), "{msg}");
}
