//! Analytic transition Jacobians with the exact contact sensitivity against the
//! finite-difference reference `fd_transition`: free flight, four-foot sticking stance and a
//! box sliding on flat ground.

use contactlab::contact::ContactMode;
use contactlab::diff::{
    fd_transition, transition_jacobians, FdWorkspace, Sensitivity, TransitionStatus, TransitionWorkspace,
};
use contactlab::dynamics::forward_kinematics;
use contactlab::model::{normalize, JointKind};
use contactlab::scene::Scene;
use contactlab::sim::{Simulation, StepStatus};
use nalgebra::{DMatrix, DVector};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::Path;

/// Finite-difference step of the `A` check.
const EPS: f64 = 1e-6;
const TOL: f64 = 1e-6;

fn scene(name: &str) -> Scene {
    Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join(name)).unwrap()
}

/// Tight contact solver so the finite differences resolve the impulses (`fd` module docs).
fn tighten(sim: &mut Simulation, tolerance: f64) {
    sim.settings.solver.tolerance = tolerance;
    sim.settings.solver.kappa_target = 1e-14;
    sim.settings.solver.max_iterations = 200;
}

/// The standing quadruped after 1 s under its joint PD, with the tight solver.
fn settled_stance() -> Simulation {
    let mut sim = scene("quadruped_stand.ron").simulation();
    tighten(&mut sim, 1e-12);
    for _ in 0..500 {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    sim
}

fn rel(a: &DMatrix<f64>, reference: &DMatrix<f64>) -> f64 {
    (a - reference).norm() / reference.norm().max(1e-12)
}

/// The sensitivities checked against finite differences where no mode changes inside the
/// stencil: the exact one and both relaxed ones in the limit `kappa, delta -> 0`.
const SENSITIVITIES: [Sensitivity; 3] = [
    Sensitivity::Exact,
    Sensitivity::SignoriniRelaxed { kappa: 1e-13 },
    Sensitivity::Relaxed { kappa: 1e-13, delta: 0.0 },
];

/// Analytic Jacobians of `sensitivity` at `(sim.q, sim.v, u)` from a copy of the simulation's
/// workspace (same warm start and actuator damping); returns `(a, b, modes)`.
fn analytic(
    sim: &Simulation,
    u: &DVector<f64>,
    sensitivity: Sensitivity,
) -> (DMatrix<f64>, DMatrix<f64>, Vec<ContactMode>) {
    let model = &*sim.model;
    let (nv, nu) = (model.nv, model.nu);
    let tau_ext = DVector::zeros(nv);
    let x = (sim.q.as_slice(), sim.v.as_slice(), u.as_slice(), tau_ext.as_slice());
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut ws = sim.ws.clone();
    let mut tw = TransitionWorkspace::new(model);
    let info =
        transition_jacobians(model, &sim.terrain, &sim.settings, &mut ws, &mut tw, x, sensitivity, &mut a, &mut b);
    assert_eq!(info.status, TransitionStatus::Ok, "{sensitivity:?}: {info:?}");
    assert_eq!(info.step.status, StepStatus::Ok, "{info:?}");
    (a, b, ws.modes.clone())
}

/// Analytic and FD Jacobians at `(sim.q, sim.v, u)`; returns `(err_a, err_b)` per entry of
/// `sensitivities` and the modes. `A` is checked against finite differences with step `eps_a`
/// (usually [`EPS`]), `B` with step `eps_b`: `B` (about `h M^-1`) is small, so the contact
/// solver's noise, about `tolerance / eps`, can swamp it at `EPS`.
fn compare_with(
    sim: &Simulation,
    u: &DVector<f64>,
    sensitivities: &[Sensitivity],
    eps_a: f64,
    eps_b: f64,
) -> (Vec<(f64, f64)>, Vec<ContactMode>) {
    let model = &*sim.model;
    let (nv, nu) = (model.nv, model.nu);
    let tau_ext = DVector::zeros(nv);
    let x = (sim.q.as_slice(), sim.v.as_slice(), u.as_slice(), tau_ext.as_slice());
    let (mut a_fd, mut b_fd) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut ws = sim.ws.clone();
    let mut fd = FdWorkspace::new(model);
    let fd_info = fd_transition(model, &sim.terrain, &sim.settings, &mut ws, &mut fd, x, eps_a, &mut a_fd, &mut b_fd);
    assert_eq!(fd_info.status, StepStatus::Ok);
    let fd_modes = ws.modes.clone();
    if eps_b != eps_a {
        let mut a_unused = a_fd.clone();
        let mut ws = sim.ws.clone();
        let fd_info =
            fd_transition(model, &sim.terrain, &sim.settings, &mut ws, &mut fd, x, eps_b, &mut a_unused, &mut b_fd);
        assert_eq!(fd_info.status, StepStatus::Ok);
    }
    let mut errors = Vec::new();
    let mut modes = Vec::new();
    for &sensitivity in sensitivities {
        let (a, b, m) = analytic(sim, u, sensitivity);
        assert_eq!(m, fd_modes, "the finite differences must see the same modes");
        errors.push((rel(&a, &a_fd), rel(&b, &b_fd)));
        modes = m;
    }
    (errors, modes)
}

fn compare(sim: &Simulation, u: &DVector<f64>, eps_b: f64) -> (Vec<(f64, f64)>, Vec<ContactMode>) {
    compare_with(sim, u, &SENSITIVITIES, EPS, eps_b)
}

fn check(what: &str, errors: &[(f64, f64)]) {
    check_within(what, errors, TOL);
}

/// [`check`] with `relaxed_tol` in place of [`TOL`] for the relaxed sensitivity.
fn check_within(what: &str, errors: &[(f64, f64)], relaxed_tol: f64) {
    for (sensitivity, &(ea, eb)) in SENSITIVITIES.iter().zip(errors) {
        eprintln!("{what} {sensitivity:?}: rel err A {ea:.2e}, B {eb:.2e}");
    }
    for (sensitivity, &(ea, eb)) in SENSITIVITIES.iter().zip(errors) {
        let tol = if matches!(sensitivity, Sensitivity::Relaxed { .. }) { relaxed_tol } else { TOL };
        assert!(ea < tol && eb < tol, "{what} {sensitivity:?}: A {ea:e}, B {eb:e}");
    }
}

#[test]
fn free_flight_matches_finite_differences() {
    let mut sim = scene("quadruped_stand.ron").simulation();
    tighten(&mut sim, 1e-12);
    let model = sim.model.clone();
    for seed in 0..3 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for j in &model.joints {
            match j.kind {
                JointKind::FreeFlyer => {
                    for k in 0..7 {
                        sim.q[j.idx_q + k] = rng.random_range(-1.0..1.0);
                    }
                    sim.q[j.idx_q + 2] = 10.0; // far above the ground
                }
                _ => sim.q[j.idx_q] = rng.random_range(-1.0..1.0),
            }
        }
        normalize(&model, sim.q.as_mut_slice());
        sim.v = DVector::from_fn(model.nv, |_, _| rng.random_range(-1.0..1.0));
        let u = DVector::from_fn(model.nu, |_, _| rng.random_range(-5.0..5.0));
        sim.ws.actuator_damping = DVector::from_fn(model.nu, |_, _| rng.random_range(0.0..2.0));
        let (errors, modes) = compare(&sim, &u, EPS);
        assert!(modes.iter().all(|m| *m == ContactMode::Separated));
        check(&format!("free flight seed {seed}"), &errors);
    }
}

#[test]
fn sticking_stance_matches_finite_differences() {
    let sim = settled_stance();
    let model = sim.model.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for trial in 0..3 {
        let mut s = sim.clone();
        for j in model.joints.iter().filter(|j| j.kind != JointKind::FreeFlyer) {
            s.v[j.idx_v] += rng.random_range(-0.02..0.02);
        }
        let mut u = DVector::zeros(model.nu);
        let mut damping = s.ws.actuator_damping.clone();
        s.controller.compute(&model, s.q.as_slice(), s.v.as_slice(), s.settings.dt, &mut u, &mut damping);
        s.ws.actuator_damping = damping;
        let (errors, modes) = compare(&s, &u, EPS);
        assert_eq!(modes.iter().filter(|m| **m == ContactMode::Sticking).count(), 4, "{modes:?}");
        check(&format!("sticking stance trial {trial}"), &errors);
    }
}

/// A box balanced on one corner, sliding (four coplanar corners on flat ground would make the
/// normal impulses statically indeterminate, `R_lambda + R_w G` singular, and the exact
/// sensitivity undefined). The corner starts 1e-4 m deep.
///
/// Why this case needs its own steps (measured over six spins, `tolerance` 1e-12):
/// - The finite differences are noise-limited in half the trials: the forward solve's answer
///   moves by about 2e-11 between nearby states, so their error goes as `1 / eps` (2e-5 at
///   `eps` 1e-6, 2.4e-6 at 1e-5), while in the other trials it goes as `eps^2` (4e-9 at 1e-6,
///   2.7e-7 at 1e-5). At `eps` 1e-5 every trial is within 3.5e-6 of the exact `A`.
/// - At `eps` 1e-4 the stencil moves the corner by as much as its depth: the contact separates
///   inside the stencil and the difference jumps (0.1-0.5). That was the "kink within 1e-4".
/// - The relaxed sensitivity at `kappa` 1e-13 is not the exact one's limit here: its distance to
///   the exact `A` is `O(kappa)` from the relaxation (1.3e-5 at 1e-9, 1.3e-4 at 1e-8) plus a
///   rounding part that grows as `kappa` shrinks (1e-6 to 1.5e-5 at 1e-13), because the sliding
///   contact's complementarity pairs are then `O(kappa)` small and the solve resolves them only
///   to its absolute tolerance. It is closest around `kappa` 1e-11 (at most 1.9e-7), which is
///   what this test checks it at.
#[test]
fn sliding_box_corner_matches_finite_differences() {
    let text = "Scene(name: \"slide\", robot: Box(size: (0.3, 0.2, 0.1), mass: 2.0),
          initial: (base_position: (0.0, 0.0, 1.0), base_rpy: (0.3, 0.4, 0.0), base_linear_velocity: (2.0, 0.3, 0.0)),
          terrain: (ground: (friction: 0.4)), dt: 0.002)";
    let mut sim = Scene::from_str(text, Path::new("slide.ron")).unwrap().simulation();
    let model = sim.model.clone();
    forward_kinematics(&model, &mut sim.ws.data, sim.q.as_slice(), None);
    let lowest = model
        .contact_points
        .iter()
        .map(|cp| sim.ws.data.o_m_i[cp.body].act_point(&cp.position).z - cp.radius)
        .fold(f64::INFINITY, f64::min);
    sim.q[2] -= lowest + 1e-4;
    tighten(&mut sim, 1e-12);
    let checked = [
        Sensitivity::Exact,
        Sensitivity::SignoriniRelaxed { kappa: 1e-13 },
        Sensitivity::Relaxed { kappa: 1e-11, delta: 0.0 },
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for trial in 0..6 {
        let mut s = sim.clone();
        s.v[3] += rng.random_range(-0.5..0.5);
        s.v[4] += rng.random_range(-0.5..0.5);
        let u = DVector::zeros(model.nu);
        let (errors, modes) = compare_with(&s, &u, &checked, 1e-5, 1e-5);
        assert_eq!(modes.iter().filter(|m| **m == ContactMode::Sliding).count(), 1, "{modes:?}");
        assert!(modes.iter().all(|m| *m != ContactMode::Sticking), "{modes:?}");
        for (sensitivity, &(ea, eb)) in checked.iter().zip(&errors) {
            eprintln!("sliding box corner trial {trial} {sensitivity:?}: rel err A {ea:.2e}, B {eb:.2e}");
            assert!(ea < 1e-5 && eb < 1e-5, "trial {trial} {sensitivity:?}: A {ea:e}, B {eb:e}");
        }
        // The relaxed limit itself, closer than the finite differences can see.
        let (exact, _, _) = analytic(&s, &u, Sensitivity::Exact);
        let (relaxed, _, _) = analytic(&s, &u, checked[2]);
        assert!(rel(&relaxed, &exact) < 1e-6, "trial {trial}: relaxed vs exact {:e}", rel(&relaxed, &exact));
    }
}

/// The standing quadruped on slippery ground with its base pushed sideways: four feet sliding
/// (sphere feet, so the contact-point torque terms are exercised).
///
/// The relaxed sensitivity is held to 3e-6 here, not [`TOL`]: at `kappa` 1e-13 its central-path
/// system on sliding feet is ill-conditioned, and its error against the differences (7.5e-7 to
/// 8.3e-7 over the three trials at 53d215a, where the exact sensitivity's is under 1e-8 for `A`)
/// is rounding: it reached 1.05e-6 when one division in `ltl::factor` or `ltl::solve_l` was
/// taken as a product by the reciprocal (scratch).
#[test]
fn sliding_feet_match_finite_differences() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join("quadruped_stand.ron");
    let text = std::fs::read_to_string(&path).unwrap().replace("friction: 0.8", "friction: 0.1");
    let mut sim = Scene::from_str(&text, &path).unwrap().simulation();
    for _ in 0..500 {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    // 1e-12 is not reached on four sliding feet; 1e-11 is.
    tighten(&mut sim, 1e-11);
    let model = sim.model.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for trial in 0..3 {
        let mut s = sim.clone();
        s.v[0] += 1.0 + rng.random_range(-0.2..0.2);
        s.v[1] += rng.random_range(-0.3..0.3);
        let mut u = DVector::zeros(model.nu);
        let mut damping = s.ws.actuator_damping.clone();
        s.controller.compute(&model, s.q.as_slice(), s.v.as_slice(), s.settings.dt, &mut u, &mut damping);
        s.ws.actuator_damping = damping;
        let (errors, modes) = compare(&s, &u, 3e-4);
        assert_eq!(modes.iter().filter(|m| **m == ContactMode::Sliding).count(), 4, "{modes:?}");
        check_within(&format!("sliding feet trial {trial}"), &errors, 3e-6);
    }
}

/// The sticking stance of `scenes/mpc_pull_rotors.ron`, whose leg joints carry rotor inertia
/// (`Model::armature`): the step adds it to `M`'s diagonal, and the Jacobians must too.
#[test]
fn stance_with_rotor_inertia_matches_finite_differences() {
    let mut sim = scene("mpc_pull_rotors.ron").simulation();
    assert!(sim.model.armature.iter().any(|&a| a > 0.0));
    sim.pulls.clear();
    tighten(&mut sim, 1e-12);
    for _ in 0..500 {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    let model = sim.model.clone();
    let mut u = DVector::zeros(model.nu);
    let mut damping = sim.ws.actuator_damping.clone();
    sim.controller.compute(&model, sim.q.as_slice(), sim.v.as_slice(), sim.settings.dt, &mut u, &mut damping);
    sim.ws.actuator_damping = damping;
    let (errors, modes) = compare(&sim, &u, EPS);
    assert_eq!(modes.iter().filter(|m| **m == ContactMode::Sticking).count(), 4, "{modes:?}");
    check("stance with rotor inertia", &errors);
}

/// `TransitionWorkspace::dlambda` (the impulse sensitivity the app's contact inspector shows):
/// its `du` columns against central differences of the step's impulses, at a sticking stance
/// where the active set does not change inside the stencil.
#[test]
fn dlambda_of_a_sticking_stance_matches_finite_differences() {
    let mut sim = settled_stance();
    let model = sim.model.clone();
    let (nq, nv, nu) = (model.nq, model.nv, model.nu);
    let mut u = DVector::zeros(nu);
    let mut damping = sim.ws.actuator_damping.clone();
    sim.controller.compute(&model, sim.q.as_slice(), sim.v.as_slice(), sim.settings.dt, &mut u, &mut damping);
    sim.ws.actuator_damping = damping;
    let tau_ext = DVector::zeros(nv);
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut ws = sim.ws.clone();
    let mut tw = TransitionWorkspace::new(&model);
    let x = (sim.q.as_slice(), sim.v.as_slice(), u.as_slice(), tau_ext.as_slice());
    let info = transition_jacobians(
        &model,
        &sim.terrain,
        &sim.settings,
        &mut ws,
        &mut tw,
        x,
        Sensitivity::Exact,
        &mut a,
        &mut b,
    );
    assert_eq!(info.status, TransitionStatus::Ok);
    let ka = ws.contacts.n_active();
    assert_eq!(ka, 4);
    let active = ws.contacts.active.clone();
    let dl = tw.dlambda(ka, nv, nu).into_owned();
    assert_eq!(dl.shape(), (3 * ka, 2 * nv + nu));
    let lambda_at = |u: &DVector<f64>| {
        let mut ws = sim.ws.clone();
        let (mut q1, mut v1) = (vec![0.0; nq], vec![0.0; nv]);
        let s = contactlab::sim::step(
            &model,
            &sim.terrain,
            &sim.settings,
            &mut ws,
            sim.q.as_slice(),
            sim.v.as_slice(),
            u.as_slice(),
            tau_ext.as_slice(),
            &mut q1,
            &mut v1,
        );
        assert_eq!(s.status, StepStatus::Ok);
        assert_eq!(ws.contacts.active, active, "the active set moved inside the stencil");
        ws.lambda_active.rows(0, 3 * ka).into_owned()
    };
    let eps = 1e-5;
    let mut worst: f64 = 0.0;
    for j in 0..nu {
        let (mut up, mut um) = (u.clone(), u.clone());
        up[j] += eps;
        um[j] -= eps;
        let fd = (lambda_at(&up) - lambda_at(&um)) / (2.0 * eps);
        let col = dl.column(2 * nv + j);
        worst = worst.max((col - &fd).norm() / fd.norm().max(1e-9));
    }
    assert!(worst < 1e-4, "dlambda/du against central differences: relative error {worst:.2e}");
}

/// The relaxed backward solve, warm-started from the hard solution of the settled stance (the
/// scene's own solver settings), starts with its loaded pairs on its central path and
/// converges in two Newton iterations (three from `warm_start_mu` with `s >= w_n`, where the
/// shift `delta` put `gamma s` far above the path).
#[test]
fn the_relaxed_backward_solve_of_the_stance_takes_two_newton_iterations() {
    let mut sim = scene("quadruped_stand.ron").simulation();
    for _ in 0..500 {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    let model = &*sim.model;
    let (nv, nu) = (model.nv, model.nu);
    let tau_ext = DVector::zeros(nv);
    let x = (sim.q.as_slice(), sim.v.as_slice(), sim.u.as_slice(), tau_ext.as_slice());
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let mut ws = sim.ws.clone();
    let mut tw = TransitionWorkspace::new(model);
    let relaxed = Sensitivity::Relaxed { kappa: 1e-6, delta: 1e-3 };
    let info = transition_jacobians(model, &sim.terrain, &sim.settings, &mut ws, &mut tw, x, relaxed, &mut a, &mut b);
    assert_eq!(info.status, TransitionStatus::Ok, "{info:?}");
    assert_eq!(info.backward.status, contactlab::contact::solver::Status::Converged, "{info:?}");
    assert!(info.backward.iterations <= 2, "{:?}", info.backward);
}
