//! The contact simulator as a DDP action model: its cost derivatives against finite
//! differences through `integrate`, and DDP raising the standing quadruped's base with no
//! contact schedule (the feet stay down because that is what lowers the cost).

use contactlab::diff::Sensitivity;
use contactlab::ocp::{ActionModel, ContactAction, Ddp, FootClearance, PoseCost, Settings, ShootingProblem, Status};
use contactlab::scene::Scene;
use contactlab::sim::Simulation;
use nalgebra::{DVector, Rotation3, Vector3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::Path;
use std::sync::Arc;

fn stance() -> Simulation {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).unwrap();
    let mut sim = s.simulation();
    for _ in 0..500 {
        sim.step();
    }
    sim
}

fn cost(sim: &Simulation, dz: f64) -> PoseCost {
    PoseCost {
        base_position: Vector3::new(sim.q[0], sim.q[1], sim.q[2] + dz),
        base_rotation: *Rotation3::from_euler_angles(0.05, -0.03, 0.1).matrix(),
        w_position: Vector3::new(100.0, 100.0, 400.0),
        w_orientation: Vector3::new(50.0, 50.0, 20.0),
        posture: sim.q.clone(),
        w_posture: 0.02,
        w_joint_velocity: 0.1,
        w_base_velocity: 1.0,
        w_control: 1e-3,
        w_joint_range: 0.0,
        joint_range_margin: 0.05,
    }
}

#[test]
fn cost_derivatives_match_finite_differences() {
    let sim = stance();
    let m = sim.model.clone();
    let (nq, nv) = (m.nq, m.nv);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut c = cost(&sim, 0.03);
    c.base_rotation = *Rotation3::from_euler_angles(0.4, -0.3, 1.2).matrix();
    let clearance = Some(FootClearance { weight: 5.0, scale: 0.02 });
    for (terminal, clearance) in [(None, None), (Some(10.0), None), (None, clearance), (Some(10.0), clearance)] {
        let mut action =
            ContactAction::new(m.clone(), sim.terrain.clone(), sim.settings, Sensitivity::Exact, c.clone(), terminal);
        action.clearance = clearance;
        let mut x = DVector::zeros(nq + nv);
        x.rows_mut(0, nq).copy_from(&sim.q);
        // Lifted a little so that the clearance term's exponential is not at its ground value.
        x[2] += 0.01;
        x.rows_mut(nq, nv).copy_from(&DVector::from_fn(nv, |_, _| rng.random_range(-0.5..0.5)));
        let u = if terminal.is_some() {
            DVector::zeros(0)
        } else {
            DVector::from_fn(m.nu, |_, _| rng.random_range(-5.0..5.0))
        };
        let mut d = action.create_data();
        action.calc_diff(&mut d, &x, &u);
        assert!(d.ok);
        let lx = d.lx.clone();
        let base = d.cost;
        for _ in 0..6 {
            let dir = DVector::from_fn(2 * nv, |_, _| rng.random_range(-1.0..1.0));
            let eps = 1e-6;
            let f = |s: f64| {
                let mut xs = x.clone();
                action.integrate(&x, &(&dir * s), &mut xs);
                let mut dd = action.create_data();
                action.calc(&mut dd, &xs, &u);
                dd.cost
            };
            let fd = (f(eps) - f(-eps)) / (2.0 * eps);
            let an = lx.dot(&dir);
            eprintln!("terminal {terminal:?} clearance {clearance:?}: directional derivative {an:.8e} vs fd {fd:.8e} (cost {base:.3e})");
            assert!((an - fd).abs() <= 1e-6 * fd.abs().max(1.0));
        }
    }
    // The SO(3) inverse right Jacobian inverts the right Jacobian: log(R exp(d)) - log(R) = Jr^-1 d.
    let r = Vector3::new(0.3, -0.7, 0.5);
    let d = Vector3::new(1e-7, -2e-7, 1.5e-7);
    let a = Rotation3::from_scaled_axis(r) * Rotation3::from_scaled_axis(d);
    let lhs = a.scaled_axis() - r;
    let rhs: Vector3<f64> = contactlab::ocp::contact::so3_right_jacobian_inv(&r) * d;
    assert!((lhs - rhs).norm() < 1e-12, "{lhs} vs {rhs}");
}

#[test]
fn ddp_raises_the_standing_quadruped_without_a_contact_schedule() {
    let mut sim = stance();
    sim.settings.dt = 0.01;
    let m = sim.model.clone();
    let (nq, nv) = (m.nq, m.nv);
    let c = cost(&sim, 0.04);
    let knots = 30;
    let running: Arc<dyn ActionModel> =
        Arc::new(ContactAction::new(m.clone(), sim.terrain.clone(), sim.settings, Sensitivity::Exact, c.clone(), None));
    let terminal =
        Arc::new(ContactAction::new(m.clone(), sim.terrain.clone(), sim.settings, Sensitivity::Exact, c, Some(200.0)));
    let mut x0 = DVector::zeros(nq + nv);
    x0.rows_mut(0, nq).copy_from(&sim.q);
    x0.rows_mut(nq, nv).copy_from(&sim.v);
    let p = ShootingProblem { x0, running: vec![running; knots], terminal };
    // Initial guess: the torques that hold the stance (the PD's output at rest).
    let mut u = DVector::zeros(m.nu);
    let mut damping = DVector::zeros(m.nu);
    sim.controller.compute(&m, sim.q.as_slice(), sim.v.as_slice(), 0.01, &mut u, &mut damping);
    let guess = vec![u; knots];
    let mut ddp = Ddp::new(p, Settings { max_iterations: 40, ..Default::default() });
    let info = ddp.solve(Some(&guess), None);
    let first = info.history.first().map(|h| h.cost + h.actual).unwrap_or(f64::NAN);
    eprintln!("{:?}: cost {first:.4} -> {:.4} in {} iterations", info.status, info.cost, info.iterations);
    for h in &info.history {
        eprintln!(
            "  it {} cost {:.5} expected {:.3e} actual {:.3e} mu {:.1e} alpha {} {:.1} ms",
            h.iteration,
            h.cost,
            h.expected,
            h.actual,
            h.mu,
            h.alpha,
            1e3 * h.time
        );
    }
    assert!(!matches!(info.status, Status::NonFinite | Status::InvalidInput), "{info:?}");
    assert!(info.cost < 0.7 * first, "DDP should cut the cost: {first} -> {}", info.cost);
    let z_final = ddp.xs[knots][2];
    eprintln!("base height {:.4} -> {:.4} (target {:.4})", sim.q[2], z_final, sim.q[2] + 0.04);
    assert!((z_final - (sim.q[2] + 0.04)).abs() < 0.01);
}

/// The joint range term: zero inside the ranges shrunk by the margin, and beyond them its
/// gradient matches finite differences (three joints pushed past an end, one of them past the
/// lower end), while the state cost without the term does not see them.
#[test]
fn joint_range_cost_penalizes_joints_beyond_their_ranges() {
    let sim = stance();
    let m = sim.model.clone();
    let (nq, nv) = (m.nq, m.nv);
    let mut c = cost(&sim, 0.0);
    let action = |c: &PoseCost| {
        ContactAction::new(m.clone(), sim.terrain.clone(), sim.settings, Sensitivity::Exact, c.clone(), Some(1.0))
    };
    let mut x = DVector::zeros(nq + nv);
    x.rows_mut(0, nq).copy_from(&sim.q);
    let value = |a: &ContactAction, x: &DVector<f64>| {
        let mut d = a.create_data();
        a.calc(&mut d, x, &DVector::zeros(0));
        d.cost
    };
    let off = value(&action(&c), &x);
    c.w_joint_range = 100.0;
    assert_eq!(value(&action(&c), &x), off, "the stance is inside every range: no penalty");
    // Past the ends: a hip abducted to 1.2 rad (range +-0.8), a thigh to -1.7 (lower -1.5), a
    // calf to -0.58 (upper -0.6; inside the range but within the 0.05 margin).
    let mut pushed = x.clone();
    for (name, q) in [("FR_hip_joint", 1.2), ("RL_thigh_joint", -1.7), ("RR_calf_joint", -0.58)] {
        let j = m.joints.iter().find(|j| j.name == name).expect("joint");
        pushed[j.idx_q] = q;
    }
    let c_off = PoseCost { w_joint_range: 0.0, ..c.clone() };
    let expected = 0.5 * 100.0 * ((1.2 - 0.75_f64).powi(2) + (-1.7 + 1.45_f64).powi(2) + (-0.58 + 0.65_f64).powi(2));
    let added = value(&action(&c), &pushed) - value(&action(&c_off), &pushed);
    assert!((added - expected).abs() < 1e-9, "penalty {added} vs {expected}");
    let a = action(&c);
    let mut d = a.create_data();
    a.calc_diff(&mut d, &pushed, &DVector::zeros(0));
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..6 {
        let dir = DVector::from_fn(2 * nv, |_, _| rng.random_range(-1.0..1.0));
        let eps = 1e-6;
        let f = |s: f64| {
            let mut xs = pushed.clone();
            a.integrate(&pushed, &(&dir * s), &mut xs);
            value(&a, &xs)
        };
        let fd = (f(eps) - f(-eps)) / (2.0 * eps);
        let an = d.lx.dot(&dir);
        assert!((an - fd).abs() <= 1e-6 * fd.abs().max(1.0), "{an} vs {fd}");
    }
}

/// A running model that records which threads differentiate it and the order of its calls
/// (`calls`: `c` for a `calc`, `d` for a `calc_diff` as it starts), and whose derivatives can be
/// made not finite (`poison`), or whose differentiation panics on any thread but one
/// (`panics: Off`) or on one thread only (`panics: On`), or whose `calc` panics at its `n`-th
/// call (`calc_panics_at`), or whose `n`-th `calc` waits (up to two seconds) until a
/// `calc_diff` has started (`calc_waits_at`: how a test makes sure that the other threads had
/// time to start on a rollout's knots, however busy the cores are).
#[derive(Clone)]
struct OnThreads {
    inner: Arc<dyn ActionModel>,
    seen: Arc<std::sync::Mutex<std::collections::HashSet<std::thread::ThreadId>>>,
    calls: Arc<std::sync::Mutex<Vec<char>>>,
    poison: Option<Arc<std::sync::atomic::AtomicBool>>,
    panics: Option<Panics>,
    calc_panics_at: Option<usize>,
    calc_waits_at: Option<usize>,
}

/// Where an [`OnThreads`] model panics when it is differentiated.
#[derive(Clone, Copy)]
enum Panics {
    Off(std::thread::ThreadId),
    On(std::thread::ThreadId),
}

impl OnThreads {
    fn new(inner: Arc<dyn ActionModel>) -> Self {
        let (seen, calls) = (Arc::default(), Arc::default());
        Self { inner, seen, calls, poison: None, panics: None, calc_panics_at: None, calc_waits_at: None }
    }
}

impl ActionModel for OnThreads {
    fn nx(&self) -> usize {
        self.inner.nx()
    }
    fn ndx(&self) -> usize {
        self.inner.ndx()
    }
    fn nu(&self) -> usize {
        self.inner.nu()
    }
    fn control_bounds(&self) -> Option<(&DVector<f64>, &DVector<f64>)> {
        self.inner.control_bounds()
    }
    fn create_data(&self) -> contactlab::ocp::ActionData {
        self.inner.create_data()
    }
    fn history_free(&self) -> bool {
        self.inner.history_free()
    }
    fn calc(&self, d: &mut contactlab::ocp::ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        let n = {
            let mut calls = self.calls.lock().unwrap();
            calls.push('c');
            calls.iter().filter(|c| **c == 'c').count()
        };
        assert!(self.calc_panics_at != Some(n), "this model panics at its call {n}");
        if self.calc_waits_at == Some(n) {
            let started = std::time::Instant::now();
            while !self.calls.lock().unwrap().contains(&'d') && started.elapsed().as_secs_f64() < 2.0 {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        self.inner.calc(d, x, u)
    }
    fn calc_diff(&self, d: &mut contactlab::ocp::ActionData, x: &DVector<f64>, u: &DVector<f64>) {
        self.calls.lock().unwrap().push('d');
        self.seen.lock().unwrap().insert(std::thread::current().id());
        let here = std::thread::current().id();
        match self.panics {
            Some(Panics::Off(t)) => assert!(t == here, "this model panics off its thread"),
            Some(Panics::On(t)) => assert!(t != here, "this model panics on this thread"),
            None => {}
        }
        // Knots are claimed one at a time by whichever thread is free: a knot that takes a while
        // makes both threads take some, even when the tests around take the cores.
        std::thread::sleep(std::time::Duration::from_micros(500));
        self.inner.calc_diff(d, x, u);
        if self.poison.as_ref().is_some_and(|p| p.load(std::sync::atomic::Ordering::Relaxed)) {
            d.fx[(0, 0)] = f64::NAN;
        }
    }
    fn integrate(&self, x: &DVector<f64>, dx: &DVector<f64>, out: &mut DVector<f64>) {
        self.inner.integrate(x, dx, out)
    }
    fn difference(&self, x0: &DVector<f64>, x1: &DVector<f64>, out: &mut DVector<f64>) {
        self.inner.difference(x0, x1, out)
    }
}

/// The raise of the threads tests: the settled stance with 10 ms knots, the relaxed sensitivity
/// and the joint PD's control as every knot's guess.
struct Raise {
    sim: Simulation,
    cost: PoseCost,
    sensitivity: Sensitivity,
    u: DVector<f64>,
}

impl Raise {
    fn new() -> Self {
        let mut sim = stance();
        sim.settings.dt = 0.01;
        let cost = cost(&sim, 0.04);
        let (mut u, mut damping) = (DVector::zeros(sim.model.nu), DVector::zeros(sim.model.nu));
        sim.controller.compute(&sim.model, sim.q.as_slice(), sim.v.as_slice(), 0.01, &mut u, &mut damping);
        Self { sim, cost, sensitivity: Sensitivity::Relaxed { kappa: 1e-3, delta: 1e-2 }, u }
    }

    fn action(&self, terminal: Option<f64>) -> ContactAction {
        let s = &self.sim;
        ContactAction::new(
            s.model.clone(),
            s.terrain.clone(),
            s.settings,
            self.sensitivity,
            self.cost.clone(),
            terminal,
        )
    }

    /// From the stance, with these running models and the raise's terminal.
    fn problem(&self, running: Vec<Arc<dyn ActionModel>>) -> ShootingProblem {
        let (nq, nv) = (self.sim.model.nq, self.sim.model.nv);
        let mut x0 = DVector::zeros(nq + nv);
        x0.rows_mut(0, nq).copy_from(&self.sim.q);
        x0.rows_mut(nq, nv).copy_from(&self.sim.v);
        ShootingProblem { x0, running, terminal: Arc::new(self.action(Some(200.0))) }
    }
}

/// The bits of a list of matrices, for comparing solves bit for bit.
fn bits(m: &[nalgebra::DMatrix<f64>]) -> Vec<u64> {
    m.iter().flat_map(|m| m.iter().map(|x| x.to_bits())).collect()
}

/// `Settings::threads`: the knots are differentiated on that many threads, the first backward
/// pass after them runs beside them, and the solve is the same bit for bit (each knot's
/// derivatives depend on that knot alone; the backward pass takes the knots in the same order).
#[test]
fn ddp_differentiates_knots_on_its_threads_with_the_same_result() {
    let raise = Raise::new();
    let knots = 30;
    let solve = |threads: usize, warm_start: bool| {
        let mut action = raise.action(None);
        action.warm_start = warm_start;
        // Halfway through the initial rollout, time for the other thread to start on its
        // knots (where it would: two threads without warm starts).
        let waits = (threads > 1 && !warm_start).then_some(knots / 2);
        let model = OnThreads { calc_waits_at: waits, ..OnThreads::new(Arc::new(action)) };
        let running: Arc<dyn ActionModel> = Arc::new(model.clone());
        let mut ddp = Ddp::new(
            raise.problem(vec![running; knots]),
            Settings { max_iterations: 4, threads, ..Default::default() },
        );
        let info = ddp.solve(Some(&vec![raise.u.clone(); knots]), None);
        let seen = model.seen.lock().unwrap().clone();
        // Derivatives that started before the initial rollout's last knot.
        let calls = model.calls.lock().unwrap();
        let last = calls.iter().enumerate().filter(|(_, c)| **c == 'c').nth(knots - 1).expect("a rollout").0;
        let behind = calls[..last].iter().filter(|c| **c == 'd').count();
        (info, ddp.xs.clone(), ddp.us.clone(), ddp.gains().to_vec(), seen, behind)
    };
    let vbits = |v: &[DVector<f64>]| v.iter().flat_map(|x| x.iter().map(|e| e.to_bits())).collect::<Vec<_>>();
    // Every iteration's step, regularization and improvements (all but the wall time).
    let steps = |info: &contactlab::ocp::Info| {
        info.history.iter().map(|h| [h.cost, h.expected, h.actual, h.mu, h.alpha].map(f64::to_bits)).collect::<Vec<_>>()
    };
    // Without warm starts the line searches take two trials at a time on two threads; with
    // them (each knot's solve starts from what its buffers held) one at a time.
    for warm_start in [false, true] {
        let (one, xs1, us1, gains1, seen1, behind1) = solve(1, warm_start);
        let (two, xs2, us2, gains2, seen2, behind2) = solve(2, warm_start);
        // Without warm starts the initial rollout's knots are differentiated behind it on two
        // threads; with them (or on one thread) only after it.
        assert_eq!(behind1, 0);
        assert!((behind2 > 0) != warm_start, "warm {warm_start}: {behind2} knots differentiated behind the rollout");
        assert!(one.iterations > 0 && one.cost.is_finite(), "{one:?}");
        // A line search accepted its second trial: on two threads the one rolled out beside
        // the first, into the other buffers.
        assert!(one.history.iter().any(|h| h.alpha == 0.5), "{:?}", one.history);
        // One thread: the caller's. Two: the caller's and, in each sweep, one spawned for it.
        let me = std::thread::current().id();
        assert_eq!(seen1.into_iter().collect::<Vec<_>>(), vec![me], "one thread differentiates: the caller");
        assert!(seen2.len() >= 2 && seen2.contains(&me), "the caller and other threads differentiate: {seen2:?}");
        assert_eq!(one.cost.to_bits(), two.cost.to_bits(), "warm {warm_start}: costs {} and {}", one.cost, two.cost);
        assert_eq!(
            (one.status, one.iterations, one.line_search_trials),
            (two.status, two.iterations, two.line_search_trials)
        );
        assert_eq!((vbits(&xs1), vbits(&us1)), (vbits(&xs2), vbits(&us2)), "warm {warm_start}");
        // The gains of the last backward pass, which on two threads ran beside the derivatives.
        assert!(bits(&gains1) == bits(&gains2), "warm {warm_start}: gains");
        assert_eq!(steps(&one), steps(&two), "warm {warm_start}");
    }
}

/// A knot whose derivatives are not finite stops the solve (`NonFinite`) before its backward
/// pass on one thread; on two, where the pass runs beside the derivatives and has already gone
/// over the knots above it, the gains it changed are put back: both leave the previous solve's
/// gains as they were, bit for bit.
#[test]
fn ddp_on_threads_puts_the_gains_back_when_a_knot_is_not_finite() {
    let raise = Raise::new();
    let (knots, bad) = (30, 10);
    for threads in [1, 2] {
        let poison = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let model = OnThreads::new(Arc::new(raise.action(None)));
        let running: Vec<Arc<dyn ActionModel>> = (0..knots)
            .map(|i| {
                let poison = (i == bad).then(|| poison.clone());
                Arc::new(OnThreads { poison, ..model.clone() }) as Arc<dyn ActionModel>
            })
            .collect();
        let mut ddp = Ddp::new(raise.problem(running), Settings { max_iterations: 2, threads, ..Default::default() });
        let guess = vec![raise.u.clone(); knots];
        let first = ddp.solve(Some(&guess), None);
        assert!(first.iterations == 2 && first.cost.is_finite(), "{first:?}");
        let before = bits(ddp.gains());
        assert!(ddp.gains()[knots - 1].norm() > 0.0);
        poison.store(true, std::sync::atomic::Ordering::Relaxed);
        let second = ddp.solve(Some(&guess), None);
        assert_eq!(second.status, Status::NonFinite, "threads {threads}");
        assert!(before == bits(ddp.gains()), "threads {threads}: the gains changed");
    }
}

/// A 2-thread solve of the raise whose models `configure` sets up (given the thread that calls
/// the solve) to panic: whether the panic reached that caller (the test fails if the solve has
/// not returned within two minutes), that thread, and the model with its records.
fn panic_on_threads(
    configure: fn(std::thread::ThreadId, OnThreads) -> OnThreads,
) -> (bool, std::thread::ThreadId, OnThreads) {
    let raise = Raise::new();
    let knots = 30;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let caller = std::thread::current().id();
        let model = configure(caller, OnThreads::new(Arc::new(raise.action(None))));
        let running: Arc<dyn ActionModel> = Arc::new(model.clone());
        let problem = raise.problem(vec![running; knots]);
        let mut ddp = Ddp::new(problem, Settings { max_iterations: 1, threads: 2, ..Default::default() });
        let guess = vec![raise.u.clone(); knots];
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ddp.solve(Some(&guess), None)));
        let _ = done.send((outcome.is_err(), caller, model));
    });
    finished.recv_timeout(std::time::Duration::from_secs(120)).expect("the solve did not return")
}

/// Whether the caller differentiated a knot, and whether another thread did.
fn differentiated_by(caller: std::thread::ThreadId, model: &OnThreads) -> (bool, bool) {
    let seen = model.seen.lock().unwrap_or_else(|e| e.into_inner());
    (seen.contains(&caller), seen.iter().any(|t| *t != caller))
}

/// A model that panics while a knot is differentiated on two threads: the panic reaches the
/// caller of the solve (as on one thread), and the backward pass running beside the derivatives
/// does not wait forever for that knot. The models panic on the helper thread only, at its first
/// knot (the lowest, taken behind the initial rollout), which the backward pass reaches (it takes
/// every knot from the last down).
#[test]
fn ddp_on_threads_passes_a_models_panic_on_instead_of_waiting_for_its_knot() {
    let (panicked, caller, model) = panic_on_threads(|t, m| OnThreads { panics: Some(Panics::Off(t)), ..m });
    let (_, helped) = differentiated_by(caller, &model);
    // The helper thread differentiated (and so panicked) unless the caller took every knot first.
    assert_eq!(panicked, helped, "panicked {panicked}, helper thread seen {helped}");
}

/// The same with models that panic on the calling thread only, while the helper thread stays
/// awake for the end of the sweep: the panic reaches the caller instead of the helper waiting
/// forever for a sweep that will not end.
#[test]
fn ddp_on_threads_passes_a_panic_on_the_calling_thread_on() {
    // The caller takes the last knot as soon as the rollout ends (the helper is busy with the
    // knots behind it, half a millisecond each).
    let (panicked, caller, model) = panic_on_threads(|t, m| OnThreads { panics: Some(Panics::On(t)), ..m });
    let (differentiated_here, _) = differentiated_by(caller, &model);
    assert!(panicked && differentiated_here, "panicked {panicked}, the caller differentiated {differentiated_here}");
}

/// A model that panics in the initial rollout on two threads, where the other thread is
/// waiting to differentiate the rollout's next knot: the panic reaches the caller of the solve
/// instead of the solve waiting forever for a rollout that will not go on.
#[test]
fn ddp_on_threads_passes_a_panic_in_the_rollout_on() {
    // Halfway through the 30 knots' rollout, once the other thread has started on its knots.
    let (panicked, _, model) =
        panic_on_threads(|_, m| OnThreads { calc_waits_at: Some(15), calc_panics_at: Some(16), ..m });
    let behind = model.calls.lock().unwrap_or_else(|e| e.into_inner()).contains(&'d');
    assert!(panicked && behind, "panicked {panicked}, knots differentiated behind the rollout {behind}");
}
