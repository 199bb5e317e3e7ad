//! Rigid-body algorithms and the full contact step on the quadruped, with baselines measured in
//! the same run: nalgebra's allocating Cholesky for `M`, and the step without warm start.
//!
//! Run: `cargo bench --no-default-features --bench dynamics`.

use contactlab::dynamics::{aba, crba, rnea};
use contactlab::model::Data;
use contactlab::scene::Scene;
use criterion::{criterion_group, criterion_main, Criterion};
use nalgebra::DVector;
use std::hint::black_box;
use std::path::Path;

fn standing() -> contactlab::sim::Simulation {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).unwrap();
    let mut sim = s.simulation();
    // Settle on four feet first so the benchmark measures steady standing contact.
    for _ in 0..1000 {
        sim.step();
    }
    sim
}

fn bench(c: &mut Criterion) {
    let sim = standing();
    let model = sim.model.clone();
    let mut data = Data::new(&model);
    let (q, v) = (sim.q.clone(), sim.v.clone() + DVector::from_element(model.nv, 0.3));
    let a = DVector::from_fn(model.nv, |i, _| (i as f64 * 0.37).sin());
    let tau = DVector::from_fn(model.nv, |i, _| (i as f64 * 0.91).cos());

    let mut g = c.benchmark_group("quadruped");
    g.bench_function("rnea", |b| {
        b.iter(|| rnea(&model, &mut data, black_box(q.as_slice()), v.as_slice(), a.as_slice()))
    });
    g.bench_function("crba", |b| b.iter(|| crba(&model, &mut data, black_box(q.as_slice()))));
    g.bench_function("aba", |b| {
        b.iter(|| aba(&model, &mut data, black_box(q.as_slice()), v.as_slice(), tau.as_slice()))
    });
    g.bench_function("baseline_crba_then_nalgebra_cholesky_solve", |b| {
        b.iter(|| {
            crba(&model, &mut data, black_box(q.as_slice()));
            let chol = data.mass_matrix.clone().cholesky().unwrap();
            black_box(chol.solve(&tau))
        })
    });

    let mut stepping = sim.clone();
    g.bench_function("step_standing_4_contacts", |b| {
        b.iter(|| {
            // Re-step from the same settled state each time so every sample sees the same problem.
            stepping.q.copy_from(&sim.q);
            stepping.v.copy_from(&sim.v);
            black_box(stepping.step())
        })
    });
    let mut cold = sim.clone();
    g.bench_function("baseline_step_standing_cold_start", |b| {
        b.iter(|| {
            cold.q.copy_from(&sim.q);
            cold.v.copy_from(&sim.v);
            cold.ws.reset_warm_start();
            black_box(cold.step())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
