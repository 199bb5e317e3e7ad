//! ContactLab without a scene file: load a URDF, stand the robot on flat ground, step it, take
//! the transition Jacobians `A`, `B` with the relaxed contact sensitivity, and plan a 4 cm base
//! raise by contact-implicit trajectory optimization.
//!
//! `cargo run --release --no-default-features --example quickstart [URDF]` (default: our
//! quadruped, `assets/robots/quadruped.urdf`; any floating-base URDF whose feet are links named
//! `*foot` and whose legs have `*_thigh_joint` and `*_calf_joint` works).

use contactlab::prelude::*;
use nalgebra::{DMatrix, DVector, Rotation3, Vector3};
use std::path::PathBuf;
use std::sync::Arc;

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/robots/quadruped.urdf"));

    // 1. The robot: a URDF with a free-flyer root; feet (links named `*foot`) become contacts.
    let loaded = urdf::load(&path, RootJoint::FreeFlyer)?;
    let model = Arc::new(loaded.model);
    println!(
        "{}: nq {}, nv {}, nu {}, {} contact points",
        model.name,
        model.nq,
        model.nv,
        model.nu,
        model.contact_points.len()
    );

    // 2. A crouched stance 33 cm up, held by a joint PD; 2 ms steps on flat ground.
    let mut q = neutral(&model);
    set_free_flyer(q.as_mut_slice(), &Se3::new(*Rotation3::identity().matrix(), Vector3::new(0.0, 0.0, 0.33)));
    for j in &model.joints {
        if j.name.ends_with("_thigh_joint") {
            q[j.idx_q] = 0.8;
        } else if j.name.ends_with("_calf_joint") {
            q[j.idx_q] = -1.6;
        }
    }
    let posture = model.actuated_positions(q.as_slice());
    let settings = StepSettings { dt: 0.002, ..StepSettings::default() };
    let v = DVector::zeros(model.nv);
    let mut sim = Simulation::new(model.clone(), Terrain::flat(0.8), settings, q, v);
    sim.controller = Controller::JointPd { kp: 80.0, kd: 6.0, posture };

    // 3. Step: drop onto the feet and settle for 1 s.
    sim.settle(1.0)?;
    let info = sim.step();
    println!(
        "settled: base height {:.4} m, step {:?} in {} Newton iterations (residual {:.1e})",
        sim.q[2], info.status, info.solver.iterations, info.solver.residual
    );

    // 4. Transition Jacobians at the stance under the torque that holds it, relaxed sensitivity.
    let u = hold_torque(&sim);
    let (nv, nu) = (model.nv, model.nu);
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut ws = StepWorkspace::new(&model);
    let mut tw = TransitionWorkspace::new(&model);
    let tau_ext = vec![0.0; nv];
    // The relaxation the shipped CITO tasks use (about 1e-3 of a foot's impulse per knot times
    // a velocity scale).
    let sensitivity = Sensitivity::Relaxed { kappa: 1e-3, delta: 1e-2 };
    let x = (sim.q.as_slice(), sim.v.as_slice(), u.as_slice(), tau_ext.as_slice());
    let t = transition_jacobians(&model, &sim.terrain, &sim.settings, &mut ws, &mut tw, x, sensitivity, &mut a, &mut b);
    println!(
        "A ({}x{}), B ({}x{}) with {sensitivity}: {:?}, |A| {:.3}, |B| {:.4}, backward solve {} iterations",
        a.nrows(),
        a.ncols(),
        b.nrows(),
        b.ncols(),
        t.status,
        a.norm(),
        b.norm(),
        t.backward.iterations
    );

    // 5. CITO: raise the base 4 cm in 0.3 s (30 knots of 10 ms), no contact schedule given.
    let mut cito_settings = CitoSettings { target_offset: [0.0, 0.0, 0.04], ..CitoSettings::default() };
    cito_settings.set_sensitivity(sensitivity);
    let problem = CitoProblem::from_state(&sim, &cito_settings)?;
    let report = cito::solve(&problem, None, &mut |it| {
        println!("  DDP iteration {:>2}: cost {:.5}", it.iteration, it.cost);
    });
    println!(
        "CITO ({}): {:?} after {} iterations in {:.2} s, cost {:.4}, pose error {:.1} mm / {:.2} deg, \
         max penetration {:.1e} m",
        report.sensitivity,
        report.info.status,
        report.info.iterations,
        report.solve_time,
        report.info.cost,
        1e3 * report.pose_error_m,
        report.pose_error_deg,
        report.max_penetration_m
    );
    anyhow::ensure!(report.info.cost.is_finite(), "the plan diverged");
    Ok(())
}
