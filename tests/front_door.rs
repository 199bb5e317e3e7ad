//! The library without scene files: a CITO problem and a learning task built from a `Model`, a
//! `Terrain`, a start state and settings structs are the same as those a scene file assembles;
//! every settings struct rejects a bad value with a typed error naming the field; an unknown
//! sensitivity name is an error everywhere; `examples/quickstart.rs` runs.

use contactlab::diff::sweep::SweepSettings;
use contactlab::learn::contactnets::train::TrainSettings as ContactNetsSettings;
use contactlab::learn::contactnets::{LossSettings, SplitSettings};
use contactlab::ocp::cito::CitoWeights;
use contactlab::ocp::Settings as DdpSettings;
use contactlab::prelude::*;
use contactlab::scene::Scene;
use nalgebra::{DVector, Rotation3, Vector3};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The quadruped of scenes/cito_raise.ron and scenes/learn_stand.ron, set up by hand.
fn crouched_quadruped(dt: f64, kd: f64) -> Simulation {
    let model = Arc::new(builtin::quadruped().unwrap().model);
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
    let settings = StepSettings { dt, ..StepSettings::default() };
    let v = DVector::zeros(model.nv);
    let mut sim = Simulation::new(model, Terrain::flat(0.8), settings, q, v);
    sim.controller = Controller::JointPd { kp: 80.0, kd, posture };
    sim
}

#[test]
fn a_cito_problem_without_a_scene_file_is_the_scenes_problem() {
    let scene = Scene::load(&root().join("scenes/cito_raise.ron")).unwrap();
    let settings = scene.cito_settings().unwrap();
    let from_file = scene.cito_problem(&settings).unwrap();

    assert_eq!(scene.settings.dt, 0.002, "the hand-built twin below assumes the scene's step");
    let mut sim = crouched_quadruped(scene.settings.dt, 6.0);
    assert_eq!(sim.q, scene.q0, "the same start");
    assert_eq!(sim.controller, scene.controller, "the same PD");
    sim.settle(settings.settle).unwrap();
    let by_hand = CitoProblem::from_state(&sim, &settings).unwrap();
    assert_eq!(by_hand.x0, from_file.x0);
    assert_eq!(by_hand.u_guess, from_file.u_guess);
    assert_eq!(by_hand.knots, from_file.knots);
    assert_eq!(by_hand.sensitivity, from_file.sensitivity);
    assert_eq!(by_hand.cost.base_position, from_file.cost.base_position);

    // And it solves: two DDP iterations lower the cost.
    let few = CitoSettings { iterations: 2, ..settings };
    let r = cito::solve(&CitoProblem::from_state(&sim, &few).unwrap(), None, &mut |_| {});
    assert!(r.info.cost.is_finite() && r.info.iterations >= 1, "{:?}", r.info.status);
}

#[test]
fn a_learning_task_without_a_scene_file_is_the_scenes_task() {
    let scene = Scene::load(&root().join("scenes/learn_stand.ron")).unwrap();
    let from_file = scene.task(scene.learn_settings().unwrap()).unwrap();

    let mut sim = crouched_quadruped(scene.settings.dt, 6.0);
    assert_eq!(sim.controller, scene.controller, "the same PD");
    sim.pulls = scene.pulls.clone();
    let by_hand = Task::new("learn_stand", &sim, scene.learn_settings().unwrap()).unwrap();
    assert_eq!(by_hand.q_stand, from_file.q_stand);
    assert_eq!(by_hand.steps, from_file.steps);
    assert_eq!(by_hand.obs_dim(), from_file.obs_dim());
    let eps = by_hand.eval_episodes();
    assert_eq!(by_hand.reference_return(&eps), from_file.reference_return(&from_file.eval_episodes()));

    // BPTT settings for it, from the task alone.
    let bptt = BpttSettings::for_task(&by_hand);
    bptt.validate().unwrap();
    assert_eq!(bptt.sensitivity, by_hand.spec.sensitivity());

    // A task needs a PD to turn actions into torques: a typed error, not a panic.
    let mut no_pd = sim.clone();
    no_pd.controller = Controller::None;
    assert!(Task::new("x", &no_pd, TaskSettings::default()).is_err());
}

/// `(settings struct, the field its validate() names)` for one bad value each.
fn bad_values(task: &Task) -> Vec<(SettingsError, &'static str, &'static str)> {
    let mut out = Vec::new();
    let mut push = |e: Result<(), SettingsError>, settings: &'static str, field: &'static str| {
        out.push((e.expect_err(field), settings, field));
    };
    push(CitoSettings { horizon: -0.3, ..CitoSettings::default() }.validate(), "CitoSettings", "horizon");
    push(CitoSettings { kappa: 0.0, ..CitoSettings::default() }.validate(), "CitoSettings", "kappa");
    push(
        CitoSettings { weights: CitoWeights { posture: -1.0, ..CitoWeights::default() }, ..CitoSettings::default() }
            .validate(),
        "CitoSettings",
        "weights.posture",
    );
    push(MpcSettings { iterations: 0, ..MpcSettings::default() }.validate(), "MpcSettings", "iterations");
    push(MpcSettings { knot_dt: f64::NAN, ..MpcSettings::default() }.validate(), "MpcSettings", "knot_dt");
    push(
        MpcSettings { trial_abort: Some(f64::NAN), ..MpcSettings::default() }.validate(),
        "MpcSettings",
        "trial_abort",
    );
    push(
        MpcSettings { relative_tolerance: Some(1.0), ..MpcSettings::default() }.validate(),
        "MpcSettings",
        "relative_tolerance",
    );
    push(
        MpcSettings { contact_tolerance: Some(0.0), ..MpcSettings::default() }.validate(),
        "MpcSettings",
        "contact_tolerance",
    );
    push(
        MpcSettings { contact_warm_start_mu: Some(2.0), ..MpcSettings::default() }.validate(),
        "MpcSettings",
        "contact_warm_start_mu",
    );
    let sampling = contactlab::ocp::mpc::StepSampling { frequency: 0.0, ..Default::default() };
    push(
        MpcSettings { step_sampling: Some(sampling), ..MpcSettings::default() }.validate(),
        "MpcSettings",
        "step_sampling.frequency",
    );
    push(TaskSettings { episode: 0.0, ..TaskSettings::default() }.validate(), "TaskSettings", "episode");
    push(TaskSettings { task: "run".into(), ..TaskSettings::default() }.validate(), "TaskSettings", "task");
    push(BpttSettings { lr: -1e-3, ..BpttSettings::for_task(task) }.validate(), "BpttSettings", "lr");
    push(BpttSettings { batch: 0, ..BpttSettings::for_task(task) }.validate(), "BpttSettings", "batch");
    push(PpoSettings { gamma: 1.5, ..PpoSettings::for_task(task) }.validate(), "PpoSettings", "gamma");
    push(PpoSettings { hidden: vec![], ..PpoSettings::for_task(task) }.validate(), "PpoSettings", "hidden");
    let sweep = SweepSettings {
        param: "base_z".into(),
        from: 0.0,
        to: 0.05,
        points: 1,
        horizon: 0.1,
        objective: vec![],
        sigma: None,
        samples: 4,
        watch: vec![],
        settle: 0.0,
        kappa: 1e-3,
        delta: 1e-3,
    };
    push(sweep.validate(), "SweepSettings", "points");
    push(SweepSettings { to: -1.0, points: 11, ..sweep.clone() }.validate(), "SweepSettings", "to");
    push(ContactNetsSettings { lr: 0.0, ..ContactNetsSettings::default() }.validate(), "TrainSettings", "lr");
    push(
        ContactNetsSettings {
            loss: LossSettings { margin: -1.0, ..LossSettings::default() },
            ..ContactNetsSettings::default()
        }
        .validate(),
        "TrainSettings",
        "loss.margin",
    );
    push(LossSettings { max_iterations: 0, ..LossSettings::default() }.validate(), "LossSettings", "max_iterations");
    push(
        SplitSettings { test_fraction: 0.7, valid_fraction: 0.5, ..SplitSettings::default() }.validate(),
        "SplitSettings",
        "valid_fraction",
    );
    push(DdpSettings { mu_factor: 1.0, ..DdpSettings::default() }.validate(), "ddp::Settings", "mu_factor");
    push(
        DdpSettings { max_rejected_line_searches: Some(0), ..DdpSettings::default() }.validate(),
        "ddp::Settings",
        "max_rejected_line_searches",
    );
    push(DdpSettings { trial_abort: Some(1.0), ..DdpSettings::default() }.validate(), "ddp::Settings", "trial_abort");
    push(
        DdpSettings { relative_tolerance: Some(f64::NAN), ..DdpSettings::default() }.validate(),
        "ddp::Settings",
        "relative_tolerance",
    );
    out
}

#[test]
fn every_settings_struct_names_its_bad_field() {
    let scene = Scene::load(&root().join("scenes/learn_stand.ron")).unwrap();
    let task = scene.task(scene.learn_settings().unwrap()).unwrap();
    // The defaults themselves are valid.
    CitoSettings::default().validate().unwrap();
    MpcSettings::default().validate().unwrap();
    TaskSettings::default().validate().unwrap();
    BpttSettings::for_task(&task).validate().unwrap();
    PpoSettings::for_task(&task).validate().unwrap();
    ContactNetsSettings::default().validate().unwrap();
    for (e, settings, field) in bad_values(&task) {
        assert_eq!((e.settings, e.field.as_str()), (settings, field), "{e}");
        assert!(e.to_string().starts_with(&format!("{settings}.{field}: ")), "{e}");
    }
    // The step's and the contact solver's settings have errors of their own, also by field.
    let e = StepSettings { dt: 0.0, ..StepSettings::default() }.validate().unwrap_err();
    assert!(e.to_string().contains("dt"), "{e}");
    let solver = contactlab::contact::solver::Settings { tolerance: 2.0, ..Default::default() };
    assert!(solver.validate().unwrap_err().to_string().contains("tolerance"));
    // A solve refuses bad settings instead of running with them.
    let sim = {
        let mut s = crouched_quadruped(0.002, 2.0);
        s.settle(0.5).unwrap();
        s
    };
    assert!(CitoProblem::from_state(&sim, &CitoSettings { iterations: 0, ..CitoSettings::default() }).is_err());
}

#[test]
fn an_unknown_sensitivity_is_an_error_everywhere() {
    assert!("Exact".parse::<Sensitivity>().is_err());
    assert!("relaxd".parse::<SensitivityKind>().is_err());
    for section in
        ["cito: (sensitivity: \"relaxd\")", "mpc: (sensitivity: \"relaxd\")", "learn: (sensitivity: \"relaxd\")"]
    {
        let text = format!(
            "Scene(name: \"s\", robot: Builtin(Quadruped), initial: (base_position: (0.0, 0.0, 0.33)), dt: 0.01, \
             controller: JointPd(kp: 80.0, kd: 6.0), {section})"
        );
        let e = Scene::from_str(&text, Path::new("bad.ron")).unwrap_err().to_string();
        assert!(e.starts_with("bad.ron:1:") && e.contains("sensitivity") && e.contains("relaxd"), "{e}");
    }
}

/// `cargo test` builds the examples beside the test binaries; the quickstart must run and
/// plan its raise without a scene file.
#[test]
fn quickstart_runs() {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().join("examples");
    let bin = dir.join(format!("quickstart{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.exists(), "{} not built (cargo test builds the examples)", bin.display());
    let out = std::process::Command::new(&bin).current_dir(root()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("A (36x36), B (36x12)"), "{stdout}");
    let cito = stdout.lines().find(|l| l.starts_with("CITO")).unwrap_or_else(|| panic!("{stdout}"));
    let mm: f64 =
        cito.split("pose error ").nth(1).and_then(|r| r.split(' ').next()).and_then(|x| x.parse().ok()).unwrap();
    assert!(mm < 10.0, "{cito}");
}
