//! The step-sampling replan bench's workload (`--bench mpc`, one trot per replan, in turn, as
//! in `scenes/mpc_step_fast.ron`: 3 DDP iterations over 30 knots of the rotor quadruped, from
//! the settled stance, warm-started by the previous replan) repeated `N` times (default 20),
//! for instruction-counting profilers that do not depend on the machine's load:
//!
//! ```sh
//! valgrind --tool=callgrind --toggle-collect='contactlab::ocp::mpc::Mpc::replan_sampled' \
//!     --toggle-collect='contactlab::ocp::mpc::StepSampling::trots_at' \
//!     target/release/examples/mpc_profile 10
//! ```
//!
//! counts the replans and their trots alone (not the scene's settle or the first solve). The
//! printed cost sum tells whether a change moved the plans.

use contactlab::ocp::cito::hold_torque;
use contactlab::ocp::mpc::{horizon_problem, Mpc, StepSampling};
use contactlab::scene::Scene;
use std::path::Path;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/mpc_step.ron")).expect("scene");
    let step = s.mpc_settings().expect("mpc section");
    let sampling = step.step_sampling.expect("scenes/mpc_step.ron samples steps");
    let one = StepSampling { per_replan: 1, ..sampling };
    let rotors = s.settled(step.settle).expect("the stance settles");
    let problem = horizon_problem(&rotors, &hold_torque(&rotors), &step, step.sensitivity());
    let mut mpc = Mpc::new(&problem, step.iterations, 10);
    let x = problem.x0.clone();
    let started = std::time::Instant::now();
    let mut cost = 0.0;
    for replan in 0..n {
        let (_, trots) = one.trots_at(&rotors, 0.0, replan, problem.knots, step.knot_dt);
        cost += mpc.replan_sampled(&x, &trots, None).0.cost;
    }
    println!("{n} replans, {:.3} ms each (cost sum {cost:.12e})", 1e3 * started.elapsed().as_secs_f64() / n as f64);
}
