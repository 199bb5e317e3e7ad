//! One MPC replan cycle on scenes/mpc_pull.ron (30 knots of 10 ms, relaxed sensitivity, from
//! the settled stance, warm-started by the previous cycle as in closed loop): 1 and 3 DDP
//! iterations per cycle, against the 10 ms control period they must fit in; and on
//! scenes/mpc_step.ron (rotor inertia, 3 iterations) without and with step sampling (the eight
//! trots generated and compared at every cycle, as `MpcDriver` does, or one in turn as in
//! scenes/mpc_step_fast.ron, and that with the budgeted replans of scenes/mpc_step_budget.ron
//! and the lean ones of scenes/mpc_step_lean.ron, and the feedback warm starts with two
//! iterations of scenes/mpc_step_feedback.ron). At the settled stance a lean replan often
//! ends early (its relative tolerance): the closed-loop runs of those scenes time the replans
//! through a shove, and two of the lean and of the feedback scene's closed-loop cycles through
//! their shove (those with the most line-search trials) are replayed from a snapshot of the
//! driver and the plant.
//! Baseline in the same run:
//! one control period of the simulator under the scene's joint PD (5 steps of 2 ms).
//!
//! Run: `cargo bench --no-default-features --bench mpc`.

use contactlab::ocp::cito::hold_torque;
use contactlab::ocp::mpc::{horizon_problem, Mpc, MpcDriver, MpcSettings, StepSampling};
use contactlab::scene::Scene;
use contactlab::sim::{Pull, Simulation};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::path::Path;

fn bench(c: &mut Criterion) {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/mpc_pull.ron")).unwrap();
    let settings = s.mpc_settings().unwrap();
    let sim = s.settled(settings.settle).unwrap();
    let problem = horizon_problem(&sim, &hold_torque(&sim), &settings, settings.sensitivity());
    for iterations in [1, 3] {
        let mut mpc = Mpc::new(&problem, iterations, 10);
        let x = problem.x0.clone();
        c.bench_function(&format!("mpc_replan_{iterations}_iteration_30_knots"), |b| {
            b.iter(|| std::hint::black_box(mpc.replan(&x, None).cost))
        });
    }
    // The same cycle with step sampling (scenes/mpc_step.ron: rotor inertia, 3 iterations,
    // eight sampled trots rolled out and compared with the shifted plan at every replan).
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/mpc_step.ron")).unwrap();
    let step = s.mpc_settings().unwrap();
    let sampling = step.step_sampling.expect("scenes/mpc_step.ron samples steps");
    let rotors = s.settled(step.settle).unwrap();
    let problem = horizon_problem(&rotors, &hold_torque(&rotors), &step, step.sensitivity());
    let mut mpc = Mpc::new(&problem, step.iterations, 10);
    let x = problem.x0.clone();
    c.bench_function("mpc_replan_3_iterations_30_knots_rotors", |b| {
        b.iter(|| std::hint::black_box(mpc.replan(&x, None).cost))
    });
    let mut mpc = Mpc::new(&problem, step.iterations, 10);
    c.bench_function("mpc_replan_3_iterations_30_knots_rotors_step_sampling", |b| {
        b.iter(|| {
            let trots = sampling.trots(&rotors, 0.0, problem.knots, step.knot_dt);
            std::hint::black_box(mpc.replan_sampled(&x, &trots, None).0.cost)
        })
    });
    // One trot per replan, taken in turn (scenes/mpc_step_fast.ron), then the same with
    // budgeted replans (scenes/mpc_step_budget.ron: warm-started contact solves, a replan ended
    // at its first rejected line search, diverging trials cut short) and with lean ones
    // (scenes/mpc_step_lean.ron: relative convergence, line searches from the last accepted
    // step, a looser horizon contact tolerance, re-centered horizon contact warm starts).
    let one = StepSampling { per_replan: 1, ..sampling };
    one_trot(c, "mpc_replan_3_iterations_30_knots_rotors_step_sampling_one_trot", &rotors, &step, one);
    // And with feedback warm starts and two iterations (scenes/mpc_step_feedback.ron).
    for (scene, suffix) in
        [("mpc_step_budget", "budgeted"), ("mpc_step_lean", "lean"), ("mpc_step_feedback", "feedback")]
    {
        let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenes/{scene}.ron"))).unwrap();
        let settings = s.mpc_settings().unwrap();
        let sampling = settings.step_sampling.expect("the scene samples steps");
        let name =
            format!("mpc_replan_{}_iterations_30_knots_rotors_step_sampling_one_trot_{suffix}", settings.iterations);
        one_trot(c, &name, &rotors, &settings, sampling);
    }
    // Closed-loop cycles of the lean scene's own run through its shove, replayed from a
    // snapshot: the two with the most line-search trials (8 each, at 0.73 s, during the pull,
    // and 1.21 s, stepping after it). Of the feedback scene's: the one with the most trials
    // (12, at 1.78 s, stepping) and the slowest of those with 6 (1.09 s, in its own run).
    mid_shove(c, "mpc_step_lean", &[73, 121]);
    mid_shove(c, "mpc_step_feedback", &[109, 178]);
    let mut pd = sim.clone();
    c.bench_function("baseline_simulator_10ms_joint_pd_5_steps", |b| {
        b.iter(|| {
            let snapshot = (pd.q.clone(), pd.v.clone());
            for _ in 0..5 {
                pd.step();
            }
            pd.q = snapshot.0;
            pd.v = snapshot.1;
        })
    });
}

/// A replan cycle from the settled stance `sim` with `settings`, warm-started by the previous
/// one, each sampling its trot from `sampling` in turn.
fn one_trot(c: &mut Criterion, name: &str, sim: &Simulation, settings: &MpcSettings, sampling: StepSampling) {
    let problem = horizon_problem(sim, &hold_torque(sim), settings, settings.sensitivity());
    let mut mpc = Mpc::new(&problem, settings.iterations, 10);
    mpc.feedback_warm_start = settings.feedback_warm_start;
    let x = problem.x0.clone();
    let mut replan = 0;
    c.bench_function(name, |b| {
        b.iter(|| {
            let (_, trots) = sampling.trots_at(sim, 0.0, replan, problem.knots, settings.knot_dt);
            replan += 1;
            std::hint::black_box(mpc.replan_sampled(&x, &trots, None).0.cost)
        })
    });
}

/// The scene's closed loop as `contactlab mpc` runs it (`ocp::mpc::run_closed_loop`), driven to
/// each of `cycles` (replans since engagement, ascending); there the driver and the simulation
/// are cloned and the bench times the clone's whole cycle (`MpcDriver::before_step` at a
/// replan: the sampled trot and the replan), every iteration from the same snapshot.
fn mid_shove(c: &mut Criterion, scene: &str, cycles: &[usize]) {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenes/{scene}.ron"))).unwrap();
    let settings = s.mpc_settings().unwrap();
    let mut sim = s.settled(settings.settle).unwrap();
    let mut driver = MpcDriver::new(settings.clone());
    driver.engage(&mut sim).unwrap();
    let t0 = sim.t;
    sim.pulls = s.pulls.iter().map(|p| Pull { start: p.start + t0, ..*p }).collect();
    let substeps = (settings.knot_dt / sim.settings.dt).round() as usize;
    let mut steps = 0;
    for &k in cycles {
        while steps < k * substeps {
            driver.before_step(&mut sim, None).unwrap();
            assert!(sim.step().status.advanced());
            steps += 1;
        }
        let name = format!("mpc_cycle_{scene}_replan_{k}");
        c.bench_function(&name, |b| {
            b.iter_batched(
                || (driver.clone(), sim.clone()),
                // Returned, so that criterion drops the clones after the timing, not in it.
                |(mut d, mut s)| {
                    let cycle = d.before_step(&mut s, None).unwrap().expect("a replan");
                    (d, s, cycle)
                },
                BatchSize::LargeInput,
            )
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
