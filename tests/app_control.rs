//! Headless tests of the Control window's machinery (MinimalPlugins, manual time): MPC as the
//! simulation's driver rejecting the mouse spring and moving to a new target, the scene's
//! controller back on stop, and a CITO solve on a background task from the state on screen.
#![cfg(feature = "viewer")]

use bevy::prelude::*;
use contactlab::app::control::{displayed_simulation, CitoState, ControlSettings, MpcLink, MPC_DRIVER};
use contactlab::app::sim::{DragPull, DriverSlot, SimCommand, SimHistory, SimWorker};
use contactlab::app::CurrentScene;
use contactlab::sim::Controller;
use nalgebra::Vector3;
use std::time::Duration;

mod common;
use common::{app, idle, push, run_until};

fn base(app: &App) -> Vector3<f64> {
    let s = app.world().resource::<SimHistory>().snapshots.back().unwrap();
    Vector3::new(s.q[0], s.q[1], s.q[2])
}

/// Frames until the background CITO solve has finished.
fn wait_cito(app: &mut App) {
    for _ in 0..1_000_000 {
        app.update();
        if app.world().resource::<CitoState>().finished == 1 {
            return;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    panic!("the CITO solve did not finish");
}

#[test]
fn mpc_drives_rejects_the_mouse_spring_and_hands_back() {
    let mut app = app("scenes/mpc_pull.ron");
    // The scene's own 45 N pull (0.5 s to 0.8 s) is met by its PD; MPC takes over once the
    // stance has settled.
    run_until(&mut app, 2.0);
    let spec = app.world().resource::<ControlSettings>().mpc.clone();
    let driver = app.world_mut().resource_mut::<MpcLink>().driver(spec).unwrap();
    push(&mut app, SimCommand::Drive(DriverSlot::new(Box::new(driver))));
    run_until(&mut app, 2.2);
    assert_eq!(app.world().resource::<SimWorker>().driver(), Some(MPC_DRIVER));
    let link = app.world().resource::<MpcLink>().clone();
    let home = link.snapshot().home.expect("engaged").0;
    // The mouse spring is held 12 cm to the side with its force capped at 30 N, for 0.3 s (larger pulls can
    // make the one-iteration replans diverge; the driver then hands back, see the window).
    let t0 = app.world().resource::<SimHistory>().snapshots.back().unwrap().t;
    push(
        &mut app,
        SimCommand::Drag(Some(DragPull {
            body: 0,
            point: Vector3::zeros(),
            target: home + Vector3::new(0.0, 0.12, 0.0),
            stiffness: 2000.0,
            damping: 0.0,
            max_force: 30.0,
        })),
    );
    run_until(&mut app, t0 + 0.3);
    let pushed = base(&app);
    push(&mut app, SimCommand::Drag(None));
    run_until(&mut app, t0 + 2.3);
    let back = base(&app);
    assert!((pushed - home).norm() > 0.01, "the spring did not move the base: {pushed:?} from {home:?}");
    assert!((back - home).norm() < 0.02, "base {back:?} did not return to {home:?}");
    let t = link.snapshot();
    assert!(t.total_cycles >= 200, "{} replans", t.total_cycles);
    assert!(t.cycles.iter().all(|c| c.solve_ms.is_finite() && c.cost.is_finite()));
    let plan = t.plan.expect("a plan");
    assert_eq!(plan.len(), 31);
    // A new target from the window: 3 cm up.
    let (p, r) = t.target.unwrap();
    push(&mut app, SimCommand::SetTarget(p + Vector3::new(0.0, 0.0, 0.03), r));
    let t1 = app.world().resource::<SimHistory>().snapshots.back().unwrap().t;
    run_until(&mut app, t1 + 1.5);
    assert!((base(&app).z - (p.z + 0.03)).abs() < 0.01, "base z {} for target {}", base(&app).z, p.z + 0.03);
    // Stop: the scene's PD takes over again.
    push(&mut app, SimCommand::StopDriving);
    idle(&mut app);
    assert_eq!(app.world().resource::<SimWorker>().driver(), None);
    let sim = app.world().resource::<SimWorker>().idle_sim().unwrap();
    assert!(matches!(sim.controller, Controller::JointPd { .. }));
    assert!(sim.u_offset.iter().all(|&u| u == 0.0));
}

#[test]
fn cito_plans_in_the_background_from_the_state_on_screen() {
    let mut app = app("scenes/cito_raise.ron");
    run_until(&mut app, 0.6);
    idle(&mut app);
    let scene = app.world().resource::<CurrentScene>().scene.clone();
    let start = displayed_simulation(&scene, app.world().resource::<SimHistory>());
    let shown = app.world().resource::<SimHistory>().displayed().unwrap().q.clone();
    assert_eq!(start.q, shown);
    let mut spec = app.world().resource::<ControlSettings>().cito.clone();
    spec.target_offset = [0.0, 0.0, -0.03];
    spec.iterations = 15;
    app.world_mut().resource_mut::<CitoState>().start(start, spec);
    assert!(app.world().resource::<CitoState>().busy());
    // The simulation keeps running while the plan is computed.
    push(&mut app, SimCommand::Play);
    wait_cito(&mut app);
    let st = app.world().resource::<CitoState>();
    assert!(st.error.is_none(), "{:?}", st.error);
    let run = st.result.as_ref().expect("a plan");
    let its = st.progress.lock().unwrap().clone();
    // Every iteration the solver reports was streamed (it may also count rejected ones).
    assert!(
        its.len() <= run.report.info.iterations + 1,
        "{} streamed, {} reported",
        its.len(),
        run.report.info.iterations
    );
    assert!(its.len() >= 2 && its.last().unwrap().cost < its.first().unwrap().cost);
    assert_eq!(run.ghost.len(), 31);
    assert!((run.target.0.z - (shown[2] - 0.03)).abs() < 1e-12);
    assert!(run.report.pose_error_m < 0.01, "pose error {} m", run.report.pose_error_m);
    assert!(run.report.max_penetration_m < 1e-3);
    // The ghost's last base is the replayed final base.
    let last = run.report.knots.last().unwrap();
    let g = run.ghost.base.last().unwrap().0;
    assert!((g - Vector3::new(last.base[0], last.base[1], last.base[2])).norm() < 1e-9);
    let h = app.world().resource::<SimHistory>();
    assert!(h.snapshots.back().unwrap().t > 0.7, "the simulation stalled during the solve");
}

/// go1 and solo12 (from their URDFs, `scenes/*_stand.ron`) under the Control window: CITO
/// shifts the base from the state on screen, and MPC holds the stance against the mouse spring.
#[test]
fn go1_and_solo12_run_cito_and_mpc_from_the_control_window() {
    for file in ["scenes/go1_stand.ron", "scenes/solo12_stand.ron"] {
        let mut app = app(file);
        run_until(&mut app, 0.5);
        idle(&mut app);
        let scene = app.world().resource::<CurrentScene>().scene.clone();
        let start = displayed_simulation(&scene, app.world().resource::<SimHistory>());
        let spec = app.world().resource::<ControlSettings>().cito.clone();
        app.world_mut().resource_mut::<CitoState>().start(start, spec);
        wait_cito(&mut app);
        let st = app.world().resource::<CitoState>();
        assert!(st.error.is_none(), "{file}: {:?}", st.error);
        let run = st.result.as_ref().expect("a plan");
        assert!(run.report.pose_error_m < 0.01, "{file}: pose error {} m", run.report.pose_error_m);

        let spec = app.world().resource::<ControlSettings>().mpc.clone();
        let driver = app.world_mut().resource_mut::<MpcLink>().driver(spec).unwrap();
        push(&mut app, SimCommand::Drive(DriverSlot::new(Box::new(driver))));
        push(&mut app, SimCommand::Play);
        run_until(&mut app, 0.7);
        assert_eq!(app.world().resource::<SimWorker>().driver(), Some(MPC_DRIVER), "{file}");
        let home = base(&app);
        let weight = scene.model.total_mass() * 9.81;
        push(
            &mut app,
            SimCommand::Drag(Some(DragPull {
                body: 1,
                point: Vector3::zeros(),
                target: home + Vector3::new(0.0, 0.1, 0.0),
                stiffness: 20.0 * weight,
                damping: 0.0,
                max_force: 0.15 * weight,
            })),
        );
        run_until(&mut app, 0.9);
        push(&mut app, SimCommand::Drag(None));
        run_until(&mut app, 1.8);
        let end = base(&app);
        assert!((end - home).norm() < 0.03, "{file}: base {end:?} from {home:?}");
        assert!(end.z > 0.8 * home.z, "{file}: fell to {}", end.z);
    }
}

/// `--open control --start` on a step scene runs MPC as `contactlab mpc` does: `settle` seconds
/// under the joint PD without the scene's pull, then MPC takes over and the pull (100 N
/// sideways, 0.5 s later) fires from that moment, so MPC meets it rather than the PD it
/// replaced. Before, the app waited for the scheduled pull to pass under the PD, which fell.
#[test]
fn start_engages_mpc_before_the_scenes_pull_fires() {
    use contactlab::app::{ToolWindows, ViewerOptions};
    let mut app = app("scenes/mpc_step_fast.ron");
    let pull = app.world().resource::<CurrentScene>().scene.pulls[0];
    assert!(pull.force.y >= 100.0 && pull.start > 0.0);
    app.insert_resource(ViewerOptions { open: vec!["control".into()], start: true, ..Default::default() });
    app.world_mut().resource_mut::<ToolWindows>().control = true;
    let settle = app.world().resource::<ControlSettings>().mpc.settle;
    assert!(pull.start + pull.duration < settle, "the old start would have let the PD meet the pull");
    // Past the scene's own pull time: nothing pushed the stance.
    run_until(&mut app, settle);
    let y0 = base(&app).y;
    assert!(y0.abs() < 0.01, "the base moved {y0} m sideways before MPC took over");
    run_until(&mut app, settle + 0.1);
    assert_eq!(app.world().resource::<SimWorker>().driver(), Some(MPC_DRIVER));
    // The pull fires under MPC, from its engagement.
    run_until(&mut app, settle + pull.start + pull.duration + 0.1);
    let y1 = base(&app).y;
    assert!(y1 - y0 > 0.02, "the pull did not move the base: {y0} -> {y1}");
    assert_eq!(app.world().resource::<SimWorker>().driver(), Some(MPC_DRIVER));
    assert!(app.world().resource::<MpcLink>().snapshot().total_cycles >= 50);
}
