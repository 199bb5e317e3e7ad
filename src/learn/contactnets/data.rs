//! Trajectory CSVs in the cube-toss format, their validation, duplicate detection and seeded
//! train / validation / test splits.
//!
//! A toss file has the header `t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz`: position of the centre
//! (world, scaled units), unit quaternion body -> world with the real part first, linear
//! velocity (world) and angular velocity (body). Every value must be finite and every quaternion
//! within `1e-3` of unit norm (it is then re-normalized). Errors name the file, the line and the
//! field.
//!
//! **Duplicates.** Some recordings were processed twice with a different random yaw about the
//! world z axis: same `z(t)` and body angular velocity. They are detected from the content (same
//! length, `pz` and `w` equal to `1e-9` at every frame), not from a list, so any folder is
//! handled; on `../shared/data/cube_tosses` this finds exactly the 22 pairs its README lists
//! (tests/contactnets.rs). A split shuffles *groups* of duplicates with a seeded ChaCha8 RNG,
//! so both members of a pair always land on the same side.

use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3, Vector6};
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The expected CSV header.
pub const COLUMNS: [&str; 14] = ["t", "px", "py", "pz", "qw", "qx", "qy", "qz", "vx", "vy", "vz", "wx", "wy", "wz"];

/// Largest accepted deviation of a quaternion's norm from 1.
pub const QUATERNION_TOLERANCE: f64 = 1e-3;

#[derive(Debug, Error)]
pub enum DataError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:1: header: column {column} is `{found}`, expected `{expected}` (header must be {})", COLUMNS.join(","))]
    BadColumn { path: PathBuf, column: usize, found: String, expected: &'static str },
    #[error("{path}:{line}: expected {expected} fields, found {found}")]
    FieldCount { path: PathBuf, line: usize, expected: usize, found: usize },
    #[error("{path}:{line}: {field}: {message}")]
    BadValue { path: PathBuf, line: usize, field: &'static str, message: String },
    #[error("{path}:{line}: qw,qx,qy,qz: quaternion norm {norm} differs from 1 by more than {QUATERNION_TOLERANCE}")]
    Quaternion { path: PathBuf, line: usize, norm: f64 },
    #[error("{path}: {frames} frame(s), need at least 2")]
    TooShort { path: PathBuf, frames: usize },
    #[error("{path}: no toss CSV files (*.csv)")]
    Empty { path: PathBuf },
    #[error("{path}: {field}: {message}")]
    Params { path: PathBuf, field: String, message: String },
}

/// One motion-capture frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    /// Time (s).
    pub t: f64,
    /// Centre position in the world (scaled units).
    pub p: Vector3<f64>,
    /// Orientation, body -> world.
    pub q: UnitQuaternion<f64>,
    /// Linear velocity of the centre in the world (scaled units / s).
    pub v: Vector3<f64>,
    /// Angular velocity in the body frame (rad / s).
    pub w: Vector3<f64>,
}

impl Frame {
    /// Generalized velocity `nu = (v_world, w_body)`.
    pub fn nu(&self) -> Vector6<f64> {
        Vector6::new(self.v.x, self.v.y, self.v.z, self.w.x, self.w.y, self.w.z)
    }
}

/// One trajectory file.
#[derive(Clone, Debug)]
pub struct Toss {
    /// File stem, e.g. `toss_042`.
    pub name: String,
    pub path: PathBuf,
    pub frames: Vec<Frame>,
}

/// One observed step `(q, nu) -> (q', nu')` in the form the loss needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    /// Rotation body -> world at the start and at the end of the step.
    pub r0: Matrix3<f64>,
    pub r1: Matrix3<f64>,
    /// Centre height at the start and at the end.
    pub pz0: f64,
    pub pz1: f64,
    /// Generalized velocities `(v_world, w_body)` at the start and at the end.
    pub nu0: Vector6<f64>,
    pub nu1: Vector6<f64>,
}

impl Transition {
    pub fn new(a: &Frame, b: &Frame) -> Self {
        Self {
            r0: *a.q.to_rotation_matrix().matrix(),
            r1: *b.q.to_rotation_matrix().matrix(),
            pz0: a.p.z,
            pz1: b.p.z,
            nu0: a.nu(),
            nu1: b.nu(),
        }
    }
}

/// Physical constants of the tossed body and the data (`params.json`), scaled units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Body {
    /// Time step (s).
    pub dt: f64,
    /// Gravity magnitude (scaled units / s^2), along world -z.
    pub g: f64,
    pub mass: f64,
    /// Isotropic rotational inertia (scaled units).
    pub inertia: f64,
    /// Friction coefficient of the ground-truth model.
    pub mu: f64,
    /// The true corners (body frame, scaled units).
    pub vertices: Vec<[f64; 3]>,
    /// Half width of the block in metres (the length unit).
    pub block_half_width_m: f64,
}

impl Default for Body {
    /// The acrylic cube of `../shared/data/cube_tosses/params.json`.
    fn default() -> Self {
        let mut vertices = Vec::with_capacity(8);
        for i in 0..8 {
            let s = |b: usize| if i >> (2 - b) & 1 == 1 { 1.0 } else { -1.0 };
            vertices.push([s(0), s(1), s(2)]);
        }
        Self {
            dt: 1.0 / 148.0,
            g: 9.81 / 0.0524,
            mass: 0.37,
            inertia: 0.00081 / (0.0524 * 0.0524),
            mu: 0.18,
            vertices,
            block_half_width_m: 0.0524,
        }
    }
}

impl Body {
    /// Full block width in scaled units (2: the corners are at +-1); metrics are in % of it.
    pub fn block_width(&self) -> f64 {
        2.0
    }

    /// Diagonal of `M = diag(m I3, I I3)`.
    pub fn mass_diag(&self) -> Vector6<f64> {
        let (m, i) = (self.mass, self.inertia);
        Vector6::new(m, m, m, i, i, i)
    }

    /// Reads `params.json` (the fields `dt, g, mass, inertia, mu, vertices`; the half width
    /// defaults to 0.0524 m).
    pub fn load(path: &Path) -> Result<Body, DataError> {
        let text = std::fs::read_to_string(path).map_err(|source| DataError::Io { path: path.into(), source })?;
        #[derive(Deserialize)]
        struct Raw {
            dt: f64,
            g: f64,
            mass: f64,
            inertia: f64,
            mu: f64,
            vertices: Vec<[f64; 3]>,
            #[serde(default = "half_width")]
            block_half_width_m: f64,
        }
        fn half_width() -> f64 {
            0.0524
        }
        let de = &mut serde_json::Deserializer::from_str(&text);
        let raw: Raw = serde_path_to_error::deserialize(de).map_err(|e| DataError::Params {
            path: path.into(),
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        let b = Body {
            dt: raw.dt,
            g: raw.g,
            mass: raw.mass,
            inertia: raw.inertia,
            mu: raw.mu,
            vertices: raw.vertices,
            block_half_width_m: raw.block_half_width_m,
        };
        b.validate().map_err(|(field, message)| DataError::Params {
            path: path.into(),
            field: field.into(),
            message,
        })?;
        Ok(b)
    }

    /// Checks every constant is finite and in range; returns the field and what is wrong.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let pos = |name: &'static str, x: f64| {
            if x.is_finite() && x > 0.0 {
                Ok(())
            } else {
                Err((name, format!("must be finite and > 0, got {x}")))
            }
        };
        pos("dt", self.dt)?;
        pos("g", self.g)?;
        pos("mass", self.mass)?;
        pos("inertia", self.inertia)?;
        pos("block_half_width_m", self.block_half_width_m)?;
        if !(self.mu.is_finite() && self.mu >= 0.0) {
            return Err(("mu", format!("must be finite and >= 0, got {}", self.mu)));
        }
        if self.vertices.is_empty() || !self.vertices.iter().flatten().all(|x| x.is_finite()) {
            return Err(("vertices", "must be a non-empty list of finite [x, y, z]".into()));
        }
        Ok(())
    }
}

/// Reads and validates one toss CSV.
pub fn load_toss(path: &Path) -> Result<Toss, DataError> {
    let text = std::fs::read_to_string(path).map_err(|source| DataError::Io { path: path.into(), source })?;
    parse_toss(&text, path)
}

/// Parses a toss CSV held in memory; `path` only names it in errors.
pub fn parse_toss(text: &str, path: &Path) -> Result<Toss, DataError> {
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, l)| l).unwrap_or("");
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    for (c, expected) in COLUMNS.iter().enumerate() {
        let found = names.get(c).copied().unwrap_or("");
        if found != *expected {
            return Err(DataError::BadColumn { path: path.into(), column: c + 1, found: found.into(), expected });
        }
    }
    if names.len() != COLUMNS.len() {
        return Err(DataError::BadColumn {
            path: path.into(),
            column: COLUMNS.len() + 1,
            found: names[COLUMNS.len()].into(),
            expected: "end of line",
        });
    }
    let mut frames = Vec::new();
    for (i, line) in lines {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != COLUMNS.len() {
            return Err(DataError::FieldCount {
                path: path.into(),
                line: line_no,
                expected: COLUMNS.len(),
                found: fields.len(),
            });
        }
        let mut x = [0.0; 14];
        for (c, f) in fields.iter().enumerate() {
            let bad =
                |message: String| DataError::BadValue { path: path.into(), line: line_no, field: COLUMNS[c], message };
            let v: f64 = f.trim().parse().map_err(|_| bad(format!("`{}` is not a number", f.trim())))?;
            if !v.is_finite() {
                return Err(bad(format!("{v} is not finite")));
            }
            x[c] = v;
        }
        let quat = Quaternion::new(x[4], x[5], x[6], x[7]);
        let norm = quat.norm();
        if (norm - 1.0).abs() > QUATERNION_TOLERANCE {
            return Err(DataError::Quaternion { path: path.into(), line: line_no, norm });
        }
        frames.push(Frame {
            t: x[0],
            p: Vector3::new(x[1], x[2], x[3]),
            q: UnitQuaternion::from_quaternion(quat),
            v: Vector3::new(x[8], x[9], x[10]),
            w: Vector3::new(x[11], x[12], x[13]),
        });
    }
    if frames.len() < 2 {
        return Err(DataError::TooShort { path: path.into(), frames: frames.len() });
    }
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Toss { name, path: path.into(), frames })
}

/// A folder of tosses, sorted by file name, with the body constants and duplicate groups.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub dir: PathBuf,
    pub tosses: Vec<Toss>,
    /// From `DIR/params.json` when present, else [`Body::default`].
    pub body: Body,
    /// Groups of toss indices that are the same recording (singletons included), each sorted,
    /// ordered by their first member.
    pub groups: Vec<Vec<usize>>,
}

impl Dataset {
    /// Loads every `*.csv` of `dir` (sorted by name) and `params.json` if present.
    pub fn load(dir: &Path) -> Result<Dataset, DataError> {
        let entries = std::fs::read_dir(dir).map_err(|source| DataError::Io { path: dir.into(), source })?;
        let mut paths = Vec::new();
        for e in entries {
            let e = e.map_err(|source| DataError::Io { path: dir.into(), source })?;
            let p = e.path();
            if p.extension().is_some_and(|x| x == "csv") {
                paths.push(p);
            }
        }
        if paths.is_empty() {
            return Err(DataError::Empty { path: dir.into() });
        }
        paths.sort();
        let tosses = paths.iter().map(|p| load_toss(p)).collect::<Result<Vec<_>, _>>()?;
        let params = dir.join("params.json");
        let body = if params.exists() { Body::load(&params)? } else { Body::default() };
        Ok(Self::from_tosses(dir.into(), tosses, body))
    }

    pub fn from_tosses(dir: PathBuf, tosses: Vec<Toss>, body: Body) -> Dataset {
        let groups = duplicate_groups(&tosses);
        Dataset { dir, tosses, body, groups }
    }

    /// Pairs `(i, j)`, `i < j`, of tosses detected as the same recording.
    pub fn duplicate_pairs(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for g in &self.groups {
            for a in 0..g.len() {
                for b in a + 1..g.len() {
                    out.push((g[a], g[b]));
                }
            }
        }
        out
    }

    /// The transitions of the given tosses, in order.
    pub fn transitions(&self, tosses: &[usize]) -> Vec<Transition> {
        tosses.iter().flat_map(|&i| self.tosses[i].frames.windows(2).map(|w| Transition::new(&w[0], &w[1]))).collect()
    }
}

/// Whether two tosses are the same recording up to a yaw: same length, same `pz(t)` and body
/// angular velocity.
fn same_recording(a: &Toss, b: &Toss) -> bool {
    a.frames.len() == b.frames.len()
        && a.frames.iter().zip(&b.frames).all(|(x, y)| (x.p.z - y.p.z).abs() < 1e-9 && (x.w - y.w).norm() < 1e-9)
}

fn duplicate_groups(tosses: &[Toss]) -> Vec<Vec<usize>> {
    // Bucket by length and the first frame's height so the pairwise check stays near linear.
    let mut buckets: HashMap<(usize, i64), Vec<usize>> = HashMap::new();
    for (i, t) in tosses.iter().enumerate() {
        let key = (t.frames.len(), (t.frames[0].p.z * 1e6).round() as i64);
        buckets.entry(key).or_default().push(i);
    }
    let mut group_of: Vec<usize> = (0..tosses.len()).collect();
    for members in buckets.values() {
        for a in 0..members.len() {
            for b in a + 1..members.len() {
                let (i, j) = (members[a], members[b]);
                if same_recording(&tosses[i], &tosses[j]) {
                    let (gi, gj) = (group_of[i], group_of[j]);
                    let g = gi.min(gj);
                    for x in group_of.iter_mut() {
                        if *x == gi || *x == gj {
                            *x = g;
                        }
                    }
                }
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = vec![];
    let mut index: HashMap<usize, usize> = HashMap::new();
    for (i, &g) in group_of.iter().enumerate() {
        let k = *index.entry(g).or_insert_with(|| {
            groups.push(vec![]);
            groups.len() - 1
        });
        groups[k].push(i);
    }
    groups
}

/// How to split a dataset.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitSettings {
    /// Seed of the group shuffle. Default 0.
    pub seed: u64,
    /// Fraction of the tosses in the test split. Default 0.2.
    pub test_fraction: f64,
    /// Fraction of the tosses in the validation split. Default 0.1.
    pub valid_fraction: f64,
}

impl Default for SplitSettings {
    fn default() -> Self {
        Self { seed: 0, test_fraction: 0.2, valid_fraction: 0.1 }
    }
}

impl SplitSettings {
    pub fn validate(&self) -> Result<(), crate::validate::SettingsError> {
        let in_range = |x: f64| (0.0..1.0).contains(&x);
        crate::validate::Checker::new("SplitSettings")
            .check(in_range(self.test_fraction), "test_fraction", || {
                format!("{} is out of range: allowed [0, 1)", self.test_fraction)
            })
            .check(in_range(self.valid_fraction), "valid_fraction", || {
                format!("{} is out of range: allowed [0, 1)", self.valid_fraction)
            })
            .check(self.test_fraction + self.valid_fraction < 1.0, "valid_fraction", || {
                format!("test_fraction + valid_fraction = {} must be below 1", self.test_fraction + self.valid_fraction)
            })
            .finish()
    }
}

/// Toss indices of the three splits, each in shuffled order (so the first `N` training tosses
/// are a seeded random choice).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Split {
    pub train: Vec<usize>,
    pub valid: Vec<usize>,
    pub test: Vec<usize>,
}

impl Split {
    /// The tosses of a run on `n` training tosses: the first `n` of the training split and,
    /// for early stopping, the first `max(1, ceil(n / 4))` of the validation split (all of them
    /// if it is smaller). `None` unless `1 <= n <= train.len()`.
    pub fn first(&self, n: usize) -> Option<(&[usize], &[usize])> {
        if n == 0 || n > self.train.len() {
            return None;
        }
        let nv = n.div_ceil(4).max(1).min(self.valid.len());
        Some((&self.train[..n], &self.valid[..nv]))
    }
}

/// Shuffles the duplicate groups with the seed and deals them into test, validation and train
/// (in that order) until each of the first two holds its fraction of the tosses.
pub fn split(data: &Dataset, settings: &SplitSettings) -> Split {
    let mut groups = data.groups.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed);
    groups.shuffle(&mut rng);
    let n = data.tosses.len() as f64;
    let (n_test, n_valid) =
        ((settings.test_fraction * n).round() as usize, (settings.valid_fraction * n).round() as usize);
    let mut s = Split { train: vec![], valid: vec![], test: vec![] };
    for g in groups {
        let side = if s.test.len() < n_test {
            &mut s.test
        } else if s.valid.len() < n_valid {
            &mut s.valid
        } else {
            &mut s.train
        };
        side.extend(g);
    }
    s
}
