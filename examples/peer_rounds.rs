//! ContactLab's side of one paired round of `benches/peers/paired_rounds.py`: the standing
//! quadruped's step, its transition Jacobians and the batch rollouts, timed the way the criterion
//! benches time them (`benches/dynamics.rs`, `benches/transition.rs`, `benches/scaling.rs`), in
//! a fraction of a second, printed as one JSON object. The script runs it and MuJoCo's
//! measurements back to back, round after round, so that the ratios it reports are of
//! measurements taken at the same speed of a machine whose clock drifts by a third within
//! minutes.
//!
//! ```sh
//! cargo run --release --no-default-features --example peer_rounds
//! ```
//!
//! It also times one DDP iteration, `examples/ddp_profile.rs`'s (`scenes/cito_raise.ron`, 30
//! knots of 10 ms, exact sensitivity), on one and on two threads (`ddp::Settings::threads`),
//! for issue 21's target of 1.5 ms.
//!
//! Each time is the median over blocks (a block: many calls, its mean per call); the batch's
//! one- and two-thread blocks alternate, so that a drift of the clock within the round falls on
//! both. With `--count N` it runs N steps, N relaxed and N exact Jacobians and N RNEA
//! derivatives (from the configuration, as Pinocchio's `computeRNEADerivatives`), each batch in a
//! function of its own, for an instruction counter (`benches/peers/count_instructions.py`).

use contactlab::diff::transition::{transition_jacobians, Sensitivity, TransitionWorkspace};
use contactlab::dynamics::rnea_derivatives;
use contactlab::model::Data;
use contactlab::ocp::cito::CitoSettings;
use contactlab::ocp::{Ddp, Settings};
use contactlab::scene::Scene;
use contactlab::sim::Simulation;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

/// Median over `blocks` blocks of `per_block` calls of `f`, per call (us).
fn median_us(blocks: usize, per_block: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..blocks)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_block {
                f();
            }
            1e6 * start.elapsed().as_secs_f64() / per_block as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// 64 rollouts of 250 steps from the settled state with small pushes (`benches/scaling.rs`).
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

/// The buffers of the timed and counted calls, made before either, so that each counted
/// function (`--count`) executes the calls alone.
struct Counted<'a> {
    sim: &'a Simulation,
    stepping: Simulation,
    ws: contactlab::sim::step::StepWorkspace,
    tw: TransitionWorkspace,
    a: DMatrix<f64>,
    b: DMatrix<f64>,
    tau_ext: DVector<f64>,
    /// The RNEA derivatives' workspace and acceleration: the step's `(v+ - v) / h`.
    data: Data,
    acc: DVector<f64>,
}

impl<'a> Counted<'a> {
    fn new(sim: &'a Simulation) -> Self {
        let (nv, nu) = (sim.model.nv, sim.model.nu);
        Self {
            sim,
            stepping: sim.clone(),
            ws: sim.ws.clone(),
            tw: TransitionWorkspace::new(&sim.model),
            a: DMatrix::zeros(2 * nv, 2 * nv),
            b: DMatrix::zeros(2 * nv, nu),
            tau_ext: DVector::zeros(nv),
            data: Data::new(&sim.model),
            acc: {
                let mut next = sim.clone();
                next.step();
                (&next.v - &sim.v) / sim.settings.dt
            },
        }
    }

    #[inline(always)]
    fn jacobians(&mut self, n: usize, sensitivity: Sensitivity) {
        let sim = self.sim;
        let x = (sim.q.as_slice(), sim.v.as_slice(), sim.u.as_slice(), self.tau_ext.as_slice());
        for _ in 0..n {
            black_box(transition_jacobians(
                &sim.model,
                &sim.terrain,
                &sim.settings,
                &mut self.ws,
                &mut self.tw,
                x,
                sensitivity,
                &mut self.a,
                &mut self.b,
            ));
        }
    }
}

/// `n` steps from the settled state.
#[inline(never)]
fn counted_steps(c: &mut Counted, n: usize) {
    for _ in 0..n {
        c.stepping.q.copy_from(&c.sim.q);
        c.stepping.v.copy_from(&c.sim.v);
        black_box(c.stepping.step());
    }
}

/// `n` relaxed transition Jacobians at the settled state.
#[inline(never)]
fn counted_relaxed(c: &mut Counted, n: usize) {
    c.jacobians(n, Sensitivity::Relaxed { kappa: 1e-6, delta: 1e-3 })
}

/// `n` exact transition Jacobians at the settled state.
#[inline(never)]
fn counted_exact(c: &mut Counted, n: usize) {
    c.jacobians(n, Sensitivity::Exact)
}

/// `n` RNEA derivatives at the settled state and the step's acceleration, kinematics included
/// (the Jacobians start theirs from the step's placements and add the contact loads).
#[inline(never)]
fn counted_rnea_derivatives(c: &mut Counted, n: usize) {
    let (q, v) = (c.sim.q.as_slice(), c.sim.v.as_slice());
    for _ in 0..n {
        rnea_derivatives(&c.sim.model, &mut c.data, q, v, c.acc.as_slice());
        black_box(&c.data.dtau_dq);
    }
}

fn main() {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).expect("scene");
    let mut sim = s.simulation();
    for _ in 0..1000 {
        sim.step();
    }
    // `--count N`: N steps, then N relaxed and N exact Jacobians and N RNEA derivatives, each in
    // its own function, for `valgrind --tool=callgrind --toggle-collect=...`
    // (benches/peers/count_instructions.py).
    let args: Vec<String> = std::env::args().collect();
    let mut c = Counted::new(&sim);
    if let [_, flag, n] = &args[..] {
        assert_eq!(flag, "--count", "usage: peer_rounds [--count N]");
        let n: usize = n.parse().expect("--count N");
        counted_steps(&mut c, n);
        counted_relaxed(&mut c, n);
        counted_exact(&mut c, n);
        counted_rnea_derivatives(&mut c, n);
        return;
    }
    // Timed one call at a time through the same functions.
    let step_us = median_us(9, 2000, || counted_steps(&mut c, 1));
    let relaxed = median_us(9, 300, || counted_relaxed(&mut c, 1));
    let exact = median_us(9, 300, || counted_exact(&mut c, 1));

    // From the same settled state as the step (`benches/scaling.rs` settles the builtin
    // quadruped under the same PD for 3 s instead of 2 s: both stand still on four feet).
    // The one- and two-thread blocks alternate (seven of each, their medians): run one after
    // the other, a drift of the clock between them went into their ratio (1.56 to 2.36 in
    // three runs of five blocks each, scratch).
    let mut rollouts = serde_json::Map::new();
    let pools: Vec<rayon::ThreadPool> =
        [1, 2].iter().map(|&n| rayon::ThreadPoolBuilder::new().num_threads(n).build().expect("pool")).collect();
    let mut blocks = [Vec::new(), Vec::new()];
    for _ in 0..7 {
        for (pool, t) in pools.iter().zip(blocks.iter_mut()) {
            let start = Instant::now();
            assert_eq!(pool.install(|| batch(&sim)), 64 * 250);
            t.push(start.elapsed().as_secs_f64());
        }
    }
    for (threads, mut t) in [1, 2].into_iter().zip(blocks) {
        t.sort_by(f64::total_cmp);
        rollouts
            .insert(format!("rollouts_64x250_{threads}_threads_steps_per_s"), (64.0 * 250.0 / t[t.len() / 2]).into());
    }
    // One DDP iteration from the same start each time (`benches/ddp.rs` times the same step of
    // the solver on its own problem), on one and two threads.
    let raise = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/cito_raise.ron")).expect("scene");
    let mut cito = CitoSettings { iterations: 1, ..raise.cito_settings().expect("cito section") };
    cito.set_sensitivity(Sensitivity::Exact);
    let problem = raise.cito_problem(&cito).expect("cito problem");
    let guess = vec![problem.u_guess.clone(); problem.knots];
    for threads in [1, 2] {
        let mut ddp = Ddp::new(problem.shooting(), Settings { max_iterations: 1, threads, ..Default::default() });
        let us = median_us(7, 20, || {
            black_box(ddp.solve(Some(&guess), None).cost);
        });
        rollouts.insert(format!("ddp_iteration_{threads}_threads_ms"), (1e-3 * us).into());
    }
    let mut out = serde_json::json!({
        "step_us": step_us,
        "jacobians_relaxed_us": relaxed,
        "jacobians_exact_us": exact,
    });
    out.as_object_mut().expect("object").extend(rollouts);
    println!("{out}");
}
