//! Hard-contact behaviour of the full step: standing, sticking and sliding against Coulomb's
//! law, bouncing without energy gain, and every shipped scene running to its end.

use contactlab::contact::ContactMode;
use contactlab::dynamics::{center_of_mass, forward_kinematics, kinetic_energy};
use contactlab::scene::Scene;
use contactlab::sim::{Simulation, StepStatus};
use nalgebra::Vector3;
use std::path::Path;

fn scene(name: &str) -> Scene {
    Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join(name)).unwrap()
}

fn energy(sim: &mut Simulation) -> f64 {
    let model = sim.model.clone();
    forward_kinematics(&model, &mut sim.ws.data, sim.q.as_slice(), Some(sim.v.as_slice()));
    let c = center_of_mass(&model, &sim.ws.data);
    kinetic_energy(&model, &sim.ws.data) - model.total_mass() * model.gravity.dot(&c)
}

#[test]
fn quadruped_settles_standing_on_four_feet() {
    let s = scene("quadruped_stand.ron");
    let mut sim = s.simulation();
    let mut iterations = Vec::new();
    let mut max_pen: f64 = 0.0;
    for _ in 0..(3.0 / s.settings.dt) as usize {
        let info = sim.step();
        assert_eq!(info.status, StepStatus::Ok, "t = {}: {:?}", sim.t, info.solver);
        assert!(info.solver.min_iterate_cone_margin >= 0.0, "an iterate left the cone: {:?}", info.solver);
        max_pen = max_pen.max(info.penetration);
        iterations.push(info.solver.iterations);
    }
    let last = sim.step();
    max_pen = max_pen.max(last.penetration);
    iterations.sort_unstable();
    let median = iterations[iterations.len() / 2];
    eprintln!("quadruped_stand: median Newton iterations {median}, max penetration {max_pen:.2e} m");
    assert!(max_pen <= 1e-4, "penetration {max_pen:e} m");
    assert!(sim.ws.modes[..4].iter().all(|m| *m == ContactMode::Sticking), "modes {:?}", sim.ws.modes);
    assert!(sim.ws.modes[4..].iter().all(|m| *m == ContactMode::Separated), "the trunk touches: {:?}", sim.ws.modes);
    assert!(sim.v.norm() < 1e-3, "still moving: |v| = {:e}", sim.v.norm());
    // Weight carried by the feet: sum of normal impulses / h = m g (the ground is flat).
    let weight = sim.model.total_mass() * 9.81;
    let normal: f64 = (0..4).map(|i| sim.ws.lambda[3 * i]).sum::<f64>() / s.settings.dt;
    assert!((normal - weight).abs() < 1e-3 * weight, "normal force {normal} vs weight {weight}");
    assert!(sim.q[2] > 0.25, "base height {}", sim.q[2]);
}

/// A box resting on an incline, its bottom face on the plane.
fn box_on_incline(slope: f64, friction: f64, speed_downhill: f64) -> Simulation {
    let (hz, n) = (0.05, Vector3::new(slope.sin(), 0.0, slope.cos()));
    let c = n * hz;
    let d = Vector3::new(slope.cos(), 0.0, -slope.sin()) * speed_downhill;
    let text = format!(
        "Scene(name: \"incline\", robot: Box(size: (0.3, 0.2, {}), mass: 2.0),
          initial: (base_position: ({}, 0.0, {}), base_rpy: (0.0, {slope}, 0.0), base_linear_velocity: ({}, 0.0, {})),
          terrain: (ground: (slope: {slope}, friction: {friction})), dt: 0.002)",
        2.0 * hz,
        c.x,
        c.z,
        d.x,
        d.z
    );
    Scene::from_str(&text, Path::new("incline.ron")).unwrap().simulation()
}

/// Displacement and velocity along the downhill direction.
fn downhill(sim: &Simulation, slope: f64, x0: &Vector3<f64>) -> (f64, f64) {
    let d = Vector3::new(slope.cos(), 0.0, -slope.sin());
    let p = Vector3::new(sim.q[0], sim.q[1], sim.q[2]);
    let rot = contactlab::model::configuration::free_flyer_placement(&sim.q.as_slice()[..7]).rot;
    let v_world = rot * Vector3::new(sim.v[0], sim.v[1], sim.v[2]);
    ((p - x0).dot(&d), v_world.dot(&d))
}

#[test]
fn box_sticks_below_the_friction_angle() {
    let (slope, mu) = (0.3, 0.5); // friction angle atan(0.5) = 0.4636 rad
    let mut sim = box_on_incline(slope, mu, 0.0);
    let x0 = Vector3::new(sim.q[0], sim.q[1], sim.q[2]);
    for _ in 0..2500 {
        let info = sim.step();
        assert_eq!(info.status, StepStatus::Ok);
    }
    let (drift, _) = downhill(&sim, slope, &x0);
    eprintln!("sticking box drift over 5 s: {drift:e} m");
    assert!(drift.abs() < 1e-4, "drift {drift:e} m");
}

#[test]
fn box_slides_above_the_friction_angle_with_coulomb_acceleration() {
    let g = 9.81;
    for (slope, mu) in [(0.5f64, 0.3f64), (0.35, 0.2)] {
        let mut sim = box_on_incline(slope, mu, 0.0);
        let x0 = Vector3::new(sim.q[0], sim.q[1], sim.q[2]);
        let steps = 500;
        for _ in 0..steps {
            assert_eq!(sim.step().status, StepStatus::Ok);
        }
        let t = sim.t;
        let (_, v) = downhill(&sim, slope, &x0);
        let expected = g * (slope.sin() - mu * slope.cos());
        let measured = v / t;
        eprintln!("slope {slope}, mu {mu}: acceleration {measured:.5} vs Coulomb {expected:.5}");
        assert!((measured - expected).abs() < 0.02 * expected, "{measured} vs {expected}");
        assert!(sim.ws.modes.iter().all(|m| *m != ContactMode::Sticking));
    }
}

#[test]
fn box_thrown_along_flat_ground_decelerates_at_mu_g() {
    let (mu, v0) = (0.4, 2.0);
    let mut sim = box_on_incline(0.0, mu, v0);
    let x0 = Vector3::new(sim.q[0], sim.q[1], sim.q[2]);
    for _ in 0..200 {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    let (_, v) = downhill(&sim, 0.0, &x0);
    let measured = (v0 - v) / sim.t;
    let expected = mu * 9.81;
    assert!((measured - expected).abs() < 0.02 * expected, "{measured} vs {expected}");
}

/// Energy of the box toss at time step `dt`: (initial, maximum, final, KE at the end, impacts).
/// Panics if the contact impulse of any step does positive work: the kinetic energy it adds,
/// `1/2 v+^T M v+ - 1/2 v_free^T M v_free = 1/2 lambda^T J (v+ + v_free)`, must be <= 0.
fn toss(dt: f64) -> (f64, f64, f64, f64, usize) {
    let mut s = scene("box_toss.ron");
    s.settings.dt = dt;
    let mut sim = s.simulation();
    let e0 = energy(&mut sim);
    let (mut e_prev, mut e_max, mut impacts, mut was_touching) = (e0, e0, 0, false);
    for _ in 0..(4.0 / dt) as usize {
        let info = sim.step();
        assert!(info.status.advanced(), "{:?}", info);
        let ws = &sim.ws;
        let mut jv = ws.contacts.jac.clone() * (&sim.v + &ws.v_free);
        jv *= 0.5;
        let work = ws.lambda.dot(&jv);
        // The interior point stops at complementarity ~1e-10, not 0: allow that much work.
        assert!(work <= 1e-9, "dt {dt}: contact did positive work {work:e} J at t = {}", sim.t);
        let e = energy(&mut sim);
        let touching = info.active_contacts > 0;
        impacts += (touching && !was_touching) as usize;
        was_touching = touching;
        e_max = e_max.max(e);
        e_prev = e;
    }
    (e0, e_max, e_prev, kinetic_energy(&sim.model, &sim.ws.data), impacts)
}

/// Contact impulses never do positive work and the box ends at rest. Between impacts
/// the first-order step (explicit gyroscopic term) lets the energy of a fast-spinning box creep
/// up by O(h): the excess over the initial energy must stay below 1 % and shrink with `dt`,
/// which shows it is discretization error rather than energy injected by contact.
#[test]
fn thrown_box_bounces_and_comes_to_rest_without_energy_gain() {
    let (e0, e_max, e_end, ke, impacts) = toss(0.002);
    let (_, e_max_fine, _, _, _) = toss(0.0005);
    eprintln!(
        "box toss: E0 {e0:.4} J, max {e_max:.4} J (dt 0.5 ms: {e_max_fine:.4} J), final {e_end:.4} J, KE {ke:.1e} J, {impacts} impacts"
    );
    assert!(impacts >= 2, "it should bounce");
    assert!(e_max <= e0 * 1.01, "energy rose to {e_max} from {e0}");
    assert!(e_max_fine - e0 < 0.5 * (e_max - e0).max(1e-12), "the excess does not shrink with dt");
    assert!(e_end < e0);
    assert!(ke < 1e-6, "not at rest: KE {ke:e}");
}

#[test]
fn every_scene_simulates_to_the_end() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("ron") {
            continue;
        }
        let s = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
        // Our robots import cleanly; the URDFs of others (../shared) may carry a non-physical
        // inertia that the import keeps as written, as Pinocchio does (go1's dummy `base` link).
        let known = |w: &String| w.contains("/shared/fixtures/") && w.contains("kept as written");
        assert!(s.warnings.iter().all(known), "{}: {:?}", path.display(), s.warnings);
        let mut sim = s.simulation();
        let duration = s.file.duration.unwrap_or(1.0);
        let steps = (duration / s.settings.dt).round() as usize;
        let mut not_converged = 0;
        for _ in 0..steps {
            let info = sim.step();
            assert!(info.status.advanced(), "{}: t = {}: {:?}", path.display(), sim.t, info);
            not_converged += (info.status != StepStatus::Ok) as usize;
        }
        assert!(sim.q.iter().chain(sim.v.iter()).all(|x| x.is_finite()));
        assert_eq!(not_converged, 0, "{}: {not_converged} steps did not converge", path.display());
        count += 1;
    }
    assert!(count >= 6, "only {count} scenes");
}

/// A third-party URDF from the shared fixtures, with contacts chosen in the scene, stands too.
#[test]
fn urdf_robot_with_scene_contacts_stands() {
    let text = r#"Scene(
        name: "solo12",
        robot: Urdf(path: "../shared/fixtures/rbd/urdf/solo12.urdf", floating: true,
                    contacts: [(frame: "FL_FOOT", radius: 0.016), (frame: "FR_FOOT", radius: 0.016),
                               (frame: "HL_FOOT", radius: 0.016), (frame: "HR_FOOT", radius: 0.016)]),
        initial: (base_position: (0.0, 0.0, 0.3), joints: {"*_HFE": 0.8, "*_KFE": -1.6}),
        terrain: (ground: (friction: 0.9)),
        dt: 0.002,
        controller: JointPd(kp: 5.0, kd: 0.2, posture: {"*_HFE": 0.8, "*_KFE": -1.6}),
    )"#;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("solo12.ron");
    let s = Scene::from_str(text, &path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.model.contact_points.len(), 4);
    let mut sim = s.simulation();
    for _ in 0..1000 {
        assert_eq!(sim.step().status, StepStatus::Ok);
    }
    // The four feet (the candidates after them are the second contacts of concave corners).
    assert!(sim.ws.modes[..4].iter().all(|m| *m != ContactMode::Separated), "{:?}", sim.ws.modes);
    let bad = text.replace("HR_FOOT", "HR_TOE");
    let e = Scene::from_str(&bad, &path).unwrap_err().to_string();
    assert!(e.contains("robot.contacts[3].frame") && e.contains("HR_TOE"), "{e}");
}

/// A cube sliding along the ground into a step: its leading bottom corners sit in the concave
/// corner between the ground and the step's face and touch both. With one contact per point
/// (the nearest primitive, the ground) the face was ignored until a corner was inside the step
/// (about 1 cm of penetration here); with the second contact it is never entered.
#[test]
fn a_corner_sliding_into_a_step_does_not_enter_it() {
    let text = r#"Scene(
        name: "slide_into_step",
        robot: Builtin(Cube),
        initial: (base_position: (0.0, 0.0, 0.1), base_linear_velocity: (1.5, 0.0, 0.0)),
        terrain: (
            ground: (friction: 0.1),
            boxes: [(center: (0.5, 0.0, 0.025), size: (0.4, 2.0, 0.05), friction: 0.1)],
        ),
        dt: 0.002,
        duration: 1.0,
    )"#;
    let s = Scene::from_str(text, Path::new("slide_into_step.ron")).unwrap();
    let mut sim = s.simulation();
    let (mut max_pen, mut touched_face) = (0.0f64, false);
    for _ in 0..500 {
        let info = sim.step();
        assert!(info.status.advanced(), "{:?}", info.status);
        max_pen = max_pen.max(info.penetration);
        let c = &sim.ws.contacts;
        touched_face |= c.active.iter().any(|&i| c.normal[i].x < -0.9 && sim.ws.lambda[3 * i] > 1e-6);
    }
    assert!(touched_face, "the step's face never pushed back");
    assert!(max_pen <= 1e-4, "a corner went {max_pen} m into the terrain");
}

/// A robot without contact points (a URDF loaded with no contacts chosen) falls through the
/// ground: the step runs with an empty contact problem, every time.
#[test]
fn a_model_without_contact_points_steps() {
    let mut model = contactlab::model::builtin::quadruped().unwrap().model;
    model.contact_points.clear();
    let model = std::sync::Arc::new(model);
    let q = contactlab::model::neutral(&model);
    let v = nalgebra::DVector::zeros(model.nv);
    let terrain = contactlab::contact::Terrain::flat(0.8);
    let mut sim = Simulation::new(model, terrain, contactlab::sim::StepSettings::default(), q, v);
    let z0 = sim.q[2];
    for _ in 0..100 {
        let info = sim.step();
        assert_eq!(info.status, StepStatus::Ok, "{info:?}");
        assert_eq!(info.active_contacts, 0);
    }
    // Free fall for 0.2 s: z drops by about g t^2 / 2.
    assert!((z0 - sim.q[2] - 0.5 * 9.81 * 0.04).abs() < 0.01, "z {} -> {}", z0, sim.q[2]);
}
