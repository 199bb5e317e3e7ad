//! Headless tests of the Policy window's plugin (MinimalPlugins, manual time): the shipped
//! policy drives the standing quadruped through a sideways mouse-spring pull and follows a
//! commanded height; stopping gives the controls back to the scene's PD; a policy that does
//! not fit the scene is refused with a message; training runs on its own thread while frames
//! go on, logs iterations, can be run and saved, and can be cancelled.
#![cfg(feature = "viewer")]

use bevy::prelude::*;
use contactlab::app::policy::{Learner, PolicyRequest, PolicyState, TrainSettings, DEFAULT_POLICY};
use contactlab::app::sim::{DragPull, SimCommand, SimCommands, SimHistory, SimWorker};
use contactlab::app::CurrentScene;
use contactlab::learn::{Command, Policy, TrainStatus};
use contactlab::sim::snapshot::Snapshot;
use nalgebra::Vector3;
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod common;
use common::{app, push};

fn request(app: &mut App, r: PolicyRequest) {
    app.world_mut().resource_mut::<PolicyState>().request(r);
}

fn state(app: &App) -> &PolicyState {
    app.world().resource::<PolicyState>()
}

fn worker(app: &App) -> &SimWorker {
    app.world().resource::<SimWorker>()
}

/// Runs frames until `done` holds (bounded by `seconds` of wall time).
fn wait_for(app: &mut App, what: &str, seconds: f64, done: impl Fn(&App) -> bool) {
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        app.update();
        if done(app) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting for {what}");
}

/// Runs frames until the simulation is idle and nothing is queued or loading.
fn settle(app: &mut App) {
    wait_for(app, "the app to settle", 120.0, |a| {
        !worker(a).busy()
            && a.world().resource::<SimCommands>().0.is_empty()
            && state(a).requests.is_empty()
            && !state(a).loading()
    });
}

/// Pauses, loads the shipped policy and hands it the controls.
fn drive_shipped(app: &mut App) {
    push(app, SimCommand::Pause);
    request(app, PolicyRequest::Load(PathBuf::from(DEFAULT_POLICY)));
    request(app, PolicyRequest::Run);
    settle(app);
    let s = state(app);
    let loaded = s.loaded.as_ref().expect("the shipped policy loads");
    assert!(loaded.task.is_ok(), "the shipped policy fits learn_stand: {:?}", loaded.task.as_ref().err());
    assert!(s.message.is_none(), "unexpected message: {:?}", s.message);
}

fn steps(app: &mut App, n: usize) {
    push(app, SimCommand::Step(n));
    settle(app);
}

fn last(app: &App) -> Snapshot {
    app.world().resource::<SimHistory>().snapshots.back().expect("a snapshot").clone()
}

/// Whether any contact candidate that is not a foot carries an impulse.
fn trunk_contact(app: &App, s: &Snapshot) -> bool {
    let model = &app.world().resource::<CurrentScene>().scene.model;
    s.contacts.iter().zip(&model.contact_points).any(|(c, p)| !p.name.ends_with("foot") && c.lambda.x > 1e-9)
}

#[test]
fn shipped_policy_stands_through_a_sideways_pull_and_follows_the_command() {
    let mut app = app("scenes/learn_stand.ron");
    drive_shipped(&mut app);
    // Past the scene's first push (0.5 to 0.7 s), so the spring below acts alone.
    steps(&mut app, 80);
    let name = worker(&app).driver().expect("a driver is in control").to_string();
    assert!(name.contains("policy bptt-relaxed"), "driver named `{name}`");
    assert!(state(&app).driving(Some(worker(&app))));
    // The policy, not the scene's PD, sets the joint targets.
    let scene_controller = app.world().resource::<CurrentScene>().scene.controller.clone();
    assert_ne!(worker(&app).idle_sim().unwrap().controller, scene_controller);

    // A sideways spring on the trunk (as Ctrl + drag does), 0.2 s, up to 50 N: the strongest
    // push of the task's training distribution (20 to 50 N for 0.1 to 0.2 s).
    let y0 = last(&app).q[1];
    let trunk = app.world().resource::<CurrentScene>().scene.model.body_index("trunk").unwrap();
    let p = last(&app).bodies[trunk].trans;
    let first = app.world().resource::<SimHistory>().snapshots.len();
    push(
        &mut app,
        SimCommand::Drag(Some(DragPull {
            body: trunk,
            point: Vector3::zeros(),
            target: p + Vector3::new(0.0, 0.25, 0.0),
            stiffness: 400.0,
            damping: 20.0,
            max_force: 50.0,
        })),
    );
    steps(&mut app, 20);
    let pushed = last(&app).q[1] - y0;
    assert!(pushed > 0.01, "the pull moved the trunk only {pushed} m sideways");
    push(&mut app, SimCommand::Drag(None));
    // 1.5 s more: recovery, and the scene's own pushes at 1.5 and 2.5 s.
    steps(&mut app, 150);
    let h = app.world().resource::<SimHistory>();
    let after: Vec<&Snapshot> = h.snapshots.range(first..).collect();
    assert!(after.len() >= 170);
    for s in &after {
        assert!(s.q[2] > 0.22, "trunk at {} m at t = {:.2} s: fell", s.q[2], s.t);
        assert!(!trunk_contact(&app, s), "trunk or leg touched the ground at t = {:.2} s", s.t);
    }
    let tel = state(&app).telemetry.lock().unwrap().clone();
    let s = tel.samples.back().expect("the driver reports telemetry");
    assert!((s.height - s.target_height).abs() < 0.02, "height {} against {}", s.height, s.target_height);
    let r = tel.recent_return().expect("a return over the last episode");
    assert!(r.is_finite() && r < 0.0);

    // The sliders' command reaches the driver: 3 cm up.
    let before = last(&app).q[2];
    state(&app).set_command(Command { height: 0.03, ..Command::default() });
    steps(&mut app, 100);
    let tel = state(&app).telemetry.lock().unwrap().clone();
    let s = tel.samples.back().unwrap();
    let rise = s.height - before;
    assert!(rise > 0.02, "commanded +3 cm, rose {rise} m");
    assert!((s.height - s.target_height).abs() < 0.01, "height {} against {}", s.height, s.target_height);
}

#[test]
fn stop_gives_the_controls_back_to_the_scene_controller() {
    let mut app = app("scenes/learn_stand.ron");
    drive_shipped(&mut app);
    steps(&mut app, 20);
    assert!(worker(&app).driver().is_some());
    request(&mut app, PolicyRequest::Stop);
    settle(&mut app);
    assert_eq!(worker(&app).driver(), None);
    assert!(!state(&app).driving(Some(worker(&app))));
    let scene_controller = app.world().resource::<CurrentScene>().scene.controller.clone();
    assert_eq!(worker(&app).idle_sim().unwrap().controller, scene_controller);
    // The telemetry stops with the driver.
    let n = state(&app).telemetry.lock().unwrap().samples.len();
    steps(&mut app, 10);
    assert_eq!(state(&app).telemetry.lock().unwrap().samples.len(), n);
    // A reset drops the driver too, and the window notices.
    request(&mut app, PolicyRequest::Run);
    settle(&mut app);
    steps(&mut app, 2);
    assert!(state(&app).driving(Some(worker(&app))));
    push(&mut app, SimCommand::Reset);
    settle(&mut app);
    assert!(!state(&app).driving(Some(worker(&app))));
}

#[test]
fn policies_that_do_not_fit_the_scene_are_refused_with_a_reason() {
    // The stand policy on the walk scene: the observation sizes differ (34 against 41).
    let mut app = app("scenes/learn_walk.ron");
    drive_shipped_expecting_refusal(&mut app, &["stand", "walk", "34", "41"]);
    // A scene without a learning task.
    let mut app = self::app("scenes/quadruped_stand.ron");
    drive_shipped_expecting_refusal(&mut app, &["learn"]);
    // A file that is not there.
    request(&mut app, PolicyRequest::Load(PathBuf::from("no/such/policy.json")));
    settle(&mut app);
    let m = state(&app).message.clone().unwrap_or_default();
    assert!(m.contains("no/such/policy.json"), "message: {m}");
}

fn drive_shipped_expecting_refusal(app: &mut App, words: &[&str]) {
    push(app, SimCommand::Pause);
    request(app, PolicyRequest::Load(PathBuf::from(DEFAULT_POLICY)));
    request(app, PolicyRequest::Run);
    settle(app);
    steps(app, 5);
    assert_eq!(worker(app).driver(), None, "a policy that does not fit must not drive");
    let m = state(app).message.clone().unwrap_or_default();
    for w in words {
        assert!(m.contains(w), "the message should mention `{w}`: {m}");
    }
}

#[test]
fn training_runs_in_the_background_and_can_be_run_saved_and_cancelled() {
    let mut app = app("scenes/learn_stand.ron");
    push(&mut app, SimCommand::Pause);
    settle(&mut app);
    // One BPTT iteration: the smallest budget.
    let settings = TrainSettings { learner: Learner::BpttRelaxed, seed: 3, steps: 1 };
    request(&mut app, PolicyRequest::Train(settings));
    let mut slowest = Duration::ZERO;
    let start = Instant::now();
    while state(&app).trainings == 0 {
        assert!(start.elapsed().as_secs() < 300, "training did not finish");
        let t = Instant::now();
        app.update();
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(slowest < Duration::from_millis(500), "a frame took {slowest:?} while training");
    let s = state(&app);
    assert!(s.message.is_none(), "{:?}", s.message);
    let t = s.trained.as_ref().expect("a trained policy");
    assert_eq!(t.result.status, TrainStatus::Finished);
    assert_eq!(t.result.policy.algorithm, "bptt-relaxed");
    let logs = &t.result.logs;
    assert_eq!(logs.len(), 2, "the initial evaluation and one iteration");
    assert_eq!(logs[1].iteration, 1);
    assert!(logs[1].sim_steps > 0 && logs.iter().all(|l| l.eval_return.is_finite()));
    let curve = s.curve().unwrap();
    assert!(curve.target_return.is_some_and(|r| r.is_finite() && r < 0.0));

    // Run it, then save it and read it back.
    request(&mut app, PolicyRequest::RunTrained);
    settle(&mut app);
    steps(&mut app, 5);
    let name = worker(&app).driver().unwrap_or_default().to_string();
    assert!(name.contains("trained here"), "driver `{name}`");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trained.json");
    request(&mut app, PolicyRequest::Save(path.clone()));
    settle(&mut app);
    let saved = Policy::load(&path).expect("the saved policy loads");
    assert_eq!(saved.mlp, state(&app).trained.as_ref().unwrap().result.policy.mlp);
    assert!(saved.info.get("final_return").is_some());

    // A long run, cancelled after its first iteration.
    let settings = TrainSettings { learner: Learner::BpttExact, seed: 0, steps: 10_000_000 };
    request(&mut app, PolicyRequest::Train(settings));
    wait_for(&mut app, "the first iteration", 300.0, |a| {
        state(a).training.as_ref().is_some_and(|t| t.progress.lock().unwrap().logs.len() >= 2)
    });
    request(&mut app, PolicyRequest::CancelTraining);
    wait_for(&mut app, "the cancelled run to stop", 120.0, |a| state(a).trainings == 2);
    let t = state(&app).trained.as_ref().expect("the cancelled run's policy");
    assert_eq!(t.result.status, TrainStatus::Cancelled);
    assert!(t.result.sim_steps < 10_000_000 / 10, "cancelled after {} steps", t.result.sim_steps);
    assert_eq!(t.result.policy.algorithm, "bptt-exact");
}
