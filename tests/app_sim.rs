//! Headless tests of the app's simulation and sweep plugins (MinimalPlugins, manual time):
//! stepping at real time, pause, single steps, reset, history scrub and branching, pulls from
//! the panel and the mouse spring, and cancelling background work.
#![cfg(feature = "viewer")]

use bevy::prelude::*;
use contactlab::app::sim::{DragPull, SimCommand, SimCommands, SimControl, SimHistory, SimWorker};
use contactlab::app::sweep::{SweepSetup, SweepState};
use contactlab::app::CurrentScene;
use contactlab::sim::Pull;
use nalgebra::Vector3;
use std::time::Duration;

mod common;
use common::{app, push, FRAME};

/// Runs frames until the step task is idle with no commands queued (bounded).
fn settle(app: &mut App) {
    for _ in 0..10_000 {
        app.update();
        let idle = !app.world().resource::<SimWorker>().busy();
        let queued = !app.world().resource::<SimCommands>().0.is_empty();
        if idle && !queued {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the simulation task did not finish");
}

fn pause(app: &mut App) {
    push(app, SimCommand::Pause);
    settle(app);
}

fn history(app: &App) -> &SimHistory {
    app.world().resource::<SimHistory>()
}

#[test]
fn plays_at_real_time_and_the_quadruped_stands() {
    let mut app = app("scenes/quadruped_stand.ron");
    let frames = 120;
    for _ in 0..frames {
        app.update();
        // Give the background task a moment, as a real frame would.
        std::thread::sleep(Duration::from_micros(300));
    }
    pause(&mut app);
    let h = history(&app);
    let last = h.snapshots.back().unwrap();
    let dt = last.dt;
    // Every frame owes FRAME of simulated time; steps are whole, and at most one frame's worth
    // can be in flight or dropped when a batch was still running.
    let expected = frames as f64 * FRAME;
    assert!(last.t <= expected + dt, "simulated {} s in {expected} s", last.t);
    assert!(last.t > 0.5 * expected, "simulated only {} s of {expected} s", last.t);
    assert_eq!(h.snapshots.len() as f64, (last.t / dt).round() + 1.0);
    assert!(last.is_finite());
    let height = last.q[2];
    assert!(height > 0.25, "trunk at {height} m: the quadruped should be standing");
    assert!(h.snapshots.iter().all(|s| s.status.advanced()));
}

#[test]
fn pause_single_step_and_reset() {
    let mut app = app("scenes/quadruped_stand.ron");
    pause(&mut app);
    let n0 = history(&app).snapshots.len();
    let t0 = history(&app).snapshots.back().unwrap().t;
    for _ in 0..30 {
        app.update();
    }
    settle(&mut app);
    assert_eq!(history(&app).snapshots.len(), n0, "paused, yet it stepped");
    push(&mut app, SimCommand::Step(5));
    settle(&mut app);
    let h = history(&app);
    assert_eq!(h.snapshots.len(), n0 + 5);
    let dt = h.snapshots.back().unwrap().dt;
    assert!((h.snapshots.back().unwrap().t - (t0 + 5.0 * dt)).abs() < 1e-12);
    assert!(!app.world().resource::<SimControl>().playing);
    push(&mut app, SimCommand::Reset);
    settle(&mut app);
    let h = history(&app);
    assert_eq!(h.snapshots.len(), 1);
    let s = h.snapshots.back().unwrap();
    assert_eq!(s.t, 0.0);
    let q0 = app.world().resource::<CurrentScene>().scene.q0.clone();
    assert_eq!(s.q, q0);
}

#[test]
fn scrub_back_and_branch_reproduces_the_trajectory() {
    let mut app = app("scenes/quadruped_stand.ron");
    pause(&mut app);
    push(&mut app, SimCommand::Step(40));
    settle(&mut app);
    let before: Vec<_> = history(&app).snapshots.iter().map(|s| (s.t, s.q.clone(), s.v.clone())).collect();
    push(&mut app, SimCommand::Scrub(10));
    settle(&mut app);
    let shown = history(&app).displayed().unwrap();
    assert_eq!(shown.t, before[10].0, "the scrubbed snapshot is on screen");
    assert_eq!(history(&app).snapshots.len(), before.len(), "scrubbing keeps the history");
    // Stepping from a scrubbed state branches: the entries after it are replaced by new steps,
    // which reproduce the old ones (same state, same warm start).
    push(&mut app, SimCommand::Step(5));
    settle(&mut app);
    let h = history(&app);
    assert_eq!(h.snapshots.len(), 16);
    assert!(h.cursor.is_none());
    for k in 11..16 {
        let s = &h.snapshots[k];
        assert!((s.t - before[k].0).abs() < 1e-12);
        let dq = (&s.q - &before[k].1).norm();
        let dv = (&s.v - &before[k].2).norm();
        assert!(dq < 1e-9 && dv < 1e-7, "step {k}: |dq| {dq:e}, |dv| {dv:e}");
    }
}

#[test]
fn fired_pull_and_mouse_spring_push_the_base() {
    let mut app = app("scenes/quadruped_stand.ron");
    pause(&mut app);
    push(&mut app, SimCommand::Step(100));
    settle(&mut app);
    let trunk = app.world().resource::<CurrentScene>().scene.model.body_index("trunk").unwrap();
    push(
        &mut app,
        SimCommand::FirePull(Pull {
            body: trunk,
            point: Vector3::zeros(),
            force: Vector3::new(0.0, 150.0, 0.0),
            start: 0.0,
            duration: 0.05,
        }),
    );
    push(&mut app, SimCommand::Step(25));
    settle(&mut app);
    let h = history(&app);
    let acted: Vec<_> = h.snapshots.iter().rev().take(25).filter(|s| !s.pulls.is_empty()).collect();
    assert_eq!(acted.len(), 25, "the pull acts for 0.05 s = 25 steps");
    assert!(acted.iter().all(|s| (s.pulls[0].force.y - 150.0).abs() < 1e-12));
    let last = h.snapshots.back().unwrap();
    // Base linear velocity is in the base frame; the trunk is nearly level, so y is world y.
    assert!(last.v[1] > 0.05, "the lateral pull should move the base sideways, v_y = {}", last.v[1]);

    // The mouse spring pulls the trunk up towards a target 10 cm above it.
    push(&mut app, SimCommand::Reset);
    push(&mut app, SimCommand::Step(100));
    settle(&mut app);
    let z0 = history(&app).snapshots.back().unwrap().bodies[trunk].trans.z;
    let target = history(&app).snapshots.back().unwrap().bodies[trunk].trans + Vector3::new(0.0, 0.0, 0.1);
    push(
        &mut app,
        SimCommand::Drag(Some(DragPull {
            body: trunk,
            point: Vector3::zeros(),
            target,
            stiffness: 3000.0,
            damping: 50.0,
            max_force: 400.0,
        })),
    );
    push(&mut app, SimCommand::Step(100));
    settle(&mut app);
    let s = history(&app).snapshots.back().unwrap();
    assert!(s.pulls.len() == 1 && s.pulls[0].force.z > 0.0, "the spring acts upwards");
    assert!(s.bodies[trunk].trans.z > z0 + 0.01, "the spring lifts the trunk");
    push(&mut app, SimCommand::Drag(None));
    push(&mut app, SimCommand::Step(1));
    settle(&mut app);
    assert!(history(&app).snapshots.back().unwrap().pulls.is_empty(), "released");
}

#[test]
fn cancelled_step_task_leaves_a_consistent_state() {
    let mut app = app("scenes/quadruped_stand.ron");
    pause(&mut app);
    let n0 = history(&app).snapshots.len();
    push(&mut app, SimCommand::Step(200_000));
    app.update();
    assert!(app.world().resource::<SimWorker>().busy(), "a long batch is running");
    push(&mut app, SimCommand::Cancel);
    settle(&mut app);
    let w = app.world().resource::<SimWorker>();
    let sim = w.idle_sim().expect("the simulation is back");
    let h = history(&app);
    let last = h.snapshots.back().unwrap();
    assert!(h.snapshots.len() < n0 + 200_000, "cancelled before the end");
    assert_eq!(sim.t, last.t, "the simulation is at the last recorded step");
    assert_eq!(sim.q, last.q);
    assert_eq!(sim.v, last.v);
    let (t_last, dt) = (last.t, last.dt);
    // And it goes on from there.
    push(&mut app, SimCommand::Step(3));
    settle(&mut app);
    assert!((history(&app).snapshots.back().unwrap().t - (t_last + 3.0 * dt)).abs() < 1e-9);
}

#[test]
fn background_sweep_finishes_and_follows_kappa_and_cancels() {
    let mut app = app("scenes/quadruped_stand.ron");
    pause(&mut app);
    {
        let mut s = app.world_mut().resource_mut::<SweepSetup>();
        s.from = 0.0;
        s.to = 0.04;
        s.points = 3;
        s.samples = 2;
        s.horizon = 0.02;
    }
    app.world_mut().resource_mut::<SweepState>().requested = true;
    let wait = |app: &mut App, finished: u64| {
        for _ in 0..200_000 {
            app.update();
            let s = app.world().resource::<SweepState>();
            assert!(s.error.is_none(), "sweep failed: {:?}", s.error);
            if s.finished >= finished && !s.busy() {
                return;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        panic!("the sweep did not finish");
    };
    wait(&mut app, 1);
    let (s1, r1) = app.world().resource::<SweepState>().result.clone().unwrap();
    assert_eq!(r1.points.len(), 3);
    assert!(r1.points.iter().all(|p| p.f.is_finite() && p.smoothed.is_finite()));
    // Moving kappa re-runs the sweep by itself.
    app.world_mut().resource_mut::<SweepSetup>().kappa = s1.kappa * 0.5;
    wait(&mut app, 2);
    let (s2, _) = app.world().resource::<SweepState>().result.clone().unwrap();
    assert_eq!(s2.kappa, s1.kappa * 0.5);
    // A cancelled sweep keeps the last result and reports no error.
    app.world_mut().resource_mut::<SweepState>().requested = true;
    app.update();
    assert!(app.world().resource::<SweepState>().busy());
    app.world_mut().resource_mut::<SweepState>().cancel_requested = true;
    for _ in 0..100_000 {
        app.update();
        if !app.world().resource::<SweepState>().busy() {
            break;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let s = app.world().resource::<SweepState>();
    assert!(!s.busy() && s.error.is_none() && s.finished == 2);
    assert_eq!(s.result.as_ref().unwrap().0.kappa, s1.kappa * 0.5);
}
