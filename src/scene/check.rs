//! `deserialize_with` validators: a bad value fails while the RON parser still knows where it
//! is, so the error carries the line and column of the value, and `serde_path_to_error` adds
//! the field path.

use serde::de::Error;
use serde::{Deserialize, Deserializer};

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
    check(d, |x| x.is_finite() && x > 0.0 && x <= 0.1, "(0, 0.1] s")
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
    if g.iter().flatten().any(|x| !x.is_finite()) {
        return Err(D::Error::custom("heights must be finite"));
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
