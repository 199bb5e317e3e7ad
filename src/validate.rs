//! Range checks every layer may use: the typed [`SettingsError`] that each `Settings::validate`
//! returns, and the `deserialize_with` validators that the same structs use when they are read
//! from a file (a bad value fails while the parser still knows where it is, so the error carries
//! the line and column of the value, and `serde_path_to_error` adds the field path).
//!
//! This module is a leaf: it imports nothing from the crate, so the core can check its settings
//! without knowing about scene files.

use serde::de::Error;
use serde::{Deserialize, Deserializer};

/// Time steps (simulation `dt`, knot steps) allowed: `[1e-6, 0.1]` s. Below a microsecond a
/// step is not physics but a typo (`2e-12` asks for about 1e12 steps a simulated second), and
/// every count derived from it (steps of a run, knots) must stay allocatable.
pub const TIME_STEP_RANGE: &str = "[1e-6, 0.1] s";

/// Whether `x` is an allowed time step ([`TIME_STEP_RANGE`]); false for NaN.
pub fn time_step_ok(x: f64) -> bool {
    (1e-6..=0.1).contains(&x)
}

/// A setting out of its allowed range: which settings struct, which field, and why.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{settings}.{field}: {message}")]
pub struct SettingsError {
    /// The settings struct, e.g. `CitoSettings`.
    pub settings: &'static str,
    /// The field path inside it, e.g. `weights.position`.
    pub field: String,
    pub message: String,
}

impl SettingsError {
    pub fn new(settings: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { settings, field: field.into(), message: message.into() }
    }

    /// The same error with its field nested under `prefix` (a struct inside another).
    pub fn within(mut self, settings: &'static str, prefix: &str) -> Self {
        self.settings = settings;
        self.field = format!("{prefix}.{}", self.field);
        self
    }
}

/// Field-by-field checks for `validate()` methods: the first failing check wins.
pub struct Checker {
    settings: &'static str,
    error: Option<SettingsError>,
}

impl Checker {
    pub fn new(settings: &'static str) -> Self {
        Self { settings, error: None }
    }

    /// Records `message` against `field` unless `ok` (or an earlier check failed).
    pub fn check(&mut self, ok: bool, field: &str, message: impl FnOnce() -> String) -> &mut Self {
        if !ok && self.error.is_none() {
            self.error = Some(SettingsError::new(self.settings, field, message()));
        }
        self
    }

    pub fn finite(&mut self, field: &str, x: f64) -> &mut Self {
        self.check(x.is_finite(), field, || format!("{x} is out of range: allowed finite numbers"))
    }

    pub fn non_negative(&mut self, field: &str, x: f64) -> &mut Self {
        self.check(x.is_finite() && x >= 0.0, field, || format!("{x} is out of range: allowed [0, inf)"))
    }

    pub fn positive(&mut self, field: &str, x: f64) -> &mut Self {
        self.check(x.is_finite() && x > 0.0, field, || format!("{x} is out of range: allowed (0, inf)"))
    }

    pub fn probability(&mut self, field: &str, x: f64) -> &mut Self {
        self.check(x.is_finite() && (0.0..=1.0).contains(&x), field, || format!("{x} is out of range: allowed [0, 1]"))
    }

    pub fn time_step(&mut self, field: &str, x: f64) -> &mut Self {
        self.check(time_step_ok(x), field, || format!("{x} is out of range: allowed {TIME_STEP_RANGE}"))
    }

    pub fn all_finite(&mut self, field: &str, x: &[f64]) -> &mut Self {
        self.check(x.iter().all(|v| v.is_finite()), field, || format!("{x:?}: each entry must be finite"))
    }

    pub fn all_non_negative(&mut self, field: &str, x: &[f64]) -> &mut Self {
        self.check(x.iter().all(|&v| v.is_finite() && v >= 0.0), field, || {
            format!("{x:?} is out of range: each entry must be in [0, inf)")
        })
    }

    /// A `[low, high]` range of non-negative numbers.
    pub fn range(&mut self, field: &str, r: [f64; 2]) -> &mut Self {
        self.all_non_negative(field, &r)
            .check(r[0] <= r[1], field, || format!("({}, {}): needs low <= high", r[0], r[1]))
    }

    /// Hidden-layer widths of a network: at least one layer, each in `[1, 1024]`.
    pub fn widths(&mut self, field: &str, w: &[usize]) -> &mut Self {
        self.check(!w.is_empty() && w.iter().all(|&n| (1..=1024).contains(&n)), field, || {
            format!("{w:?}: needs at least one layer, widths in [1, 1024]")
        })
    }

    /// An integer in `[low, high]`.
    pub fn count(&mut self, field: &str, n: usize, low: usize, high: usize) -> &mut Self {
        self.check((low..=high).contains(&n), field, || format!("{n} is out of range: allowed [{low}, {high}]"))
    }

    pub fn finish(&mut self) -> Result<(), SettingsError> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn check<'de, D: Deserializer<'de>>(d: D, ok: fn(f64) -> bool, range: &str) -> Result<f64, D::Error> {
    let x = f64::deserialize(d)?;
    if ok(x) {
        Ok(x)
    } else {
        Err(D::Error::custom(format!("{x} is out of range: allowed {range}")))
    }
}

pub fn finite<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    check(d, f64::is_finite, "finite numbers")
}

pub fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    check(d, |x| x.is_finite() && x >= 0.0, "[0, inf)")
}

pub fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    check(d, |x| x.is_finite() && x > 0.0, "(0, inf)")
}

pub fn friction<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    check(d, |x| x.is_finite() && (0.0..=10.0).contains(&x), "[0, 10]")
}

pub fn time_step<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    check(d, time_step_ok, TIME_STEP_RANGE)
}

pub fn slope<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    check(d, |x| x.is_finite() && x.abs() < 1.5, "(-1.5, 1.5) rad")
}

fn check3<'de, D: Deserializer<'de>>(d: D, ok: fn(f64) -> bool, range: &str) -> Result<[f64; 3], D::Error> {
    let x = <[f64; 3]>::deserialize(d)?;
    if x.iter().all(|&v| ok(v)) {
        Ok(x)
    } else {
        Err(D::Error::custom(format!("{x:?} is out of range: each entry must be {range}")))
    }
}

pub fn finite3<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 3], D::Error> {
    check3(d, f64::is_finite, "finite")
}

pub fn non_negative3<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 3], D::Error> {
    check3(d, |x| x.is_finite() && x >= 0.0, "in [0, inf)")
}

pub fn positive3<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 3], D::Error> {
    check3(d, |x| x.is_finite() && x > 0.0, "in (0, inf)")
}

pub fn finite_map<'de, D: Deserializer<'de>>(d: D) -> Result<std::collections::BTreeMap<String, f64>, D::Error> {
    let m = std::collections::BTreeMap::<String, f64>::deserialize(d)?;
    if let Some((k, v)) = m.iter().find(|(_, v)| !v.is_finite()) {
        return Err(D::Error::custom(format!("`{k}`: {v} is out of range: allowed finite numbers")));
    }
    Ok(m)
}

pub fn positive_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let x = Option::<f64>::deserialize(d)?;
    match x {
        Some(v) if !(v.is_finite() && v > 0.0) => {
            Err(D::Error::custom(format!("{v} is out of range: allowed (0, inf)")))
        }
        _ => Ok(x),
    }
}

pub fn height_grid<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<f64>>, D::Error> {
    let g = Vec::<Vec<f64>>::deserialize(d)?;
    if g.len() < 2 || g[0].len() < 2 || g.iter().any(|r| r.len() != g[0].len()) {
        return Err(D::Error::custom("must be at least 2 x 2 with rows of equal length"));
    }
    // Heights beyond 1000 km are no terrain; the bound also keeps differences of heights finite.
    if g.iter().flatten().any(|x| !(x.is_finite() && x.abs() <= 1e6)) {
        return Err(D::Error::custom("heights must be finite and within [-1e6, 1e6] m"));
    }
    Ok(g)
}

pub fn probability<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    check(d, |x| x.is_finite() && (0.0..=1.0).contains(&x), "[0, 1]")
}

pub fn non_negative2<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 2], D::Error> {
    let x = <[f64; 2]>::deserialize(d)?;
    if x.iter().all(|&v| v.is_finite() && v >= 0.0) {
        Ok(x)
    } else {
        Err(D::Error::custom(format!("{x:?} is out of range: each entry must be in [0, inf)")))
    }
}
