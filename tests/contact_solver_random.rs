//! The forward contact solver on 100 000 random problems (`CONTACTLAB_RANDOM_PROBLEMS` sets the
//! number): k = 1..8 contacts, mu uniform in [0.05, 2], Delassus matrices with condition numbers
//! up to 1e8 (SPD with a log-uniform spectrum, or rank-deficient `J M^-1 J^T` as a body with
//! fewer dofs than contact rows gives), and free velocities mixing approaching, separating,
//! sliding and sticking contacts. Every problem must converge (no stall: `MaxIterations` counts
//! as one), every iterate stay strictly inside the cones, and the answer satisfy Coulomb's law
//! to the solver's tolerance. The iteration counts are reported (median, p99, max).
//!
//! Ignored by default because it fails today: on this distribution 15 % of the problems end in
//! `MaxIterations` (15 032 of 100 000; median 12 iterations among the converged, p99 50, max
//! 60); no iterate leaves the cones.
//! `cargo test --release --no-default-features --test contact_solver_random -- --ignored
//! --nocapture` measures it; the solver's globalization is open work.

use contactlab::contact::solver::{ContactSolver, Settings, Status};
use nalgebra::{DMatrix, DVector};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

fn problems() -> usize {
    std::env::var("CONTACTLAB_RANDOM_PROBLEMS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

fn random_matrix(r: &mut ChaCha8Rng, rows: usize, cols: usize) -> DMatrix<f64> {
    DMatrix::from_fn(rows, cols, |_, _| r.random_range(-1.0..1.0))
}

/// A random orthogonal matrix (Q of a QR factorization).
fn orthogonal(r: &mut ChaCha8Rng, n: usize) -> DMatrix<f64> {
    random_matrix(r, n, n).qr().q()
}

/// Problem `trial`: `(G, b, mu)`.
fn problem(r: &mut ChaCha8Rng, trial: usize) -> (DMatrix<f64>, Vec<f64>, Vec<f64>) {
    let k = 1 + trial % 8;
    let n = 3 * k;
    let mu: Vec<f64> = (0..k).map(|_| r.random_range(0.05..2.0)).collect();
    let cond = 10f64.powf(r.random_range(0.0..8.0));
    let g = if trial % 3 == 2 {
        // Rank-deficient, as a light body with fewer dofs than contact rows: J M^-1 J^T.
        let nv = r.random_range(k.max(2)..=n);
        let j = random_matrix(r, n, nv);
        let q = orthogonal(r, nv);
        let spectrum = DVector::from_fn(nv, |i, _| cond.powf(-(i as f64) / (nv.max(2) - 1) as f64));
        let minv = &q * DMatrix::from_diagonal(&spectrum) * q.transpose();
        &j * minv * j.transpose()
    } else {
        let q = orthogonal(r, n);
        let spectrum = DVector::from_fn(n, |_, _| cond.powf(-r.random_range(0.0..1.0)));
        &q * DMatrix::from_diagonal(&spectrum) * q.transpose()
    };
    let g = (&g + g.transpose()) * 0.5;
    // Free velocities per contact: approaching (sticking or sliding, depending on the tangential
    // part), separating, or touching with a tangential slip.
    let mut b = vec![0.0; n];
    for i in 0..k {
        let (bn, bt) = match r.random_range(0..4) {
            0 => (-r.random_range(0.0..2.0), r.random_range(0.0..0.1)),
            1 => (-r.random_range(0.0..0.5), r.random_range(0.5..3.0)),
            2 => (r.random_range(0.0..2.0), r.random_range(0.0..2.0)),
            _ => (r.random_range(-1e-6..1e-6), r.random_range(0.0..1.0)),
        };
        let a: f64 = r.random_range(0.0..std::f64::consts::TAU);
        b[3 * i] = bn;
        b[3 * i + 1] = bt * a.cos();
        b[3 * i + 2] = bt * a.sin();
    }
    (g, b, mu)
}

#[test]
#[ignore = "fails today (15 % MaxIterations): a measurement of the open globalization work"]
fn random_problems_all_converge_inside_the_cones() {
    let n = problems();
    let settings = Settings::default();
    let mut solver = ContactSolver::new(8);
    let mut r = ChaCha8Rng::seed_from_u64(16);
    let mut iterations = Vec::with_capacity(n);
    let mut failures = Vec::new();
    for trial in 0..n {
        let (g, b, mu) = problem(&mut r, trial);
        let (mut lambda, mut w) = (vec![0.0; b.len()], vec![0.0; b.len()]);
        let info = solver.solve(&settings, g.as_view(), &b, &mu, None, &mut lambda, &mut w);
        assert!(info.min_iterate_cone_margin > 0.0, "trial {trial}: an iterate left the cone: {info:?}");
        if info.status != Status::Converged {
            failures.push((trial, info.status, info.residual));
            continue;
        }
        iterations.push(info.iterations);
        // Coulomb's law at the answer, scaled as the solver measures it.
        let k = mu.len();
        for i in 0..k {
            let (ln, lt) = (lambda[3 * i], lambda[3 * i + 1].hypot(lambda[3 * i + 2]));
            assert!(ln >= 0.0 && mu[i] * ln - lt >= 0.0, "trial {trial}: contact {i} outside the cone");
        }
        assert!(lambda.iter().chain(&w).all(|x| x.is_finite()), "trial {trial}: non-finite answer");
    }
    iterations.sort_unstable();
    let pct = |p: f64| iterations[((p * (iterations.len() - 1) as f64).round()) as usize];
    eprintln!(
        "{n} problems: {} converged, {} not; iterations median {}, p99 {}, max {}",
        iterations.len(),
        failures.len(),
        pct(0.5),
        pct(0.99),
        iterations.last().copied().unwrap_or(0)
    );
    if let Ok(out) = std::env::var("CONTACTLAB_RANDOM_OUT") {
        // `scripts/reproduce solver`: the README's numbers for this test.
        let by_status = |st: Status| failures.iter().filter(|f| f.1 == st).count();
        let json = serde_json::json!({
            "machine": contactlab::io::machine_stamp(),
            "problems": n,
            "seed": 16,
            "converged": iterations.len(),
            "max_iterations": by_status(Status::MaxIterations),
            "linear_solve_failed": by_status(Status::LinearSolveFailed),
            "other_failures": failures.len() - by_status(Status::MaxIterations) - by_status(Status::LinearSolveFailed),
            "iterations_median": pct(0.5),
            "iterations_p99": pct(0.99),
            "iterations_max": iterations.last().copied().unwrap_or(0),
            "iterates_outside_the_cones": 0,
        });
        let path = std::path::Path::new(&out);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        contactlab::io::write_atomic(path, serde_json::to_string_pretty(&json).unwrap().as_bytes()).unwrap();
    }
    assert!(
        failures.is_empty(),
        "{} of {n} problems did not converge, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
}
