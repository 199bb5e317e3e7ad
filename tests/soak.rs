//! Soak: 1 000 000 steps per scene class, ignored by default (about 2 minutes in all in release):
//!
//! ```sh
//! cargo test --release --no-default-features --test soak -- --ignored --nocapture
//! ```
//! (`CONTACTLAB_SOAK_STEPS` sets the steps per class.) Classes: the standing quadruped under a
//! random trunk pull every 0.5 s (0-150 N horizontal, 0.2 s); the tossed cube, thrown again every
//! 2 s; the hopper dropped again every 2 s; the quadruped standing on the heightfield. Per class
//! it reports failed steps, steps whose solver did not converge, max penetration, min cone margin
//! (a violation is a negative margin), non-finite states, and for the unactuated, unpulled cube
//! the largest energy gain over one step (the hard-contact step must not create energy; a free
//! flight step with semi-implicit Euler changes `T + V` by `O(h^2)`).

use contactlab::dynamics::{center_of_mass, forward_kinematics, kinetic_energy};
use contactlab::scene::Scene;
use contactlab::sim::{Pull, Simulation, StepStatus};
use nalgebra::Vector3;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::Path;

fn steps() -> usize {
    std::env::var("CONTACTLAB_SOAK_STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

fn scene(name: &str) -> Scene {
    Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join(name)).unwrap()
}

fn energy(sim: &mut Simulation) -> f64 {
    let model = sim.model.clone();
    forward_kinematics(&model, &mut sim.ws.data, sim.q.as_slice(), Some(sim.v.as_slice()));
    let c = center_of_mass(&model, &sim.ws.data);
    kinetic_energy(&model, &sim.ws.data) - model.total_mass() * model.gravity.dot(&c)
}

#[derive(Debug, Default)]
struct Report {
    steps: usize,
    failed: usize,
    /// The statuses of the failed steps, with the time of the first.
    failures: Vec<(StepStatus, f64)>,
    not_converged: usize,
    non_finite: usize,
    max_penetration: f64,
    min_cone_margin: f64,
    max_energy_gain: f64,
}

/// Writes the reports as JSON to `CONTACTLAB_SOAK_OUT` if it is set (`scripts/reproduce soak`
/// writes `docs/results/soak/soak.json`, the README's soak numbers).
fn write_reports(n: usize, reports: &[(&str, Report)]) {
    let Ok(out) = std::env::var("CONTACTLAB_SOAK_OUT") else { return };
    let classes: Vec<serde_json::Value> = reports
        .iter()
        .map(|(name, r)| {
            serde_json::json!({
                "class": name,
                "steps": r.steps,
                "failed_steps": r.failed,
                "first_failures": r.failures.iter().map(|(s, t)| format!("{s:?} at t = {t:.3} s")).collect::<Vec<_>>(),
                "not_converged_steps": r.not_converged,
                "non_finite_states": r.non_finite,
                "max_penetration_m": r.max_penetration,
                "min_cone_margin_ns": r.min_cone_margin,
                "max_energy_gain_j": r.max_energy_gain,
            })
        })
        .collect();
    let json = serde_json::json!({
        "machine": contactlab::io::machine_stamp(),
        "steps_per_class": n,
        "seed": 16,
        "classes": classes,
    });
    let path = Path::new(&out);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    contactlab::io::write_atomic(path, serde_json::to_string_pretty(&json).unwrap().as_bytes()).unwrap();
}

/// Runs `n` steps of `sim`, calling `every` before each step (pulls, re-tosses).
fn soak(mut sim: Simulation, n: usize, measure_energy: bool, mut every: impl FnMut(usize, &mut Simulation)) -> Report {
    let mut r = Report { min_cone_margin: f64::INFINITY, ..Report::default() };
    let start = (sim.q.clone(), sim.v.clone());
    for k in 0..n {
        every(k, &mut sim);
        let e0 = if measure_energy { energy(&mut sim) } else { 0.0 };
        let info = sim.step();
        r.steps += 1;
        if !info.status.advanced() {
            r.failed += 1;
            if r.failures.len() < 5 {
                r.failures.push((info.status, sim.t));
            }
            // Carry on from the start rather than stop: the soak counts failures.
            sim.q.copy_from(&start.0);
            sim.v.copy_from(&start.1);
            continue;
        }
        if info.status == StepStatus::SolverNotConverged {
            r.not_converged += 1;
        }
        if !sim.q.iter().chain(sim.v.iter()).all(|x| x.is_finite()) {
            r.non_finite += 1;
            sim.q.copy_from(&start.0);
            sim.v.copy_from(&start.1);
            continue;
        }
        r.max_penetration = r.max_penetration.max(info.penetration);
        if info.active_contacts > 0 {
            r.min_cone_margin = r.min_cone_margin.min(info.solver.cone_margin);
        }
        if measure_energy {
            r.max_energy_gain = r.max_energy_gain.max(energy(&mut sim) - e0);
        }
    }
    r
}

/// Prints the report and returns what is wrong with it (all classes run before the verdict).
fn check(name: &str, r: &Report) -> Vec<String> {
    eprintln!("{name}: {r:?}");
    let mut wrong = Vec::new();
    if r.failed > 0 {
        wrong.push(format!("{name}: {} failed steps, first {:?}", r.failed, r.failures));
    }
    if r.non_finite > 0 {
        wrong.push(format!("{name}: {} non-finite states", r.non_finite));
    }
    if r.min_cone_margin < -1e-9 {
        wrong.push(format!("{name}: cone violation {}", r.min_cone_margin));
    }
    wrong
}

#[test]
#[ignore = "a soak: run with --release -- --ignored"]
fn soak_every_scene_class() {
    let n = steps();
    // Standing quadruped, a random horizontal trunk pull every 0.5 s.
    let s = scene("quadruped_stand.ron");
    let trunk = s.model.resolve_body_or_frame("trunk").unwrap().0;
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let period = (0.5 / s.settings.dt).round() as usize;
    let r = soak(s.simulation(), n, false, |k, sim| {
        if k % period == 0 {
            let (f, a) = (rng.random_range(0.0..150.0), rng.random_range(0.0..std::f64::consts::TAU));
            sim.pulls.clear();
            sim.pulls.push(Pull {
                body: trunk,
                point: Vector3::zeros(),
                force: Vector3::new(f * a.cos(), f * a.sin(), 0.0),
                start: sim.t,
                duration: 0.2,
            });
        }
    });
    let mut wrong = check("quadruped, random pulls", &r);
    let mut reports = vec![("quadruped, random pulls", r)];

    // Tossed cube, thrown again from the scene's initial state every 2 s; no actuation.
    let s = scene("box_toss.ron");
    let period = (2.0 / s.settings.dt).round() as usize;
    let (q0, v0) = (s.q0.clone(), s.v0.clone());
    let r = soak(s.simulation(), n, true, |k, sim| {
        if k % period == 0 {
            sim.q.copy_from(&q0);
            sim.v.copy_from(&v0);
        }
    });
    wrong.extend(check("tossed cube", &r));
    // Energy: impacts only dissipate; the bound is the free-flight integration error of one
    // step, `m g h * (g h)`-sized, far below a millijoule for the 1 kg cube at 2 ms.
    if r.max_energy_gain >= 1e-3 {
        wrong.push(format!("tossed cube: energy gain {} J in one step", r.max_energy_gain));
    }
    reports.push(("tossed cube", r));

    // Hopper dropped again every 2 s.
    let s = scene("hopper_drop.ron");
    let (q0, v0) = (s.q0.clone(), s.v0.clone());
    let r = soak(s.simulation(), n, false, |k, sim| {
        if k % period == 0 {
            sim.q.copy_from(&q0);
            sim.v.copy_from(&v0);
        }
    });
    wrong.extend(check("hopper", &r));
    reports.push(("hopper", r));

    // Quadruped on the heightfield.
    let s = scene("quadruped_heightfield.ron");
    let r = soak(s.simulation(), n, false, |_, _| {});
    wrong.extend(check("quadruped on the heightfield", &r));
    reports.push(("quadruped on the heightfield", r));
    write_reports(n, &reports);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
