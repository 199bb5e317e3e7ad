//! The step, the derivative algorithms and the transition Jacobians allocate nothing once their
//! workspaces exist (STYLE habit 1). One counting allocator for the whole binary; it counts only
//! on the thread that armed it (the test harness allocates on its own threads while a test
//! runs), and the tests take a lock so that one test's set-up is not counted against another.

use contactlab::diff::{transition_jacobians, Sensitivity, TransitionStatus, TransitionWorkspace};
use contactlab::dynamics::{
    aba_derivatives, forward_kinematics, jt_force_derivative, point_velocity_derivative, rnea_derivatives_with_forces,
    PointForce,
};
use contactlab::model::{builtin, neutral, Data};
use contactlab::scene::Scene;
use nalgebra::{DMatrix, DVector, Vector3};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

struct Counting;
static COUNT: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn arm(on: bool) {
    ARMED.with(|a| a.set(on));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(|a| a.get()) {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn stepping_allocates_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for name in ["quadruped_pull.ron", "box_toss.ron", "hopper_drop.ron"] {
        let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join(name)).unwrap();
        let mut sim = s.simulation();
        sim.step();
        arm(true);
        for _ in 0..700 {
            sim.step();
        }
        arm(false);
        assert_eq!(COUNT.swap(0, Ordering::SeqCst), 0, "{name}: step allocated");
    }
}

#[test]
fn derivatives_allocate_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = builtin::quadruped().unwrap().model;
    let mut data = Data::new(&model);
    let q = neutral(&model);
    let v = DVector::from_fn(model.nv, |i, _| (i as f64 * 0.7).sin());
    let a = DVector::from_fn(model.nv, |i, _| (i as f64 * 0.3).cos());
    let mut out3 = DMatrix::zeros(3, model.nv);
    let mut outn = DMatrix::zeros(model.nv, model.nv);
    let body = model.nbodies() - 1;
    let forces = [PointForce {
        body,
        point: Vector3::new(0.1, 0.0, -0.3),
        force: Vector3::new(1.0, 2.0, 30.0),
        torque: Vector3::new(0.5, -0.2, 0.1),
    }];

    let p = Vector3::new(0.1, 0.0, -0.3);
    let mut count = |name: &str, f: &mut dyn FnMut(&mut Data)| {
        arm(true);
        f(&mut data);
        arm(false);
        assert_eq!(COUNT.swap(0, Ordering::SeqCst), 0, "{name} allocated");
    };
    count("rnea_derivatives_with_forces", &mut |d| {
        rnea_derivatives_with_forces(&model, d, q.as_slice(), v.as_slice(), a.as_slice(), &forces)
    });
    count("aba_derivatives", &mut |d| {
        assert!(aba_derivatives(&model, d, q.as_slice(), v.as_slice(), a.as_slice()));
    });
    count("forward_kinematics", &mut |d| forward_kinematics(&model, d, q.as_slice(), Some(v.as_slice())));
    count("point_velocity_derivative", &mut |d| {
        point_velocity_derivative(&model, &d.o_m_i, body, &p, v.as_slice(), &mut out3)
    });
    count("jt_force_derivative", &mut |d| jt_force_derivative(&model, &d.o_m_i, body, &p, &forces[0].force, &mut outn));
}

#[test]
fn transition_jacobians_allocate_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).unwrap();
    let mut sim = s.simulation();
    for _ in 0..600 {
        sim.step();
    }
    let model = sim.model.clone();
    let (nv, nu) = (model.nv, model.nu);
    let (u, tau_ext) = (sim.u.clone(), DVector::zeros(nv));
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut tw = TransitionWorkspace::new(&model);
    let x = (sim.q.as_slice(), sim.v.as_slice(), u.as_slice(), tau_ext.as_slice());
    for sensitivity in [
        Sensitivity::Exact,
        Sensitivity::SignoriniRelaxed { kappa: 1e-4 },
        Sensitivity::Relaxed { kappa: 1e-4, delta: 1e-3 },
    ] {
        let mut ws = sim.ws.clone();
        let run = |ws: &mut _, tw: &mut _, a: &mut _, b: &mut _| {
            transition_jacobians(&model, &sim.terrain, &sim.settings, ws, tw, x, sensitivity, a, b)
        };
        assert_eq!(run(&mut ws, &mut tw, &mut a, &mut b).status, TransitionStatus::Ok);
        arm(true);
        let info = run(&mut ws, &mut tw, &mut a, &mut b);
        arm(false);
        assert_eq!(info.status, TransitionStatus::Ok);
        assert_eq!(COUNT.swap(0, Ordering::SeqCst), 0, "transition_jacobians ({sensitivity:?}) allocated");
    }
}
