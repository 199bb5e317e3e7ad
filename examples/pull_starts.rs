//! The rotor-inertia pull sweep's lateral comparison repeated from perturbed starts: every
//! controller (MPC with each contact sensitivity at the scene's iterations, and the scene's own
//! joint PD) against the same lateral pulls from the same `N` starts (`ocp::starts::perturbed`
//! with its default noise: joint offsets up to 0.05 rad before the settle, a small base twist
//! after it), judged as `contactlab mpc --pull-sweep` judges a run (`ocp::pull_sweep`):
//!
//! ```sh
//! cargo run --release --no-default-features --example pull_starts -- SCENE OUT_DIR [FIRST_SEED]
//! ```
//!
//! Writes `OUT_DIR/pull_starts.json` (every run) and `pull_starts.md` (recovered runs out of
//! `N` per controller and force, the table the README quotes). The starts are seeds
//! `FIRST_SEED..FIRST_SEED + N` (default 0): the README's tables use 0..10, on which settings
//! were chosen, and 10..20 as fresh starts no choice looked at.

use contactlab::diff::Sensitivity;
use contactlab::io::write_atomic;
use contactlab::ocp::pull_sweep::{run_pull, PullDirection, PullOutcome, PullSweepSettings, SweepController};
use contactlab::ocp::starts::{perturbed, StartNoise};
use contactlab::scene::Scene;
use std::fmt::Write as _;
use std::path::Path;

const FORCES: [f64; 3] = [60.0, 80.0, 100.0];
const STARTS: u64 = 10;

#[derive(serde::Serialize)]
struct Run {
    seed: u64,
    #[serde(flatten)]
    outcome: PullOutcome,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (scene, out, first) = match &args[..] {
        [_, scene, out] => (scene, out, 0),
        [_, scene, out, first] => match first.parse::<u64>() {
            Ok(f) => (scene, out, f),
            Err(e) => {
                eprintln!("FIRST_SEED `{first}`: {e}");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!("usage: pull_starts SCENE OUT_DIR [FIRST_SEED]");
            std::process::exit(2);
        }
    };
    let s = Scene::load(Path::new(scene)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let settings = s.mpc_settings().expect("the scene has an mpc section");
    let sweep = PullSweepSettings::default();
    let (kappa, delta) = (settings.kappa, settings.delta);
    let controllers = [
        SweepController::Mpc(Sensitivity::Exact),
        SweepController::Mpc(Sensitivity::SignoriniRelaxed { kappa }),
        SweepController::Mpc(Sensitivity::Relaxed { kappa, delta }),
        SweepController::Baseline,
    ];
    let mut initial = s.simulation();
    initial.pulls.clear();
    let mut runs = Vec::new();
    for seed in first..first + STARTS {
        let start = perturbed(&initial, settings.settle, &StartNoise::default(), seed).expect("the start settles");
        for &force in &FORCES {
            for &c in &controllers {
                let outcome =
                    run_pull(&start, c, &settings, &sweep, PullDirection::Lateral, force, None).expect("a run");
                eprintln!(
                    "seed {seed} {force:>5} N {:<14} {} footfalls {} joint range excess {:.2} rad{}",
                    outcome.controller,
                    if outcome.recovered { "recovered    " } else { "not recovered" },
                    outcome.footfalls,
                    outcome.joint_range_excess,
                    if outcome.trunk_touched { ", trunk touched" } else { "" }
                );
                runs.push(Run { seed, outcome });
            }
        }
    }
    let mut md = format!(
        "# {}: lateral pulls of 0.3 s from {STARTS} perturbed starts (seeds {first}..{}), {} DDP iterations per replan\n\n",
        s.file.name,
        first + STARTS - 1,
        settings.iterations
    );
    md.push_str("| controller |");
    for f in FORCES {
        write!(md, " {f} N recovered |").unwrap();
    }
    md.push_str(
        " footfalls in recovered runs (mean) | largest joint range excess, recovered runs / all runs (rad) |\n|---|",
    );
    for _ in FORCES {
        md.push_str("---|");
    }
    md.push_str("---|---|\n");
    for c in &controllers {
        let name = c.name();
        write!(md, "| {name} |").unwrap();
        let mine: Vec<&Run> = runs.iter().filter(|r| r.outcome.controller == name).collect();
        for f in FORCES {
            let at: Vec<&&Run> = mine.iter().filter(|r| r.outcome.force_n == f).collect();
            write!(md, " {}/{} |", at.iter().filter(|r| r.outcome.recovered).count(), at.len()).unwrap();
        }
        let rec: Vec<&Run> = mine.iter().copied().filter(|r| r.outcome.recovered).collect();
        let excess = |runs: &[&Run]| runs.iter().map(|r| r.outcome.joint_range_excess).fold(0.0, f64::max);
        let all = excess(&mine);
        if rec.is_empty() {
            writeln!(md, " - | - / {all:.2} |").unwrap();
        } else {
            let mean = rec.iter().map(|r| r.outcome.footfalls as f64).sum::<f64>() / rec.len() as f64;
            let recovered = excess(&rec);
            writeln!(md, " {mean:.1} | {recovered:.2} / {all:.2} |").unwrap();
        }
    }
    let json = serde_json::json!({
        "machine": contactlab::io::machine_stamp(),
        "scene": s.file.name,
        "iterations": settings.iterations,
        "forces_n": FORCES,
        "starts": STARTS,
        "first_seed": first,
        "noise": StartNoise::default(),
        "sweep": sweep,
        "runs": runs,
    });
    let dir = Path::new(out);
    std::fs::create_dir_all(dir).expect("output directory");
    write_atomic(&dir.join("pull_starts.json"), serde_json::to_string_pretty(&json).unwrap().as_bytes()).unwrap();
    write_atomic(&dir.join("pull_starts.md"), md.as_bytes()).unwrap();
    print!("{md}");
}
