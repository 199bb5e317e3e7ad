//! The contact inspector (headless, MinimalPlugins, manual time): a pinned contact's numbers are
//! the step's record, its recomputed impulse agrees with the record, and its sensitivity rows
//! exist for the chosen (relaxed) and the exact sensitivity and differ.
#![cfg(feature = "viewer")]

use contactlab::app::inspect::Inspector;
use contactlab::app::sim::{SimCommand, SimCommands, SimHistory, SimWorker};
use contactlab::diff::Sensitivity;
use std::time::Duration;

mod common;
use common::{app, push};

#[test]
fn a_pinned_contact_shows_the_steps_record_and_its_sensitivity_rows() {
    let mut app = app("scenes/quadruped_stand.ron");
    for _ in 0..40 {
        app.update();
        std::thread::sleep(Duration::from_micros(300));
    }
    push(&mut app, SimCommand::Pause);
    for _ in 0..10_000 {
        app.update();
        if !app.world().resource::<SimWorker>().busy() && app.world().resource::<SimCommands>().0.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    {
        let mut ins = app.world_mut().resource_mut::<Inspector>();
        ins.pinned = Some(2);
        ins.sensitivity = Some(Sensitivity::Relaxed { kappa: 1e-4, delta: 1e-3 });
    }
    for _ in 0..20_000 {
        app.update();
        let ins = app.world().resource::<Inspector>();
        if ins.finished > 0 && !ins.busy() && ins.result.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let r = app.world().resource::<Inspector>().result.clone().expect("an inspection");
    let snap = app.world().resource::<SimHistory>().displayed().unwrap().clone();
    let c = snap.contacts[2];
    assert_eq!(r.contact, 2);
    assert_eq!(r.t.to_bits(), snap.t.to_bits());
    assert_eq!(r.phi.to_bits(), c.phi.to_bits());
    assert_eq!(r.lambda, c.lambda);
    assert_eq!(r.mode, c.mode);
    assert_eq!(r.iterations, snap.iterations);
    assert_eq!(r.residual.to_bits(), snap.residual.to_bits());
    assert!(c.lambda.x > 0.0, "the foot carries load");
    let l = r.recomputed_lambda.expect("recomputed");
    assert!((l - c.lambda).norm() < 1e-4 * c.lambda.norm(), "recomputed {l:?} vs record {:?}", c.lambda);
    let (a, x) = (r.rows.expect("relaxed rows"), r.exact_rows.expect("exact rows"));
    let nv = 18;
    assert_eq!(a.shape(), (3, 2 * nv + 12));
    assert!(a.iter().chain(x.iter()).all(|v| v.is_finite()));
    let diff = (&a - &x).norm();
    assert!(diff > 1e-6 * x.norm() && diff < x.norm(), "relaxed vs exact rows: |diff| {diff}, |exact| {}", x.norm());
    assert!(r.backward_iterations > 0);
}
