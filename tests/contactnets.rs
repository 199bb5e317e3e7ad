//! ContactNets (issue 7): the loader's errors, duplicate-aware splits, the envelope gradient of
//! the inner problem against central differences, the true geometry at the loss minimum on
//! noise-free simulated tosses, recovery of perturbed vertices, and the real-data comparison of
//! the polytope with the end-to-end baseline.

use contactlab::learn::contactnets::data::{self, split, Body, Dataset, Frame, SplitSettings, Toss, Transition};
use contactlab::learn::contactnets::eval::{evaluate, vertex_error};
use contactlab::learn::contactnets::loss::{transition_loss, InnerStatus, LossSettings};
use contactlab::learn::contactnets::model::{LearnedModel, Method};
use contactlab::learn::contactnets::train::{self, loss_and_grad, params, set_params, TrainSettings};
use nalgebra::{UnitQuaternion, Vector3};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/cube_tosses")
}

/// The real dataset, loaded once for the whole file.
fn real() -> &'static Dataset {
    static D: OnceLock<Dataset> = OnceLock::new();
    D.get_or_init(|| Dataset::load(&data_dir()).expect("../shared/data/cube_tosses loads"))
}

const GOOD: &str = "t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz
0.0,0,0,3,1,0,0,0,1,0,0,0,0,0
0.00675,0.00675,0,3,1,0,0,0,1,0,0,0,0,0
0.0135,0.0135,0,3,1,0,0,0,1,0,0,0,0,0
";

fn load_text(dir: &Path, name: &str, text: &str) -> Result<Toss, data::DataError> {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write temp csv");
    data::load_toss(&p)
}

#[test]
fn loader_errors_name_file_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(load_text(dir.path(), "good.csv", GOOD).expect("good file loads").frames.len(), 3);

    let e = load_text(dir.path(), "column.csv", &GOOD.replacen(",pz,", ",z,", 1)).unwrap_err().to_string();
    assert!(e.contains("column.csv:1: header: column 4 is `z`, expected `pz`"), "{e}");

    let bad = GOOD.replacen("0.00675,0.00675,0,3,1,0,0,0,1,0,0", "0.00675,0.00675,0,3,1,0,0,0,1,NaN,0", 1);
    let e = load_text(dir.path(), "nan.csv", &bad).unwrap_err().to_string();
    assert!(e.contains("nan.csv:3: vy: NaN is not finite"), "{e}");

    let bad = GOOD.replacen("0.0,0,0,3,1,0,0,0", "0.0,0,0,3,1.1,0,0,0", 1);
    let e = load_text(dir.path(), "quat.csv", &bad).unwrap_err().to_string();
    assert!(e.contains("quat.csv:2: qw,qx,qy,qz: quaternion norm 1.1"), "{e}");

    let bad = GOOD.replacen("0.0135,0.0135,0,3", "0.0135,abc,0,3", 1);
    let e = load_text(dir.path(), "word.csv", &bad).unwrap_err().to_string();
    assert!(e.contains("word.csv:4: px: `abc` is not a number"), "{e}");

    let bad = GOOD.replacen("0.0135,0.0135,0,3,1,0,0,0,1,0,0,0,0,0", "0.0135,0.0135,0,3,1,0,0,0,1,0,0,0,0", 1);
    let e = load_text(dir.path(), "short_row.csv", &bad).unwrap_err().to_string();
    assert!(e.contains("short_row.csv:4: expected 14 fields, found 13"), "{e}");

    let e = load_text(dir.path(), "one.csv", &GOOD.lines().take(2).collect::<Vec<_>>().join("\n")).unwrap_err();
    assert!(e.to_string().contains("one.csv: 1 frame(s)"), "{e}");

    let e = Dataset::load(&dir.path().join("missing")).unwrap_err().to_string();
    assert!(e.contains("missing"), "{e}");
}

#[test]
fn duplicates_are_found_and_splits_keep_them_together() {
    let d = real();
    assert_eq!(d.tosses.len(), 460);
    // The pairs the data README lists, found from the content alone.
    let listed = [
        (39, 368),
        (40, 369),
        (41, 370),
        (42, 371),
        (56, 140),
        (84, 436),
        (160, 325),
        (161, 326),
        (162, 327),
        (171, 300),
        (172, 301),
        (173, 302),
        (174, 303),
        (226, 453),
        (227, 454),
        (228, 455),
        (229, 456),
        (230, 457),
        (321, 413),
        (322, 414),
        (323, 415),
        (324, 416),
    ];
    let mut found = d.duplicate_pairs();
    found.sort();
    assert_eq!(found, listed.to_vec());
    for (i, t) in d.tosses.iter().enumerate() {
        assert_eq!(t.name, format!("toss_{i:03}"));
    }

    let s = SplitSettings::default();
    let a = split(d, &s);
    assert_eq!(a, split(d, &s), "a split is a function of its seed");
    let b = split(d, &SplitSettings { seed: 1, ..s });
    assert_ne!(a.train, b.train, "another seed shuffles differently");
    for sp in [&a, &b] {
        let mut all: Vec<usize> = sp.train.iter().chain(&sp.valid).chain(&sp.test).copied().collect();
        all.sort();
        assert_eq!(all, (0..460).collect::<Vec<_>>(), "the splits partition the tosses");
        assert_eq!(sp.test.len(), 92);
        assert_eq!(sp.valid.len(), 46);
        let side = |i: usize| {
            if sp.train.contains(&i) {
                0
            } else if sp.valid.contains(&i) {
                1
            } else {
                2
            }
        };
        for (i, j) in &listed {
            assert_eq!(side(*i), side(*j), "pair ({i}, {j}) split apart");
        }
    }
}

/// A cube tossed from a random state, simulated by the repo's hard-contact step with the true
/// geometry (noise free).
fn simulated_tosses(n: usize, seed: u64) -> Vec<Toss> {
    let body = Body::default();
    let truth = LearnedModel::truth(&body);
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|k| {
            let axis = Vector3::new(r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0));
            let first = Frame {
                t: 0.0,
                p: Vector3::new(0.0, 0.0, r.random_range(2.5..4.0)),
                q: UnitQuaternion::from_scaled_axis(axis * 2.0),
                v: Vector3::new(r.random_range(-8.0..8.0), r.random_range(-8.0..8.0), r.random_range(-10.0..0.0)),
                w: Vector3::new(r.random_range(-10.0..10.0), r.random_range(-10.0..10.0), r.random_range(-10.0..10.0)),
            };
            let frames = truth.simulate(&first, 90).expect("true cube rolls out");
            Toss { name: format!("sim_{k}"), path: PathBuf::from(format!("sim_{k}.csv")), frames }
        })
        .collect()
}

fn all_transitions(tosses: &[Toss]) -> Vec<Transition> {
    tosses.iter().flat_map(|t| t.frames.windows(2).map(|w| Transition::new(&w[0], &w[1]))).collect()
}

fn perturbed(body: &Body, r: &mut ChaCha8Rng, size: f64) -> LearnedModel {
    let mut m = LearnedModel::truth(body);
    for x in m.vertices.iter_mut().flatten() {
        *x += r.random_range(-size..size);
    }
    m.mu = 0.25;
    m
}

#[test]
fn envelope_gradient_matches_central_differences() {
    let d = real();
    let body = &d.body;
    let settings = LossSettings { tolerance: 1e-11, ..LossSettings::default() };
    let mut r = ChaCha8Rng::seed_from_u64(7);
    let trs = d.transitions(&[3, 57, 200]);
    let mut checked = 0;
    for (n, tr) in trs.iter().enumerate().step_by(7) {
        let m = perturbed(body, &mut r, 0.1);
        let pts = m.vertices();
        let l = transition_loss(body, &settings, tr, &pts, &pts, m.mu);
        // Far from the contact margin, so finite differences do not change the problem's size.
        let gaps: Vec<f64> = pts.iter().map(|c| tr.pz1 + c.dot(&tr.r1.row(2).transpose())).collect();
        if l.status != InnerStatus::Solved
            || l.impulses.iter().all(|i| i.x < 1e-3)
            || gaps.iter().any(|g| (g - 1.0).abs() < 0.01)
        {
            continue;
        }
        let h = 1e-5;
        let value = |pts: &[Vector3<f64>], mu: f64| transition_loss(body, &settings, tr, pts, pts, mu).value;
        let mut analytic = vec![];
        let mut fd = vec![];
        for i in 0..pts.len() {
            for k in 0..3 {
                let (mut p, mut q) = (pts.clone(), pts.clone());
                p[i][k] += h;
                q[i][k] -= h;
                fd.push((value(&p, m.mu) - value(&q, m.mu)) / (2.0 * h));
                analytic.push(l.grad_start[i][k] + l.grad_end[i][k]);
            }
        }
        fd.push((value(&pts, m.mu + h) - value(&pts, m.mu - h)) / (2.0 * h));
        analytic.push(l.grad_mu);
        let scale = analytic.iter().fold(0.0f64, |a, g| a.max(g.abs())).max(1e-3);
        for (j, (a, f)) in analytic.iter().zip(&fd).enumerate() {
            assert!(
                (a - f).abs() <= 1e-4 * scale + 1e-7,
                "transition {n}, parameter {j}: envelope {a} vs FD {f} (scale {scale})"
            );
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} transitions with contact were checked");
}

#[test]
fn deep_and_batch_gradients_match_directional_differences() {
    let d = real();
    let trs = d.transitions(&[10, 11]);
    let batch: Vec<&Transition> = trs.iter().step_by(3).collect();
    let loss = LossSettings { tolerance: 1e-11, ..LossSettings::default() };
    for method in [Method::Poly, Method::Deep] {
        let ts = TrainSettings { method, seed: 3, init_noise: 0.1, ..TrainSettings::default() };
        let mut m = train::init_model(&d.body, &ts);
        let mut theta = params(&m);
        let mut r = ChaCha8Rng::seed_from_u64(11);
        // A nonzero correction, so the MLP's vector-Jacobian products are exercised.
        for t in theta.iter_mut().skip(25) {
            *t += r.random_range(-0.3..0.3);
        }
        set_params(&mut m, &theta);
        let (_, g, failed) = loss_and_grad(&m, &loss, &batch, 2, true);
        assert_eq!(failed, 0);
        for _ in 0..3 {
            let dir: Vec<f64> = (0..theta.len()).map(|_| r.random_range(-1.0..1.0)).collect();
            let h = 1e-5;
            let at = |s: f64| {
                let mut mm = m.clone();
                let p: Vec<f64> = theta.iter().zip(&dir).map(|(t, d)| t + s * d).collect();
                set_params(&mut mm, &p);
                loss_and_grad(&mm, &loss, &batch, 2, false).0
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            let an: f64 = g.iter().zip(&dir).map(|(a, b)| a * b).sum();
            assert!((fd - an).abs() <= 1e-4 * an.abs().max(1e-2), "{method:?}: directional FD {fd} vs analytic {an}");
        }
    }
}

#[test]
fn true_geometry_is_near_the_loss_minimum_on_simulated_tosses() {
    let body = Body::default();
    let tosses = simulated_tosses(8, 1);
    let trs = all_transitions(&tosses);
    let batch: Vec<&Transition> = trs.iter().collect();
    let loss = LossSettings::default();
    let truth = LearnedModel::truth(&body);
    let (at_truth, grad, failed) = loss_and_grad(&truth, &loss, &batch, 2, true);
    assert_eq!(failed, 0);
    // The loss of a model that never touches (all impulses zero) is the squared velocity change
    // the data cannot explain without contact; the truth explains almost all of it.
    let mut no_contact = truth.clone();
    for v in no_contact.vertices.iter_mut() {
        v[2] -= 100.0;
    }
    let (untouched, _, _) = loss_and_grad(&no_contact, &loss, &batch, 2, false);
    assert!(at_truth < 0.02 * untouched, "loss at the truth {at_truth:.3e} vs without contact {untouched:.3e}");
    let mut r = ChaCha8Rng::seed_from_u64(5);
    for size in [0.02, 0.05, 0.1] {
        for _ in 0..2 {
            let mut m = perturbed(&body, &mut r, size);
            m.mu = body.mu;
            let (v, _, _) = loss_and_grad(&m, &loss, &batch, 2, false);
            assert!(v > at_truth, "perturbation {size}: {v:.4e} <= {at_truth:.4e}");
        }
    }
    for mu in [0.1, 0.3] {
        let mut m = truth.clone();
        m.mu = mu;
        assert!(loss_and_grad(&m, &loss, &batch, 2, false).0 > at_truth, "mu {mu}");
    }
    let gnorm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
    let pert = perturbed(&body, &mut r, 0.1);
    let (_, gp, _) = loss_and_grad(&pert, &loss, &batch, 2, true);
    let gpn = gp.iter().map(|g| g * g).sum::<f64>().sqrt();
    assert!(gnorm < 0.1 * gpn, "gradient at the truth {gnorm:.3e} vs at a 0.1 perturbation {gpn:.3e}");
}

#[test]
fn training_recovers_perturbed_vertices_on_simulated_tosses() {
    let body = Body::default();
    let tosses = simulated_tosses(12, 2);
    // Every corner touches the ground at some point, so every vertex is identifiable.
    for c in &body.vertices {
        let c = Vector3::from(*c);
        let lowest = tosses.iter().flat_map(|t| &t.frames).map(|f| f.p.z + (f.q * c).z).fold(f64::INFINITY, f64::min);
        assert!(lowest < 1e-3, "corner {c:?} never touches ({lowest})");
    }
    let train_tr = all_transitions(&tosses[..10]);
    let valid_tr = all_transitions(&tosses[10..]);
    let ts = TrainSettings {
        seed: 4,
        init_noise: 0.2,
        init_mu: 0.3,
        steps: 600,
        batch: 48,
        lr: 5e-3,
        ..TrainSettings::default()
    };
    let init = train::init_model(&body, &ts);
    let (m, rep) = train::train(&body, &train_tr, &valid_tr, &ts).expect("training runs");
    let before = vertex_error(&init);
    let after = vertex_error(&m);
    eprintln!(
        "vertex error {before:.3} -> {after:.4}, mu {:.4}, {} steps in {:.1} s",
        m.mu, rep.steps, rep.wall_seconds
    );
    assert!(before > 0.15, "the start is perturbed ({before})");
    assert!(after < 0.05, "learned corners within 5 % of the half width: max error {after:.4}");
    assert!((m.mu - body.mu).abs() < 0.03, "mu {}", m.mu);
}

/// Issue 7's real-data acceptance: on a duplicate-aware split, the polytope trained on 64 real
/// tosses beats the end-to-end baseline trained on the same tosses on all three rollout metrics
/// over the 92 test tosses, and its corners are within 10 % of the half width of the true ones.
/// Runs in CI (about 20 s of the file's time in the dev profile); the README's sweep has the
/// same comparison over three seeds and nine training-set sizes.
#[test]
fn polytope_beats_end_to_end_on_real_tosses() {
    let d = real();
    let sp = split(d, &SplitSettings::default());
    let tr = d.transitions(&sp.train[..64]);
    let va = d.transitions(&sp.valid[..16]);
    let test: Vec<&Toss> = sp.test.iter().map(|&i| &d.tosses[i]).collect();
    let mut out = vec![];
    for method in [Method::Poly, Method::E2e] {
        let ts = TrainSettings { method, ..TrainSettings::default() };
        let (m, rep) = train::train(&d.body, &tr, &va, &ts).expect("training runs");
        let ev = evaluate(&m, &test, 2);
        eprintln!(
            "{method:?}: {} steps {:.1} s; pos {:.2} %, angle {:.2} deg, pen {:.3} %",
            rep.steps, rep.wall_seconds, ev.position_error_pct, ev.angle_error_deg, ev.penetration_pct
        );
        assert_eq!(ev.failed_rollouts, 0);
        out.push((m, ev));
    }
    let (poly, e2e) = (&out[0].1, &out[1].1);
    assert!(poly.position_error_pct < e2e.position_error_pct, "position: {poly:?} vs {e2e:?}");
    assert!(poly.angle_error_deg < e2e.angle_error_deg, "angle");
    assert!(poly.penetration_pct < e2e.penetration_pct, "penetration");
    let err = vertex_error(&out[0].0);
    assert!(err < 0.1, "learned corners {err:.4} half widths from the true ones");
}

#[test]
fn model_files_round_trip_and_bad_ones_name_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = Body::default();
    let ts = TrainSettings { method: Method::Deep, ..TrainSettings::default() };
    let m = train::init_model(&body, &ts);
    let path = dir.path().join("deep.json");
    m.save(&path).expect("save");
    let back = contactlab::learn::contactnets::load(&path).expect("load");
    assert_eq!(back, m);
    assert_eq!(back.vertices().len(), 8);

    let text = std::fs::read_to_string(&path).expect("read").replacen("\"mu\": 0.3", "\"mu\": \"high\"", 1);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, text).expect("write");
    let e = contactlab::learn::contactnets::load(&bad).unwrap_err().to_string();
    assert!(e.contains("bad.json:") && e.contains(": mu: invalid type"), "{e}");

    let mut neg = m.clone();
    neg.mu = -1.0;
    let p = dir.path().join("neg.json");
    neg.save(&p).expect("save");
    let e = contactlab::learn::contactnets::load(&p).unwrap_err().to_string();
    assert!(e.contains("neg.json: mu: must be finite and >= 0"), "{e}");
}

#[test]
fn cli_trains_evaluates_and_sweeps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_contactlab"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .expect("run contactlab");
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let data = data_dir();
    let data = data.to_str().expect("utf-8 path");
    let model = dir.path().join("poly.json");
    let model = model.to_str().expect("utf-8 path");
    let out = run(&[
        "contactnets",
        "train",
        "--data",
        data,
        "--method",
        "poly",
        "--tosses",
        "2",
        "--steps",
        "30",
        "--out",
        model,
    ]);
    assert!(out.contains("test split (92 tosses)"), "{out}");

    // Any folder of toss CSVs: three real tosses copied to a temporary folder.
    let tosses = dir.path().join("tosses");
    std::fs::create_dir(&tosses).expect("mkdir");
    for n in ["toss_000.csv", "toss_001.csv", "toss_002.csv"] {
        std::fs::copy(data_dir().join(n), tosses.join(n)).expect("copy");
    }
    let json = dir.path().join("eval.json");
    run(&[
        "contactnets",
        "eval",
        "--model",
        model,
        "--data",
        tosses.to_str().expect("utf-8"),
        "--out",
        json.to_str().expect("utf-8"),
    ]);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("eval.json")).expect("json");
    for key in ["position_error_pct", "angle_error_deg", "penetration_pct"] {
        assert!(v[key].as_f64().is_some_and(|x| x.is_finite() && x >= 0.0), "{key}: {}", v[key]);
    }
    assert_eq!(v["per_toss"].as_array().map(|a| a.len()), Some(3));

    let sweep = dir.path().join("sweep");
    let s = sweep.to_str().expect("utf-8");
    run(&[
        "contactnets",
        "sweep",
        "--data",
        data,
        "--out",
        s,
        "--tosses",
        "1",
        "--seeds",
        "0",
        "--methods",
        "poly,e2e",
        "--steps",
        "20",
    ]);
    for f in ["sweep.json", "sweep.md", "sweep.png"] {
        assert!(sweep.join(f).exists(), "{f} missing");
    }
    let table = std::fs::read_to_string(sweep.join("sweep.md")).expect("table");
    assert!(table.contains("| poly | 1 | 1 |") && table.contains("| e2e | 1 | 1 |"), "{table}");
}
