//! Headless tests of the ContactNets replay plugin (MinimalPlugins, manual time): a replay of
//! a real toss with the true cube runs on the background task and agrees with
//! `contactlab contactnets eval`'s per-toss metrics; a broken model file is reported by name
//! in the window's error, never a panic; training in the background can be cancelled.
#![cfg(feature = "viewer")]

use bevy::prelude::*;
use contactlab::app::replay::{ModelSource, ReplayPlayback, ReplaySettings, ReplayState, TossSource};
use contactlab::learn::contactnets::data::{load_toss, Body};
use contactlab::learn::contactnets::eval;
use contactlab::learn::contactnets::LearnedModel;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

const DATA: &str = "../shared/data/cube_tosses";

fn app() -> App {
    common::app("scenes/box_toss.ron")
}

/// Asks for a replay with these inputs and runs frames until it has finished (bounded).
fn replay(app: &mut App, toss: TossSource, model: ModelSource) {
    {
        let mut s = app.world_mut().resource_mut::<ReplaySettings>();
        s.data_dir = PathBuf::from(DATA);
        s.toss = toss;
        s.model = model;
    }
    let before = app.world().resource::<ReplayState>().finished;
    app.world_mut().resource_mut::<ReplayState>().requested = true;
    for _ in 0..20_000 {
        app.update();
        let st = app.world().resource::<ReplayState>();
        if st.finished > before && !st.busy() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the replay task did not finish");
}

#[test]
fn replays_a_real_toss_with_the_true_cube_as_eval_does() {
    let mut app = app();
    replay(&mut app, TossSource::Index(7), ModelSource::Truth);
    let st = app.world().resource::<ReplayState>();
    assert_eq!(st.tosses.len(), 460, "the data folder lists its tosses");
    assert!(st.error.is_none(), "{:?}", st.error);
    let r = st.replay.as_ref().expect("a replay");
    let path = Path::new(DATA).join("toss_007.csv");
    let toss = load_toss(&path).expect("toss loads");
    assert_eq!(r.toss.name, "toss_007");
    assert_eq!(r.rollout.len(), toss.frames.len(), "one rollout pose per frame of the toss");
    assert!(r.rollout.iter().all(|p| p.p.iter().all(|x| x.is_finite()) && p.q.coords.iter().all(|x| x.is_finite())));
    assert_eq!(r.rollout[0].p, toss.frames[0].p, "the rollout starts at the toss's first frame");

    // The same numbers as `contactnets eval`, computed independently from the files.
    let body = Body::load(&Path::new(DATA).join("params.json")).expect("params load");
    let truth = LearnedModel::truth(&body);
    let expected = eval::toss_metrics(&truth, &toss);
    assert_eq!(r.metrics, expected);
    assert!(r.metrics.failure.is_none());
    assert_eq!(r.vertex_error, Some(0.0), "the true cube's vertices are the corners");

    // Playback: the clock only runs when playing and loops within the toss.
    let dur = r.duration();
    assert!((dur - (toss.frames.len() - 1) as f64 * body.dt).abs() < 1e-9);
    app.world_mut().resource_mut::<ReplayPlayback>().playing = true;
    app.world_mut().resource_mut::<ReplayPlayback>().speed = 1.0;
    for _ in 0..30 {
        app.update();
    }
    let t = app.world().resource::<ReplayPlayback>().time;
    assert!(t > 0.0 && t <= dur, "playback time {t} in (0, {dur}]");
}

#[test]
fn changing_the_toss_re_runs_the_replay() {
    let mut app = app();
    replay(&mut app, TossSource::Index(0), ModelSource::Truth);
    let first = app.world().resource::<ReplayState>().finished;
    app.world_mut().resource_mut::<ReplaySettings>().toss = TossSource::Index(1);
    for _ in 0..20_000 {
        app.update();
        let st = app.world().resource::<ReplayState>();
        if st.finished > first && !st.busy() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let r = app.world().resource::<ReplayState>().replay.as_ref().map(|r| r.toss.name.clone());
    assert_eq!(r.as_deref(), Some("toss_001"));
}

#[test]
fn a_bad_model_file_is_an_error_that_names_the_file() {
    let dir = std::env::temp_dir().join(format!("contactlab_replay_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("broken_model.json");
    std::fs::write(&bad, "{\n  \"method\": \"poly\",\n  \"mu\": \"high\"\n}\n").unwrap();
    let mut app = app();
    replay(&mut app, TossSource::Index(0), ModelSource::File(bad.clone()));
    let st = app.world().resource::<ReplayState>();
    let e = st.error.as_deref().expect("an error");
    assert!(e.contains("broken_model.json"), "the error names the file: {e}");
    assert!(st.replay.is_none());

    // A missing toss file: named too, and the previous state stays usable.
    let missing = dir.join("no_such_toss.csv");
    replay(&mut app, TossSource::File(missing), ModelSource::Truth);
    let e = app.world().resource::<ReplayState>().error.clone().expect("an error");
    assert!(e.contains("no_such_toss.csv"), "the error names the file: {e}");

    // A malformed toss: file, line and field.
    let toss = dir.join("toss_bad.csv");
    std::fs::write(
        &toss,
        "t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz\n0,0,0,1,1,0,0,0,0,0,0,0,0,0\n0.1,0,0,1,1,0,0,0,x,0,0,0,0,0\n",
    )
    .unwrap();
    replay(&mut app, TossSource::File(toss), ModelSource::Truth);
    let e = app.world().resource::<ReplayState>().error.clone().expect("an error");
    assert!(e.contains("toss_bad.csv:3") && e.contains("vx"), "file, line and field: {e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn training_in_the_background_can_be_cancelled() {
    let mut app = app();
    {
        let mut s = app.world_mut().resource_mut::<ReplaySettings>();
        s.data_dir = PathBuf::from(DATA);
        s.train_tosses = 1;
    }
    app.world_mut().resource_mut::<ReplayState>().train_requested = true;
    app.update();
    assert!(app.world().resource::<ReplayState>().training());
    app.world_mut().resource_mut::<ReplayState>().train_cancel_requested = true;
    for _ in 0..60_000 {
        app.update();
        if !app.world().resource::<ReplayState>().training() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let st = app.world().resource::<ReplayState>();
    assert!(!st.training(), "the training task stopped");
    assert!(st.trained.is_none(), "a cancelled run leaves no model");
    assert!(st.train_error.is_none(), "cancelling is not an error: {:?}", st.train_error);
}

#[test]
fn a_learned_model_file_is_replayed_with_its_vertices_against_the_true_cube() {
    // A polytope with one corner pushed out by 0.2 half widths and a different friction, written
    // as `contactnets train` writes models.
    let body = Body::load(&Path::new(DATA).join("params.json")).expect("params load");
    let mut learned = LearnedModel::truth(&body);
    learned.vertices[0][2] -= 0.2;
    learned.mu *= 0.5;
    let dir = std::env::temp_dir().join(format!("contactlab_replay_model_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("poly.json");
    learned.save(&file).unwrap();
    let mut app = app();
    replay(&mut app, TossSource::Index(3), ModelSource::File(file.clone()));
    let st = app.world().resource::<ReplayState>();
    assert!(st.error.is_none(), "{:?}", st.error);
    let r = st.replay.as_ref().expect("a replay");
    assert!((r.vertex_error.unwrap() - 0.2).abs() < 1e-12, "vertex error {:?}", r.vertex_error);
    let toss = load_toss(&Path::new(DATA).join("toss_003.csv")).unwrap();
    let loaded = contactlab::learn::contactnets::model::load(&file).unwrap();
    assert_eq!(r.metrics, eval::toss_metrics(&loaded, &toss), "the window's numbers are eval's");
    assert_ne!(r.metrics, eval::toss_metrics(&LearnedModel::truth(&body), &toss), "the file's model was used");
    std::fs::remove_dir_all(&dir).ok();
}
