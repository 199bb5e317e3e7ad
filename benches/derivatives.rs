//! Analytical derivatives of the rigid-body algorithms on the quadruped (mirrors
//! `src/dynamics/{rnea,rnea_derivatives,aba_derivatives}.rs`), with the baseline they replace
//! measured in the same run: central finite differences of `rnea` through `integrate`
//! (`4 nv` RNEA calls for `d tau / d q` and `d tau / d v`), preallocated.
//!
//! Run: `cargo bench --no-default-features --bench derivatives`.

use contactlab::dynamics::{aba_derivatives, rnea, rnea_derivatives};
use contactlab::model::{builtin, integrate, neutral, normalize, Data, Model};
use criterion::{criterion_group, criterion_main, Criterion};
use nalgebra::{DMatrix, DVector};
use std::hint::black_box;

/// Central differences of `rnea` in `q` (through `integrate`) and `v`, into `dq` and `dv`.
fn fd_rnea(
    model: &Model,
    data: &mut Data,
    q: &DVector<f64>,
    v: &DVector<f64>,
    a: &DVector<f64>,
    work: &mut (DVector<f64>, DVector<f64>, DVector<f64>),
    dq: &mut DMatrix<f64>,
    dv: &mut DMatrix<f64>,
) {
    let eps = 1e-6;
    let (qe, ve, step) = work;
    for j in 0..model.nv {
        step.fill(0.0);
        for (sign, scale) in [(1.0, 0.5 / eps), (-1.0, -0.5 / eps)] {
            step[j] = sign * eps;
            integrate(model, q.as_slice(), step.as_slice(), qe.as_mut_slice());
            rnea(model, data, qe.as_slice(), v.as_slice(), a.as_slice());
            dq.column_mut(j).axpy(scale, &data.tau, if sign > 0.0 { 0.0 } else { 1.0 });
            ve.copy_from(v);
            ve[j] += sign * eps;
            rnea(model, data, q.as_slice(), ve.as_slice(), a.as_slice());
            dv.column_mut(j).axpy(scale, &data.tau, if sign > 0.0 { 0.0 } else { 1.0 });
        }
    }
}

fn bench(c: &mut Criterion) {
    let model = builtin::quadruped().unwrap().model;
    let mut data = Data::new(&model);
    let nv = model.nv;
    // A generic state: tilted base, bent legs, every velocity non-zero.
    let mut q = neutral(&model);
    for i in 0..model.nq {
        q[i] += 0.3 * (i as f64 * 1.3).sin();
    }
    normalize(&model, q.as_mut_slice());
    let v = DVector::from_fn(nv, |i, _| (i as f64 * 0.37).sin());
    let a = DVector::from_fn(nv, |i, _| (i as f64 * 0.91).cos());
    let tau = DVector::from_fn(nv, |i, _| 2.0 * (i as f64 * 0.53).cos());

    let mut g = c.benchmark_group("quadruped_derivatives");
    g.bench_function("rnea", |b| {
        b.iter(|| rnea(&model, &mut data, black_box(q.as_slice()), v.as_slice(), a.as_slice()))
    });
    g.bench_function("rnea_derivatives", |b| {
        b.iter(|| rnea_derivatives(&model, &mut data, black_box(q.as_slice()), v.as_slice(), a.as_slice()))
    });
    g.bench_function("aba_derivatives", |b| {
        b.iter(|| aba_derivatives(&model, &mut data, black_box(q.as_slice()), v.as_slice(), tau.as_slice()))
    });
    let mut work = (q.clone(), v.clone(), DVector::zeros(nv));
    let (mut dq, mut dv) = (DMatrix::zeros(nv, nv), DMatrix::zeros(nv, nv));
    g.bench_function("baseline_fd_rnea_central", |b| {
        b.iter(|| fd_rnea(&model, &mut data, black_box(&q), &v, &a, &mut work, &mut dq, &mut dv))
    });
    g.finish();

    // Keep the baseline honest: it computes what the analytical version computes.
    rnea_derivatives(&model, &mut data, q.as_slice(), v.as_slice(), a.as_slice());
    let err = (&dq - &data.dtau_dq).norm() / data.dtau_dq.norm() + (&dv - &data.dtau_dv).norm() / data.dtau_dv.norm();
    assert!(err < 1e-6, "finite-difference baseline disagrees with rnea_derivatives: {err:e}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
