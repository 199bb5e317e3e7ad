//! The rigid-body algorithms against Pinocchio reference values (`../shared/fixtures/rbd/`).

use contactlab::dynamics::reference::check;
use contactlab::model::urdf::{load, RootJoint};
use std::path::Path;

fn run(system: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/rbd");
    let loaded = load(&dir.join(format!("urdf/{system}.urdf")), RootJoint::FreeFlyer).expect("URDF loads");
    let report = check(&loaded.model, &dir.join(format!("{system}_set_a.json"))).expect("fixture loads");
    assert_eq!(report.samples, 10);
    eprintln!("{system}: {:?} roundtrip {:e}", report.errors, report.aba_rnea_roundtrip);
    for (name, err) in &report.errors {
        assert!(*err < 1e-9, "{system}: {name} relative error {err:e}");
    }
    assert!(report.aba_rnea_roundtrip < 1e-9, "{system}: aba(rnea(a)) != a: {:e}", report.aba_rnea_roundtrip);
}

#[test]
fn free_box_matches_pinocchio() {
    run("free_box");
}

#[test]
fn solo12_matches_pinocchio() {
    run("solo12");
}

#[test]
fn go1_matches_pinocchio() {
    run("go1");
}

/// Bodies are numbered as Pinocchio numbers them (depth first, siblings by name), so `q` and
/// `v` coincide index for index with Pinocchio's for the same URDF.
#[test]
fn joint_order_matches_pinocchio() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/rbd");
    for system in ["solo12", "go1"] {
        let model = load(&dir.join(format!("urdf/{system}.urdf")), RootJoint::FreeFlyer).unwrap().model;
        let text = std::fs::read_to_string(dir.join(format!("{system}_set_a.json"))).unwrap();
        let fx: serde_json::Value = serde_json::from_str(&text).unwrap();
        for j in fx["meta"]["joints"].as_array().unwrap() {
            let ours = &model.joints[model.joint_index(j["name"].as_str().unwrap()).unwrap()];
            assert_eq!(ours.idx_q as u64, j["idx_q"].as_u64().unwrap(), "{system}: {}", ours.name);
            assert_eq!(ours.idx_v as u64, j["idx_v"].as_u64().unwrap(), "{system}: {}", ours.name);
        }
    }
}
