//! Rotor inertia (`Model::armature`, a scene's `armature:`): the step adds it to the joint's
//! diagonal of `M`, so one step from rest in free flight gives
//! `v+ = h (M + diag(armature))^-1 (S u - c(q, 0))`, and a scene rejects a negative value by
//! its field. The transition Jacobians with armature are checked against finite differences in
//! `tests/transition.rs`.

use contactlab::dynamics::{crba, nle};
use contactlab::model::{Data, JointKind};
use contactlab::scene::{Scene, SceneError};
use contactlab::sim::StepStatus;
use nalgebra::DVector;
use std::path::Path;

/// `h (M + A)^-1 (S u - c)` at the simulation's configuration, from rest.
fn expected(sim: &contactlab::sim::Simulation, u: &DVector<f64>) -> DVector<f64> {
    let m = &*sim.model;
    let mut data = Data::new(m);
    crba(m, &mut data, sim.q.as_slice());
    let zero = vec![0.0; m.nv];
    nle(m, &mut data, sim.q.as_slice(), &zero);
    let mut mass = data.mass_matrix.clone();
    for i in 0..m.nv {
        mass[(i, i)] += m.armature[i];
    }
    let mut f = -data.nle.clone();
    for (k, &dof) in m.actuated_dofs.iter().enumerate() {
        f[dof] += u[k];
    }
    mass.cholesky().expect("SPD").solve(&f) * sim.settings.dt
}

#[test]
fn a_free_flight_step_sees_the_rotor_inertia() {
    let scene = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/mpc_pull_rotors.ron")).unwrap();
    let mut sim = scene.simulation();
    let model = sim.model.clone();
    let knee = model.joints.iter().find(|j| j.name == "FL_calf_joint").unwrap().idx_v;
    assert_eq!(model.armature[knee], 0.0097, "the scene's armature reaches the model");
    assert!(model.joints.iter().filter(|j| j.kind == JointKind::FreeFlyer).all(|j| model.armature[j.idx_v] == 0.0));
    sim.q[2] = 5.0; // far above the ground: no contact
    sim.v.fill(0.0);
    sim.controller = contactlab::sim::Controller::None;
    let u = DVector::from_fn(model.nu, |k, _| if k % 3 == 2 { 10.0 } else { -3.0 });
    sim.u_offset.copy_from(&u);
    let with = expected(&sim, &u);
    assert_eq!(sim.step().status, StepStatus::Ok);
    let err = (&sim.v - &with).norm() / with.norm();
    assert!(err < 1e-12, "v+ against h (M + A)^-1 (S u - c): relative error {err:e}");
    // The rotors make a difference a test can see: a knee torque of 10 N m accelerates the
    // knee several times less than the bare link would.
    let mut bare = scene.simulation();
    let mut m0 = (*bare.model).clone();
    m0.armature.fill(0.0);
    bare.model = std::sync::Arc::new(m0);
    let without = expected(&bare, &u);
    assert!(with[knee].abs() < 0.5 * without[knee].abs(), "knee {} with rotors, {} without", with[knee], without[knee]);
    assert!((&sim.v - &without).norm() > 1e-3 * without.norm());
}

#[test]
fn a_negative_armature_is_an_error_naming_its_field() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/mpc_pull_rotors.ron"))
        .unwrap()
        .replace("\"*_calf_joint\": 0.0097", "\"*_calf_joint\": -0.01");
    let Err(err) = Scene::from_str(&text, Path::new("rotors.ron")) else { panic!("a negative armature is accepted") };
    let message = err.to_string();
    assert!(matches!(err, SceneError::Invalid { .. }), "{message}");
    assert!(message.contains("rotors.ron:") && message.contains("armature[\"*_calf_joint\"]"), "{message}");
    let text = text.replace("\"*_calf_joint\": -0.01", "\"*_elbow_joint\": 0.01");
    let Err(err) = Scene::from_str(&text, Path::new("rotors.ron")) else {
        panic!("a pattern matching no joint is accepted")
    };
    let message = err.to_string();
    assert!(message.contains("armature[\"*_elbow_joint\"]") && message.contains("no joint matches"), "{message}");
}
