//! One DDP iteration over a 30-knot quadruped horizon with contact-implicit dynamics (10 ms
//! knots, four feet on the ground, exact sensitivity), from a converged-ish start: derivatives
//! at every knot, the backward pass and a full-step forward pass; then the same with the knots
//! differentiated on two threads.
//!
//! Run: `cargo bench --no-default-features --bench ddp`.

use contactlab::diff::Sensitivity;
use contactlab::ocp::{ActionModel, ContactAction, Ddp, PoseCost, Settings, ShootingProblem};
use contactlab::scene::Scene;
use criterion::{criterion_group, criterion_main, Criterion};
use nalgebra::{DVector, Matrix3, Vector3};
use std::path::Path;
use std::sync::Arc;

fn bench(c: &mut Criterion) {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).unwrap();
    let mut sim = s.simulation();
    for _ in 0..500 {
        sim.step();
    }
    sim.settings.dt = 0.01;
    let m = sim.model.clone();
    let (nq, nv) = (m.nq, m.nv);
    let cost = PoseCost {
        base_position: Vector3::new(sim.q[0], sim.q[1], sim.q[2] + 0.04),
        base_rotation: Matrix3::identity(),
        w_position: Vector3::new(100.0, 100.0, 400.0),
        w_orientation: Vector3::new(50.0, 50.0, 20.0),
        posture: sim.q.clone(),
        w_posture: 0.02,
        w_joint_velocity: 0.1,
        w_base_velocity: 1.0,
        w_control: 1e-3,
        w_joint_range: 0.0,
        joint_range_margin: 0.05,
    };
    let knots = 30;
    let running: Arc<dyn ActionModel> = Arc::new(ContactAction::new(
        m.clone(),
        sim.terrain.clone(),
        sim.settings,
        Sensitivity::Exact,
        cost.clone(),
        None,
    ));
    let terminal = Arc::new(ContactAction::new(
        m.clone(),
        sim.terrain.clone(),
        sim.settings,
        Sensitivity::Exact,
        cost,
        Some(200.0),
    ));
    let mut x0 = DVector::zeros(nq + nv);
    x0.rows_mut(0, nq).copy_from(&sim.q);
    x0.rows_mut(nq, nv).copy_from(&sim.v);
    let mut u = DVector::zeros(m.nu);
    let mut damping = DVector::zeros(m.nu);
    sim.controller.compute(&m, sim.q.as_slice(), sim.v.as_slice(), 0.01, &mut u, &mut damping);
    let guess = vec![u; knots];
    let problem =
        || ShootingProblem { x0: x0.clone(), running: vec![running.clone(); knots], terminal: terminal.clone() };
    let mut ddp = Ddp::new(problem(), Settings { max_iterations: 1, ..Default::default() });
    c.bench_function("ddp_iteration_quadruped_30_knots", |b| {
        b.iter(|| {
            let info = ddp.solve(Some(&guess), None);
            std::hint::black_box(info.cost)
        })
    });
    // The same iteration with the knots differentiated on two threads (`Settings::threads`;
    // the rollouts and the backward pass stay sequential).
    let mut ddp = Ddp::new(problem(), Settings { max_iterations: 1, threads: 2, ..Default::default() });
    c.bench_function("ddp_iteration_quadruped_30_knots_2_threads", |b| {
        b.iter(|| {
            let info = ddp.solve(Some(&guess), None);
            std::hint::black_box(info.cost)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
