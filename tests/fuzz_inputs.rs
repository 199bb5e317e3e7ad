//! Mutation fuzzing of every input format: scene RON, URDF, toss CSV, policy JSON and
//! ContactNets model JSON. Each case takes a real file (the shipped scenes, robots, tosses,
//! policy, a model), applies a few seeded mutations (byte changes, deleted or duplicated spans,
//! numbers swapped for extreme values, truncation) and loads it. A case passes when the loader
//! returns without panicking or hanging and either accepts the input or rejects it with an error
//! that names the file; a scene that loads is also stepped, which must report a status, not panic.
//!
//! Cases per format: `CONTACTLAB_FUZZ_CASES` (default 1500, about a minute in all in the dev
//! profile; the README reports a 10 000-case run).

use contactlab::learn::contactnets::data::parse_toss;
use contactlab::learn::contactnets::train::{init_model, TrainSettings};
use contactlab::learn::contactnets::{self, Body};
use contactlab::learn::Policy;
use contactlab::model::urdf::{load_str, RootJoint};
use contactlab::scene::Scene;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> usize {
    std::env::var("CONTACTLAB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1500)
}

/// A case slower than this counts as a hang.
const HANG: Duration = Duration::from_secs(5);

const EXTREMES: [&str; 10] = ["1e308", "-1e308", "NaN", "inf", "-0.0", "1e-320", "0", "-1", "99999999999999999999", ""];

/// A few seeded mutations of `text`.
fn mutate(text: &str, rng: &mut ChaCha8Rng) -> String {
    let mut b = text.as_bytes().to_vec();
    for _ in 0..rng.random_range(1..4) {
        if b.is_empty() {
            break;
        }
        let i = rng.random_range(0..b.len());
        match rng.random_range(0..6) {
            0 => {
                const CHARS: &[u8] = b" (){}[],:;\"'0123456789.-eE\nxyz_*#";
                b[i] = CHARS[rng.random_range(0..CHARS.len())];
            }
            1 => {
                let j = (i + rng.random_range(1..40)).min(b.len());
                b.drain(i..j);
            }
            2 => {
                let j = (i + rng.random_range(1..40)).min(b.len());
                let span = b[i..j].to_vec();
                b.splice(i..i, span);
            }
            3 => b.truncate(i),
            _ => {
                // Replace the number that starts at or after i by an extreme value.
                let Some(s) = (i..b.len()).find(|&k| b[k].is_ascii_digit()) else { continue };
                let e = (s..b.len()).find(|&k| !(b[k].is_ascii_digit() || b".eE-+".contains(&b[k]))).unwrap_or(b.len());
                let v = EXTREMES[rng.random_range(0..EXTREMES.len())].as_bytes().to_vec();
                b.splice(s..e, v);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// Runs `cases()` mutations of the corpus through `load`, which returns `Err(message)` for a
/// rejected input; checks no panic, no hang, and every message names `file`.
fn fuzz(format: &str, corpus: &[String], file: &str, mut load: impl FnMut(&str) -> Result<(), String>) {
    assert!(!corpus.is_empty(), "{format}: empty corpus");
    let mut rng = ChaCha8Rng::seed_from_u64(format.bytes().map(u64::from).sum());
    let (mut accepted, mut rejected, mut slowest) = (0, 0, Duration::ZERO);
    for case in 0..cases() {
        let input = mutate(&corpus[case % corpus.len()], &mut rng);
        let started = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| load(&input)));
        let took = started.elapsed();
        slowest = slowest.max(took);
        match r {
            Err(_) => panic!("{format} case {case}: the loader panicked on\n{input}"),
            Ok(Ok(())) => accepted += 1,
            Ok(Err(message)) => {
                assert!(message.contains(file), "{format} case {case}: the error does not name {file}: {message}");
                rejected += 1;
            }
        }
        assert!(took < HANG, "{format} case {case}: took {took:?}:\n{input}");
    }
    eprintln!("{format}: {} cases, {accepted} accepted, {rejected} rejected, slowest {slowest:?}", cases());
}

fn read_all(paths: impl IntoIterator<Item = PathBuf>) -> Vec<String> {
    paths.into_iter().map(|p| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).collect()
}

fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn scene_files() {
    // Scenes with URDF robots resolve paths relative to the file: parse them as if in scenes/.
    let corpus = read_all(files_in(&root().join("scenes"), "ron"));
    let path = root().join("scenes/fuzz_case.ron");
    fuzz("scene", &corpus, "fuzz_case.ron", |text| match Scene::from_str(text, &path) {
        Err(e) => Err(e.to_string()),
        Ok(scene) => {
            let mut sim = scene.simulation();
            for _ in 0..5 {
                let _ = sim.step();
            }
            assert!(sim.q.iter().chain(sim.v.iter()).all(|x| x.is_finite()), "a step left a non-finite state");
            Ok(())
        }
    });
}

#[test]
fn urdf_files() {
    let mut paths = files_in(&root().join("assets/robots"), "urdf");
    paths.extend(files_in(&root().join("../shared/fixtures/rbd/urdf"), "urdf"));
    let corpus = read_all(paths);
    let path = Path::new("fuzz_case.urdf");
    fuzz("urdf", &corpus, "fuzz_case.urdf", |text| {
        load_str(text, path, RootJoint::FreeFlyer).map(|_| ()).map_err(|e| e.to_string())
    });
}

#[test]
fn toss_csv_files() {
    let corpus = read_all(files_in(&root().join("../shared/data/cube_tosses"), "csv").into_iter().take(4));
    let path = Path::new("fuzz_case.csv");
    fuzz("toss csv", &corpus, "fuzz_case.csv", |text| parse_toss(text, path).map(|_| ()).map_err(|e| e.to_string()));
}

#[test]
fn policy_files() {
    let corpus = read_all([root().join("assets/policies/stand_bptt_relaxed.json")]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz_case.json");
    fuzz("policy json", &corpus, "fuzz_case.json", |text| {
        std::fs::write(&path, text).unwrap();
        Policy::load(&path).map(|_| ()).map_err(|e| e.to_string())
    });
}

#[test]
fn contactnets_model_files() {
    let body = Body::load(&root().join("../shared/data/cube_tosses/params.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut corpus = Vec::new();
    for method in [contactnets::Method::Poly, contactnets::Method::E2e] {
        let m = init_model(&body, &TrainSettings { method, ..TrainSettings::default() });
        let p = dir.path().join("seed.json");
        m.save(&p).unwrap();
        corpus.push(std::fs::read_to_string(&p).unwrap());
    }
    let path = dir.path().join("fuzz_case.json");
    fuzz("contactnets model json", &corpus, "fuzz_case.json", |text| {
        std::fs::write(&path, text).unwrap();
        contactnets::load(&path).map(|_| ()).map_err(|e| e.to_string())
    });
}
