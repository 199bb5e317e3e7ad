//! `contactlab contactnets train|eval|sweep`: learned contact geometry from real cube tosses.

use super::{list, ContactnetsCommand};
use anyhow::{Context, Result};
use std::time::Instant;

pub fn contactnets(command: ContactnetsCommand) -> Result<()> {
    use contactlab::learn::contactnets::{data, eval, model, sweep, train};
    match command {
        ContactnetsCommand::Train {
            data: dir,
            method,
            tosses,
            seed,
            steps,
            batch,
            lr,
            lr_e2e,
            patience,
            threads,
            out,
        } => {
            let method: model::Method = method.parse().map_err(|e: String| anyhow::anyhow!("--method: {e}"))?;
            let d = data::Dataset::load(&dir)?;
            let mut ts = train::TrainSettings { method, seed, threads, ..Default::default() };
            ts.steps = steps.unwrap_or(ts.steps);
            ts.batch = batch.unwrap_or(ts.batch);
            ts.lr = lr.unwrap_or(ts.lr);
            ts.lr_e2e = lr_e2e.unwrap_or(ts.lr_e2e);
            ts.patience = patience.unwrap_or(ts.patience);
            let run =
                train::train_on_split(&d, tosses, &ts, train::TrainMonitor::default()).map_err(anyhow::Error::msg)?;
            let (mut m, rep) = (run.model, run.report);
            let test: Vec<_> = run.split.test.iter().map(|&i| &d.tosses[i]).collect();
            let ev = eval::evaluate(&m, &test, threads);
            m.info["test"] = serde_json::json!({"tosses": ev.tosses, "position_error_pct": ev.position_error_pct,
                "angle_error_deg": ev.angle_error_deg, "penetration_pct": ev.penetration_pct});
            m.save(&out).with_context(|| format!("{}: cannot write", out.display()))?;
            println!(
                "{}: {} tosses ({} transitions), {} steps (best {} , valid loss {:.4e}) in {:.1} s; {} failed inner solves",
                method.name(),
                tosses,
                run.train_transitions,
                rep.steps,
                rep.best_step,
                rep.best_valid,
                rep.wall_seconds,
                rep.failed_solves
            );
            if method != model::Method::E2e {
                println!("mu {:.4}, max vertex error {:.4} half widths", m.mu, eval::vertex_error(&m));
            }
            println!(
                "test split ({} tosses): position {:.2} % width, angle {:.2} deg, penetration {:.3} % width",
                ev.tosses, ev.position_error_pct, ev.angle_error_deg, ev.penetration_pct
            );
            println!("wrote {}", out.display());
            Ok(())
        }
        ContactnetsCommand::Eval { model: path, data: dir, out, threads } => {
            let m = model::load(&path)?;
            let d = data::Dataset::load(&dir)?;
            let all: Vec<_> = d.tosses.iter().collect();
            let ev = eval::evaluate(&m, &all, threads);
            let text = serde_json::to_string_pretty(&ev)?;
            contactlab::io::write_atomic(&out, text.as_bytes())
                .with_context(|| format!("{}: cannot write", out.display()))?;
            println!(
                "{} tosses: position {:.2} % width, angle {:.2} deg, penetration {:.3} % width ({} rollouts failed)",
                ev.tosses, ev.position_error_pct, ev.angle_error_deg, ev.penetration_pct, ev.failed_rollouts
            );
            println!("wrote {}", out.display());
            Ok(())
        }
        ContactnetsCommand::Sweep { data: dir, out, tosses, seeds, methods, steps, threads } => {
            let d = data::Dataset::load(&dir)?;
            let mut s = sweep::SweepSettings {
                tosses: list(&tosses, "tosses")?,
                seeds: list(&seeds, "seeds")?,
                methods: list(&methods, "methods")?,
                ..Default::default()
            };
            s.train.threads = threads;
            if let Some(st) = steps {
                s.train.steps = st;
            }
            std::fs::create_dir_all(&out).with_context(|| format!("{}: cannot create", out.display()))?;
            let started = Instant::now();
            let rows = sweep::run(&d, &s, |r| {
                println!(
                    "{:>4} {:>4} tosses seed {}: pos {:6.2} %  angle {:6.2} deg  pen {:6.3} %  vertex err {:.3}  mu {:.3}  {} steps {:.1} s",
                    r.method.name(),
                    r.tosses,
                    r.seed,
                    r.position_error_pct,
                    r.angle_error_deg,
                    r.penetration_pct,
                    r.vertex_error,
                    r.mu,
                    r.steps,
                    r.train_seconds
                );
            })
            .map_err(|e| anyhow::anyhow!(e))?;
            let json = serde_json::to_string_pretty(&serde_json::json!({"settings": s, "rows": rows}))?;
            contactlab::io::write_atomic(&out.join("sweep.json"), json.as_bytes())?;
            let table = sweep::table(&rows);
            contactlab::io::write_atomic(&out.join("sweep.md"), table.as_bytes())?;
            contactlab::io::write_atomic_with(&out.join("sweep.png"), |tmp| sweep::png(&rows, tmp))?;
            print!("{table}");
            println!(
                "wrote {}/sweep.json, sweep.md, sweep.png in {:.1} s",
                out.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}
