//! The walk task's gait terms (`learn::task`, *Gait*): the foot-height observation rows and
//! their tangent Jacobian against finite differences through `integrate`, the cost gradient
//! through them, the trot prior's targets, and the gait measurements on the prior.

use contactlab::learn::gait::{measure, summarize};
use contactlab::learn::task::{Command, Task};
use contactlab::model::configuration::integrate;
use contactlab::scene::Scene;
use nalgebra::{DMatrix, DVector};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::PathBuf;

fn walk_task() -> Task {
    let sc = Scene::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenes/learn_walk.ron")).unwrap();
    sc.task(sc.learn_settings().unwrap()).unwrap()
}

#[test]
fn walk_observation_and_cost_gradients_match_finite_differences() {
    let task = walk_task();
    let m = &*task.model;
    assert_eq!(task.feet.len(), 4);
    assert_eq!(task.obs_dim(), 10 + 2 * m.nu + 3 + 4);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for trial in 0..3 {
        let ep = task.sample_episode(&mut rng);
        let (mut q, v) = (ep.q0.clone(), ep.v0.clone());
        // Off the stance: bend some joints so the feet sit at different heights, and tilt the
        // base (at a zero orientation error the differences of the log map lose ~1e-4 to
        // rounding, whatever the analytic rows).
        for k in 0..m.nu {
            q[task.act_q[k]] += rng.random_range(-0.2..0.2);
        }
        let mut tilt = DVector::zeros(m.nv);
        for i in 3..6 {
            tilt[i] = rng.random_range(-0.1..0.1);
        }
        let q0 = q.clone();
        integrate(m, q0.as_slice(), tilt.as_slice(), q.as_mut_slice());
        let t = 0.37 * trial as f64;
        let cmd = Command { speed: 0.4, phase: 1.1, ..Command::default() };
        let no = task.obs_dim();
        let mut o = vec![0.0; no];
        let mut jac = DMatrix::zeros(no, 2 * m.nv);
        task.observe(q.as_slice(), v.as_slice(), t, &cmd, &mut o, Some(&mut jac));
        let a: Vec<f64> = (0..m.nu).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut go = vec![0.0; no];
        let mut ga = vec![0.0; m.nu];
        task.cost(&o, &a, Some((&mut go, &mut ga, 1.0)));
        let dcdx = jac.tr_mul(&DVector::from_column_slice(&go));
        let eps = 1e-6;
        let (mut worst_o, mut worst_c): (f64, f64) = (0.0, 0.0);
        for i in 0..2 * m.nv {
            let mut d = DVector::zeros(2 * m.nv);
            let (mut op, mut om) = (vec![0.0; no], vec![0.0; no]);
            for (sign, out) in [(1.0, &mut op), (-1.0, &mut om)] {
                d[i] = sign * eps;
                let mut qn = DVector::zeros(m.nq);
                integrate(m, q.as_slice(), &d.as_slice()[..m.nv], qn.as_mut_slice());
                let vn = &v + d.rows(m.nv, m.nv);
                task.observe(qn.as_slice(), vn.as_slice(), t, &cmd, out, None);
            }
            for r in 0..no {
                let fd = (op[r] - om[r]) / (2.0 * eps);
                worst_o = worst_o.max((fd - jac[(r, i)]).abs());
            }
            let fd = (task.cost(&op, &a, None) - task.cost(&om, &a, None)) / (2.0 * eps);
            worst_c = worst_c.max((fd - dcdx[i]).abs() / dcdx[i].abs().max(1.0));
        }
        assert!(worst_o < 1e-7, "observation Jacobian error {worst_o:e}");
        assert!(worst_c < 1e-5, "cost gradient error {worst_c:e}");
        // The foot rows carry the foot-height error against the clock's reference.
        assert!(jac.rows(13 + 2 * m.nu, 4).iter().any(|x| x.abs() > 0.1));
    }
}

#[test]
fn trot_prior_moves_diagonal_pairs_in_antiphase() {
    let task = walk_task();
    let nu = task.model.nu;
    let a = vec![0.0; nu];
    let mut r = vec![0.0; nu];
    // A quarter cycle in: the phase-0 pair is at mid-swing, the other pair at mid-stance.
    let c = Command { speed: 0.4, ..Command::default() };
    task.targets(&a, 0.25 / task.spec.command.gait_frequency, &c, &mut r);
    let g = &task.spec.gait;
    for f in &task.feet {
        let (th, ca) = (f.thigh.unwrap(), f.calf.unwrap());
        let swing = f.phase_offset == 0.0;
        let lift = if swing { g.prior_lift } else { 0.0 };
        assert!((r[th] - task.posture[th] - lift).abs() < 1e-9, "thigh of foot {}", f.contact);
        assert!((r[ca] - task.posture[ca] + 2.0 * lift).abs() < 1e-9, "calf of foot {}", f.contact);
    }
    assert_eq!(task.feet.iter().filter(|f| f.phase_offset == 0.0).count(), 2);
}

#[test]
fn gait_measurements_of_the_standing_pd_see_no_lift() {
    // The scene's PD with the gait terms off stands: full duty, no lift, no speed.
    let sc = Scene::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenes/learn_walk.ron")).unwrap();
    let mut spec = sc.learn_settings().unwrap();
    spec.gait = Default::default();
    let task = sc.task(spec).unwrap();
    let mut eps = task.eval_episodes();
    eps.truncate(4);
    for e in &mut eps {
        e.q0 = task.q_stand.clone();
        e.v0.fill(0.0);
        e.pushes.clear();
    }
    let g = measure(&task, None, &eps, task.steps, Some(0.4));
    let s = summarize(&g, 0.2, 0.02, [0.3, 0.8]);
    assert_eq!(s.failed, 0);
    assert!(s.speed_mean.abs() < 0.02, "{s:?}");
    assert!(s.min_lift.iter().all(|&l| l < 0.005), "{s:?}");
    assert!(s.duty_min.iter().all(|&d| d > 0.95), "{s:?}");
    assert_eq!(s.walking, 0);
}

#[test]
fn a_short_walk_bptt_run_improves_the_return() {
    let task = walk_task();
    let mut cfg = contactlab::learn::bptt::BpttSettings::for_task(&task);
    // The scene's BPTT settings, a few iterations of a smaller batch.
    assert_eq!((cfg.batch, cfg.lr, cfg.sim_steps), (32, 5e-4, 150_000));
    cfg.batch = 8;
    cfg.lr = 3e-3;
    cfg.sim_steps = 5 * cfg.batch * task.steps;
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let r = contactlab::learn::bptt::train_bptt(&task, &cfg, &cancel, |_, _| {});
    let first = r.logs[0].eval_return;
    eprintln!("walk evaluation return {first:.3} -> {:.3}", r.final_return);
    assert!(r.final_return > 0.8 * first, "return did not improve by 20 %: {first} -> {}", r.final_return);
    assert!(r.logs.iter().all(|l| l.failed_rollouts == 0));
}

#[test]
fn the_shipped_walk_policy_keeps_its_commanded_speed_for_three_seconds() {
    // assets/policies/walk_bptt_relaxed.json: compare-learning's seed-0 relaxed BPTT policy
    // (docs/results/learning/walk). Six evaluation episodes (random starts and clock phases),
    // 0.4 m/s commanded, 3 s (six times its training episodes).
    let task = walk_task();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/policies/walk_bptt_relaxed.json");
    let policy = contactlab::learn::Policy::load(&path).unwrap();
    policy.check(&task).unwrap();
    let mut eps = task.eval_episodes();
    eps.truncate(6);
    let steps = (3.0 / task.settings.dt).round() as usize;
    for e in measure(&task, Some(&policy), &eps, steps, Some(0.4)) {
        eprintln!("speed {:.3} m/s, duty {:?}, lift {:?}", e.speed, e.duty, e.min_lift);
        assert!(!e.failed && e.trunk_contact_steps == 0, "{e:?}");
        assert!((e.speed / 0.4 - 1.0).abs() < 0.3, "speed {} m/s against 0.4 commanded", e.speed);
    }
}
