//! Transition Jacobians of the quadruped standing on four feet: the analytic ones with each
//! contact sensitivity against our own central-difference reference, in the same run.
//!
//! Run: `cargo bench --no-default-features --bench transition`.

use contactlab::diff::transition::{transition_jacobians, Sensitivity, TransitionWorkspace};
use contactlab::diff::{fd_transition, FdWorkspace};
use contactlab::scene::Scene;
use criterion::{criterion_group, criterion_main, Criterion};
use nalgebra::{DMatrix, DVector};
use std::hint::black_box;
use std::path::Path;

fn bench(c: &mut Criterion) {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).unwrap();
    let mut sim = s.simulation();
    for _ in 0..1000 {
        sim.step();
    }
    let model = sim.model.clone();
    let (nv, nu) = (model.nv, model.nu);
    let u = sim.u.clone();
    let tau_ext = DVector::zeros(nv);
    let (q, v) = (sim.q.clone(), sim.v.clone());
    let x = (q.as_slice(), v.as_slice(), u.as_slice(), tau_ext.as_slice());
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut g = c.benchmark_group("quadruped_transition");
    let mut ws = sim.ws.clone();
    let mut tw = TransitionWorkspace::new(&model);
    for (name, sensitivity) in [
        ("analytic_exact", Sensitivity::Exact),
        ("analytic_signorini", Sensitivity::SignoriniRelaxed { kappa: 1e-6 }),
        ("analytic_relaxed", Sensitivity::Relaxed { kappa: 1e-6, delta: 1e-3 }),
    ] {
        g.bench_function(name, |bch| {
            bch.iter(|| {
                black_box(transition_jacobians(
                    &model,
                    &sim.terrain,
                    &sim.settings,
                    &mut ws,
                    &mut tw,
                    x,
                    sensitivity,
                    &mut a,
                    &mut b,
                ))
            })
        });
    }
    let mut ws = sim.ws.clone();
    let mut fd = FdWorkspace::new(&model);
    g.bench_function("baseline_fd_transition", |bch| {
        bch.iter(|| {
            black_box(fd_transition(&model, &sim.terrain, &sim.settings, &mut ws, &mut fd, x, 1e-6, &mut a, &mut b))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
