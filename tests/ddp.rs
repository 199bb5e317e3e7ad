//! DDP on a linear-quadratic problem against the direct solution of its KKT system: one
//! iteration from zero controls must land on the optimum (the Gauss-Newton model is exact).
//! Plus control limits against a projected reference, and the solver's failure reports.

use contactlab::ocp::{ActionModel, Ddp, Lqr, Settings, ShootingProblem, Status};
use nalgebra::{DMatrix, DVector};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;

fn random(rng: &mut ChaCha8Rng, r: usize, c: usize, s: f64) -> DMatrix<f64> {
    DMatrix::from_fn(r, c, |_, _| rng.random_range(-s..s))
}

fn spd(rng: &mut ChaCha8Rng, n: usize, floor: f64) -> DMatrix<f64> {
    let m = random(rng, n, n, 1.0);
    &m * m.transpose() + DMatrix::identity(n, n) * floor
}

struct Case {
    running: Lqr,
    terminal: Lqr,
    x0: DVector<f64>,
    t: usize,
}

fn case(seed: u64) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (nx, nu, t) = (4, 2, 20);
    let a = DMatrix::identity(nx, nx) + random(&mut rng, nx, nx, 0.1);
    let b = random(&mut rng, nx, nu, 0.5);
    let running = Lqr {
        a: a.clone(),
        b: b.clone(),
        c: DVector::from_fn(nx, |_, _| rng.random_range(-0.1..0.1)),
        q: spd(&mut rng, nx, 0.1),
        q_lin: DVector::from_fn(nx, |_, _| rng.random_range(-1.0..1.0)),
        r: spd(&mut rng, nu, 0.5),
        r_lin: DVector::from_fn(nu, |_, _| rng.random_range(-1.0..1.0)),
        n: random(&mut rng, nu, nx, 0.05),
    };
    let terminal = Lqr {
        a,
        b: DMatrix::zeros(nx, 0),
        c: DVector::zeros(nx),
        q: spd(&mut rng, nx, 1.0),
        q_lin: DVector::from_fn(nx, |_, _| rng.random_range(-1.0..1.0)),
        r: DMatrix::zeros(0, 0),
        r_lin: DVector::zeros(0),
        n: DMatrix::zeros(0, nx),
    };
    Case { running, terminal, x0: DVector::from_fn(nx, |_, _| rng.random_range(-1.0..1.0)), t }
}

/// The optimum from the KKT system of the equality-constrained QP over (u_0..u_{T-1}, x_1..x_T).
fn kkt(c: &Case) -> Vec<DVector<f64>> {
    let (nx, nu, t) = (c.running.a.nrows(), c.running.b.ncols(), c.t);
    let nz = t * nu + t * nx;
    let ui = |k: usize| k * nu;
    let xi = |k: usize| t * nu + (k - 1) * nx; // x_k, k >= 1
    let mut h = DMatrix::zeros(nz, nz);
    let mut g = DVector::zeros(nz);
    let m = &c.running;
    for k in 0..t {
        // u_k terms.
        h.view_mut((ui(k), ui(k)), (nu, nu)).add_assign(&m.r);
        g.rows_mut(ui(k), nu).add_assign(&m.r_lin);
        if k == 0 {
            g.rows_mut(ui(0), nu).add_assign(&(&m.n * &c.x0));
        } else {
            h.view_mut((xi(k), xi(k)), (nx, nx)).add_assign(&m.q);
            g.rows_mut(xi(k), nx).add_assign(&m.q_lin);
            h.view_mut((ui(k), xi(k)), (nu, nx)).add_assign(&m.n);
            h.view_mut((xi(k), ui(k)), (nx, nu)).add_assign(&m.n.transpose());
        }
    }
    h.view_mut((xi(t), xi(t)), (nx, nx)).add_assign(&c.terminal.q);
    g.rows_mut(xi(t), nx).add_assign(&c.terminal.q_lin);
    // x_{k+1} - A x_k - B u_k = c.
    let mut e = DMatrix::zeros(t * nx, nz);
    let mut rhs = DVector::zeros(t * nx);
    for k in 0..t {
        let r = k * nx;
        e.view_mut((r, xi(k + 1)), (nx, nx)).copy_from(&DMatrix::identity(nx, nx));
        e.view_mut((r, ui(k)), (nx, nu)).copy_from(&(-&m.b));
        if k == 0 {
            rhs.rows_mut(r, nx).copy_from(&(&m.c + &m.a * &c.x0));
        } else {
            e.view_mut((r, xi(k)), (nx, nx)).copy_from(&(-&m.a));
            rhs.rows_mut(r, nx).copy_from(&m.c);
        }
    }
    let n = nz + t * nx;
    let mut k = DMatrix::zeros(n, n);
    k.view_mut((0, 0), (nz, nz)).copy_from(&h);
    k.view_mut((nz, 0), (t * nx, nz)).copy_from(&e);
    k.view_mut((0, nz), (nz, t * nx)).copy_from(&e.transpose());
    let mut b = DVector::zeros(n);
    b.rows_mut(0, nz).copy_from(&(-g));
    b.rows_mut(nz, t * nx).copy_from(&rhs);
    let z = k.lu().solve(&b).unwrap();
    (0..t).map(|k| z.rows(ui(k), nu).into_owned()).collect()
}

use std::ops::AddAssign;

fn problem(c: &Case) -> ShootingProblem {
    let running: Arc<dyn ActionModel> = Arc::new(c.running.clone());
    ShootingProblem { x0: c.x0.clone(), running: vec![running; c.t], terminal: Arc::new(c.terminal.clone()) }
}

#[test]
fn one_iteration_solves_an_lqr_to_its_kkt_solution() {
    for seed in 0..3 {
        let c = case(seed);
        let reference = kkt(&c);
        let settings = Settings { max_iterations: 1, mu_init: 0.0, mu_min: 0.0, ..Default::default() };
        let mut ddp = Ddp::new(problem(&c), settings);
        let info = ddp.solve(None, None);
        assert_eq!(info.iterations, 1, "{info:?}");
        assert_eq!(info.history[0].alpha, 1.0);
        let err = ddp.us.iter().zip(&reference).map(|(a, b)| (a - b).norm()).fold(0.0, f64::max);
        let scale = reference.iter().map(|u| u.norm()).fold(0.0, f64::max);
        eprintln!("seed {seed}: max |u - u_kkt| = {err:.2e} (|u| up to {scale:.2})");
        assert!(err < 1e-8 * scale.max(1.0));
        // A second iteration sees nothing left to gain.
        let mut ddp = Ddp::new(problem(&c), Settings { mu_init: 0.0, mu_min: 0.0, ..Default::default() });
        let info = ddp.solve(None, None);
        assert_eq!(info.status, Status::Converged);
        assert!(info.iterations <= 2, "{info:?}");
        // The expected improvement of the first step equals the actual one (exact model).
        let h = &info.history[0];
        assert!((h.expected - h.actual).abs() < 1e-9 * h.actual.abs().max(1.0), "{h:?}");
    }
}

/// Control limits: the bounded optimum satisfies the projected optimality conditions, which are
/// checked against the KKT gradient of the reduced (u-only) problem by finite differences.
#[test]
fn control_limits_are_respected_and_optimal() {
    struct Boxed(Lqr, DVector<f64>, DVector<f64>);
    impl ActionModel for Boxed {
        fn nx(&self) -> usize {
            self.0.nx()
        }
        fn ndx(&self) -> usize {
            self.0.ndx()
        }
        fn nu(&self) -> usize {
            self.0.nu()
        }
        fn control_bounds(&self) -> Option<(&DVector<f64>, &DVector<f64>)> {
            Some((&self.1, &self.2))
        }
        fn create_data(&self) -> contactlab::ocp::ActionData {
            self.0.create_data()
        }
        fn calc(&self, d: &mut contactlab::ocp::ActionData, x: &DVector<f64>, u: &DVector<f64>) {
            self.0.calc(d, x, u)
        }
        fn calc_diff(&self, d: &mut contactlab::ocp::ActionData, x: &DVector<f64>, u: &DVector<f64>) {
            self.0.calc_diff(d, x, u)
        }
        fn integrate(&self, x: &DVector<f64>, dx: &DVector<f64>, out: &mut DVector<f64>) {
            self.0.integrate(x, dx, out)
        }
        fn difference(&self, x0: &DVector<f64>, x1: &DVector<f64>, out: &mut DVector<f64>) {
            self.0.difference(x0, x1, out)
        }
    }
    let c = case(7);
    let unbounded = kkt(&c);
    let peak = unbounded.iter().map(|u| u.amax()).fold(0.0, f64::max);
    let lim = 0.5 * peak;
    let nu = c.running.nu();
    let model: Arc<dyn ActionModel> =
        Arc::new(Boxed(c.running.clone(), DVector::from_element(nu, -lim), DVector::from_element(nu, lim)));
    let p = ShootingProblem { x0: c.x0.clone(), running: vec![model; c.t], terminal: Arc::new(c.terminal.clone()) };
    let mut ddp = Ddp::new(p, Settings::default());
    let info = ddp.solve(None, None);
    assert_eq!(info.status, Status::Converged, "{info:?}");
    assert!(ddp.us.iter().all(|u| u.amax() <= lim + 1e-12));
    assert!(ddp.us.iter().any(|u| u.amax() >= lim - 1e-9), "the bound should be active");
    // Projected optimality: perturbing any control inward does not lower the cost.
    let cost = |us: &[DVector<f64>]| {
        let mut d = c.running.create_data();
        let mut x = c.x0.clone();
        let mut j = 0.0;
        for u in us {
            c.running.calc(&mut d, &x, u);
            j += d.cost;
            x = d.x_next.clone();
        }
        c.terminal.calc(&mut d, &x, &DVector::zeros(0));
        j + d.cost
    };
    let j0 = cost(&ddp.us);
    for k in 0..c.t {
        for i in 0..nu {
            for s in [-1e-4, 1e-4] {
                let mut us = ddp.us.clone();
                us[k][i] = (us[k][i] + s).clamp(-lim, lim);
                assert!(cost(&us) >= j0 - 1e-10, "knot {k} control {i}: a feasible move lowers the cost");
            }
        }
    }
}

#[test]
fn invalid_settings_and_cancellation_are_reported() {
    let c = case(1);
    let mut ddp = Ddp::new(problem(&c), Settings { mu_factor: 0.5, ..Default::default() });
    assert_eq!(ddp.solve(None, None).status, Status::InvalidInput);
    let cancel = std::sync::atomic::AtomicBool::new(true);
    let mut ddp = Ddp::new(problem(&c), Settings::default());
    assert_eq!(ddp.solve(None, Some(&cancel)).status, Status::Cancelled);
}

/// `u+ = u`-style one-knot problem whose control gradient is biased by `bias` and scaled by
/// `scale` (as a relaxed contact sensitivity is): the true cost is `0.5 x^2 + 0.5 u^2`, the
/// model's `l_u` is `scale u + bias`. Counts the rollouts (`calc` calls).
struct BiasedGradient {
    lqr: Lqr,
    bias: f64,
    scale: f64,
    calcs: std::sync::atomic::AtomicUsize,
    /// What the model reports as `nonnegative_cost` (true only for a cost without linear terms).
    nonnegative: bool,
}

impl ActionModel for BiasedGradient {
    fn nx(&self) -> usize {
        self.lqr.nx()
    }
    fn ndx(&self) -> usize {
        self.lqr.ndx()
    }
    fn nu(&self) -> usize {
        self.lqr.nu()
    }
    fn create_data(&self) -> contactlab::ocp::ActionData {
        self.lqr.create_data()
    }
    fn calc(&self, d: &mut contactlab::ocp::ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        self.calcs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lqr.calc(d, x, u)
    }
    fn calc_diff(&self, d: &mut contactlab::ocp::ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        self.lqr.calc_diff(d, x, u);
        d.lu *= self.scale;
        d.lu.add_scalar_mut(self.bias);
    }
    fn nonnegative_cost(&self) -> bool {
        self.nonnegative
    }
    fn integrate(&self, x: &DVector<f64>, dx: &DVector<f64>, out: &mut DVector<f64>) {
        self.lqr.integrate(x, dx, out)
    }
    fn difference(&self, x0: &DVector<f64>, x1: &DVector<f64>, out: &mut DVector<f64>) {
        self.lqr.difference(x0, x1, out)
    }
}

/// The scalar problem `x+ = a x + b u` with cost `x^2 / 2 + r u^2 / 2` per knot and `x^2 / 2` at
/// the end: its running and terminal models.
fn scalar(a: f64, b: f64, r: f64) -> (Lqr, Lqr) {
    let one = |v: f64| DMatrix::from_element(1, 1, v);
    let running = Lqr {
        a: one(a),
        b: one(b),
        c: DVector::zeros(1),
        q: one(1.0),
        q_lin: DVector::zeros(1),
        r: one(r),
        r_lin: DVector::zeros(1),
        n: DMatrix::zeros(1, 1),
    };
    let terminal = Lqr {
        b: DMatrix::zeros(1, 0),
        r: DMatrix::zeros(0, 0),
        r_lin: DVector::zeros(0),
        n: DMatrix::zeros(0, 1),
        ..running.clone()
    };
    (running, terminal)
}

/// The one-knot problem `x+ = x` with cost `0.5 x^2 + 0.5 u^2` (`0.5 x^2` at the end) whose
/// control gradient is biased by `bias` and scaled by `scale`; the running model counts its
/// rollouts.
fn one_knot(bias: f64, scale: f64) -> (Arc<BiasedGradient>, ShootingProblem) {
    let (lqr, terminal) = scalar(1.0, 0.0, 1.0);
    let running = Arc::new(BiasedGradient { lqr, bias, scale, calcs: 0.into(), nonnegative: false });
    let problem = ShootingProblem {
        x0: DVector::zeros(1),
        running: vec![running.clone() as Arc<dyn ActionModel>],
        terminal: Arc::new(terminal),
    };
    (running, problem)
}

/// A biased gradient predicts descent along a step that raises the true cost to first order:
/// from `u = -0.9` the model (optimum `u = -1`) steps by `-0.1`, where the cost's slope is
/// `+0.09`. Every trial step is rejected either way; the cut stops the search after three trials
/// (steps 1, 1/2, 1/4) instead of halving down to `alpha_min` (11 trials), and leaves the same
/// answer.
#[test]
fn a_line_search_along_a_first_order_ascent_is_cut_short() {
    let solve = |cut: bool| {
        let (running, problem) = one_knot(1.0, 1.0);
        let settings = Settings { max_iterations: 1, cut_first_order_ascent: cut, ..Default::default() };
        let mut ddp = Ddp::new(problem, settings);
        let info = ddp.solve(Some(&[DVector::from_element(1, -0.9)]), None);
        // One rollout before the iteration; the rest are the line search's trials.
        let trials = running.calcs.load(std::sync::atomic::Ordering::Relaxed) - 1;
        (info.status, ddp.us[0][0], info.cost, trials)
    };
    let (cut, full) = (solve(true), solve(false));
    assert_eq!(full.3, 11, "without the cut the search halves down to alpha_min");
    assert_eq!(cut.3, 3, "the cut stops after steps 1, 1/2 and 1/4");
    assert_eq!((cut.0, cut.1, cut.2), (full.0, full.1, full.2));
    assert_eq!(cut.1, -0.9, "every trial was rejected");
}

/// The scalar problem of the cut test: every line search is rejected, and raising `mu` changes
/// nothing, so a budgeted solve (`max_rejected_line_searches = 1`) ends after its first
/// iteration with the answer the unbudgeted one reaches after all five.
#[test]
fn a_budgeted_solve_stops_at_its_first_rejected_line_search() {
    let solve = |budget: Option<usize>| {
        let (_, problem) = one_knot(1.0, 1.0);
        let settings = Settings { max_iterations: 5, max_rejected_line_searches: budget, ..Default::default() };
        let mut ddp = Ddp::new(problem, settings);
        let info = ddp.solve(Some(&[DVector::from_element(1, -0.9)]), None);
        (info.status, info.iterations, info.line_search_trials, ddp.us[0][0], info.cost)
    };
    let (full, budgeted) = (solve(None), solve(Some(1)));
    assert_eq!((full.0, full.1, full.2), (Status::MaxIterations, 5, 15), "five rejected searches of three trials");
    assert_eq!((budgeted.0, budgeted.1, budgeted.2), (Status::LineSearchFailed, 1, 3));
    assert_eq!((budgeted.3, budgeted.4), (full.3, full.4));
}

/// `x+ = u` over ten knots with a pure quadratic cost, from `x0 = 1` and `u = 1` at every
/// knot, and a gradient biased by +30: the model's full step overshoots the optimum (`u = 0`)
/// many times over, so the first iteration accepts only a step of 1/16 and the later ones
/// none, after trials whose cost rises up to a hundredfold within the first knots. With
/// `trial_abort = 2` such a trial stops at the knot where its running cost passes twice the
/// current cost (every cost is non-negative): fewer model calls, the same steps accepted and
/// the same answer. A model that does not declare its cost non-negative is never cut.
#[test]
fn trial_abort_stops_diverging_trials_early_with_the_same_answer() {
    let (lqr, terminal) = scalar(0.0, 1.0, 0.1);
    let solve = |abort: Option<f64>, nonnegative: bool| {
        let running =
            Arc::new(BiasedGradient { lqr: lqr.clone(), bias: 30.0, scale: 1.0, calcs: 0.into(), nonnegative });
        let problem = ShootingProblem {
            x0: DVector::from_element(1, 1.0),
            running: vec![running.clone() as Arc<dyn ActionModel>; 10],
            terminal: Arc::new(BiasedGradient {
                lqr: terminal.clone(),
                bias: 0.0,
                scale: 1.0,
                calcs: 0.into(),
                nonnegative,
            }),
        };
        let settings = Settings { max_iterations: 3, trial_abort: abort, ..Default::default() };
        let mut ddp = Ddp::new(problem, settings);
        let info = ddp.solve(Some(&vec![DVector::from_element(1, 1.0); 10]), None);
        let us: Vec<f64> = ddp.us.iter().map(|u| u[0]).collect();
        (
            info.status,
            info.iterations,
            info.line_search_trials,
            us,
            info.cost,
            running.calcs.load(std::sync::atomic::Ordering::Relaxed),
        )
    };
    let full = solve(None, true);
    let cut = solve(Some(2.0), true);
    let undeclared = solve(Some(2.0), false);
    assert!(full.2 > 3, "the biased steps need several trials: {full:?}");
    assert_eq!((cut.0, cut.1, cut.2, &cut.3, cut.4), (full.0, full.1, full.2, &full.3, full.4));
    assert!(cut.5 + 10 <= full.5, "aborted trials skip knots: {} against {} model calls", cut.5, full.5);
    assert_eq!(undeclared.5, full.5, "costs not declared non-negative are never cut");
}

/// The first-order-ascent problem from `u = -0.9`: the model predicts a full step to gain
/// 0.005, 1.2 % of the cost 0.405, that the rollout cannot confirm. With a relative tolerance
/// above that fraction the solve ends as converged before any trial; below it, the line search
/// runs (three trials, rejected) as without one.
#[test]
fn a_relative_tolerance_ends_a_solve_whose_expected_gain_is_a_small_fraction_of_its_cost() {
    let solve = |relative: Option<f64>| {
        let (_, problem) = one_knot(1.0, 1.0);
        let settings = Settings { max_iterations: 1, relative_tolerance: relative, ..Default::default() };
        let mut ddp = Ddp::new(problem, settings);
        let info = ddp.solve(Some(&[DVector::from_element(1, -0.9)]), None);
        (info.status, info.line_search_trials, ddp.us[0][0])
    };
    assert_eq!(solve(Some(0.02)), (Status::Converged, 0, -0.9));
    assert_eq!(solve(Some(0.01)), (Status::MaxIterations, 3, -0.9));
    assert_eq!(solve(None), solve(Some(0.01)));
}

/// A gradient scaled six-fold overshoots the optimum `u = 0` of `0.5 u^2`: a step `alpha` lowers
/// the cost only if `6 alpha < 2`, so every line search from 1 rejects 1 and 1/2 and accepts
/// 1/4 (the gap then halves). With `adaptive_step` every search after the first starts from
/// twice the last accepted step, 1/2, and so does the first of the next solve on the same
/// `Ddp`: the same steps, the same answer, one trial fewer per search.
#[test]
fn adaptive_step_starts_from_the_last_step_and_accepts_the_same_ones() {
    let solve = |adaptive: bool| {
        let (_, problem) = one_knot(0.0, 6.0);
        let settings = Settings { max_iterations: 4, adaptive_step: adaptive, ..Default::default() };
        let mut ddp = Ddp::new(problem, settings);
        let first = ddp.solve(Some(&[DVector::from_element(1, 1.0)]), None);
        let second = ddp.solve(None, None);
        let alphas: Vec<f64> = first.history.iter().chain(&second.history).map(|h| h.alpha).collect();
        (alphas, first.line_search_trials, second.line_search_trials, ddp.us[0][0])
    };
    let (plain, adaptive) = (solve(false), solve(true));
    assert_eq!(plain.0, vec![0.25; 8]);
    assert_eq!((plain.1, plain.2), (12, 12), "three trials per search from 1");
    assert_eq!(adaptive.0, plain.0, "the same steps accepted");
    assert_eq!((adaptive.1, adaptive.2), (3 + 3 * 2, 4 * 2), "two trials per search from 1/2");
    assert_eq!(adaptive.3, plain.3);
    assert!((plain.3 - 1.0 / 256.0).abs() < 1e-7, "the gap halves with every step: {}", plain.3);
}
