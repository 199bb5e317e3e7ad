//! BPTT's policy gradient against the rollout length per contact sensitivity
//! (`contactlab::learn::grad_stats`), at the initial policy of seed 0 and at a trained policy:
//!
//! ```sh
//! cargo run --release --no-default-features --example walk_gradients -- SCENE POLICY OUT_DIR \
//!     [EPISODES]
//! ```
//!
//! Writes `OUT_DIR/gradients.csv`, `OUT_DIR/gradients.json` and `OUT_DIR/gradients.png`. The
//! episodes (default 32) are drawn from the task's training distribution with a fixed seed;
//! the rollout lengths are 10, 20, 30, 40 and 50 steps; the sensitivities exact (the cosine's
//! reference), Signorini and relaxed with the scene's `kappa` and `delta`.

use contactlab::diff::SensitivityKind;
use contactlab::learn::grad_stats::{contact_changes, gradient_png, gradient_stats, PolicyGradients};
use contactlab::learn::mlp::Activation;
use contactlab::learn::Policy;
use contactlab::scene::Scene;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use std::fmt::Write as _;
use std::path::Path;

/// Seed of the measured episodes (not a training or evaluation seed).
const EPISODE_SEED: u64 = 0x6EAD;
const LENGTHS: [usize; 5] = [10, 20, 30, 40, 50];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        anyhow::bail!("usage: walk_gradients SCENE POLICY OUT_DIR [EPISODES]");
    }
    let sc = Scene::load(Path::new(&args[0]))?;
    let task = sc.task(sc.learn_settings()?)?;
    let trained = Policy::load(Path::new(&args[1]))?;
    trained.check(&task).map_err(anyhow::Error::msg)?;
    let out = Path::new(&args[2]);
    let n: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(32);
    std::fs::create_dir_all(out)?;
    // BPTT's initial policy of seed 0 (`learn::bptt::train_bptt`).
    let act: Activation = task.spec.activation.parse().unwrap_or_default();
    let initial = Policy::new(&task, &task.spec.hidden, act, &mut ChaCha8Rng::seed_from_u64(0));
    let episodes = task.episodes(n, EPISODE_SEED);
    let (k, d) = (task.spec.kappa, task.spec.delta);
    let sens: Vec<_> =
        [SensitivityKind::Exact, SensitivityKind::Signorini, SensitivityKind::Relaxed].map(|s| s.with(k, d)).to_vec();
    let mut all = Vec::new();
    for (label, p) in [("initial", &initial), ("trained", &trained)] {
        let t0 = std::time::Instant::now();
        let stats = gradient_stats(&task, p, &episodes, &sens, &LENGTHS);
        let contacts: Vec<_> = LENGTHS.iter().map(|&l| contact_changes(&task, p, &episodes, l)).collect();
        eprintln!("{label}: {:.1} s", t0.elapsed().as_secs_f64());
        all.push(PolicyGradients { policy: label.into(), stats, contacts });
    }
    let mut csv = String::from(
        "policy,sensitivity,rollout_steps,episodes,ok,fallback_steps,batch_gradient_norm,rollout_gradient_norm_mean,variance,loss_mean,cosine_to_exact,mode_change_fraction,contact_change_fraction,contacts_mean\n",
    );
    for p in &all {
        for s in &p.stats {
            let c = p.contacts.iter().find(|c| c.rollout_steps == s.rollout_steps).expect("every length");
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{:.6e},{:.6e},{:.6e},{:.6e},{},{:.4},{:.4},{:.3}",
                p.policy,
                s.sensitivity,
                s.rollout_steps,
                s.episodes,
                s.ok,
                s.fallback_steps,
                s.batch_gradient_norm,
                s.rollout_gradient_norm_mean,
                s.variance,
                s.loss_mean,
                s.cosine_to_reference.map_or(String::new(), |c| format!("{c:.4}")),
                c.mode_change_fraction,
                c.contact_change_fraction,
                c.contacts_mean
            );
            println!(
                "{:8} {:9} T={:2}: |g| {:.3e}  mean |g_i| {:.3e}  var {:.3e}  cos {:?}  ok {}/{}  modes {:.3} set {:.3}",
                p.policy,
                s.sensitivity,
                s.rollout_steps,
                s.batch_gradient_norm,
                s.rollout_gradient_norm_mean,
                s.variance,
                s.cosine_to_reference,
                s.ok,
                s.episodes,
                c.mode_change_fraction,
                c.contact_change_fraction
            );
        }
    }
    std::fs::write(out.join("gradients.csv"), csv)?;
    let json = serde_json::json!({
        "scene": sc.file.name,
        "policy_file": args[1],
        "episodes": n,
        "episode_seed": EPISODE_SEED,
        "kappa": k,
        "delta": d,
        "measurements": all,
    });
    std::fs::write(out.join("gradients.json"), serde_json::to_string_pretty(&json)?)?;
    gradient_png(&all, &out.join("gradients.png")).map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("wrote {}/gradients.csv, gradients.json, gradients.png", out.display());
    Ok(())
}
