//! The DDP bench's workload (one iteration over a 30-knot contact-implicit quadruped horizon)
//! repeated `N` times (default 20), for instruction-counting profilers that do not depend on
//! the machine's load: `valgrind --tool=callgrind target/release/examples/ddp_profile 20`.

use contactlab::diff::Sensitivity;
use contactlab::ocp::cito::CitoSettings;
use contactlab::ocp::{Ddp, Settings};
use contactlab::scene::Scene;
use std::path::Path;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/cito_raise.ron")).expect("scene");
    let mut settings = CitoSettings { iterations: 1, ..s.cito_settings().expect("cito section") };
    settings.set_sensitivity(Sensitivity::Exact);
    let p = s.cito_problem(&settings).expect("cito problem");
    let guess = vec![p.u_guess.clone(); p.knots];
    let mut ddp = Ddp::new(p.shooting(), Settings { max_iterations: 1, ..Default::default() });
    let started = std::time::Instant::now();
    let mut cost = 0.0;
    for _ in 0..n {
        cost += ddp.solve(Some(&guess), None).cost;
    }
    println!("{n} iterations, {:.3} ms each (cost {cost:.6})", 1e3 * started.elapsed().as_secs_f64() / n as f64);
}
