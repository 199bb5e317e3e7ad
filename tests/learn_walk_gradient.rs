//! BPTT's policy gradient on the walk task through rollouts in which feet lift off and touch
//! down: the exact sensitivity's is the loss's derivative where the loss is smooth, and against
//! a Gaussian-smoothed finite-difference reference (`contactlab::learn::smoothed`: widths
//! matched in action space) the relaxed one is the closer once the smoothing moves contact
//! events. The multi-policy measurement behind the README's numbers is
//! `examples/walk_smoothed.rs` (`docs/results/learning/walk/smoothed_gradient.json`).

use contactlab::diff::{Sensitivity, SensitivityKind};
use contactlab::learn::bptt::{self, BpttWork};
use contactlab::learn::mlp::Activation;
use contactlab::learn::policy::Policy;
use contactlab::learn::smoothed::{compare_along, contact_events, moved, moving_start, random_direction, unit};
use contactlab::learn::task::{Env, Episode, Task};
use contactlab::scene::Scene;
use rand::rngs::ChaCha8Rng;
use rand::SeedableRng;
use std::path::{Path, PathBuf};

fn walk_task(steps: usize) -> Task {
    let sc = Scene::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenes/learn_walk.ron")).unwrap();
    let mut task = sc.task(sc.learn_settings().unwrap()).unwrap();
    task.steps = steps;
    task
}

fn gradient(task: &Task, policy: &Policy, ep: &Episode, s: Sensitivity) -> Vec<f64> {
    let mut w = BpttWork::new(task);
    let mut g = vec![0.0; policy.mlp.n_params()];
    let o = bptt::rollout_gradient(task, policy, ep, s, &mut w, &mut g);
    assert!(o.ok, "{s:?}: {o:?}");
    g
}

/// Where the loss is smooth the exact sensitivity's gradient is its derivative, also at a
/// trained gait whose swing feet leave the ground slowly. Before the realized modes compared
/// `w_n` with `G_nn l_n` (contact::solver, *Realized modes*), a foot lifting off at 1 cm/s kept
/// the interior point's residual impulse (3e-9 N s, above the absolute threshold), was
/// differentiated as sliding, and this gradient was off by 45 % (2 steps) and 10 % (35 steps).
#[test]
fn exact_gradient_of_the_shipped_walking_policy_is_the_derivative() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let policy = Policy::load(&root.join("assets/policies/walk_bptt_relaxed.json")).unwrap();
    for steps in [2, 35] {
        let task = walk_task(steps);
        let ep = moving_start(&task);
        let g = gradient(&task, &policy, &ep, SensitivityKind::Exact.with(task.spec.kappa, task.spec.delta));
        let d = unit(&g);
        let along: f64 = g.iter().zip(&d).map(|(a, b)| a * b).sum();
        let mut env = Env::new(&task);
        let h = 1e-6;
        let mut loss = |s: f64| bptt::rollout_loss(&task, &moved(&policy, &d, s), &ep, &mut env).unwrap();
        let fd = (loss(h) - loss(-h)) / (2.0 * h);
        let rel = (along - fd).abs() / fd.abs();
        eprintln!("{steps} steps: exact {along:.7e}, central differences {fd:.7e}, rel {rel:.1e}");
        assert!(rel < 1e-5, "{steps} steps: exact {along} against central differences {fd}");
    }
}

#[test]
fn bptt_gradient_through_lift_off_and_touchdown_against_smoothed_differences() {
    let task = walk_task(35);
    let ep = moving_start(&task);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let policy = Policy::new(&task, &task.spec.hidden.clone(), Activation::Tanh, &mut rng);
    // The rollout has lift-offs and touchdowns of the feet.
    let (lift_offs, touchdowns) = contact_events(&task, &policy, &ep);
    eprintln!("lift-offs {lift_offs}, touchdowns {touchdowns}");
    assert!(lift_offs >= 2 && touchdowns >= 2, "the rollout must lift and land feet");

    let (k, d) = (task.spec.kappa, task.spec.delta);
    let (exact, relaxed) = (0, 1);
    let grads: Vec<Vec<f64>> = [SensitivityKind::Exact, SensitivityKind::Relaxed]
        .map(|s| gradient(&task, &policy, &ep, s.with(k, d)))
        .to_vec();
    let n = policy.mlp.n_params();
    let mut dirs: Vec<Vec<f64>> = grads.iter().map(|g| unit(g)).collect();
    for _ in 0..6 {
        dirs.push(random_direction(n, &mut rng));
    }
    // Widths in action space (root-mean-square change of the policy outputs; times
    // action_scale 0.3 in rad of joint target): 3e-4 moves no contact event by a step,
    // 1e-2 does.
    let (narrow, wide) = (0, 1);
    let refs: Vec<_> = dirs
        .iter()
        .map(|dir| compare_along(&task, &policy, &ep, &grads, dir, &[3e-4, 1e-2], 161).expect("rollouts"))
        .collect();
    for (l, r) in refs.iter().enumerate() {
        for w in r {
            eprintln!(
                "sigma_a {:.0e} (sigma {:.2e}), direction {l}: smoothed {:+.5e}, exact {:+.5e} (rel {:.3}), relaxed {:+.5e} (rel {:.3})",
                w.sigma_action,
                w.sigma,
                w.reference,
                w.analytic[exact],
                w.rel_error(exact),
                w.analytic[relaxed],
                w.rel_error(relaxed)
            );
        }
    }
    let rel = |l: usize, w: usize, i: usize| refs[l][w].rel_error(i);
    // Narrow: the loss is smooth over the window and the exact gradient is its derivative,
    // while the relaxed one carries the relaxation's bias.
    for l in 0..dirs.len() {
        assert!(rel(l, narrow, exact) < 0.01, "exact against the local derivative, direction {l}");
        assert!(rel(l, narrow, relaxed) > 3.0 * rel(l, narrow, exact), "relaxed shows no bias, direction {l}");
    }
    // Wide: touchdowns and lift-offs move within the window. Along the gradient directions the
    // smoothed derivative falls > 15 % below the exact one and the relaxed gradient is the
    // closer; in random directions it is the closer in most.
    for l in 0..2 {
        assert!(rel(l, wide, exact) > 0.15, "no event moves along direction {l}");
        assert!(rel(l, wide, relaxed) < rel(l, wide, exact), "relaxed is not closer along direction {l}");
    }
    let closer = (2..dirs.len()).filter(|&l| rel(l, wide, relaxed) < rel(l, wide, exact)).count();
    assert!(closer >= 5, "relaxed closer in {closer} of 6 random directions");
}
