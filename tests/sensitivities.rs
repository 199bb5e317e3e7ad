//! The relaxed contact sensitivities (DESIGN 3.2, 3.3) against the exact one: convergence as
//! kappa and delta shrink away from transitions, blindness of the exact sensitivity to a foot
//! about to touch, and finite Jacobians over the whole documented kappa and delta range at
//! states across each shipped sweep's transition.

use contactlab::contact::ContactMode;
use contactlab::diff::sweep::SweepOverrides;
use contactlab::diff::{apply_param, transition_jacobians, Sensitivity, TransitionStatus, TransitionWorkspace};
use contactlab::scene::Scene;
use contactlab::sim::{Simulation, StepStatus};
use nalgebra::{DMatrix, DVector};
use std::path::Path;

fn scene(name: &str) -> Scene {
    Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join(name)).unwrap()
}

/// `(A, B, status, modes)` at the simulation's state and its controller's controls.
fn jacobians(
    sim: &Simulation,
    sensitivity: Sensitivity,
) -> (DMatrix<f64>, DMatrix<f64>, TransitionStatus, Vec<ContactMode>) {
    let model = &*sim.model;
    let (nv, nu) = (model.nv, model.nu);
    let mut ws = sim.ws.clone();
    let mut u = DVector::zeros(nu);
    let mut damping = DVector::zeros(nu);
    sim.controller.compute(model, sim.q.as_slice(), sim.v.as_slice(), sim.settings.dt, &mut u, &mut damping);
    u += &sim.u_offset;
    ws.actuator_damping = damping;
    let mut tau_ext = DVector::zeros(nv);
    if sim.pulls.iter().any(|p| p.active(sim.t)) {
        contactlab::dynamics::forward_kinematics(model, &mut ws.data, sim.q.as_slice(), None);
        for p in sim.pulls.iter().filter(|p| p.active(sim.t)) {
            p.add_generalized_force(model, &mut ws.data, &mut tau_ext);
        }
    }
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut tw = TransitionWorkspace::new(model);
    let info = transition_jacobians(
        model,
        &sim.terrain,
        &sim.settings,
        &mut ws,
        &mut tw,
        (sim.q.as_slice(), sim.v.as_slice(), u.as_slice(), tau_ext.as_slice()),
        sensitivity,
        &mut a,
        &mut b,
    );
    (a, b, info.status, ws.modes.clone())
}

fn rel(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    (a - b).norm() / b.norm().max(1e-12)
}

fn settled(mut sim: Simulation, steps: usize) -> Simulation {
    for _ in 0..steps {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    sim
}

#[test]
fn relaxed_sensitivities_converge_to_exact_away_from_transitions() {
    let stand = settled(scene("quadruped_stand.ron").simulation(), 400);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron");
    let text = std::fs::read_to_string(&path).unwrap().replace("friction: 0.8", "friction: 0.1");
    let mut slide = settled(Scene::from_str(&text, &path).unwrap().simulation(), 400);
    slide.v[0] += 1.0;
    for (what, mut sim) in [("sticking stance", stand), ("sliding feet", slide)] {
        sim.settings.solver.tolerance = 1e-11;
        sim.settings.solver.kappa_target = 1e-14;
        sim.settings.solver.max_iterations = 200;
        let (a0, b0, status, modes) = jacobians(&sim, Sensitivity::Exact);
        assert_eq!(status, TransitionStatus::Ok);
        assert!(modes.iter().filter(|m| **m != ContactMode::Separated).count() == 4, "{what}: {modes:?}");
        for family in ["signorini", "relaxed"] {
            let mut last = f64::INFINITY;
            for (kappa, delta) in [(1e-3, 1e-2), (1e-5, 1e-3), (1e-7, 1e-4), (1e-9, 1e-6), (1e-11, 1e-8)] {
                let s = match family {
                    "signorini" => Sensitivity::SignoriniRelaxed { kappa },
                    _ => Sensitivity::Relaxed { kappa, delta },
                };
                let (a, b, status, _) = jacobians(&sim, s);
                assert!(matches!(status, TransitionStatus::Ok), "{what} {s:?}: {status:?}");
                let e = rel(&a, &a0).max(rel(&b, &b0));
                eprintln!("{what} {s:?}: relative distance to exact {e:.2e}");
                assert!(e < last * 1.01 + 1e-9, "{what} {s:?}: {e:e} after {last:e} (not converging)");
                last = e;
            }
            assert!(last < 1e-6, "{what} {family}: {last:e}");
        }
    }
}

/// The quadruped falling with its feet 4 mm above the ground (inside the contact margin, so
/// they are in the contact problem, separated). The exact sensitivity cannot see them: its A
/// equals that of a step with no contact candidates at all. The relaxed sensitivities can.
#[test]
fn exact_is_blind_to_a_foot_about_to_touch_relaxed_is_not() {
    let mut sim = scene("sweep_foot_touchdown.ron").simulation();
    sim.q[2] += 0.0016; // feet 4 mm above the ground (their standing gap is 2.4 mm below this)
    contactlab::dynamics::forward_kinematics(&sim.model, &mut sim.ws.data, sim.q.as_slice(), None);
    let lowest = sim
        .model
        .contact_points
        .iter()
        .map(|c| sim.ws.data.o_m_i[c.body].act_point(&c.position).z - c.radius)
        .fold(f64::INFINITY, f64::min);
    sim.q[2] += 0.004 - lowest;
    sim.v[2] = -0.3;
    let (a_exact, _, status, modes) = jacobians(&sim, Sensitivity::Exact);
    assert_eq!(status, TransitionStatus::Ok);
    assert!(modes.iter().all(|m| *m == ContactMode::Separated), "{modes:?}");
    let mut free = sim.clone();
    free.settings.contact_margin = 0.0;
    let (a_free, ..) = jacobians(&free, Sensitivity::Exact);
    assert!(rel(&a_exact, &a_free) < 1e-12, "exact differs from free flight: {:e}", rel(&a_exact, &a_free));
    for s in [Sensitivity::SignoriniRelaxed { kappa: 1e-3 }, Sensitivity::Relaxed { kappa: 1e-3, delta: 1e-3 }] {
        let (a, b, status, _) = jacobians(&sim, s);
        assert_eq!(status, TransitionStatus::Ok, "{s:?}");
        assert!(a.iter().chain(b.iter()).all(|x| x.is_finite()));
        let d = rel(&a, &a_free);
        eprintln!("{s:?}: relative change of A from the contact about to happen {d:.2e}");
        assert!(d > 1e-4 && d < 10.0, "{s:?}: {d:e}");
    }
}

/// Jacobians finite for every kappa in [1e-8, 1e-1] and delta in [0, 1], at states on both
/// sides of each shipped sweep's transition.
#[test]
fn no_nan_or_infinity_over_the_kappa_delta_range_across_transitions() {
    let kappas = [1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 1e-1];
    let deltas = [0.0, 1e-3, 0.1, 1.0];
    for (file, values) in [
        ("sweep_foot_touchdown.ron", [0.0, 0.04, 0.05]),
        ("sweep_box_push.ron", [3.0, 4.9, 6.0]),
        ("sweep_liftoff.ron", [-16.0, -12.5, -8.0]),
    ] {
        let sc = scene(file);
        let (spec, sim0) = sc.sweep(&SweepOverrides::default()).unwrap();
        for s in values {
            let mut sim = sim0.clone();
            apply_param(&mut sim, &spec.param, s).unwrap();
            // States at the start, a third and the end of the sweep's horizon.
            let mut checked = 0;
            for k in 0..spec.steps {
                if k % (spec.steps / 3).max(1) == 0 {
                    for &kappa in &kappas {
                        for &delta in &deltas {
                            for sens in [Sensitivity::SignoriniRelaxed { kappa }, Sensitivity::Relaxed { kappa, delta }]
                            {
                                let (a, b, status, _) = jacobians(&sim, sens);
                                assert!(
                                    matches!(status, TransitionStatus::Ok | TransitionStatus::BackwardNotConverged),
                                    "{file} s = {s} step {k} {sens:?}: {status:?}"
                                );
                                assert!(
                                    a.iter().chain(b.iter()).all(|x| x.is_finite()),
                                    "{file} s = {s} step {k} {sens:?}: non-finite Jacobian"
                                );
                            }
                        }
                    }
                    checked += 1;
                }
                assert!(sim.step().status.advanced());
            }
            assert!(checked >= 3);
        }
    }
}
