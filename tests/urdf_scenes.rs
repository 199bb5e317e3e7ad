//! Robots without a scene file: go1 and solo12 from their URDFs (`../shared/fixtures`) stand on
//! a guessed posture, and their shipped scenes stand; a state round-trips through a keyframe.

use contactlab::scene::guess::{keyframe_ron, posture_from_limits, urdf_scene};
use contactlab::scene::Scene;
use std::path::Path;

const GO1: &str = "../shared/fixtures/rbd/urdf/go1.urdf";

/// Trunk height after `seconds` against the start, and the lowest it went.
fn stands(scene: &Scene, seconds: f64) -> (f64, f64, f64) {
    let mut sim = scene.simulation();
    let z0 = sim.q[2];
    let mut low = z0;
    let n = (seconds / sim.settings.dt).round() as usize;
    for _ in 0..n {
        let info = sim.step();
        assert!(info.status.advanced(), "{:?} at t = {}", info.status, sim.t);
        low = low.min(sim.q[2]);
    }
    (z0, sim.q[2], low)
}

#[test]
fn go1_stands_on_the_posture_guessed_from_its_limits() {
    let scene = urdf_scene(Path::new(GO1)).unwrap();
    assert_eq!(scene.model.contact_points.len(), 4);
    let p = posture_from_limits(&scene.model);
    // The calves' range excludes zero: bent a quarter in, thighs turned by half of it back.
    let calf = p["FL_calf_joint"];
    assert!((-2.0..-1.2).contains(&calf), "calf {calf}");
    assert!((p["FL_thigh_joint"] + 0.5 * calf).abs() < 1e-12);
    assert_eq!(p["FL_hip_joint"], 0.0);
    let (z0, z, low) = stands(&scene, 2.0);
    assert!(z > 0.7 * z0 && low > 0.6 * z0, "trunk from {z0} to {z} (lowest {low})");
    // Upright: the base's z axis within 10 degrees of vertical.
    let sim = scene.settled(2.0).unwrap();
    let (x, y, zq, w) = (sim.q[3], sim.q[4], sim.q[5], sim.q[6]);
    let up = 1.0 - 2.0 * (x * x + y * y);
    assert!(up > (10f64).to_radians().cos(), "tilted: R_zz {up} (quat {x} {y} {zq} {w})");
}

#[test]
fn shipped_go1_and_solo12_scenes_stand() {
    for (file, min_height) in [("scenes/go1_stand.ron", 0.2), ("scenes/solo12_stand.ron", 0.15)] {
        let scene = Scene::load(Path::new(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(scene.model.contact_points.len(), 4, "{file}");
        let (z0, z, low) = stands(&scene, 2.0);
        assert!(z > min_height && z > 0.9 * z0 && low > 0.85 * z0, "{file}: trunk from {z0} to {z} (lowest {low})");
    }
}

#[test]
fn a_keyframe_reads_back_as_the_same_state() {
    let scene = Scene::load(Path::new("scenes/quadruped_push_over.ron")).unwrap();
    let sim = scene.settled(0.3).unwrap();
    let ron_text = keyframe_ron(&scene.model, sim.q.as_slice(), sim.v.as_slice());
    let text = std::fs::read_to_string("scenes/quadruped_push_over.ron").unwrap();
    // Replace the scene's `initial` with the keyframe.
    let start = text.find("initial:").unwrap();
    let end = start + text[start..].find("\n    ),\n").unwrap() + "\n    ),\n".len();
    let edited = format!("{}{}{}", &text[..start], ron_text, &text[end..]);
    let again = Scene::from_str(&edited, Path::new("scenes/quadruped_push_over.ron"))
        .unwrap_or_else(|e| panic!("{e}\n{edited}"));
    let s2 = again.simulation();
    for (a, b) in sim.q.iter().zip(s2.q.iter()) {
        assert!((a - b).abs() < 1e-12, "q {a} vs {b}");
    }
    for (a, b) in sim.v.iter().zip(s2.v.iter()) {
        assert!((a - b).abs() < 1e-9, "v {a} vs {b}");
    }
}
