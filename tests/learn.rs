//! Policy learning (issue 6): the MLP's vector-Jacobian products, the task's observation
//! Jacobian, the BPTT policy gradient against finite differences of the simulator's loss, a
//! short training run, the shipped BPTT policy keeping the quadruped standing under the scene's
//! pushes, the CLI files, and located errors of the scene's `learn` section.

use contactlab::diff::Sensitivity;
use contactlab::learn::bptt::{self, BpttWork};
use contactlab::learn::mlp::{Activation, Mlp, MlpCache};
use contactlab::learn::policy::Policy;
use contactlab::learn::task::{Command, Env, Episode, Task};
use contactlab::model::configuration::{free_flyer_placement, integrate};
use contactlab::scene::Scene;
use nalgebra::{DMatrix, DVector, Rotation3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn stand_task() -> Task {
    let sc = Scene::load(&root().join("scenes/learn_stand.ron")).unwrap();
    sc.task(sc.learn_settings().unwrap()).unwrap()
}

#[test]
fn mlp_vector_jacobian_products_match_finite_differences() {
    for act in [Activation::Tanh, Activation::Elu] {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut net = Mlp::with_activation(&[7, 16, 9, 5], act, &mut rng, 1.0);
        for p in net.params.iter_mut() {
            *p += 0.1 * rng.random_range(-1.0..1.0);
        }
        let x: Vec<f64> = (0..7).map(|_| rng.random_range(-1.5..1.5)).collect();
        let gy: Vec<f64> = (0..5).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut cache = MlpCache::default();
        net.forward(&x, &mut cache);
        let mut gp = vec![0.0; net.n_params()];
        let gx = net.backward(&cache, &gy, &mut gp);
        let f = |net: &Mlp, x: &[f64]| -> f64 { net.eval(x).iter().zip(&gy).map(|(a, b)| a * b).sum() };
        let eps = 1e-6;
        let mut worst: f64 = 0.0;
        for i in 0..x.len() {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[i] += eps;
            xm[i] -= eps;
            let fd = (f(&net, &xp) - f(&net, &xm)) / (2.0 * eps);
            worst = worst.max((fd - gx[i]).abs() / gx[i].abs().max(1.0));
        }
        for i in 0..net.n_params() {
            let mut n = net.clone();
            n.params[i] += eps;
            let fp = f(&n, &x);
            n.params[i] -= 2.0 * eps;
            let fm = f(&n, &x);
            let fd = (fp - fm) / (2.0 * eps);
            worst = worst.max((fd - gp[i]).abs() / gp[i].abs().max(1.0));
        }
        assert!(worst < 1e-6, "{act:?}: worst VJP error {worst:e}");
    }
}

#[test]
fn observation_jacobian_matches_finite_differences_through_integrate() {
    let task = stand_task();
    let m = &*task.model;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let ep = task.sample_episode(&mut rng);
    let cmd = Command { height: 0.02, rpy: [0.05, -0.08, 0.1], speed: 0.0, phase: 0.0 };
    let (q, v) = (ep.q0.clone(), ep.v0.clone());
    let no = task.obs_dim();
    let mut o = vec![0.0; no];
    let mut jac = DMatrix::zeros(no, 2 * m.nv);
    task.observe(q.as_slice(), v.as_slice(), 0.0, &cmd, &mut o, Some(&mut jac));
    let eps = 1e-6;
    let mut worst: f64 = 0.0;
    for i in 0..2 * m.nv {
        let mut d = DVector::zeros(2 * m.nv);
        let (mut op, mut om) = (vec![0.0; no], vec![0.0; no]);
        for (sign, out) in [(1.0, &mut op), (-1.0, &mut om)] {
            d[i] = sign * eps;
            let mut qn = DVector::zeros(m.nq);
            integrate(m, q.as_slice(), &d.as_slice()[..m.nv], qn.as_mut_slice());
            let vn = &v + d.rows(m.nv, m.nv);
            task.observe(qn.as_slice(), vn.as_slice(), 0.0, &cmd, out, None);
        }
        for r in 0..no {
            let fd = (op[r] - om[r]) / (2.0 * eps);
            worst = worst.max((fd - jac[(r, i)]).abs());
        }
    }
    assert!(worst < 1e-7, "observation Jacobian error {worst:e}");
}

/// A still start at the settled stance with a command and no push: four sticking feet, no mode
/// change over a short horizon.
fn smooth_episode(task: &Task) -> Episode {
    Episode {
        q0: task.q_stand.clone(),
        v0: DVector::zeros(task.model.nv),
        command: Command { height: 0.02, rpy: [0.05, -0.05, 0.03], speed: 0.0, phase: 0.0 },
        pushes: vec![],
    }
}

#[test]
fn bptt_policy_gradient_matches_finite_differences_in_a_smooth_regime() {
    let mut task = stand_task();
    task.steps = 10; // 0.1 s
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut policy = Policy::new(&task, &[16, 16], Activation::Tanh, &mut rng);
    // A policy whose actions matter: larger output weights than the near-zero initialization.
    for p in policy.mlp.params.iter_mut() {
        *p *= 1.0 + 0.5 * rng.random_range(-1.0..1.0);
    }
    let n_out = policy.mlp.n_out();
    let last = policy.mlp.n_params() - n_out * (16 + 1);
    for p in policy.mlp.params[last..].iter_mut() {
        *p = 0.05 * rng.random_range(-1.0..1.0);
    }
    let ep = smooth_episode(&task);
    let mut w = BpttWork::new(&task);
    let mut grad = vec![0.0; policy.mlp.n_params()];
    let out = bptt::rollout_gradient(&task, &policy, &ep, Sensitivity::Exact, &mut w, &mut grad);
    assert!(out.ok && out.fallback_steps == 0, "{out:?}");
    let mut env = Env::new(&task);
    let loss = |p: &Policy, env: &mut Env| bptt::rollout_loss(&task, p, &ep, env).expect("rollout");
    assert!((loss(&policy, &mut env) - out.loss).abs() < 1e-12 * out.loss.abs().max(1.0));
    // The modes stay put (sticking feet) along the perturbed rollouts too.
    let mut check = |dir: &[f64]| {
        let eps = 1e-5;
        let (mut pp, mut pm) = (policy.clone(), policy.clone());
        for i in 0..dir.len() {
            pp.mlp.params[i] += eps * dir[i];
            pm.mlp.params[i] -= eps * dir[i];
        }
        let fd = (loss(&pp, &mut env) - loss(&pm, &mut env)) / (2.0 * eps);
        let an: f64 = grad.iter().zip(dir).map(|(a, b)| a * b).sum();
        let rel = (fd - an).abs() / fd.abs().max(1e-12);
        eprintln!("directional derivative: analytic {an:.9e}, central difference {fd:.9e}, rel {rel:.2e}");
        assert!(rel < 1e-4, "analytic {an:e} vs finite difference {fd:e}: relative error {rel:e}");
    };
    // The gradient direction, three random directions and the largest single coordinates.
    let gn = grad.iter().map(|x| x * x).sum::<f64>().sqrt();
    check(&grad.iter().map(|x| x / gn).collect::<Vec<_>>());
    for _ in 0..3 {
        let d: Vec<f64> = (0..grad.len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        check(&d);
    }
    let mut idx: Vec<usize> = (0..grad.len()).collect();
    idx.sort_by(|&a, &b| grad[b].abs().total_cmp(&grad[a].abs()));
    for &i in &idx[..3] {
        let mut d = vec![0.0; grad.len()];
        d[i] = 1.0;
        check(&d);
    }
}

#[test]
fn a_short_bptt_run_lowers_the_loss() {
    let task = stand_task();
    let mut cfg = bptt::BpttSettings::for_task(&task);
    cfg.batch = 8;
    cfg.lr = 3e-3;
    cfg.sim_steps = 4 * cfg.batch * task.steps;
    let cancel = AtomicBool::new(false);
    let mut seen = 0;
    let r = bptt::train_bptt(&task, &cfg, &cancel, |_, _| seen += 1);
    assert_eq!(seen, 5);
    let first = r.logs[0].eval_return;
    let last = r.final_return;
    eprintln!("evaluation return {first:.3} -> {last:.3}");
    assert!(last > first + 1.0, "return did not improve: {first} -> {last}");
    assert!(r.logs.iter().all(|l| l.failed_rollouts == 0));
    assert!(r.policy.mlp.params.iter().all(|p| p.is_finite()));
    // Cancelling stops before the first iteration.
    let cancel = AtomicBool::new(true);
    let r = bptt::train_bptt(&task, &cfg, &cancel, |_, _| {});
    assert_eq!(r.status, contactlab::learn::TrainStatus::Cancelled);
}

/// Runs the scene for its duration with its pushes, driving the PD's targets by `policy` (or
/// the plain PD: `None`) under `command`; returns (summed task cost, max height error from
/// the commanded height, max orientation error from the commanded one, trunk touched).
fn closed_loop(task: &Task, policy: Option<&Policy>, command: &Command) -> (f64, f64, f64, bool) {
    let sc = Scene::load(&root().join("scenes/learn_stand.ron")).unwrap();
    let mut sim = sc.simulation();
    sim.q.copy_from(&task.q_stand);
    sim.v.fill(0.0);
    let steps = (sc.file.duration.unwrap() / sc.settings.dt).round() as usize;
    let (z_t, r_t) = task.target(command);
    let zero = vec![0.0; task.act_dim()];
    let (mut cost, mut dz, mut dr, mut trunk) = (0.0, 0.0f64, 0.0f64, false);
    let mut o = vec![0.0; task.obs_dim()];
    for _ in 0..steps {
        let a = match policy {
            Some(p) => {
                p.drive(task, &mut sim, command);
                task.observe(sim.q.as_slice(), sim.v.as_slice(), sim.t, command, &mut o, None);
                p.action(&o, &mut MlpCache::default())
            }
            None => zero.clone(),
        };
        assert!(sim.step().status.advanced());
        task.observe(sim.q.as_slice(), sim.v.as_slice(), sim.t, command, &mut o, None);
        cost += task.cost(&o, &a, None);
        let m = free_flyer_placement(&sim.q.as_slice()[..7]);
        dz = dz.max((m.trans.z - z_t).abs());
        dr = dr.max(Rotation3::from_matrix_unchecked(r_t.transpose() * m.rot).angle());
        for (i, c) in sim.model.contact_points.iter().enumerate() {
            if !c.name.ends_with("foot") && sim.ws.lambda[3 * i] > 1e-6 {
                trunk = true;
            }
        }
    }
    (cost, dz, dr, trunk)
}

#[test]
fn the_shipped_bptt_policy_keeps_the_robot_standing_under_the_pushes() {
    let task = stand_task();
    let path = root().join("assets/policies/stand_bptt_relaxed.json");
    let policy = Policy::load(&path).unwrap();
    policy.check(&task).unwrap();
    assert!(!task.pulls.is_empty(), "the scene ships pushes");
    for command in [Command::default(), Command { height: 0.03, rpy: [0.0, 0.08, 0.0], speed: 0.0, phase: 0.0 }] {
        let (cost, dz, dr, trunk) = closed_loop(&task, Some(&policy), &command);
        let (cost0, dz0, dr0, _) = closed_loop(&task, None, &command);
        eprintln!(
            "{command:?}: policy cost {cost:.2}, height error {dz:.4} m, orientation error {dr:.3} rad; \
             zero action cost {cost0:.2} ({dz0:.4} m, {dr0:.3} rad)"
        );
        assert!(!trunk, "the trunk touched the ground");
        assert!(dz < 0.05, "base height left the band: {dz} m");
        assert!(dr < 0.25, "orientation error {dr} rad");
        assert!(cost < 0.5 * cost0, "policy {cost} is not clearly better than zero action {cost0}");
    }
}

fn contactlab(args: &[&str]) -> std::process::Output {
    let o =
        std::process::Command::new(env!("CARGO_BIN_EXE_contactlab")).args(args).current_dir(root()).output().unwrap();
    eprintln!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    o
}

fn keys(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn cli_train_and_compare_write_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bp = d.join("bptt");
    let o = contactlab(&[
        "train",
        "bptt",
        "scenes/learn_stand.ron",
        "--seed",
        "1",
        "--steps",
        "400",
        "--out",
        bp.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let s = keys(&bp.join("summary.json"));
    for k in ["final_return", "sim_steps", "seconds", "target_return", "algorithm", "steps_to_target"] {
        assert!(s.get(k).is_some(), "summary.json lacks {k}: {s}");
    }
    assert_eq!(s["algorithm"], "bptt-relaxed");
    // The budget is rounded up to whole iterations (16 rollouts of 50 steps).
    assert_eq!(s["sim_steps"], 800);
    assert!(s["final_return"].as_f64().unwrap().is_finite());
    let csv = std::fs::read_to_string(bp.join("progress.csv")).unwrap();
    assert!(csv.starts_with("iteration,sim_steps,wall_s,eval_return"));
    assert_eq!(csv.lines().count(), 3, "{csv}");
    Policy::load(&bp.join("policy.json")).unwrap();
    Policy::load(&bp.join("checkpoint.json")).unwrap();

    let o = contactlab(&[
        "train",
        "ppo",
        "scenes/learn_stand.ron",
        "--steps",
        "100",
        "--sensitivity",
        "exact",
        "--out",
        "x",
    ]);
    assert!(!o.status.success(), "--sensitivity is for bptt only");
    let o = contactlab(&["train", "sgd", "scenes/learn_stand.ron", "--out", "x"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("unknown learner"));
    let o = contactlab(&["train", "bptt", "scenes/quadruped_stand.ron", "--out", "x"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no `learn` section"));

    let cmp = d.join("cmp");
    let o = contactlab(&[
        "compare-learning",
        "scenes/learn_stand.ron",
        "--seeds",
        "0",
        "--bptt-steps",
        "400",
        "--ppo-steps",
        "100",
        "--out",
        cmp.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    for f in
        ["comparison.md", "comparison.json", "learning.png", "ppo/seed0/summary.json", "bptt-exact/seed0/policy.json"]
    {
        assert!(cmp.join(f).exists(), "{f} missing");
    }
    let c = keys(&cmp.join("comparison.json"));
    assert_eq!(c["rows"].as_array().unwrap().len(), 3);

    // A run whose summary.json exists is reused; --retrain trains it again.
    let summary = cmp.join("bptt-exact/seed0/summary.json");
    let mut s = keys(&summary);
    s["final_return"] = serde_json::json!(12345.0);
    std::fs::write(&summary, serde_json::to_string(&s).unwrap()).unwrap();
    let again = |retrain: bool| {
        let mut args = vec!["compare-learning", "scenes/learn_stand.ron", "--seeds", "0", "--bptt-steps", "400"];
        args.extend(["--algorithms", "bptt-exact", "--out", cmp.to_str().unwrap()]);
        if retrain {
            args.push("--retrain");
        }
        assert!(contactlab(&args).status.success());
        keys(&summary)["final_return"].as_f64().unwrap()
    };
    assert_eq!(again(false), 12345.0, "reused without --retrain");
    assert_ne!(again(true), 12345.0, "trained again with --retrain");
}

#[test]
fn policy_files_round_trip_and_bad_ones_name_the_field() {
    let task = stand_task();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let p = Policy::new(&task, &[8], Activation::Elu, &mut rng);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p.json");
    p.save(&f).unwrap();
    assert_eq!(Policy::load(&f).unwrap(), p);
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, text.replace("\"action_scale\":0.3", "\"action_scale\":\"big\"")).unwrap();
    let e = Policy::load(&f).unwrap_err().to_string();
    assert!(e.contains("p.json") && e.contains("action_scale"), "{e}");
    let mut bad = p.clone();
    bad.obs_std[0] = 0.0;
    bad.save(&f).unwrap();
    let e = Policy::load(&f).unwrap_err().to_string();
    assert!(e.contains("obs_std"), "{e}");
}

const LEARN: &str = r#"Scene(
    name: "t",
    robot: Builtin(Quadruped),
    initial: (
        base_position: (0.0, 0.0, 0.33),
        joints: {"*_thigh_joint": 0.8, "*_calf_joint": -1.6},
    ),
    terrain: (ground: (friction: 0.8)),
    dt: 0.01,
    controller: JointPd(kp: 80.0, kd: 6.0, posture: {"*_thigh_joint": 0.8, "*_calf_joint": -1.6}),
    learn: (
        task: "stand",
        push: (probability: 0.5, force: (20.0, 50.0)),
        sensitivity: "relaxed",
    ),
)"#;

fn scene_err(text: &str) -> String {
    match Scene::from_str(text, Path::new("scenes/bad.ron")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_learn_sections_give_located_errors() {
    Scene::from_str(LEARN, Path::new("scenes/good.ron")).unwrap();
    let e = scene_err(&LEARN.replace("\"stand\"", "\"run\""));
    assert!(e.starts_with("scenes/bad.ron:12:") && e.contains("learn.task") && e.contains("stand or walk"), "{e}");
    let e = scene_err(&LEARN.replace("probability: 0.5", "probability: 1.5"));
    assert!(e.starts_with("scenes/bad.ron:13:") && e.contains("learn.push.probability") && e.contains("[0, 1]"), "{e}");
    let e = scene_err(&LEARN.replace("(20.0, 50.0)", "(50.0, 20.0)"));
    assert!(e.starts_with("scenes/bad.ron:13:") && e.contains("learn.push.force") && e.contains("low <= high"), "{e}");
    let e = scene_err(&LEARN.replace("\"relaxed\"", "\"smooth\""));
    assert!(e.starts_with("scenes/bad.ron:14:") && e.contains("learn.sensitivity"), "{e}");
    let e = scene_err(&LEARN.replace("push:", "pushes:"));
    assert!(e.starts_with("scenes/bad.ron:13:") && e.contains("learn"), "{e}");
    let e = scene_err(&LEARN.replace("controller: JointPd", "// controller: JointPd"));
    assert!(e.contains("learn") && e.contains("JointPd"), "{e}");
    // BPTT's settings: a bad learning rate at its line, a zero batch by its field.
    let bptt =
        |b: &str| LEARN.replace("sensitivity: \"relaxed\",", &format!("sensitivity: \"relaxed\",\n        bptt: {b},"));
    Scene::from_str(&bptt("(batch: 32, lr: 5e-4, steps: 150000)"), Path::new("scenes/good.ron")).unwrap();
    let e = scene_err(&bptt("(lr: -1.0)"));
    assert!(e.starts_with("scenes/bad.ron:15:") && e.contains("learn.bptt.lr") && e.contains("(0, inf)"), "{e}");
    let e = scene_err(&bptt("(batch: 0)"));
    assert!(e.contains("learn.bptt.batch") && e.contains("out of range"), "{e}");
    let e = scene_err(&bptt("(batches: 4)"));
    assert!(e.starts_with("scenes/bad.ron:15:") && e.contains("learn.bptt"), "{e}");
}

#[test]
fn bptt_settings_default_to_the_stand_task_values_unless_the_scene_sets_them() {
    // learn_stand.ron sets none (its shipped policy was trained with these), learn_walk.ron
    // all three.
    let cfg = bptt::BpttSettings::for_task(&stand_task());
    let d = bptt::BpttSettings::default();
    assert_eq!((cfg.batch, cfg.lr, cfg.sim_steps), (d.batch, d.lr, d.sim_steps));
    assert_eq!((d.batch, d.lr, d.sim_steps), (16, 1e-3, 100_000));
    let sc = Scene::load(&root().join("scenes/learn_walk.ron")).unwrap();
    let walk = sc.task(sc.learn_settings().unwrap()).unwrap();
    let cfg = bptt::BpttSettings::for_task(&walk);
    assert_eq!((cfg.batch, cfg.lr, cfg.sim_steps), (32, 5e-4, 150_000));
}
