//! Which of the lean replans' settings (scenes/mpc_step_lean.ron; `ocp::mpc` module docs,
//! "Lean replans") costs the exact sensitivity its recoveries: the lateral pulls of
//! `examples/pull_starts.rs` (60, 80 and 100 N from the perturbed starts of seeds 0-29) for
//! MPC with the exact sensitivity under the lean settings and with each of the four turned off
//! in turn, and for the relaxed sensitivity under the lean settings without the relative
//! tolerance and without the re-centered contact warm starts. Two threads, one per half of the
//! seeds.
//!
//! ```sh
//! cargo run --release --no-default-features --example lean_ablation -- OUT.json
//! ```
//!
//! Writes `OUT.json`: per variant, the recovered runs out of 90 and every run.

use contactlab::diff::Sensitivity;
use contactlab::io::write_atomic;
use contactlab::ocp::mpc::MpcSettings;
use contactlab::ocp::pull_sweep::{run_pull, PullDirection, PullOutcome, PullSweepSettings, SweepController};
use contactlab::ocp::starts::{perturbed, StartNoise};
use contactlab::scene::Scene;
use contactlab::sim::Simulation;
use std::path::Path;

const FORCES: [f64; 3] = [60.0, 80.0, 100.0];
const SEEDS: u64 = 30;

#[derive(serde::Serialize)]
struct Run {
    seed: u64,
    #[serde(flatten)]
    outcome: PullOutcome,
}

/// The variant's runs over `seeds`.
fn runs(
    initial: &Simulation,
    settings: &MpcSettings,
    controller: SweepController,
    seeds: std::ops::Range<u64>,
) -> Vec<Run> {
    let sweep = PullSweepSettings::default();
    let mut out = Vec::new();
    for seed in seeds {
        let start = perturbed(initial, settings.settle, &StartNoise::default(), seed).expect("the start settles");
        for force in FORCES {
            let outcome =
                run_pull(&start, controller, settings, &sweep, PullDirection::Lateral, force, None).expect("a run");
            out.push(Run { seed, outcome });
        }
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, out] = &args[..] else {
        eprintln!("usage: lean_ablation OUT.json");
        std::process::exit(2);
    };
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/mpc_step_lean.ron")).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let lean = s.mpc_settings().expect("the scene has an mpc section");
    let mut initial = s.simulation();
    initial.pulls.clear();
    let exact = SweepController::Mpc(Sensitivity::Exact);
    let relaxed = SweepController::Mpc(Sensitivity::Relaxed { kappa: lean.kappa, delta: lean.delta });
    let variants = [
        ("exact, lean", exact, lean.clone()),
        ("exact, lean without relative_tolerance", exact, MpcSettings { relative_tolerance: None, ..lean.clone() }),
        ("exact, lean without adaptive_step", exact, MpcSettings { adaptive_step: false, ..lean.clone() }),
        ("exact, lean without contact_tolerance", exact, MpcSettings { contact_tolerance: None, ..lean.clone() }),
        (
            "exact, lean without contact_warm_start_mu",
            exact,
            MpcSettings { contact_warm_start_mu: None, ..lean.clone() },
        ),
        ("relaxed, lean without relative_tolerance", relaxed, MpcSettings { relative_tolerance: None, ..lean.clone() }),
        (
            "relaxed, lean without contact_warm_start_mu",
            relaxed,
            MpcSettings { contact_warm_start_mu: None, ..lean.clone() },
        ),
    ];
    let mut result = serde_json::Map::new();
    for (name, controller, settings) in &variants {
        let half = SEEDS / 2;
        let (a, b) = std::thread::scope(|scope| {
            let a = scope.spawn(|| runs(&initial, settings, *controller, 0..half));
            let b = runs(&initial, settings, *controller, half..SEEDS);
            (a.join().expect("a worker"), b)
        });
        let all: Vec<Run> = a.into_iter().chain(b).collect();
        let recovered = all.iter().filter(|r| r.outcome.recovered).count();
        println!("{name}: {recovered}/{}", all.len());
        result.insert(
            name.to_string(),
            serde_json::json!({ "recovered": recovered, "runs_total": all.len(), "runs": all }),
        );
    }
    let json = serde_json::json!({
        "machine": contactlab::io::machine_stamp(),
        "scene": s.file.name,
        "forces_n": FORCES,
        "seeds": SEEDS,
        "noise": StartNoise::default(),
        "variants": result,
    });
    write_atomic(Path::new(out), serde_json::to_string_pretty(&json).unwrap().as_bytes()).unwrap();
}
