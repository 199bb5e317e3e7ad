//! Bad input produces errors that name the file, the line and column, the field and the allowed
//! range; nothing is left half-written.

use contactlab::io::AtomicFile;
use contactlab::model::urdf::{load_str, RootJoint};
use contactlab::scene::Scene;
use std::io::Write;
use std::path::Path;

const GOOD: &str = r#"Scene(
    name: "t",
    robot: Builtin(Quadruped),
    initial: (
        base_position: (0.0, 0.0, 0.33),
        joints: {"*_thigh_joint": 0.8, "*_calf_joint": -1.6},
    ),
    terrain: (ground: (friction: 0.8)),
    dt: 0.002,
)"#;

fn err(text: &str) -> String {
    match Scene::from_str(text, Path::new("scenes/bad.ron")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            eprintln!("{e}");
            e.to_string()
        }
    }
}

#[test]
fn the_good_scene_loads() {
    Scene::from_str(GOOD, Path::new("scenes/good.ron")).unwrap();
}

#[test]
fn truncated_file() {
    let e = err(&GOOD[..GOOD.len() / 2]);
    assert!(e.starts_with("scenes/bad.ron:"), "{e}");
    assert!(e.contains(":6:") || e.contains(":5:") || e.contains(":7:"), "line of the cut: {e}");
}

#[test]
fn nan_in_the_state() {
    let e = err(&GOOD.replace("(0.0, 0.0, 0.33)", "(0.0, NaN, 0.33)"));
    assert!(e.contains("scenes/bad.ron:5:"), "{e}");
    assert!(e.contains("initial.base_position") && e.contains("finite"), "{e}");
    let e = err(&GOOD.replace("\"*_calf_joint\": -1.6", "\"*_calf_joint\": inf"));
    assert!(e.contains("initial.joints") && e.contains("finite"), "{e}");
}

#[test]
fn negative_mass_and_friction_and_time_step() {
    let e = err(&GOOD.replace("Builtin(Quadruped)", "Box(size: (0.1, 0.1, 0.1), mass: -2.0)"));
    assert!(e.contains("scenes/bad.ron:3:") && e.contains("robot.Box.mass") && e.contains("(0, inf)"), "{e}");
    let e = err(&GOOD.replace("friction: 0.8", "friction: -0.1"));
    assert!(e.contains("scenes/bad.ron:8:") && e.contains("terrain.ground.friction") && e.contains("[0, 10]"), "{e}");
    // 2e-12 once made `simulate` try to allocate about 200 GB for a 3 s run and abort.
    for dt in ["0.0", "-0.001", "2e-12", "0.2"] {
        let e = err(&GOOD.replace("dt: 0.002", &format!("dt: {dt}")));
        assert!(e.contains("scenes/bad.ron:9:") && e.contains("dt") && e.contains("[1e-6, 0.1]"), "{e}");
    }
}

/// A heightfield sample of 1e307 m once passed (it is finite) and made each step's contact
/// solve stall for seconds on the zero normal of its overflowed slope (`tests/fuzz_inputs.rs`).
#[test]
fn a_heightfield_height_out_of_range() {
    let terrain = "terrain: (ground: (friction: 0.8), heightfields: [(origin: (0.0, 0.0), spacing: 0.25, \
                   heights: [[0.0, 1e307], [0.0, 0.0]], friction: 0.8)])";
    let e = err(&GOOD.replace("terrain: (ground: (friction: 0.8))", terrain));
    assert!(e.contains("scenes/bad.ron:8:") && e.contains("heights") && e.contains("[-1e6, 1e6]"), "{e}");
}

#[test]
fn unknown_robot_joint_and_field() {
    let e = err(&GOOD.replace("Builtin(Quadruped)", "Builtin(Quadrupod)"));
    assert!(e.contains(":3:") && e.contains("Quadrupod") && e.contains("Quadruped"), "{e}");
    let e = err(&GOOD.replace("\"*_calf_joint\"", "\"FL_knee\""));
    assert!(e.contains(":6:") && e.contains("initial.joints[\"FL_knee\"]") && e.contains("FL_calf_joint"), "{e}");
    let e = err(&GOOD.replace("dt: 0.002", "dt: 0.002, speed: 2.0"));
    assert!(e.contains("speed"), "{e}");
}

#[test]
fn out_of_range_solver_setting() {
    let e = err(&GOOD.replace("dt: 0.002,", "dt: 0.002,\n    solver: (tolerance: -1.0),"));
    assert!(
        e.contains("scenes/bad.ron:10:") && e.contains("solver") && e.contains("tolerance") && e.contains("(0, 1)"),
        "{e}"
    );
}

#[test]
fn urdf_with_a_missing_parent() {
    let urdf = r#"<robot name="r">
      <link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
      <link name="b"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
      <joint name="j" type="revolute"><parent link="nowhere"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>"#;
    let e = load_str(urdf, Path::new("robots/r.urdf"), RootJoint::FreeFlyer).unwrap_err().to_string();
    assert!(
        e.contains("robots/r.urdf") && e.contains("joint `j`") && e.contains("parent") && e.contains("nowhere"),
        "{e}"
    );
}

#[test]
fn non_physical_inertia_warns_and_massless_body_is_regularized() {
    let urdf = r#"<robot name="r">
      <link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
      <link name="b"/>
      <link name="c"><inertial><mass value="0.1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="3"/></inertial></link>
      <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="k" type="fixed"><parent link="a"/><child link="c"/></joint>
    </robot>"#;
    let loaded = load_str(urdf, Path::new("r.urdf"), RootJoint::FreeFlyer).unwrap();
    let w = loaded.warnings.join("\n");
    assert!(w.contains("link `c`") && w.contains("not a physical"), "{w}");
    assert!(w.contains("link `b`") && w.contains("raised"), "{w}");
    let b = loaded.model.body_index("b").unwrap();
    assert!(loaded.model.inertias[b].mass > 0.0);
}

#[test]
fn an_uncommitted_file_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.csv");
    {
        let mut f = AtomicFile::create(&path).unwrap();
        writeln!(f, "half a file").unwrap();
    }
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "temporary file left behind");
    std::fs::write(&path, "old").unwrap();
    {
        let mut f = AtomicFile::create(&path).unwrap();
        writeln!(f, "new").unwrap();
        // Not committed: the previous content survives.
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
}
