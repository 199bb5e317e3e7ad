//! The `contactlab` binary as a user runs it.

use std::path::Path;
use std::process::Command;

fn contactlab() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_contactlab"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[test]
fn simulate_writes_a_complete_csv() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.csv");
    let o = contactlab()
        .args(["simulate", "scenes/quadruped_pull.ron", "--duration", "0.5", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("250 steps") && stdout.contains("median"), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "t",
        "status",
        "iterations",
        "root_joint_z",
        "q_FL_calf_joint",
        "u_RR_hip_joint",
        "FL_foot_lambda_n",
        "RR_foot_mode",
    ] {
        assert!(header.contains(&col), "missing column {col}");
    }
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 250);
    assert!(rows.iter().all(|r| r.split(',').count() == header.len()));
    assert!(rows.last().unwrap().contains("Sticking"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "temporary files left behind");
}

#[test]
fn simulate_of_a_bad_scene_fails_clearly_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("bad.ron");
    std::fs::write(&scene, "Scene(name: \"x\", robot: Builtin(Quadruped), dt: -1.0)").unwrap();
    let out = dir.path().join("run.csv");
    let o = contactlab().arg("simulate").arg(&scene).arg("--out").arg(&out).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.ron:1:") && err.contains("dt") && err.contains("[1e-6, 0.1]"), "{err}");
    assert!(!out.exists());
}

#[test]
fn check_dynamics_passes_on_the_fixtures_and_fails_beyond_tolerance() {
    let rbd = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/rbd");
    for system in ["solo12", "go1", "free_box"] {
        let o = contactlab()
            .arg("check-dynamics")
            .arg("--urdf")
            .arg(rbd.join(format!("urdf/{system}.urdf")))
            .arg("--fixture")
            .arg(rbd.join(format!("{system}_set_a.json")))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{system}: {stdout}{}", String::from_utf8_lossy(&o.stderr));
        for q in ["M ", "nle", "rnea", "aba", "foot_pos", "foot_J"] {
            assert!(stdout.contains(q), "{system}: no line for {q}: {stdout}");
        }
    }
    // A tolerance below round-off must fail with a non-zero exit code.
    let o = contactlab()
        .arg("check-dynamics")
        .arg("--urdf")
        .arg(rbd.join("urdf/go1.urdf"))
        .arg("--fixture")
        .arg(rbd.join("go1_set_a.json"))
        .args(["--tolerance", "1e-30"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    // The wrong robot for the fixture is an error naming the fixture, not a panic.
    let o = contactlab()
        .arg("check-dynamics")
        .arg("--urdf")
        .arg(rbd.join("urdf/solo12.urdf"))
        .arg("--fixture")
        .arg(rbd.join("go1_set_a.json"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("go1_set_a.json"));
}

fn json_keys(path: &Path, keys: &[&str]) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for k in keys {
        assert!(v.get(k).is_some(), "{}: no key {k}: {text}", path.display());
    }
    v
}

#[test]
fn cito_writes_its_files_and_a_summary_with_the_listed_keys() {
    let dir = tempfile::tempdir().unwrap();
    let o = contactlab()
        .args(["cito", "scenes/cito_raise.ron", "--sensitivity", "exact", "--iterations", "3", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["trajectory.csv", "iterations.csv", "schedule.csv", "summary.png", "summary.json"] {
        assert!(dir.path().join(f).exists(), "missing {f}");
    }
    let keys = [
        "status",
        "final_cost",
        "iterations",
        "pose_error_m",
        "pose_error_deg",
        "max_penetration_m",
        "max_cone_violation",
        "feet_repositioned",
    ];
    let v = json_keys(&dir.path().join("summary.json"), &keys);
    assert!(v["feet_repositioned"].is_array() && v["iterations"].as_u64().unwrap() <= 3);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5, "temporary files left behind");
    // The comparison: all three sensitivities from the same start, one table.
    let o = contactlab()
        .args(["cito", "scenes/cito_raise.ron", "--sensitivity", "all", "--iterations", "1", "--out"])
        .arg(dir.path().join("all"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(dir.path().join("all/comparison.md")).unwrap();
    for s in ["exact", "signorini", "relaxed", "final cost", "max penetration", "feet repositioned"] {
        assert!(md.contains(s), "comparison.md lacks {s}: {md}");
    }
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("all/comparison.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), 3);
    assert!(dir.path().join("all/relaxed/summary.json").exists());
}

#[test]
fn mpc_writes_a_summary_with_the_listed_keys() {
    let dir = tempfile::tempdir().unwrap();
    let o = contactlab()
        .args(["mpc", "scenes/mpc_pull.ron", "--duration", "0.1", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let keys =
        ["recovered", "max_base_error_m", "final_base_error_m", "solve_ms_median", "solve_ms_p95", "realtime_factor"];
    let v = json_keys(&dir.path().join("summary.json"), &keys);
    // 0.1 s ends before the pull: not a recovery.
    assert_eq!(v["recovered"], serde_json::Value::Bool(false));
    assert!(dir.path().join("cycles.csv").exists() && dir.path().join("trace.csv").exists());
    let o = contactlab().args(["mpc", "scenes/cito_raise.ron"]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no `mpc` section"));
}

/// `cito --starts N` solves every sensitivity from the same seeded starts and writes the mean
/// and spread (`starts.md`) and every run (`starts.json`); the starts are reproducible.
#[test]
fn cito_from_perturbed_starts_writes_mean_and_spread() {
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &std::path::Path| {
        let o = contactlab()
            .args(["cito", "scenes/cito_raise.ron", "--sensitivity", "exact,relaxed", "--iterations", "2"])
            .args(["--starts", "2", "--seed", "7", "--out"])
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(out.join("starts.json")).unwrap()).unwrap()
    };
    let a = run(&dir.path().join("a"));
    assert_eq!(a["rows"].as_array().unwrap().len(), 2);
    assert_eq!(a["runs"].as_array().unwrap().len(), 4);
    for key in [
        "succeeded",
        "final_cost_mean",
        "final_cost_std",
        "pose_error_mm_mean",
        "iterations_mean",
        "fallback_jacobians",
    ] {
        assert!(a["rows"][0].get(key).is_some(), "{key}");
    }
    let md = std::fs::read_to_string(dir.path().join("a/starts.md")).unwrap();
    assert!(md.contains("seeds 7..8") && md.contains("| exact | ") && md.contains("| relaxed | "), "{md}");
    // The two starts differ, and the same seed gives the same runs.
    let costs: Vec<f64> = a["runs"].as_array().unwrap().iter().map(|r| r["final_cost"].as_f64().unwrap()).collect();
    assert_ne!(costs[0], costs[1]);
    let b = run(&dir.path().join("b"));
    let costs_b: Vec<f64> = b["runs"].as_array().unwrap().iter().map(|r| r["final_cost"].as_f64().unwrap()).collect();
    assert_eq!(costs, costs_b);
}

#[test]
fn jacobians_writes_the_library_values_and_rejects_an_unknown_sensitivity() {
    use contactlab::diff::{transition_jacobians, Sensitivity, TransitionWorkspace};
    use contactlab::scene::Scene;
    use contactlab::sim::StepWorkspace;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("J.json");
    let o = contactlab()
        .args(["jacobians", "scenes/quadruped_stand.ron", "--sensitivity", "relaxed(kappa=1e-3, delta=1e-2)", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(j["status"], "Ok");
    // The same step in-process: equal to the last bit (JSON round-trips f64).
    let scene = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/quadruped_stand.ron")).unwrap();
    let sim = scene.settled(0.5).unwrap();
    let m = &*sim.model;
    let (mut a, mut b) = (nalgebra::DMatrix::zeros(2 * m.nv, 2 * m.nv), nalgebra::DMatrix::zeros(2 * m.nv, m.nu));
    let zeros = vec![0.0; m.nv];
    transition_jacobians(
        m,
        &sim.terrain,
        &sim.settings,
        &mut StepWorkspace::new(m),
        &mut TransitionWorkspace::new(m),
        (sim.q.as_slice(), sim.v.as_slice(), sim.u.as_slice(), &zeros),
        Sensitivity::Relaxed { kappa: 1e-3, delta: 1e-2 },
        &mut a,
        &mut b,
    );
    for (r, row) in j["A"].as_array().unwrap().iter().enumerate() {
        for (c, x) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(x.as_f64().unwrap(), a[(r, c)], "A[{r}, {c}]");
        }
    }
    assert_eq!(j["B"].as_array().unwrap().len(), 2 * m.nv);
    let bad = dir.path().join("bad.json");
    let o = contactlab()
        .args(["jacobians", "scenes/quadruped_stand.ron", "--sensitivity", "smooth", "--out"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--sensitivity"));
    assert!(!bad.exists());
}
