//! Recordings (headless, MinimalPlugins, manual time): a run with MPC at the controls, two
//! mouse pulls and a kappa change replays to the identical final state, bit for bit; the
//! replay notices a recording whose inputs were changed; result CSVs open as replays.
#![cfg(feature = "viewer")]

use bevy::prelude::*;
use contactlab::app::control::{ControlSettings, MpcLink};
use contactlab::app::record::{self, DriverRecord, Input, Recording};
use contactlab::app::sim::{DragPull, DriverSlot, SimCommand, SimHistory, SimWorker};
use contactlab::scene::Scene;
use nalgebra::Vector3;
use std::path::Path;

mod common;
use common::{app, idle, push, run_until};

fn start_mpc(app: &mut App, kappa: f64) {
    let mut spec = app.world().resource::<ControlSettings>().mpc.clone();
    spec.kappa = kappa;
    let driver = app.world_mut().resource_mut::<MpcLink>().driver(spec).unwrap();
    push(app, SimCommand::Drive(DriverSlot::new(Box::new(driver))));
}

fn spring(target: Vector3<f64>) -> SimCommand {
    SimCommand::Drag(Some(DragPull {
        body: 1,
        point: Vector3::zeros(),
        target,
        stiffness: 2000.0,
        damping: 0.0,
        max_force: 25.0,
    }))
}

/// The live run: MPC from a settled stance, a pull to the side, kappa changed (MPC restarted
/// with it, as the Control window does), a pull forward; returns the recording and the final
/// snapshot's state.
fn live_run() -> (Recording, Vec<f64>, Vec<f64>, f64) {
    let mut app = app("scenes/quadruped_stand.ron");
    push(&mut app, SimCommand::Record(true));
    push(&mut app, SimCommand::Play);
    run_until(&mut app, 0.3);
    start_mpc(&mut app, 1e-3);
    run_until(&mut app, 0.4);
    let home = {
        let s = app.world().resource::<SimHistory>().snapshots.back().unwrap();
        Vector3::new(s.q[0], s.q[1], s.q[2])
    };
    push(&mut app, spring(home + Vector3::new(0.0, 0.1, 0.0)));
    run_until(&mut app, 0.55);
    // The mouse moves while it holds the body.
    push(&mut app, spring(home + Vector3::new(0.0, 0.14, 0.0)));
    run_until(&mut app, 0.65);
    push(&mut app, SimCommand::Drag(None));
    run_until(&mut app, 0.8);
    push(&mut app, SimCommand::StopDriving);
    start_mpc(&mut app, 1e-2);
    run_until(&mut app, 0.9);
    push(&mut app, spring(home + Vector3::new(0.1, 0.0, 0.0)));
    run_until(&mut app, 1.05);
    push(&mut app, SimCommand::Drag(None));
    run_until(&mut app, 1.3);
    idle(&mut app);
    push(&mut app, SimCommand::Record(false));
    idle(&mut app);
    let rec = app.world_mut().resource_mut::<SimWorker>().finished_recording.take().expect("a recording");
    let last = app.world().resource::<SimHistory>().snapshots.back().unwrap().clone();
    (rec, last.q.iter().copied().collect(), last.v.iter().copied().collect(), last.t)
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_recorded_run_with_two_pulls_and_a_kappa_change_replays_bit_for_bit() {
    let (rec, q, v, t) = live_run();
    let drives: Vec<f64> = rec
        .events
        .iter()
        .filter_map(|e| match &e.input {
            Input::Drive(DriverRecord::Mpc(s)) => Some(s.kappa),
            _ => None,
        })
        .collect();
    assert_eq!(drives, vec![1e-3, 1e-2], "both MPC engagements are recorded with their kappa");
    let drags = rec.events.iter().filter(|e| matches!(e.input, Input::Drag(Some(_)))).count();
    assert_eq!(drags, 3, "two pulls, the first moved once");
    assert!(rec.unreplayable.is_none());
    assert_eq!(rec.steps, (t / 0.002).round() as u64);

    let dir = std::env::temp_dir().join(format!("contactlab-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.clrec");
    rec.save(&path).unwrap();
    let loaded = Recording::load(&path).unwrap();
    assert_eq!(loaded, rec, "the file round-trips");

    let run = record::replay(&loaded, &record::plain_driver, None).unwrap();
    assert!(run.stopped.is_none(), "{:?}", run.stopped);
    assert_eq!(run.snapshots.len() as u64, rec.steps + 1);
    assert_eq!(run.checkpoints_checked, rec.checkpoints.len());
    assert!(run.checkpoints_checked >= 6, "{} checkpoints", run.checkpoints_checked);
    let end = run.snapshots.last().unwrap();
    assert_eq!(end.t.to_bits(), t.to_bits());
    assert_eq!(bits(end.q.as_slice()), bits(&q), "final configuration differs");
    assert_eq!(bits(end.v.as_slice()), bits(&v), "final velocity differs");

    // The kappa change matters, and a replay notices a recording that does not match its
    // inputs: the same run with the second MPC at the first kappa departs.
    let mut edited = loaded.clone();
    for e in edited.events.iter_mut() {
        if let Input::Drive(DriverRecord::Mpc(s)) = &mut e.input {
            s.kappa = 1e-3;
        }
    }
    let err = record::replay(&edited, &record::plain_driver, None).err().expect("the edited run departs");
    assert!(err.to_string().contains("departs from the recording at step"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_branch_and_a_reset_replay_too() {
    let mut app = app("scenes/quadruped_stand.ron");
    push(&mut app, SimCommand::Record(true));
    push(&mut app, SimCommand::Play);
    run_until(&mut app, 0.1);
    push(&mut app, SimCommand::Reset);
    push(&mut app, SimCommand::Play);
    run_until(&mut app, 0.3);
    idle(&mut app);
    push(&mut app, SimCommand::Scrub(50));
    push(
        &mut app,
        SimCommand::FirePull(contactlab::sim::Pull {
            body: 1,
            point: Vector3::zeros(),
            force: Vector3::new(0.0, 40.0, 0.0),
            start: 0.0,
            duration: 0.1,
        }),
    );
    push(&mut app, SimCommand::Play);
    let t_branch = 50.0 * 0.002;
    run_until(&mut app, t_branch + 0.3);
    idle(&mut app);
    push(&mut app, SimCommand::Record(false));
    idle(&mut app);
    let rec = app.world_mut().resource_mut::<SimWorker>().finished_recording.take().unwrap();
    assert!(rec.events.iter().any(|e| e.input == Input::Branch(50)), "{:?}", rec.events);
    let last = app.world().resource::<SimHistory>().snapshots.back().unwrap().clone();
    let run = record::replay(&rec, &record::plain_driver, None).unwrap();
    assert_eq!(run.checkpoints_checked, rec.checkpoints.len());
    assert_eq!(rec.events.first().map(|e| &e.input), Some(&Input::Reset));
    assert!(
        rec.checkpoints.iter().all(|c| c.events == rec.events.len()),
        "only checkpoints of the last branch are kept"
    );
    assert!(!rec.checkpoints.is_empty());
    let end = run.snapshots.last().unwrap();
    assert_eq!(bits(end.q.as_slice()), bits(last.q.as_slice()));
    assert_eq!(bits(end.v.as_slice()), bits(last.v.as_slice()));
}

#[test]
fn result_csvs_open_as_replays() {
    let scene = Scene::load(Path::new("scenes/cito_shift.ron")).unwrap();
    let snaps = record::load_csv(Path::new("docs/results/cito/shift/relaxed/trajectory.csv"), &scene).unwrap();
    assert!(snaps.len() > 10);
    assert!(snaps.windows(2).all(|w| w[1].t > w[0].t));
    // A file of another robot is refused with the column it lacks.
    let hopper = Scene::load(Path::new("scenes/hopper_drop.ron")).unwrap();
    let err = record::load_csv(Path::new("docs/results/cito/shift/relaxed/trajectory.csv"), &hopper).err().unwrap();
    assert!(err.to_string().contains("trajectory.csv: line 1"), "{err}");
    assert!(err.to_string().contains("no column"), "{err}");
}

/// `simulate`'s CSV and `mpc`'s trace.csv, written by the command line, open as replays whose
/// states are the run's.
#[test]
fn simulate_and_mpc_outputs_open_as_replays() {
    let exe = env!("CARGO_BIN_EXE_contactlab");
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("run.csv");
    let o = std::process::Command::new(exe)
        .args(["simulate", "scenes/quadruped_stand.ron", "--duration", "0.1", "--out"])
        .arg(&csv)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let scene = Scene::load(Path::new("scenes/quadruped_stand.ron")).unwrap();
    let snaps = record::load_csv(&csv, &scene).unwrap();
    assert_eq!(snaps.len(), 50);
    let mut sim = scene.simulation();
    for _ in 0..50 {
        sim.step();
    }
    assert_eq!(bits(snaps.last().unwrap().q.as_slice()), bits(sim.q.as_slice()), "the CSV holds the run's state");
    assert_eq!(bits(snaps.last().unwrap().v.as_slice()), bits(sim.v.as_slice()));

    let out = dir.path().join("mpc");
    let o = std::process::Command::new(exe)
        .args(["mpc", "scenes/mpc_pull.ron", "--duration", "0.1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mpc_scene = Scene::load(Path::new("scenes/mpc_pull.ron")).unwrap();
    let snaps = record::load_csv(&out.join("trace.csv"), &mpc_scene).unwrap();
    assert_eq!(snaps.len(), 50);
    assert!(snaps.iter().all(|s| s.v.iter().any(|x| *x != 0.0)), "velocities were read");
}
