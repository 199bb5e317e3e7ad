//! The robot descriptions shipped in `assets/robots/` load cleanly and have the intended
//! structure, masses, contact points and standing postures.

use contactlab::dynamics::forward_kinematics;
use contactlab::model::urdf::{load, Loaded, RootJoint};
use contactlab::model::{neutral, Data, Model};
use nalgebra::{SymmetricEigen, Vector3};
use std::path::Path;

const LEGS: [&str; 4] = ["FL", "FR", "RL", "RR"];

fn load_robot(file: &str, root: RootJoint) -> Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/robots").join(file);
    let loaded = load(&path, root).unwrap_or_else(|e| panic!("{file} loads: {e}"));
    assert!(loaded.warnings.is_empty(), "{file}: unexpected warnings: {:#?}", loaded.warnings);
    loaded
}

/// Every body has positive mass and a positive-definite rotational inertia that satisfies the
/// triangle inequality (what the loader would otherwise warn about or regularize).
fn assert_physical_inertias(model: &Model) {
    for (name, inertia) in model.body_names.iter().zip(&model.inertias) {
        assert!(inertia.mass > 0.0, "{name}: mass {}", inertia.mass);
        let mut e: Vec<f64> = SymmetricEigen::new(inertia.inertia).eigenvalues.iter().copied().collect();
        e.sort_by(f64::total_cmp);
        assert!(e[0] > 0.0, "{name}: inertia eigenvalues {e:?}");
        assert!(e[0] + e[1] >= e[2] * (1.0 - 1e-12), "{name}: {e:?}");
    }
}

fn joint_q(model: &Model, name: &str) -> usize {
    let j = model.joint_index(name).unwrap_or_else(|| panic!("joint `{name}` exists"));
    assert_eq!(model.joints[j].nq(), 1, "{name}");
    model.joints[j].idx_q
}

/// World positions of the contact points' frames (the foot link origins; the sphere centres).
fn foot_positions(model: &Model, q: &[f64]) -> Vec<(String, Vector3<f64>)> {
    let mut data = Data::new(model);
    forward_kinematics(model, &mut data, q, None);
    model.contact_points.iter().map(|c| (c.name.clone(), data.o_m_i[c.body].act_point(&c.position))).collect()
}

#[test]
fn quadruped_structure() {
    let model = load_robot("quadruped.urdf", RootJoint::FreeFlyer).model;
    assert_eq!(model.name, "contactlab_quadruped");
    assert_eq!((model.nq, model.nv, model.nu), (19, 18, 12));

    let mut expected = vec!["root_joint".to_string()];
    for leg in LEGS {
        for j in ["hip", "thigh", "calf"] {
            expected.push(format!("{leg}_{j}_joint"));
        }
    }
    // The joint set and the leg chains; deliberately not the global numbering order, which
    // is the loader's business (Pinocchio numbers FL_hip, FL_thigh, FL_calf, FR_hip, ...).
    let mut names: Vec<String> = model.joints.iter().map(|j| j.name.clone()).collect();
    names.sort();
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(model.joints[0].name, "root_joint");
    assert_eq!(model.body_names[0], "trunk");
    for leg in LEGS {
        let idx = |j: &str| model.joint_index(&format!("{leg}_{j}_joint")).unwrap();
        let (hip, thigh, calf) = (idx("hip"), idx("thigh"), idx("calf"));
        assert_eq!(model.joints[hip].parent, Some(0));
        assert_eq!(model.joints[thigh].parent, Some(hip));
        assert_eq!(model.joints[calf].parent, Some(thigh));
        assert_eq!(model.body_names[calf], format!("{leg}_calf"));
    }

    let mass = model.total_mass();
    assert!((11.5..=13.0).contains(&mass), "total mass {mass}");
    assert!((mass - 12.2).abs() < 1e-9, "total mass {mass}");
    assert_physical_inertias(&model);

    for leg in LEGS {
        let lim = |j: &str| model.joints[model.joint_index(&format!("{leg}_{j}_joint")).unwrap()].limits;
        let (hip, thigh, calf) = (lim("hip"), lim("thigh"), lim("calf"));
        assert_eq!((hip.lower, hip.upper, hip.effort), (-0.8, 0.8, 35.0));
        assert_eq!((thigh.lower, thigh.upper, thigh.effort), (-1.5, 3.0, 35.0));
        assert_eq!((calf.lower, calf.upper, calf.effort), (-2.7, -0.6, 45.0));
    }

    let feet: Vec<&str> = model.contact_points.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(feet, ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]);
    for c in &model.contact_points {
        assert_eq!(c.radius, 0.02, "{}", c.name);
        let leg = &c.name[..2];
        assert_eq!(model.body_names[c.body], format!("{leg}_calf"));
        assert!((c.position - Vector3::new(0.0, 0.0, -0.22)).norm() < 1e-12);
    }
}

#[test]
fn quadruped_stands_on_four_feet() {
    let model = load_robot("quadruped.urdf", RootJoint::FreeFlyer).model;
    let h = 0.33;
    let mut q = neutral(&model);
    q[2] = h;
    for leg in LEGS {
        q[joint_q(&model, &format!("{leg}_thigh_joint"))] = 0.8;
        q[joint_q(&model, &format!("{leg}_calf_joint"))] = -1.6;
    }
    let feet = foot_positions(&model, q.as_slice());
    assert_eq!(feet.len(), 4);

    let z: Vec<f64> = feet.iter().map(|(_, p)| p.z).collect();
    let (lo, hi) = z.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(hi - lo < 0.01, "foot heights differ: {feet:?}");
    // Below the trunk's bottom face (0.055 m below its centre), about 0.3 m below the hips.
    assert!(hi < h - 0.055 - 0.2, "feet not below the trunk: {feet:?}");
    let drop = h - z.iter().sum::<f64>() / 4.0;
    assert!((0.28..0.34).contains(&drop), "foot frames {drop} m below the trunk centre");
    // The contact point (sphere bottom) is then just at the ground for h = 0.33.
    assert!((lo - 0.02).abs() < 0.01, "contact height {}", lo - 0.02);

    // Each foot under its hip: hip x = ±0.19, y = ±(0.06 + 0.08).
    for (name, p) in &feet {
        let sx = if name.starts_with('F') { 1.0 } else { -1.0 };
        let sy = if name.as_bytes()[1] == b'L' { 1.0 } else { -1.0 };
        assert!((p.x - 0.19 * sx).abs() < 0.02, "{name} at {p:?}");
        assert!((p.y - 0.14 * sy).abs() < 1e-9, "{name} at {p:?}");
    }
}

#[test]
fn hopper_structure_and_standing() {
    let model = load_robot("hopper.urdf", RootJoint::Fixed).model;
    assert_eq!(model.name, "contactlab_hopper");
    assert_eq!((model.nq, model.nv, model.nu), (5, 5, 2));
    let names: Vec<&str> = model.joints.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["base_x", "base_z", "base_pitch", "hip", "knee"]);
    // Only hip and knee are actuated.
    assert_eq!(model.actuated_dofs, [3, 4]);
    assert_eq!(model.effort_limits, [60.0, 60.0]);

    let mass = model.total_mass();
    assert!((3.5..=4.2).contains(&mass), "total mass {mass}");
    assert!((mass - 3.87).abs() < 1e-9, "total mass {mass}");
    assert_physical_inertias(&model);

    assert_eq!(model.contact_points.len(), 1);
    let c = &model.contact_points[0];
    assert_eq!(c.name, "foot");
    assert_eq!(c.radius, 0.02);
    assert_eq!(model.body_names[c.body], "shank");

    let body = model.body_index("body").expect("body link");
    let mut q = neutral(&model);
    q[0] = 0.3;
    q[1] = 0.6;
    q[joint_q(&model, "hip")] = 0.5;
    q[joint_q(&model, "knee")] = -1.0;
    let mut data = Data::new(&model);
    forward_kinematics(&model, &mut data, q.as_slice(), None);
    let b = data.o_m_i[body].trans;
    assert!((b - Vector3::new(0.3, 0.0, 0.6)).norm() < 1e-12, "body at {b:?}");
    let foot = data.o_m_i[c.body].act_point(&c.position);
    assert!((foot.x - b.x).abs() < 0.02, "foot {foot:?}, body {b:?}");
    assert!(foot.y.abs() < 1e-12);
    assert!((0.45..0.52).contains(&(b.z - foot.z)), "foot {foot:?}, body {b:?}");
}

/// The multi-legged family of the scaling benchmarks: the structure it promises, and each
/// member standing on all its feet under a joint PD (everything sticking, trunk level).
#[test]
fn legged_family_structure_and_standing() {
    use contactlab::contact::{ContactMode, Terrain};
    use contactlab::model::builtin::legged;
    use contactlab::sim::{Controller, Simulation, StepSettings, StepStatus};
    use std::sync::Arc;
    assert!(legged(1).is_err() && legged(11).is_err());
    for pairs in [2, 3, 5] {
        let l = legged(pairs).unwrap();
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        let m = l.model;
        assert_eq!((m.nv, m.nu, m.contact_points.len()), (6 + 6 * pairs, 6 * pairs, 2 * pairs));
        assert_physical_inertias(&m);
        if pairs == 2 {
            assert!((m.total_mass() - 12.2).abs() < 1e-9, "{}", m.total_mass());
        }
        let (q, posture) = contactlab::model::builtin::stance(&m);
        let v = nalgebra::DVector::zeros(m.nv);
        let mut sim = Simulation::new(Arc::new(m), Terrain::flat(0.8), StepSettings::default(), q, v);
        sim.controller = Controller::JointPd { kp: 80.0, kd: 6.0, posture };
        for _ in 0..1500 {
            assert_eq!(sim.step().status, StepStatus::Ok);
        }
        assert_eq!(sim.ws.modes.iter().filter(|m| **m == ContactMode::Sticking).count(), 2 * pairs, "{pairs} pairs");
        assert!(
            (sim.q[2] - 0.32).abs() < 0.02 && sim.v.norm() < 1e-3,
            "{pairs} pairs: z {} |v| {}",
            sim.q[2],
            sim.v.norm()
        );
    }
}
