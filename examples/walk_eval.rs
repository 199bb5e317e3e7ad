//! Gait measurements of a walk policy (`contactlab::learn::gait`) on the task's 24 evaluation
//! episodes:
//!
//! ```sh
//! cargo run --release --no-default-features --example walk_eval -- SCENE POLICY|prior \
//!     [SECONDS] [SPEED]
//! ```
//!
//! `prior` runs the zero action (the scene's PD with the trot prior, if any). SECONDS is the
//! evaluation horizon (default: the task's episode), SPEED replaces every episode's commanded
//! speed. Prints per-episode lines and the summary (JSON) against the acceptance criteria:
//! speed within 20 % of the command, every foot lifting 2 cm in every cycle, duty in [0.3, 0.8].

use contactlab::learn::gait::{measure, summarize};
use contactlab::learn::Policy;
use contactlab::scene::Scene;
use std::path::Path;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        anyhow::bail!("usage: walk_eval SCENE POLICY|prior [SECONDS] [SPEED]");
    }
    let sc = Scene::load(Path::new(&args[0]))?;
    let task = sc.task(sc.learn_settings()?)?;
    let policy = if args[1] == "prior" { None } else { Some(Policy::load(Path::new(&args[1]))?) };
    if let Some(p) = &policy {
        p.check(&task).map_err(anyhow::Error::msg)?;
    }
    let seconds: f64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(task.spec.episode);
    let speed: Option<f64> = args.get(3).map(|s| s.parse()).transpose()?;
    let steps = (seconds / task.settings.dt).round() as usize;
    let eps = measure(&task, policy.as_ref(), &task.eval_episodes(), steps, speed);
    for (i, e) in eps.iter().enumerate() {
        println!(
            "ep {i:2}: cmd {:.3} speed {:.3} lift [{}] duty [{}] cycles {} return {:.2}{}{}",
            e.command,
            e.speed,
            e.min_lift.iter().map(|l| format!("{:.3}", l)).collect::<Vec<_>>().join(" "),
            e.duty.iter().map(|d| format!("{:.2}", d)).collect::<Vec<_>>().join(" "),
            e.cycles,
            e.ret,
            if e.failed { " FAILED" } else { "" },
            if e.trunk_contact_steps > 0 {
                format!(" trunk contact {} steps", e.trunk_contact_steps)
            } else {
                String::new()
            }
        );
    }
    let s = summarize(&eps, 0.2, 0.02, [0.3, 0.8]);
    println!("{}", serde_json::to_string(&s)?);
    Ok(())
}
