//! The three shipped gradient-quality sweeps (reduced to 21 points and 12 antithetic pairs to
//! keep the test short): across each transition the exact sensitivity jumps while the relaxed
//! one stays finite, bounded, smoother, nonzero where the exact one is blind, and closer to
//! the smoothed truth (cosine similarity). Also the CLI's files.

use contactlab::diff::sweep::SweepOverrides;
use contactlab::diff::sweep::{run_sweep, SweepResult};
use contactlab::scene::Scene;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize};

fn sweep(file: &str) -> SweepResult {
    let sc = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join(file)).unwrap();
    let o = SweepOverrides { points: Some(21), samples: Some(12), ..Default::default() };
    let (spec, sim) = sc.sweep(&o).unwrap();
    run_sweep(&sim, &spec, &AtomicBool::new(false), &AtomicUsize::new(0)).unwrap()
}

fn column(r: &SweepResult, name: &str) -> Vec<f64> {
    let i = r.sensitivity_names.iter().position(|n| n == name).unwrap();
    r.points.iter().map(|p| p.grads[i]).collect()
}

fn max_jump(g: &[f64]) -> f64 {
    g.windows(2).map(|w| (w[1] - w[0]).abs()).fold(0.0, f64::max)
}

fn check(file: &str) {
    let r = sweep(file);
    let exact = column(&r, "exact");
    let relaxed = column(&r, "relaxed");
    let scale = r.points.iter().map(|p| p.smoothed.abs()).fold(0.0, f64::max);
    let (ce, cr) = (r.summaries[0].cosine, r.summaries[2].cosine);
    eprintln!("{file}: cosine exact {ce:.4}, signorini {:.4}, relaxed {cr:.4}", r.summaries[1].cosine);
    // Finite and bounded everywhere.
    assert!(relaxed.iter().all(|g| g.is_finite() && g.abs() <= 10.0 * scale), "{file}: {relaxed:?}");
    // The exact gradient jumps across the transition; the relaxed one moves more gently.
    let range =
        exact.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b)) - exact.iter().fold(f64::INFINITY, |a, &b| a.min(b));
    let (je, jr) = (max_jump(&exact), max_jump(&relaxed));
    eprintln!(
        "{file}: largest step between neighbouring points: exact {je:.3e}, relaxed {jr:.3e} (exact range {range:.3e})"
    );
    assert!(je >= 0.3 * range, "{file}: the exact gradient should jump across the transition");
    assert!(jr < je, "{file}: relaxed {jr:e} vs exact {je:e}");
    // Where the exact gradient is blind (within 1e-9 of its value far on the blind side) the
    // relaxed one still sees the coming transition: it differs from the exact one.
    let differs = exact.iter().zip(&relaxed).filter(|(e, r)| (*e - *r).abs() > 1e-6 * scale).count();
    assert!(differs >= exact.len() / 2, "{file}: relaxed differs from exact at only {differs} points");
    assert!(cr > ce, "{file}: relaxed cosine {cr} is not above exact {ce}");
}

#[test]
fn box_push_stick_to_slide() {
    check("sweep_box_push.ron");
}

#[test]
fn quadruped_foot_liftoff() {
    check("sweep_liftoff.ron");
}

#[test]
fn quadruped_foot_touchdown() {
    check("sweep_foot_touchdown.ron");
}

#[test]
fn gradcheck_writes_csv_png_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gc");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_contactlab"))
        .args([
            "gradcheck",
            "scenes/sweep_box_push.ron",
            "--points",
            "5",
            "--samples",
            "3",
            "--sensitivity",
            "all",
            "--out",
        ])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 6);
    assert!(csv.starts_with("s,f,fd,fd_mode_change,smoothed,smoothed_se,exact,signorini,relaxed,mode_corner_mmm"));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["sweep"], "box_push");
    for s in ["exact", "signorini", "relaxed"] {
        for k in ["cosine", "rel_error", "sign_agreement"] {
            assert!(summary["sensitivities"][s][k].is_number(), "{s}.{k}: {summary}");
        }
    }
    let png = std::fs::read(out.join("sweep.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.len() > 20_000, "a plot with curves, not a blank image");
    // A bad parameter is a clear error, not a panic.
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_contactlab"))
        .args(["gradcheck", "scenes/sweep_box_push.ron", "--param", "torque:nope", "--out"])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("no actuated joint matches `nope`"), "{err}");
}
