//! BPTT's policy gradient on the walk task against a Gaussian-smoothed finite-difference
//! reference of the rollout loss (`contactlab::learn::smoothed`), per contact sensitivity, at
//! several widths matched in action space:
//!
//! ```sh
//! cargo run --release --no-default-features --example walk_smoothed -- SCENE POLICY OUT_DIR
//! ```
//!
//! The rollout is the one of `tests/learn_walk_gradient.rs`: 35 steps from the settled stance
//! moving at the 0.4 m/s command, clock phase -0.3, in which feet lift off and touch down. The
//! policies: the initial policies of seeds 3-8 (`Policy::new` as in `learn::bptt`) and the
//! trained POLICY. Directions per policy: the exact and the relaxed gradient's (unit), and 12
//! random unit directions (uniform in a cube, then normalized; seed 0x5300 + policy index).
//! Writes `OUT_DIR/smoothed_gradient.json` (every direction) and `smoothed_gradient.md` (the
//! summary the README quotes).

use contactlab::diff::SensitivityKind;
use contactlab::io::write_atomic;
use contactlab::learn::bptt::{self, BpttWork};
use contactlab::learn::mlp::Activation;
use contactlab::learn::report::median;
use contactlab::learn::smoothed::{
    compare_along, contact_events, moving_start, random_direction, unit, DirectionReference,
};
use contactlab::learn::Policy;
use contactlab::scene::Scene;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

const STEPS: usize = 35;
const INITIAL_SEEDS: [u64; 6] = [3, 4, 5, 6, 7, 8];
const RANDOM_DIRECTIONS: usize = 12;
const SIGMA_ACTIONS: [f64; 4] = [3e-4, 1e-3, 1e-2, 3e-2];
const POINTS: usize = 161;

#[derive(serde::Serialize)]
struct PolicyResult {
    policy: String,
    lift_offs: usize,
    touchdowns: usize,
    /// Per direction (0: exact gradient's, 1: relaxed gradient's, then random), per width.
    directions: Vec<Vec<DirectionReference>>,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 3 {
        anyhow::bail!("usage: walk_smoothed SCENE POLICY OUT_DIR");
    }
    let sc = Scene::load(Path::new(&args[0]))?;
    let mut task = sc.task(sc.learn_settings()?)?;
    task.steps = STEPS;
    let trained = Policy::load(Path::new(&args[1]))?;
    trained.check(&task).map_err(anyhow::Error::msg)?;
    let out = Path::new(&args[2]);
    std::fs::create_dir_all(out)?;
    let ep = moving_start(&task);
    let (k, d) = (task.spec.kappa, task.spec.delta);
    let sens = [
        ("exact".to_string(), SensitivityKind::Exact.with(k, d)),
        ("signorini".to_string(), SensitivityKind::Signorini.with(k, d)),
        (format!("relaxed(kappa={k:e})"), SensitivityKind::Relaxed.with(k, d)),
        ("relaxed(kappa=1e-2)".to_string(), SensitivityKind::Relaxed.with(1e-2, d)),
    ];
    let (exact, relaxed) = (0, 2);
    let act: Activation = task.spec.activation.parse().unwrap_or_default();
    let mut policies: Vec<(String, Policy)> = INITIAL_SEEDS
        .iter()
        .map(|&s| {
            (format!("initial seed {s}"), Policy::new(&task, &task.spec.hidden, act, &mut ChaCha8Rng::seed_from_u64(s)))
        })
        .collect();
    policies.push(("trained".into(), trained));

    let mut results = Vec::new();
    for (idx, (label, policy)) in policies.iter().enumerate() {
        let t0 = std::time::Instant::now();
        let (lift_offs, touchdowns) = contact_events(&task, policy, &ep);
        let grads: Vec<Vec<f64>> = sens
            .iter()
            .map(|(name, s)| {
                let mut w = BpttWork::new(&task);
                let mut g = vec![0.0; policy.mlp.n_params()];
                let o = bptt::rollout_gradient(&task, policy, &ep, *s, &mut w, &mut g);
                anyhow::ensure!(o.ok, "{label}, {name}: the rollout's gradient failed ({o:?})");
                Ok(g)
            })
            .collect::<anyhow::Result<_>>()?;
        let mut dirs = vec![unit(&grads[exact]), unit(&grads[relaxed])];
        let mut rng = ChaCha8Rng::seed_from_u64(0x5300 + idx as u64);
        for _ in 0..RANDOM_DIRECTIONS {
            dirs.push(random_direction(policy.mlp.n_params(), &mut rng));
        }
        let directions: Vec<Vec<DirectionReference>> = dirs
            .par_iter()
            .map(|dir| compare_along(&task, policy, &ep, &grads, dir, &SIGMA_ACTIONS, POINTS))
            .collect::<Option<_>>()
            .ok_or_else(|| anyhow::anyhow!("{label}: a rollout of the reference failed"))?;
        eprintln!("{label}: lift-offs {lift_offs}, touchdowns {touchdowns}, {:.1} s", t0.elapsed().as_secs_f64());
        results.push(PolicyResult { policy: label.clone(), lift_offs, touchdowns, directions });
    }

    // Summary: per policy group (initial, trained) and width, along the gradient directions
    // and the random ones, the median relative error per sensitivity and how often each
    // sensitivity is closer than exact.
    let mut summary = Vec::new();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# BPTT's policy gradient against the Gaussian-smoothed loss (walk task, 35-step rollout)\n\n\
         Written by `cargo run --release --no-default-features --example walk_smoothed -- {} {} {}`.\n\
         Median of `|g . d - D_sigma(d)| / |D_sigma(d)|` over the directions; in brackets, the \
         directions where the sensitivity is closer than exact. Widths `sigma_a` in policy outputs \
         (times `action_scale` {} rad).\n",
        args[0], args[1], args[2], task.spec.action_scale
    );
    let names: Vec<&str> = sens.iter().map(|(n, _)| n.as_str()).collect();
    let _ = writeln!(md, "| policies | directions | sigma_a | {} |", names.join(" | "));
    let _ = writeln!(md, "|---|---|---:|{}", "---:|".repeat(names.len()));
    for group in ["initial", "trained"] {
        let rs: Vec<&PolicyResult> = results.iter().filter(|r| r.policy.starts_with(group)).collect();
        for (kind, range) in [("gradient", 0..2), ("random", 2..2 + RANDOM_DIRECTIONS)] {
            for (w, &sa) in SIGMA_ACTIONS.iter().enumerate() {
                let refs: Vec<&DirectionReference> =
                    rs.iter().flat_map(|r| r.directions[range.clone()].iter().map(move |d| &d[w])).collect();
                let per: Vec<serde_json::Value> = (0..sens.len())
                    .map(|i| {
                        let closer = refs.iter().filter(|d| d.rel_error(i) < d.rel_error(exact)).count();
                        serde_json::json!({
                            "sensitivity": names[i],
                            "median_rel_error": median(refs.iter().map(|d| d.rel_error(i)).collect()),
                            "closer_than_exact": closer,
                        })
                    })
                    .collect();
                let cells: Vec<String> = per
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let m = p["median_rel_error"].as_f64().unwrap_or(f64::NAN);
                        if i == exact {
                            format!("{m:.3}")
                        } else {
                            format!("{m:.3} ({}/{})", p["closer_than_exact"], refs.len())
                        }
                    })
                    .collect();
                let _ = writeln!(md, "| {group} ({}) | {kind} | {sa:.0e} | {} |", rs.len(), cells.join(" | "));
                summary.push(serde_json::json!({
                    "policies": group, "policy_count": rs.len(), "directions": kind,
                    "direction_count": refs.len(), "sigma_action": sa, "sensitivities": per,
                }));
            }
        }
    }
    let events: Vec<String> = results
        .iter()
        .map(|r| format!("{}: {} lift-offs, {} touchdowns", r.policy, r.lift_offs, r.touchdowns))
        .collect();
    let _ = writeln!(md, "\nContact events along the rollouts: {}.", events.join("; "));
    print!("{md}");
    let json = serde_json::json!({
        "command": format!("cargo run --release --no-default-features --example walk_smoothed -- {} {} {}", args[0], args[1], args[2]),
        "scene": sc.file.name,
        "policy_file": args[1],
        "steps": STEPS,
        "kappa": k,
        "delta": d,
        "action_scale": task.spec.action_scale,
        "points": POINTS,
        "sigma_actions": SIGMA_ACTIONS,
        "sensitivities": names,
        "summary": summary,
        "policies": results,
    });
    write_atomic(&out.join("smoothed_gradient.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    write_atomic(&out.join("smoothed_gradient.md"), md.as_bytes())?;
    eprintln!("wrote {}/smoothed_gradient.json and smoothed_gradient.md", out.display());
    Ok(())
}
