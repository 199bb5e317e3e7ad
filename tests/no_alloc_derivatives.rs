//! The derivative algorithms allocate nothing once `Data` exists (STYLE habit 1).

use contactlab::dynamics::{
    aba_derivatives, forward_kinematics, jt_force_derivative, point_velocity_derivative, rnea_derivatives_with_forces,
    PointForce,
};
use contactlab::model::{builtin, neutral, Data};
use nalgebra::{DMatrix, DVector, Vector3};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

struct Counting;
static COUNT: AtomicUsize = AtomicUsize::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
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

#[test]
fn derivatives_allocate_nothing() {
    let model = builtin::quadruped().unwrap().model;
    let mut data = Data::new(&model);
    let q = neutral(&model);
    let v = DVector::from_fn(model.nv, |i, _| (i as f64 * 0.7).sin());
    let a = DVector::from_fn(model.nv, |i, _| (i as f64 * 0.3).cos());
    let mut out3 = DMatrix::zeros(3, model.nv);
    let mut outn = DMatrix::zeros(model.nv, model.nv);
    let body = model.nbodies() - 1;
    let forces = [PointForce { body, point: Vector3::new(0.1, 0.0, -0.3), force: Vector3::new(1.0, 2.0, 30.0) }];

    let p = Vector3::new(0.1, 0.0, -0.3);
    let mut count = |name: &str, f: &mut dyn FnMut(&mut Data)| {
        ARMED.store(true, Ordering::SeqCst);
        f(&mut data);
        ARMED.store(false, Ordering::SeqCst);
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
