//! How the cost grows, and what two cores buy (issue 21):
//! - against active contacts at fixed DoF: a plate (0.4 x 0.4 x 0.04 m, 2 kg, 6 DoF) resting on
//!   k contact points of its bottom face, k = 1, 4, 8, 16, 32 (a regular grid; one point under
//!   the centre for k = 1); many coplanar points make `G` rank-deficient, as a mesh contact
//!   does;
//! - against degrees of freedom: the legged family (`model::builtin::legged`) standing under a
//!   joint PD on 4, 6, 8, 10 feet, 18, 24, 30, 36 DoF;
//! - batch rollouts: 64 rollouts of 0.5 s (250 steps) of the standing quadruped under its PD,
//!   on a rayon pool of 1 and of 2 threads (throughput = 16 000 steps / time).
//!
//! Each point measures one warm-started step and the transition Jacobians with the relaxed
//! sensitivity at the same settled state. `scripts/bench-peers` turns the medians into
//! `docs/results/perf/scaling.{json,png}`.
//!
//! Run: `cargo bench --no-default-features --bench scaling`.

use contactlab::contact::Terrain;
use contactlab::diff::{transition_jacobians, Sensitivity, TransitionWorkspace};
use contactlab::model::builtin::{legged, quadruped, stance};
use contactlab::model::{neutral, ContactPoint, Model};
use contactlab::sim::{Controller, Simulation, StepSettings};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use nalgebra::{DMatrix, DVector, Vector3};
use rayon::prelude::*;
use std::hint::black_box;
use std::sync::Arc;

/// A model standing under a joint PD (thigh 0.8, calf -1.6 rad), settled for 3 s.
fn standing(model: Model) -> Simulation {
    let (q, posture) = stance(&model);
    let v = DVector::zeros(model.nv);
    let mut sim = Simulation::new(Arc::new(model), Terrain::flat(0.8), StepSettings::default(), q, v);
    sim.controller = Controller::JointPd { kp: 80.0, kd: 6.0, posture };
    for _ in 0..1500 {
        sim.step();
    }
    sim
}

/// The plate on `k` points, settled for 1 s.
fn plate(k: usize) -> Simulation {
    let size = [0.4, 0.4, 0.04];
    let mut m = contactlab::model::builtin::rigid_box(size, 2.0).expect("box");
    let (nx, ny) = match k {
        1 => (1, 1),
        4 => (2, 2),
        8 => (2, 4),
        16 => (4, 4),
        32 => (4, 8),
        _ => panic!("k = {k}"),
    };
    let at = |i: usize, n: usize, side: f64| if n == 1 { 0.0 } else { side * (i as f64 / (n - 1) as f64 - 0.5) };
    m.contact_points = (0..nx * ny)
        .map(|i| ContactPoint {
            name: format!("p{i}"),
            body: 0,
            position: Vector3::new(at(i % nx, nx, 0.36), at(i / nx, ny, 0.36), -0.02),
            radius: 0.0,
        })
        .collect();
    let mut q = neutral(&m);
    q[2] = 0.02;
    let v = DVector::zeros(m.nv);
    let mut sim = Simulation::new(Arc::new(m), Terrain::flat(0.8), StepSettings::default(), q, v);
    for _ in 0..500 {
        sim.step();
    }
    sim
}

/// One warm step and the relaxed Jacobians at `sim`'s state, as `group/{step,jacobians_relaxed}/x`.
fn measure(c: &mut Criterion, group: &str, x: usize, sim: &Simulation) {
    let model = sim.model.clone();
    let (nv, nu) = (model.nv, model.nu);
    let mut g = c.benchmark_group(group);
    let mut stepping = sim.clone();
    g.bench_with_input(BenchmarkId::new("step", x), &x, |b, _| {
        b.iter(|| {
            stepping.q.copy_from(&sim.q);
            stepping.v.copy_from(&sim.v);
            black_box(stepping.step())
        })
    });
    let tau_ext = DVector::zeros(nv);
    let (mut a, mut bm) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut ws = sim.ws.clone();
    let mut tw = TransitionWorkspace::new(&model);
    let x_in = (sim.q.as_slice(), sim.v.as_slice(), sim.u.as_slice(), tau_ext.as_slice());
    g.bench_with_input(BenchmarkId::new("jacobians_relaxed", x), &x, |b, _| {
        b.iter(|| {
            black_box(transition_jacobians(
                &model,
                &sim.terrain,
                &sim.settings,
                &mut ws,
                &mut tw,
                x_in,
                Sensitivity::Relaxed { kappa: 1e-4, delta: 1e-3 },
                &mut a,
                &mut bm,
            ))
        })
    });
    g.finish();
}

/// 64 rollouts of 250 steps (0.5 s) of the standing quadruped under its PD, each from the
/// settled state with a small push (`v_x += 1e-3 i`); returns the steps taken.
fn batch(sim: &Simulation) -> usize {
    (0..64)
        .into_par_iter()
        .map(|i| {
            let mut s = sim.clone();
            s.v[0] += 1e-3 * i as f64;
            (0..250).take_while(|_| s.step().status.advanced()).count()
        })
        .sum()
}

fn bench(c: &mut Criterion) {
    for k in [1, 4, 8, 16, 32] {
        measure(c, "scaling_contacts", k, &plate(k));
    }
    for pairs in [2, 3, 4, 5] {
        let sim = standing(legged(pairs).expect("legged").model);
        measure(c, "scaling_dof", sim.model.nv, &sim);
    }
    let quad = standing(quadruped().expect("quadruped").model);
    let mut g = c.benchmark_group("batch_rollouts_64x250");
    g.sample_size(20);
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
        g.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, _| {
            b.iter(|| assert_eq!(pool.install(|| batch(&quad)), 64 * 250))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
