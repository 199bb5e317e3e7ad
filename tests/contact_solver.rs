//! Forward contact solver: cross-check against Clarabel on the Anitescu relaxation, known
//! sliding solutions, rank-deficient Delassus matrices, warm start, bad input, random problems.

use clarabel::algebra::CscMatrix;
use clarabel::solver::{DefaultSettings, DefaultSolver, IPSolver, SolverStatus, SupportedConeT::SecondOrderConeT};
use contactlab::contact::solver::{
    classify, classify_all, ContactMode, ContactSolver, Info, Settings, SettingsError, Status,
};
use nalgebra::{DMatrix, DVector, Vector3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn random_matrix(r: &mut ChaCha8Rng, rows: usize, cols: usize) -> DMatrix<f64> {
    DMatrix::from_fn(rows, cols, |_, _| r.random_range(-1.0..1.0))
}

/// Well-conditioned SPD matrix with unit-order diagonal.
fn random_spd(r: &mut ChaCha8Rng, n: usize) -> DMatrix<f64> {
    let a = random_matrix(r, n, n);
    &a * a.transpose() / n as f64 + DMatrix::identity(n, n) * 0.2
}

/// Physical-looking PSD Delassus `J M^-1 J^T` with `J` of size `3k x nv`.
fn random_delassus(r: &mut ChaCha8Rng, k: usize, nv: usize) -> (DMatrix<f64>, DMatrix<f64>) {
    let j = random_matrix(r, 3 * k, nv);
    let m = random_spd(r, nv);
    let minv = m.try_inverse().expect("SPD");
    (&j * minv * j.transpose(), j)
}

fn unit2(r: &mut ChaCha8Rng) -> [f64; 2] {
    let a: f64 = r.random_range(0.0..std::f64::consts::TAU);
    [a.cos(), a.sin()]
}

/// Scales as in the solver docs: approach velocity and the impulse that cancels it.
fn scales(g: &DMatrix<f64>, b: &[f64]) -> (f64, f64) {
    let k = b.len() / 3;
    let v = (0..k).map(|i| (-b[3 * i]).max(b[3 * i + 1].hypot(b[3 * i + 2]))).fold(0.0_f64, f64::max).max(1e-12);
    let gmax = (0..3 * k).map(|j| g[(j, j)]).fold(0.0_f64, f64::max);
    (v, v / gmax)
}

/// Checks the Coulomb law directly from `lambda` and `w = G lambda + b`, in complementarity form:
/// feasibility of `lambda` and `w_n`, `l_n w_n = 0`, and the friction complementarity
/// `mu l_n ||w_t|| + l_t . w_t = 0` (zero iff sticking, or `l_t = -mu l_n w_t/||w_t||`).
fn assert_coulomb(g: &DMatrix<f64>, b: &[f64], mu: &[f64], lambda: &[f64], w: &[f64], tol: f64) {
    let (v, l) = scales(g, b);
    let w_ref = g * DVector::from_column_slice(lambda) + DVector::from_column_slice(b);
    for (a, e) in w.iter().zip(w_ref.iter()) {
        assert!((a - e).abs() <= 1e-10 * (1.0 + e.abs()), "w != G lambda + b");
    }
    for (i, &mu) in mu.iter().enumerate() {
        let (ln, lt) = (lambda[3 * i], Vector3::new(0.0, lambda[3 * i + 1], lambda[3 * i + 2]));
        let (wn, wt) = (w[3 * i], Vector3::new(0.0, w[3 * i + 1], w[3 * i + 2]));
        assert!(ln >= 0.0, "contact {i}: l_n = {ln} < 0");
        assert!(mu * ln - lt.norm() >= 0.0, "contact {i}: outside the friction cone");
        assert!(wn >= -tol * v, "contact {i}: penetrating w_n = {wn}");
        assert!(ln * wn <= tol * v * l, "contact {i}: l_n w_n = {}", ln * wn);
        let fric = mu * ln * wt.norm() + lt.dot(&wt);
        assert!(fric <= tol * v * l, "contact {i}: friction complementarity {fric}");
    }
}

struct Solved {
    info: Info,
    lambda: Vec<f64>,
    w: Vec<f64>,
}

fn solve_with(
    solver: &mut ContactSolver,
    settings: &Settings,
    g: &DMatrix<f64>,
    b: &[f64],
    mu: &[f64],
    warm: Option<&[f64]>,
) -> Solved {
    let mut lambda = vec![0.0; b.len()];
    let mut w = vec![0.0; b.len()];
    let info = solver.solve(settings, g.as_view(), b, mu, warm, &mut lambda, &mut w);
    Solved { info, lambda, w }
}

fn solve(g: &DMatrix<f64>, b: &[f64], mu: &[f64]) -> Solved {
    let mut solver = ContactSolver::new(mu.len());
    solve_with(&mut solver, &Settings::default(), g, b, mu, None)
}

fn assert_converged(info: &Info) {
    assert_eq!(info.status, Status::Converged, "{info:?}");
    assert!(info.residual <= Settings::default().tolerance, "{info:?}");
    assert!(info.min_iterate_cone_margin > 0.0, "an iterate left the cone: {info:?}");
    assert!(info.cone_margin > 0.0, "{info:?}");
}

/// Anitescu's convex relaxation `min 1/2 l^T G l + b^T l  s.t. (mu l_n, l_t) in SOC` by Clarabel,
/// in the form `A x + s = 0`, `s in K`, with `A = -blkdiag(mu, 1, 1)`.
fn clarabel_anitescu(g: &DMatrix<f64>, b: &[f64], mu: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut colptr = vec![0];
    let mut rowval = vec![];
    let mut nzval = vec![];
    for c in 0..n {
        for r in 0..=c {
            if g[(r, c)] != 0.0 {
                rowval.push(r);
                nzval.push(g[(r, c)]);
            }
        }
        colptr.push(rowval.len());
    }
    let p = CscMatrix::new(n, n, colptr, rowval, nzval);
    let a = CscMatrix::new(
        n,
        n,
        (0..=n).collect(),
        (0..n).collect(),
        (0..n).map(|j| if j % 3 == 0 { -mu[j / 3] } else { -1.0 }).collect(),
    );
    let cones: Vec<_> = mu.iter().map(|_| SecondOrderConeT(3)).collect();
    let settings = DefaultSettings {
        verbose: false,
        tol_gap_abs: 1e-12,
        tol_gap_rel: 1e-12,
        tol_feas: 1e-12,
        tol_ktratio: 1e-10,
        ..DefaultSettings::default()
    };
    let mut solver = DefaultSolver::new(&p, b, &a, &vec![0.0; n], &cones, settings).expect("valid clarabel problem");
    solver.solve();
    assert_eq!(solver.solution.status, SolverStatus::Solved);
    solver.solution.x.clone()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Stick,
    Separate,
    Slide,
}

/// `b = w - G lambda` for a chosen solution: sticking contacts strictly inside the cone with
/// `w = 0`, separated ones with `lambda = 0` and `w_n > mu ||w_t||`, sliding ones on the cone
/// boundary with `w_n = 0` and `w_t` opposite to `l_t`.
fn planted(r: &mut ChaCha8Rng, g: &DMatrix<f64>, mu: &[f64], kinds: &[Kind]) -> (Vec<f64>, Vec<f64>) {
    let k = mu.len();
    let mut lambda = DVector::zeros(3 * k);
    let mut w = DVector::zeros(3 * k);
    for i in 0..k {
        let d = unit2(r);
        match kinds[i] {
            Kind::Stick => {
                let ln = r.random_range(0.5..2.0);
                let frac = r.random_range(0.0..0.8);
                lambda[3 * i] = ln;
                lambda[3 * i + 1] = frac * mu[i] * ln * d[0];
                lambda[3 * i + 2] = frac * mu[i] * ln * d[1];
            }
            Kind::Separate => {
                let wn = r.random_range(0.1..2.0);
                let frac = r.random_range(0.0..0.9);
                w[3 * i] = wn;
                w[3 * i + 1] = frac * wn / mu[i] * d[0];
                w[3 * i + 2] = frac * wn / mu[i] * d[1];
            }
            Kind::Slide => {
                let ln = r.random_range(0.5..2.0);
                let speed = r.random_range(0.1..1.0);
                lambda[3 * i] = ln;
                lambda[3 * i + 1] = mu[i] * ln * d[0];
                lambda[3 * i + 2] = mu[i] * ln * d[1];
                w[3 * i + 1] = -speed * d[0];
                w[3 * i + 2] = -speed * d[1];
            }
        }
    }
    let b = &w - g * &lambda;
    (b.as_slice().to_vec(), lambda.as_slice().to_vec())
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
}

#[test]
fn agrees_with_clarabel_on_sticking_and_separated_contacts() {
    let mut r = rng(1);
    for trial in 0..40 {
        let k = 1 + trial % 4;
        let g = random_spd(&mut r, 3 * k);
        let mu: Vec<f64> = (0..k).map(|_| r.random_range(0.1..1.5)).collect();
        let kinds: Vec<Kind> =
            (0..k).map(|_| if r.random_range(0.0..1.0) < 0.6 { Kind::Stick } else { Kind::Separate }).collect();
        let (b, _) = planted(&mut r, &g, &mu, &kinds);
        let reference = clarabel_anitescu(&g, &b, &mu);
        // Relaxation and exact Coulomb coincide only where pressing contacts do not slide.
        let w_ref = &g * DVector::from_column_slice(&reference) + DVector::from_column_slice(&b);
        for i in 0..k {
            if reference[3 * i] > 1e-6 {
                assert!(w_ref[3 * i + 1].hypot(w_ref[3 * i + 2]) < 1e-6, "trial {trial}");
            }
        }
        let out = solve(&g, &b, &mu);
        assert_converged(&out.info);
        let err = max_abs_diff(&out.lambda, &reference);
        assert!(err < 1e-6, "trial {trial} k {k}: |lambda - clarabel| = {err:e}");
        assert_coulomb(&g, &b, &mu, &out.lambda, &out.w, 1e-6);
    }
}

#[test]
fn recovers_planted_sliding_solutions() {
    let mut r = rng(2);
    let settings = Settings::default();
    for trial in 0..40 {
        let k = 1 + trial % 4;
        let g = random_spd(&mut r, 3 * k);
        let mu: Vec<f64> = (0..k).map(|_| r.random_range(0.1..0.8)).collect();
        let mut kinds = vec![Kind::Slide; k];
        for kind in kinds.iter_mut().skip(1) {
            *kind = [Kind::Slide, Kind::Stick, Kind::Separate][r.random_range(0..3)];
        }
        let (b, planted_lambda) = planted(&mut r, &g, &mu, &kinds);
        let out = solve(&g, &b, &mu);
        assert_converged(&out.info);
        assert_coulomb(&g, &b, &mu, &out.lambda, &out.w, 1e-6);
        let err = max_abs_diff(&out.lambda, &planted_lambda);
        assert!(err < 1e-6, "trial {trial}: |lambda - planted| = {err:e}");
        let mut modes = vec![ContactMode::Separated; k];
        classify_all(&out.lambda, &out.w, g.as_view(), &settings, &mut modes);
        for (i, (kind, mode)) in kinds.iter().zip(&modes).enumerate() {
            let expected = match kind {
                Kind::Stick => ContactMode::Sticking,
                Kind::Separate => ContactMode::Separated,
                Kind::Slide => ContactMode::Sliding,
            };
            assert_eq!(*mode, expected, "trial {trial} contact {i}");
        }
    }
}

/// Contact Jacobian rows `(n, t1, t2)` of box corners for a body with twist `(v, omega)` in the
/// world frame: the point velocity is `v + omega x r`.
fn box_jacobian(corners: &[[f64; 3]]) -> DMatrix<f64> {
    let mut j = DMatrix::zeros(3 * corners.len(), 6);
    for (i, c) in corners.iter().enumerate() {
        // rows: n = z, t1 = x, t2 = y; omega x r = -[r]x omega.
        let axes = [2, 0, 1];
        for (row, &ax) in axes.iter().enumerate() {
            let rr = 3 * i + row;
            j[(rr, ax)] = 1.0;
            let r = Vector3::new(c[0], c[1], c[2]);
            let e = Vector3::ith(ax, 1.0);
            // d(omega x r)_ax / d omega = (r x e_ax)
            let col = r.cross(&e);
            for q in 0..3 {
                j[(rr, 3 + q)] = col[q];
            }
        }
    }
    j
}

fn box_problem(v_free: [f64; 6], gaps: &[f64], corners: &[[f64; 3]]) -> (DMatrix<f64>, Vec<f64>) {
    let h = 1e-3;
    let j = box_jacobian(corners);
    let minv = DMatrix::from_diagonal(&DVector::from_vec(vec![
        1.0 / 2.0,
        1.0 / 2.0,
        1.0 / 2.0,
        1.0 / 0.02,
        1.0 / 0.03,
        1.0 / 0.04,
    ]));
    let g = &j * minv * j.transpose();
    let mut b = &j * DVector::from_column_slice(&v_free);
    for (i, gap) in gaps.iter().enumerate() {
        b[3 * i] += gap / h;
    }
    (g, b.as_slice().to_vec())
}

const BOTTOM: [[f64; 3]; 4] = [[0.2, 0.1, -0.05], [-0.2, 0.1, -0.05], [-0.2, -0.1, -0.05], [0.2, -0.1, -0.05]];

#[test]
fn rank_deficient_box_on_the_ground_converges() {
    // G = J M^-1 J^T is 12 x 12 with rank 6: statically indeterminate.
    let mu = [0.8; 4];
    for (v_free, label) in [
        ([0.0, 0.0, -9.81e-3, 0.0, 0.0, 0.0], "resting"),
        ([0.05, 0.02, -9.81e-3, 0.0, 0.0, 0.3], "sliding and spinning"),
        ([0.0, 0.0, -0.5, 1.0, 0.0, 0.0], "landing on an edge"),
    ] {
        let (g, b) = box_problem(v_free, &[0.0; 4], &BOTTOM);
        let out = solve(&g, &b, &mu);
        assert_converged(&out.info);
        assert!(out.info.iterations < 40, "{label}: {:?}", out.info);
        assert_coulomb(&g, &b, &mu, &out.lambda, &out.w, 1e-6);
    }
}

#[test]
fn far_contacts_come_out_separated() {
    // A box with its 4 bottom corners on the ground and its 4 top corners 0.5 m above it.
    let mut corners = BOTTOM.to_vec();
    corners.extend(BOTTOM.iter().map(|c| [c[0], c[1], 0.45]));
    let gaps = [0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5];
    let mu = [0.6; 8];
    let (g, b) = box_problem([0.02, 0.0, -9.81e-3, 0.0, 0.1, 0.0], &gaps, &corners);
    assert!(b[12] > 400.0);
    let out = solve(&g, &b, &mu);
    assert_converged(&out.info);
    assert_coulomb(&g, &b, &mu, &out.lambda, &out.w, 1e-6);
    let (_, l) = scales(&g, &b);
    let pressing: f64 = (0..4).map(|i| out.lambda[3 * i]).sum();
    assert!(pressing > 1e-3, "the box must be held up");
    #[allow(clippy::needless_range_loop)] // i indexes lambda, w and mu together
    for i in 4..8 {
        assert!(out.lambda[3 * i] <= 1e-8 * l, "far contact {i}: {}", out.lambda[3 * i]);
        let mode =
            classify(&out.lambda[3 * i..3 * i + 3], &out.w[3 * i..3 * i + 3], g[(3 * i, 3 * i)], &Settings::default());
        assert_eq!(mode, ContactMode::Separated);
    }
}

#[test]
fn warm_start_reduces_iterations() {
    let mut r = rng(3);
    let settings = Settings::default();
    let mut total_cold = 0;
    let mut total_warm = 0;
    for trial in 0..20 {
        let k = 4;
        let (g, _) = random_delassus(&mut r, k, 18);
        let mu: Vec<f64> = (0..k).map(|_| r.random_range(0.3..1.0)).collect();
        let kinds: Vec<Kind> =
            (0..k).map(|_| [Kind::Stick, Kind::Stick, Kind::Slide, Kind::Separate][r.random_range(0..4)]).collect();
        let (b, _) = planted(&mut r, &g, &mu, &kinds);
        let mut solver = ContactSolver::new(k);
        let first = solve_with(&mut solver, &settings, &g, &b, &mu, None);
        assert_converged(&first.info);
        assert!(!first.info.warm_started);
        // The next step: a slightly different free velocity.
        let b2: Vec<f64> = b.iter().map(|x| x + 1e-3 * r.random_range(-1.0..1.0)).collect();
        let cold = solve_with(&mut solver, &settings, &g, &b2, &mu, None);
        let warm = solve_with(&mut solver, &settings, &g, &b2, &mu, Some(&first.lambda));
        assert_converged(&cold.info);
        assert_converged(&warm.info);
        assert!(warm.info.warm_started, "trial {trial}: {:?}", warm.info);
        assert_coulomb(&g, &b2, &mu, &warm.lambda, &warm.w, 1e-6);
        total_cold += cold.info.iterations;
        total_warm += warm.info.iterations;
    }
    assert!(total_warm < total_cold, "warm {total_warm} vs cold {total_cold} iterations");
}

/// The sticking step: a warm start that loads every contact of an all-sticking problem is
/// answered by one factorization, without an iteration, and exactly (`w = 0` to rounding); with
/// one contact sliding the sticking impulse leaves that contact's cone and the iteration runs
/// from the warm start as before.
#[test]
fn a_loaded_warm_start_of_a_sticking_problem_takes_the_sticking_step() {
    let mut r = rng(21);
    let settings = Settings::default();
    let mut iterated = 0;
    for trial in 0..20 {
        let k = 1 + trial % 4;
        let (g, _) = random_delassus(&mut r, k, 18);
        let mu: Vec<f64> = (0..k).map(|_| r.random_range(0.3..1.0)).collect();
        let mut solver = ContactSolver::new(k);
        let (b, _) = planted(&mut r, &g, &mu, &vec![Kind::Stick; k]);
        let first = solve_with(&mut solver, &settings, &g, &b, &mu, None);
        assert_converged(&first.info);
        assert!(first.info.iterations > 0);
        // The next step's problem, warm-started from this one's answer.
        let b2: Vec<f64> = b.iter().map(|x| x + 1e-6 * r.random_range(-1.0..1.0)).collect();
        let warm = solve_with(&mut solver, &settings, &g, &b2, &mu, Some(&first.lambda));
        assert_converged(&warm.info);
        assert_eq!(warm.info.iterations, 0, "trial {trial}: {:?}", warm.info);
        assert_coulomb(&g, &b2, &mu, &warm.lambda, &warm.w, 1e-12);
        let w_max = warm.w.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        assert!(w_max <= 1e-12, "trial {trial}: |w| = {w_max:e}");

        let mut kinds = vec![Kind::Stick; k];
        kinds[0] = Kind::Slide;
        let (b3, _) = planted(&mut r, &g, &mu, &kinds);
        let first = solve_with(&mut solver, &settings, &g, &b3, &mu, None);
        assert_converged(&first.info);
        let warm = solve_with(&mut solver, &settings, &g, &b3, &mu, Some(&first.lambda));
        assert_converged(&warm.info);
        assert_coulomb(&g, &b3, &mu, &warm.lambda, &warm.w, 1e-6);
        iterated += usize::from(warm.info.iterations > 0);
    }
    // A sticking answer inside every cone would be a Coulomb solution too (the law is not
    // unique); with a planted sliding contact it is the exception.
    assert!(iterated >= 18, "{iterated} of 20 sliding problems iterated");
}

#[test]
fn non_finite_input_is_reported_without_panic() {
    let mut r = rng(4);
    let g = random_spd(&mut r, 6);
    let mut lambda = vec![7.0; 6];
    let mut w = vec![7.0; 6];
    let mut solver = ContactSolver::new(2);
    let settings = Settings::default();
    let mut b = vec![-0.1, 0.0, 0.0, -0.2, 0.1, 0.0];
    b[4] = f64::NAN;
    let info = solver.solve(&settings, g.as_view(), &b, &[0.5, 0.5], None, &mut lambda, &mut w);
    assert_eq!(info.status, Status::NonFinite);
    let mut g_inf = g.clone();
    g_inf[(0, 1)] = f64::INFINITY;
    b[4] = 0.1;
    let info = solver.solve(&settings, g_inf.as_view(), &b, &[0.5, 0.5], None, &mut lambda, &mut w);
    assert_eq!(info.status, Status::NonFinite);
    // Too many contacts and mismatched sizes are statuses too.
    let big = random_spd(&mut r, 9);
    let mut l9 = vec![0.0; 9];
    let mut w9 = vec![0.0; 9];
    let info = solver.solve(&settings, big.as_view(), &[0.0; 9], &[0.5; 3], None, &mut l9, &mut w9);
    assert_eq!(info.status, Status::InvalidInput);
    // A NaN warm start is ignored, not fatal.
    let info = solver.solve(&settings, g.as_view(), &b, &[0.5, 0.5], Some(&[f64::NAN; 6]), &mut lambda, &mut w);
    assert_eq!(info.status, Status::Converged);
    assert!(!info.warm_started);
}

#[test]
fn settings_validate_names_the_field() {
    assert_eq!(Settings::default().validate(), Ok(()));
    let bad = Settings { tolerance: -1e-8, ..Settings::default() };
    let err = bad.validate().unwrap_err();
    assert!(matches!(err, SettingsError::OutOfRange { field: "tolerance", .. }));
    assert!(err.to_string().contains("tolerance"), "{err}");
    let bad = Settings { fraction_to_boundary: 1.5, ..Settings::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("fraction_to_boundary"));
    let nan = Settings { regularization: f64::NAN, ..Settings::default() };
    assert!(nan.validate().is_err());
    let text = serde_json::to_string(&Settings::default()).unwrap();
    let back: Settings = serde_json::from_str(&text).unwrap();
    assert_eq!(back, Settings::default());
}

/// Random problem number `trial` of the sequence drawn from `r`: SPD `G` with random `b` for even
/// trials, PSD `J M^-1 J^T` with `b = J v + gap term` (as time stepping produces it) for odd ones.
fn random_problem(r: &mut ChaCha8Rng, trial: usize) -> (DMatrix<f64>, Vec<f64>, Vec<f64>) {
    let k = 1 + trial % 4;
    let mu: Vec<f64> = (0..k).map(|_| r.random_range(0.1..1.5)).collect();
    if trial.is_multiple_of(2) {
        let g = random_spd(r, 3 * k);
        let b: Vec<f64> = (0..3 * k).map(|_| r.random_range(-1.0..1.0)).collect();
        (g, b, mu)
    } else {
        let nv = r.random_range(k..=3 * k);
        let (g, j) = random_delassus(r, k, nv);
        let v = DVector::from_fn(nv, |_, _| r.random_range(-1.0..1.0));
        let mut b = &j * v;
        for i in 0..k {
            if r.random_range(0.0..1.0) < 0.3 {
                b[3 * i] += r.random_range(0.0..2.0);
            }
        }
        (g, b.as_slice().to_vec(), mu)
    }
}

/// Problem 243 of seed 5 (k = 4, PSD with rank 10, one mu = 1.2): the Coulomb iteration stalls
/// at a scaled residual of ~1e-2 (it has a solution: some `x` puts `G x + b` well inside
/// `K_mu^*`, Cadoux's condition, checked with Clarabel); the globalized phase solves it.
const NEEDS_GLOBALIZATION: [usize; 1] = [243];

#[test]
fn random_problems_satisfy_coulomb() {
    let mut r = rng(5);
    let settings = Settings::default();
    let mut solver = ContactSolver::new(4);
    let mut worst = 0;
    for trial in 0..400 {
        let (g, b, mu) = random_problem(&mut r, trial);
        let out = solve_with(&mut solver, &settings, &g, &b, &mu, None);
        assert!(out.info.min_iterate_cone_margin > 0.0, "trial {trial}: {:?}", out.info);
        assert_converged(&out.info);
        assert_coulomb(&g, &b, &mu, &out.lambda, &out.w, 1e-6);
        if !NEEDS_GLOBALIZATION.contains(&trial) {
            worst = worst.max(out.info.iterations);
        }
    }
    assert!(worst <= 40, "worst iteration count {worst}");
}

#[test]
fn random_problem_243_converges_only_with_the_globalized_phase() {
    let mut r = rng(5);
    let mut problem = None;
    for trial in 0..=243 {
        problem = Some(random_problem(&mut r, trial));
    }
    let (g, b, mu) = problem.expect("generated");
    let out = solve(&g, &b, &mu);
    assert_converged(&out.info);
    assert_coulomb(&g, &b, &mu, &out.lambda, &out.w, 1e-6);
    assert!(out.info.iterations > Settings::default().max_iterations, "{:?}", out.info);
    // Without it the Coulomb iteration stalls, reporting cleanly with finite, cone-feasible output.
    let plain = Settings { global_iterations: 0, ..Settings::default() };
    let mut solver = ContactSolver::new(4);
    let out = solve_with(&mut solver, &plain, &g, &b, &mu, None);
    assert_eq!(out.info.status, Status::MaxIterations);
    assert!(out.info.min_iterate_cone_margin > 0.0);
    assert!(out.lambda.iter().chain(&out.w).all(|x| x.is_finite()));
}

/// Two single contacts from `tests/contact_solver_random.rs` (seed 17) on which every stage
/// before the mode enumeration stalls. Problem 21 576 (SPD, `mu = 1.6`, approaching at 5e-8
/// m/s while sliding at 0.44 m/s): its only solution slides with a normal impulse 1e9 times what
/// stops the approach, at a slip angle next to a pole of the sliding equations, which projected
/// Gauss-Seidel finds and the enumeration finishes. Problem 9 848 (`G` of rank 2, its second
/// eigenvalue 1e-7 of the first): no sliding solution exists, and the sticking impulses form a
/// line whose least-norm point is outside the cone; the solution is on that line 3e6 impulse
/// scales away, reached by the enumeration's search in the null space. Both converge (9 848 at
/// the rounding floor), inside the cones, and satisfy Coulomb's law with complementarity
/// relative to the largest impulse; without the globalized phase both stall.
#[test]
fn single_contacts_that_need_the_mode_enumeration_converge() {
    let problems: [([f64; 9], [f64; 3], f64); 2] = [
        (
            [
                0.056707131542898144,
                0.027125957321552246,
                -0.02371012784680069,
                0.027125957321552246,
                0.013070746028943417,
                -0.011496813489995308,
                -0.02371012784680069,
                -0.011496813489995308,
                0.010167162839122933,
            ],
            [-5.378922055119566e-08, 0.2832907064603603, -0.33207629855577875],
            1.5983143917479088,
        ),
        (
            [
                0.34956584039021177,
                -0.2626068058080653,
                0.2659635402621165,
                -0.2626068058080653,
                0.19727999483468944,
                -0.19980172616638736,
                0.2659635402621165,
                -0.19980172616638736,
                0.20235571248148856,
            ],
            [-0.21976338102130757, 0.019021737113603887, 0.0915423622481099],
            0.9843932831149762,
        ),
    ];
    for (g, b, mu) in problems {
        let g = DMatrix::from_row_slice(3, 3, &g);
        let out = solve(&g, &b, &[mu]);
        assert_eq!(out.info.status, Status::Converged, "{:?}", out.info);
        assert!(out.info.min_iterate_cone_margin > 0.0, "{:?}", out.info);
        let (l, w) = (&out.lambda, &out.w);
        let (v, scale) = (out.info.velocity_scale, out.info.impulse_scale);
        // Complementarity relative to the largest impulse, as the random test measures it.
        let big = scale.max(l.iter().fold(0.0_f64, |m, x| m.max(x.abs())));
        let (lt, wt) = (l[1].hypot(l[2]), w[1].hypot(w[2]));
        assert!(l[0] > 0.0 && mu * l[0] - lt > 0.0, "{l:?}");
        assert!(w[0] >= -1e-6 * v && l[0] * w[0] <= 1e-6 * v * big, "{l:?} {w:?}");
        assert!(mu * l[0] * wt + l[1] * w[1] + l[2] * w[2] <= 1e-6 * v * big, "{l:?} {w:?}");
        let plain = Settings { global_iterations: 0, ..Settings::default() };
        let mut solver = ContactSolver::new(1);
        assert_eq!(solve_with(&mut solver, &plain, &g, &b, &[mu], None).info.status, Status::MaxIterations);
    }
}

/// Two contacts, both sliding, from `tests/contact_solver_random.rs` (seed 17, problem 8 673:
/// SPD, `cond(G) = 2e6`, `mu = 1.67` and `1.36`), whose normalized impulses reach 1e3. The
/// enumeration's variable projection stops 1e-11 rad off the slip direction, and putting the
/// answer inside the cones by scaling the impulses moved `w` by `G` times that nudge; the cone
/// products weigh both by `|lambda~|`, which left the residual at 6e-8, outside the tolerance,
/// next to a solution. A Newton polish on every unknown, and solving the mode equations again
/// on rays a hair inside the cones, converge.
#[test]
fn two_sliding_contacts_with_large_impulses_converge() {
    let g = [
        0.052919139396760885,
        0.05276547840651536,
        -0.035098514819675075,
        0.04803033999813037,
        -0.060494801747899264,
        -0.03665501251109222,
        0.05276547840651536,
        0.09467758881994613,
        -0.009906365471867344,
        -0.03054597057026676,
        -0.1233955603131963,
        -0.03160747749141445,
        -0.035098514819675075,
        -0.009906365471867344,
        0.038301595136842836,
        -0.07875088561033829,
        0.0024775449431638143,
        0.027362601789968473,
        0.04803033999813037,
        -0.03054597057026676,
        -0.07875088561033829,
        0.19006396175207685,
        0.06275331609962376,
        -0.042684052599925054,
        -0.060494801747899264,
        -0.1233955603131963,
        0.0024775449431638143,
        0.06275331609962376,
        0.16374857735013865,
        0.03445204894829918,
        -0.03665501251109222,
        -0.03160747749141445,
        0.027362601789968473,
        -0.042684052599925054,
        0.03445204894829918,
        0.026166200115757585,
    ];
    let b = [
        -0.32042253479177174,
        0.5447017728209972,
        -1.4282876199207275,
        -0.45277897977299064,
        0.016566958386449025,
        -0.014460780167337709,
    ];
    let mu = [1.6709461723372196, 1.3634474260537819];
    let g = DMatrix::from_row_slice(6, 6, &g);
    let out = solve(&g, &b, &mu);
    assert_eq!(out.info.status, Status::Converged, "{:?}", out.info);
    assert!(out.info.min_iterate_cone_margin > 0.0, "{:?}", out.info);
    let (l, w) = (&out.lambda, &out.w);
    let (v, scale) = (out.info.velocity_scale, out.info.impulse_scale);
    let big = scale.max(l.iter().fold(0.0_f64, |m, x| m.max(x.abs())));
    assert!(big > 1e3 * scale, "the impulses this problem needs: {l:?}");
    for i in 0..2 {
        let (l, w) = (&l[3 * i..3 * i + 3], &w[3 * i..3 * i + 3]);
        let (lt, wt) = (l[1].hypot(l[2]), w[1].hypot(w[2]));
        assert!(l[0] > 0.0 && mu[i] * l[0] - lt > 0.0, "{l:?}");
        assert!(wt > 1e-3 * v, "contact {i} slides: {w:?}");
        assert!(w[0] >= -1e-6 * v && l[0] * w[0] <= 1e-6 * v * big, "{l:?} {w:?}");
        assert!(mu[i] * l[0] * wt + l[1] * w[1] + l[2] * w[2] <= 1e-6 * v * big, "{l:?} {w:?}");
    }
}

/// Three contacts from `tests/contact_solver_random.rs` that only the last stages of the
/// globalized phase solve (module docs of the solver, "Enumeration"). Problem 34 682 of seed 17
/// (`G` of rank 5 of 9, its smallest nonzero eigenvalue 1e-7 of the largest): Cadoux's fixed
/// point cycles there, and run on its own with the shift damped it ends next to a solution
/// with two contacts sliding at impulses near 1e6. Problem 3 586 of seed 16 (SPD,
/// `cond(G) = 1e7`), the reported set, is the one problem of three seeds' 300 000 that the
/// Tikhonov continuation alone solves. Before those stages both stalled; they converge, inside
/// the cones, and satisfy Coulomb's law relative to the largest impulse.
#[test]
fn contacts_that_need_the_plain_fixed_point_or_the_continuation_converge() {
    let problems: [Problem; 2] = [
        (
            3586,
            &[
                0.02441587162403798,
                -0.019871846690662734,
                -0.0531728067173691,
                -0.035216760587198345,
                0.028796648382011337,
                0.04425568812710695,
                0.05866748479660777,
                -0.009041840517261006,
                0.006360769879285103,
                -0.019871846690662734,
                0.10385987438901655,
                0.05600841085459721,
                -0.016469937116792368,
                -0.019134079497792233,
                -0.049508665400343634,
                -0.05788124137430656,
                0.1209434243191231,
                -0.12662531542469546,
                -0.0531728067173691,
                0.05600841085459721,
                0.11982062908049713,
                0.07113813574133102,
                -0.06132833096848782,
                -0.09487973272806591,
                -0.13065651148161833,
                0.040825467598453735,
                -0.03373267452645931,
                -0.035216760587198345,
                -0.016469937116792368,
                0.07113813574133102,
                0.07476717872197487,
                -0.043594325950918944,
                -0.05556865646381091,
                -0.07996029312395345,
                -0.04346424418186347,
                0.05289615159589921,
                0.028796648382011337,
                -0.019134079497792233,
                -0.06132833096848782,
                -0.043594325950918944,
                0.03463411066928154,
                0.053064335446447855,
                0.06815629017549932,
                -0.00317486511730077,
                0.00023187147214705068,
                0.04425568812710695,
                -0.049508665400343634,
                -0.09487973272806591,
                -0.05556865646381091,
                0.053064335446447855,
                0.08857083616984526,
                0.10563445563981377,
                -0.02577776659565612,
                0.02575804758839902,
                0.05866748479660777,
                -0.05788124137430656,
                -0.13065651148161833,
                -0.07996029312395345,
                0.06815629017549932,
                0.10563445563981377,
                0.14311364892746664,
                -0.03785757955899678,
                0.030933494661392474,
                -0.009041840517261006,
                0.1209434243191231,
                0.040825467598453735,
                -0.04346424418186347,
                -0.00317486511730077,
                -0.02577776659565612,
                -0.03785757955899678,
                0.16108408823310152,
                -0.1652097927960165,
                0.006360769879285103,
                -0.12662531542469546,
                -0.03373267452645931,
                0.05289615159589921,
                0.00023187147214705068,
                0.02575804758839902,
                0.030933494661392474,
                -0.1652097927960165,
                0.17367429417664343,
            ],
            &[
                -0.8519666251102711,
                -0.009233411710122388,
                -0.02311398486720769,
                9.99048607464095e-07,
                0.7933439089864316,
                -0.4415787252455411,
                -1.3721312017698186,
                -0.021324740976019867,
                -0.016419009162564696,
            ],
            &[1.0901723161360783, 1.2520894974659615, 0.9416212539581235],
        ),
        (
            34682,
            &[
                0.09279411043173535,
                -0.03983355833730256,
                0.3160263668266795,
                0.4113582450562011,
                0.03144460205207219,
                -0.055163831911069425,
                -0.03613074314482582,
                0.09333381945509461,
                -0.014317247161144402,
                -0.03983355833730256,
                0.026816413905515205,
                -0.12674361957806407,
                -0.16199275273256608,
                -0.011388917667707003,
                0.02624083435066532,
                -0.006508892012497002,
                -0.03175133332112287,
                0.0027343418668338967,
                0.3160263668266795,
                -0.12674361957806407,
                1.086479085119619,
                1.4170304310372206,
                0.10846814422274595,
                -0.1870351422910356,
                -0.14367696896867604,
                0.3257012556870011,
                -0.05267363168000016,
                0.4113582450562011,
                -0.16199275273256608,
                1.4170304310372206,
                1.8490619460407909,
                0.1418193644486728,
                -0.24271691574182686,
                -0.1937992471896762,
                0.42651301385066137,
                -0.06963440675568533,
                0.03144460205207219,
                -0.011388917667707003,
                0.10846814422274595,
                0.1418193644486728,
                0.011273493872095953,
                -0.017707603943485563,
                -0.016916837004330686,
                0.03337845884875745,
                -0.005368401687079431,
                -0.055163831911069425,
                0.02624083435066532,
                -0.1870351422910356,
                -0.24271691574182686,
                -0.017707603943485563,
                0.034625876077315404,
                0.015975051307516985,
                -0.05344338207949645,
                0.008213550397924069,
                -0.03613074314482582,
                -0.006508892012497002,
                -0.14367696896867604,
                -0.1937992471896762,
                -0.016916837004330686,
                0.015975051307516985,
                0.06407202589516527,
                -0.055230387875525914,
                0.013456198943694788,
                0.09333381945509461,
                -0.03175133332112287,
                0.3257012556870011,
                0.42651301385066137,
                0.03337845884875745,
                -0.05344338207949645,
                -0.055230387875525914,
                0.10101388984704882,
                -0.01739585803558584,
                -0.014317247161144402,
                0.0027343418668338967,
                -0.05267363168000016,
                -0.06963440675568533,
                -0.005368401687079431,
                0.008213550397924069,
                0.013456198943694788,
                -0.01739585803558584,
                0.003719811405436771,
            ],
            &[
                -1.4371677348468321,
                -0.23376562515651272,
                0.2680926117410143,
                -0.6672776816386189,
                -0.1458877729058225,
                -0.2638542686984427,
                -0.2680537026137209,
                0.014235144842614598,
                -0.11974416468106358,
            ],
            &[1.6480048903013846, 0.4430568807606969, 0.4148299707180409],
        ),
    ];
    assert_all_converge(&problems);
}

/// A stalled problem kept from `tests/contact_solver_random.rs`: trial, `G` (row-major), `b`,
/// `mu`.
type Problem = (usize, &'static [f64], &'static [f64], &'static [f64]);

/// Each problem converges and its answer passes [`assert_coulomb_relative`].
fn assert_all_converge(problems: &[Problem]) {
    for &(trial, g, b, mu) in problems {
        let k = mu.len();
        let g = DMatrix::from_row_slice(3 * k, 3 * k, g);
        let out = solve(&g, b, mu);
        assert_eq!(out.info.status, Status::Converged, "{trial}: {:?}", out.info);
        assert_coulomb_relative(trial, &out, mu);
    }
}

/// Every iterate inside the cones, and the answer strictly inside them and satisfying
/// Coulomb's law with the complementarity products relative to the largest impulse.
fn assert_coulomb_relative(trial: usize, out: &Solved, mu: &[f64]) {
    assert!(out.info.min_iterate_cone_margin > 0.0, "{trial}: {:?}", out.info);
    let (l, w) = (&out.lambda, &out.w);
    let (v, scale) = (out.info.velocity_scale, out.info.impulse_scale);
    let big = scale.max(l.iter().fold(0.0_f64, |m, x| m.max(x.abs())));
    for (i, &mu) in mu.iter().enumerate() {
        let (l, w) = (&l[3 * i..3 * i + 3], &w[3 * i..3 * i + 3]);
        let (lt, wt) = (l[1].hypot(l[2]), w[1].hypot(w[2]));
        assert!(l[0] > 0.0 && mu * l[0] - lt > 0.0, "{trial}: {l:?}");
        assert!(w[0] >= -1e-6 * v && l[0] * w[0] <= 1e-6 * v * big, "{trial}: {l:?} {w:?}");
        assert!(mu * l[0] * wt + l[1] * w[1] + l[2] * w[2] <= 1e-6 * v * big, "{trial}: {l:?} {w:?}");
    }
}

/// Rank-deficient contacts from `tests/contact_solver_random.rs` on which every stage before
/// Alart-Curnier's semismooth Newton stalls (module docs of the solver, "Alart-Curnier"):
/// problem 80 762 of seed 23 (three contacts, `G` of rank 4 of 9, impulses 6e4 impulse scales)
/// and problem 71 123 of seed 24 (four contacts, rank 4 of 12, impulses 6e5; the earlier
/// stages end with every impulse near zero there). The restarts reach a zero of the
/// Alart-Curnier function and the enumeration finishes it; both converge inside the cones and
/// satisfy Coulomb's law relative to the largest impulse. They stalled before this stage.
#[test]
fn rank_deficient_contacts_that_need_alart_curnier_converge() {
    let problems: [Problem; 2] = [
        (
            80762,
            &[
                0.09467984790905787,
                -0.07820119025765387,
                -0.17054260158941076,
                0.0406652564895363,
                -0.3635864735192521,
                0.17713752824609869,
                0.17527030694375706,
                -0.23269218781268,
                -0.16445801755232076,
                -0.07820119025765387,
                0.06469121735335948,
                0.14095824809545404,
                -0.033228770466730444,
                0.30118654358180585,
                -0.14689448393852406,
                -0.14498422334982,
                0.19301455069085027,
                0.13670875286068696,
                -0.17054260158941076,
                0.14095824809545404,
                0.3072975584379758,
                -0.0729251963715718,
                0.6557450825423021,
                -0.31962099960807433,
                -0.315914119491473,
                0.419903856059494,
                0.29703502814135446,
                0.0406652564895363,
                -0.033228770466730444,
                -0.0729251963715718,
                0.018803805320489288,
                -0.15296562117914397,
                0.07394209914093,
                0.07448535676777471,
                -0.09693655320373379,
                -0.06741395440007597,
                -0.3635864735192521,
                0.30118654358180585,
                0.6557450825423021,
                -0.15296562117914397,
                1.4039947680224254,
                -0.6854191776761444,
                -0.6749964561305567,
                0.9008391845088581,
                0.6392948099458242,
                0.17713752824609869,
                -0.14689448393852406,
                -0.31962099960807433,
                0.07394209914093,
                -0.6854191776761444,
                0.3348687514524733,
                0.3292027154643901,
                -0.44019804948404156,
                -0.31286659376088843,
                0.17527030694375706,
                -0.14498422334982,
                -0.315914119491473,
                0.07448535676777471,
                -0.6749964561305567,
                0.3292027154643901,
                0.32493796816618137,
                -0.43256182106108,
                -0.30636793233193244,
                -0.23269218781268,
                0.19301455069085027,
                0.419903856059494,
                -0.09693655320373379,
                0.9008391845088581,
                -0.44019804948404156,
                -0.43256182106108,
                0.5786868525328848,
                0.4114552783524452,
                -0.16445801755232076,
                0.13670875286068696,
                0.29703502814135446,
                -0.06741395440007597,
                0.6392948099458242,
                -0.31286659376088843,
                -0.30636793233193244,
                0.4114552783524452,
                0.2934404008454593,
            ],
            &[
                -0.25149145116501426,
                -0.12874570925940998,
                -0.5267585542256705,
                0.1778845466238722,
                -0.5696928102723706,
                0.31841107707286875,
                -0.0609227476504427,
                -0.18268011150117897,
                0.18994967142841637,
            ],
            &[0.6784599564969709, 1.2645314442019129, 0.7196234121566228],
        ),
        (
            71123,
            &[
                0.2606578785660587,
                -0.44690165747110955,
                0.3589594974965606,
                0.5753442001527904,
                0.5257442435661,
                -0.08050310305879568,
                0.4674859451325084,
                -0.017653265047787976,
                -0.08981504462251294,
                0.7882252520632049,
                0.24613421022379733,
                -0.2150192209207729,
                -0.44690165747110955,
                0.7663417816612512,
                -0.6163966284362576,
                -0.9870375247510447,
                -0.9016007892391964,
                0.13773787827506384,
                -0.8019092830531721,
                0.029991752976574314,
                0.15432682246277207,
                -1.3514915108913759,
                -0.42189616795595375,
                0.368542356956574,
                0.3589594974965606,
                -0.6163966284362576,
                0.5019839160614893,
                0.7971244219074096,
                0.7255726114720014,
                -0.10857928842779041,
                0.6469435855167318,
                -0.0220575351940344,
                -0.12640275493385045,
                1.0859960366476353,
                0.3381032934630698,
                -0.2952664129507186,
                0.5753442001527904,
                -0.9870375247510447,
                0.7971244219074096,
                1.2729588850895626,
                1.1614475131236168,
                -0.17625877283064478,
                1.03385420673247,
                -0.0375566927483864,
                -0.1999498282822924,
                1.7401539814000189,
                0.5427514636405772,
                -0.4740730037172993,
                0.5257442435661,
                -0.9016007892391964,
                0.7255726114720014,
                1.1614475131236168,
                1.060784048740732,
                -0.16190622551371212,
                0.9435723477040847,
                -0.035178282433919364,
                -0.181700310269227,
                1.5899639597722142,
                0.49628613594957793,
                -0.4334899864056744,
                -0.08050310305879568,
                0.13773787827506384,
                -0.10857928842779041,
                -0.17625877283064478,
                -0.16190622551371212,
                0.025545133460276453,
                -0.14343798603133323,
                0.006122551454548295,
                0.026928852170174947,
                -0.2432870916360911,
                -0.07627214996475097,
                0.06666178007603374,
                0.4674859451325084,
                -0.8019092830531721,
                0.6469435855167318,
                1.03385420673247,
                0.9435723477040847,
                -0.14343798603133323,
                0.8397361423871625,
                -0.030742050655747262,
                -0.16219930009305097,
                1.4138862566119048,
                0.4410887532500849,
                -0.38527561190687987,
                -0.017653265047787976,
                0.029991752976574314,
                -0.0220575351940344,
                -0.0375566927483864,
                -0.035178282433919364,
                0.006122551454548295,
                -0.030742050655747262,
                0.001878165776361176,
                0.0052779453388001425,
                -0.053244993598471596,
                -0.01692767108425203,
                0.014791188444059133,
                -0.08981504462251294,
                0.15432682246277207,
                -0.12640275493385045,
                -0.1999498282822924,
                -0.181700310269227,
                0.026928852170174947,
                -0.16219930009305097,
                0.0052779453388001425,
                0.031913053250749016,
                -0.271776774611106,
                -0.08450544277224559,
                0.07379527434611988,
                0.7882252520632049,
                -1.3514915108913759,
                1.0859960366476353,
                1.7401539814000189,
                1.5899639597722142,
                -0.2432870916360911,
                1.4138862566119048,
                -0.053244993598471596,
                -0.271776774611106,
                2.383621774493321,
                0.74425301718548,
                -0.6501473306087662,
                0.24613421022379733,
                -0.42189616795595375,
                0.3381032934630698,
                0.5427514636405772,
                0.49628613594957793,
                -0.07627214996475097,
                0.4410887532500849,
                -0.01692767108425203,
                -0.08450544277224559,
                0.74425301718548,
                0.23251746786532512,
                -0.2031266032606181,
                -0.2150192209207729,
                0.368542356956574,
                -0.2952664129507186,
                -0.4740730037172993,
                -0.4334899864056744,
                0.06666178007603374,
                -0.38527561190687987,
                0.014791188444059133,
                0.07379527434611988,
                -0.6501473306087662,
                -0.2031266032606181,
                0.17748452239141507,
            ],
            &[
                -0.5137582626874855,
                -1.0446494632363676,
                0.5638329418048147,
                0.33957549738127807,
                1.3173746133305713,
                0.4358071979220187,
                0.6154983565294077,
                -0.4628035353148079,
                -0.24281065326332396,
                0.5451335336558832,
                0.06408277406454746,
                0.5648404978763188,
            ],
            &[0.7381927527554533, 0.7083187087203046, 1.331804029743844, 1.9058085062335381],
        ),
    ];
    assert_all_converge(&problems);
}

/// A single sliding contact at a slip angle the enumeration's angle search misses: problem
/// 60 737 of seed 18 (rank-deficient, two contacts), whose only solution slides the first
/// contact and separates the second. Gauss-Newton on the angle, from the guessed angle and from
/// the free slip's direction, stops at a nonzero minimum of the mode equations; the exact slip
/// angles (`interior_point::slip_roots`: zeros of a degree-two trigonometric determinant) find
/// it. It stalled before them.
#[test]
fn a_contact_sliding_at_an_angle_the_search_misses_converges() {
    let mu = &[1.8614228041916967, 0.8450926527840936];
    let b = &[
        -0.22286722127829783,
        -0.014853941243137096,
        0.004842770202925579,
        0.1105240402818045,
        0.09096566079673607,
        -0.09253209282254637,
    ];
    let g = DMatrix::from_row_slice(
        6,
        6,
        &[
            5.3975508330669015,
            -1.4202452379493131,
            2.8285421117896297,
            4.322727424773882,
            -1.1169657128588957,
            0.27723978489164414,
            -1.4202452379493131,
            0.3737647401152587,
            -0.744266829955603,
            -1.1374790354261242,
            0.2939251228559211,
            -0.07293726470837823,
            2.8285421117896297,
            -0.744266829955603,
            1.4822743334503556,
            2.265288954276679,
            -0.5853362916447628,
            0.14528538783843228,
            4.322727424773882,
            -1.1374790354261242,
            2.265288954276679,
            3.4619773004900862,
            -0.8945596874338633,
            0.22202223499497825,
            -1.1169657128588957,
            0.2939251228559211,
            -0.5853362916447628,
            -0.8945596874338633,
            0.23115132833083518,
            -0.05736760279020088,
            0.27723978489164414,
            -0.07293726470837823,
            0.14528538783843228,
            0.22202223499497825,
            -0.05736760279020088,
            0.014242701907055517,
        ],
    );
    let out = solve(&g, b, mu);
    assert_eq!(out.info.status, Status::Converged, "{:?}", out.info);
    assert_coulomb_relative(60737, &out, mu);
}

#[test]
fn central_path_solve_hits_kappa() {
    let mut r = rng(6);
    let k = 3;
    let g = random_spd(&mut r, 3 * k);
    let mu = [0.5, 0.9, 0.3];
    let (b, _) = planted(&mut r, &g, &mu, &[Kind::Stick, Kind::Slide, Kind::Separate]);
    let mut solver = ContactSolver::new(k);
    let settings = Settings::default();
    let hard = solve_with(&mut solver, &settings, &g, &b, &mu, None);
    let kappa = 1e-3;
    let mut lambda = vec![0.0; 3 * k];
    let mut w = vec![0.0; 3 * k];
    let info =
        solver.solve_central_path(&settings, g.as_view(), &b, &mu, Some(&hard.lambda), kappa, &mut lambda, &mut w);
    assert_converged(&info);
    // On the central path l_n w_n = kappa for every contact (s = w_n at convergence).
    for i in 0..k {
        let p = lambda[3 * i] * w[3 * i];
        assert!((p - kappa).abs() < 1e-6 * kappa.max(1.0), "contact {i}: {p}");
    }
    let mut m = vec![0.0; 9 * k * k];
    solver.newton_matrix(&mut m);
    assert!(m.iter().all(|x| x.is_finite()));
}
