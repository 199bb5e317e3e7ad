//! Rollout gradients (adjoint over stored transition Jacobians) against central finite
//! differences of the rollout cost computed by the plain simulator, on a 0.5 s quadruped
//! rollout in a smooth regime (four sticking feet under a joint PD controller).

use contactlab::diff::{apply_param, rollout_cost, rollout_gradient, Cost, Param, PointCost, Sensitivity};
use contactlab::model::{integrate, JointKind};
use contactlab::scene::Scene;
use contactlab::sim::{Simulation, StepStatus};
use nalgebra::{DVector, Vector3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::Path;

fn settled_stance() -> Simulation {
    let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).unwrap();
    let mut sim = s.simulation();
    sim.settings.solver.tolerance = 1e-12;
    sim.settings.solver.kappa_target = 1e-14;
    sim.settings.solver.max_iterations = 200;
    for _ in 0..300 {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    sim.t = 0.0;
    sim
}

fn cost(sim: &Simulation) -> Cost {
    let model = &*sim.model;
    let mut c = Cost::zero(model);
    c.running = 1.0;
    c.terminal = 5.0;
    for j in model.joints.iter().filter(|j| j.kind != JointKind::FreeFlyer) {
        c.q_ref[j.idx_q] = sim.q[j.idx_q] + 0.1;
        c.w_q[j.idx_v] = 1.0;
    }
    c.w_v.fill(0.05);
    c.w_u.fill(1e-3);
    c.points.push(PointCost {
        body: 0,
        point: Vector3::new(0.1, 0.0, 0.0),
        target: Vector3::new(0.05, 0.02, 0.35),
        weight: Vector3::new(1.0, 1.0, 10.0),
        linear: Vector3::new(0.0, 0.0, 0.5),
        linear_velocity: Vector3::new(0.2, -0.1, 0.3),
    });
    c
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-12)
}

#[test]
fn rollout_gradients_match_finite_differences() {
    let sim = settled_stance();
    let model = sim.model.clone();
    let (nv, nu) = (model.nv, model.nu);
    let steps = (0.5 / sim.settings.dt).round() as usize;
    let cost = cost(&sim);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let e_u = DVector::from_fn(nu, |_, _| rng.random_range(-1.0..1.0));
    let param = Param::ControlOffset { direction: e_u.clone() };
    for sensitivity in [Sensitivity::Exact, Sensitivity::Relaxed { kappa: 1e-13, delta: 0.0 }] {
        let g = rollout_gradient(&sim, &cost, steps, Some(&param), sensitivity).unwrap();
        assert_eq!(g.modes.len(), steps);
        // Four sticking feet throughout: a smooth regime.
        assert!(g
            .modes
            .iter()
            .all(|m| m.iter().filter(|m| **m == contactlab::contact::ContactMode::Sticking).count() == 4));
        let (j0, _) = rollout_cost(&sim, &cost, steps, None).unwrap();
        assert!(rel(g.cost, j0) < 1e-12, "costs {} vs {}", g.cost, j0);

        // dJ/ds for a constant control offset.
        let eps = 1e-5;
        let f = |s: f64| {
            let mut x = sim.clone();
            apply_param(&mut x, &param, s).unwrap();
            rollout_cost(&x, &cost, steps, None).unwrap().0
        };
        let fd = (f(eps) - f(-eps)) / (2.0 * eps);
        let e = rel(g.grad_param, fd);
        eprintln!("{sensitivity:?}: dJ/ds analytic {:.8e}, fd {fd:.8e}, rel {e:.1e}", g.grad_param);
        assert!(e < 1e-4);
        // The per-step control gradient summed along the offset is the same number.
        let sum: f64 = (0..steps).map(|t| g.grad_u.row(t).transpose().dot(&e_u)).sum();
        assert!(rel(sum, g.grad_param) < 1e-10);

        // dJ/dx0 along a random tangent direction (q through integrate) and along each axis of
        // the base and one leg.
        let dirs: Vec<DVector<f64>> = (0..3)
            .map(|_| DVector::from_fn(2 * nv, |_, _| rng.random_range(-1.0..1.0)))
            .chain([0, 2, 4, 8, nv + 2, nv + 9].into_iter().map(|i| DVector::from_fn(2 * nv, |r, _| f64::from(r == i))))
            .collect();
        for d in dirs {
            let h0 = |s: f64| {
                let mut x = sim.clone();
                let dq = d.rows(0, nv) * s;
                let mut q = x.q.clone();
                integrate(&model, sim.q.as_slice(), dq.as_slice(), q.as_mut_slice());
                x.q = q;
                x.v += d.rows(nv, nv) * s;
                rollout_cost(&x, &cost, steps, None).unwrap().0
            };
            let eps = 1e-6;
            let fd = (h0(eps) - h0(-eps)) / (2.0 * eps);
            let an = g.grad_x0.dot(&d);
            let e = (an - fd).abs() / (fd.abs().max(1e-3 * g.grad_x0.norm() * d.norm()));
            eprintln!("{sensitivity:?}: dJ/dx0 . d analytic {an:.8e}, fd {fd:.8e}, rel {e:.1e}");
            assert!(e < 1e-4);
        }
    }
}
