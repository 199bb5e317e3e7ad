//! Forward contact solver, k = 4 standing-like problem: `G = J M^-1 J^T` from a random `12 x 18`
//! `J` and a random SPD `18 x 18` `M`, `b` planted so that every foot sticks.

use contactlab::contact::solver::{ContactSolver, Settings, Status};
use criterion::{criterion_group, criterion_main, Criterion};
use nalgebra::{DMatrix, DVector};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::hint::black_box;

fn standing_problem() -> (DMatrix<f64>, Vec<f64>, Vec<f64>) {
    let mut r = ChaCha8Rng::seed_from_u64(7);
    let mut rand_mat = |rows, cols| DMatrix::from_fn(rows, cols, |_, _| r.random_range(-1.0..1.0));
    let j = rand_mat(12, 18);
    let a = rand_mat(18, 18);
    let m = &a * a.transpose() / 18.0 + DMatrix::identity(18, 18) * 0.2;
    let g = &j * m.try_inverse().expect("SPD") * j.transpose();
    // Sticking feet: impulses inside the cone, zero contact velocity, b = -G lambda.
    let lambda =
        DVector::from_vec(vec![0.03, 0.004, -0.002, 0.025, -0.003, 0.001, 0.035, 0.0, 0.005, 0.028, 0.002, 0.002]);
    let b = -(&g * lambda);
    (g, b.as_slice().to_vec(), vec![0.8; 4])
}

fn bench(c: &mut Criterion) {
    let (g, b, mu) = standing_problem();
    let settings = Settings::default();
    let mut solver = ContactSolver::new(4);
    let mut lambda = vec![0.0; 12];
    let mut w = vec![0.0; 12];
    let info = solver.solve(&settings, g.as_view(), &b, &mu, None, &mut lambda, &mut w);
    assert_eq!(info.status, Status::Converged);
    let previous = lambda.clone();
    // The next step sees a slightly different free velocity.
    let b2: Vec<f64> = b.iter().enumerate().map(|(i, x)| x + 1e-4 * ((i % 3) as f64 - 1.0)).collect();
    let warm = solver.solve(&settings, g.as_view(), &b2, &mu, Some(&previous), &mut lambda, &mut w);
    let cold = solver.solve(&settings, g.as_view(), &b2, &mu, None, &mut lambda, &mut w);
    println!("iterations: warm {} cold {}", warm.iterations, cold.iterations);

    let mut group = c.benchmark_group("contact_solver_k4");
    group.bench_function("warm_start", |bench| {
        bench.iter(|| {
            solver.solve(&settings, black_box(g.as_view()), black_box(&b2), &mu, Some(&previous), &mut lambda, &mut w)
        })
    });
    group.bench_function("cold_start", |bench| {
        bench.iter(|| solver.solve(&settings, black_box(g.as_view()), black_box(&b2), &mu, None, &mut lambda, &mut w))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
