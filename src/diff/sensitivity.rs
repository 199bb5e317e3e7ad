//! Which contact sensitivity the backward step uses (DESIGN 3), named and parsed in one place.
//!
//! * `exact`: differentiate the realized contact modes (DESIGN 3.1);
//! * `signorini`: the normal complementarity relaxed to `l_n w_n = kappa`, friction per the
//!   forward mode (DESIGN 3.2);
//! * `relaxed`: our relaxed contact sensitivity, the central path of the whole cone
//!   complementarity at `kappa` with the normal free-contact term shifted by `delta`
//!   (DESIGN 3.3; `diff::transition` says how the code realizes it).
//!
//! Text form (command lines, result files, [`std::str::FromStr`] and serde):
//! `exact`, `signorini`, `signorini(kappa=1e-3)`, `relaxed`, `relaxed(kappa=1e-4, delta=1e-3)`;
//! a missing parameter takes its default ([`DEFAULT_KAPPA`], [`DEFAULT_DELTA`]). An unknown
//! name or parameter is an error everywhere.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Default relaxation `kappa` of the relaxed sensitivities (N s * m/s): about `1e-3` of
/// `(impulse per contact) x (velocity scale)` of a standing quadruped at 10 ms steps.
pub const DEFAULT_KAPPA: f64 = 1e-4;
/// Default normal shift `delta` of the relaxed sensitivity (m/s).
pub const DEFAULT_DELTA: f64 = 1e-3;

/// Which contact sensitivity the backward step uses (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sensitivity {
    /// Differentiate the realized modes (DESIGN 3.1).
    Exact,
    /// Normal complementarity relaxed to `l_n w_n = kappa` (N s * m/s), friction per the
    /// forward mode (DESIGN 3.2).
    SignoriniRelaxed { kappa: f64 },
    /// Central-path relaxation `lambda_i o w_hat_i = kappa e` of the whole cone
    /// complementarity (kappa in N s * m/s), with the normal free-contact term shifted by
    /// `delta >= 0` (m/s) (DESIGN 3.3). The sweep scenes document their choices.
    Relaxed { kappa: f64, delta: f64 },
}

/// Serde default of a settings struct's `kappa` field: [`DEFAULT_KAPPA`].
pub fn default_kappa() -> f64 {
    DEFAULT_KAPPA
}

/// Serde default of a settings struct's `delta` field: [`DEFAULT_DELTA`].
pub fn default_delta() -> f64 {
    DEFAULT_DELTA
}

/// The family of a sensitivity, without its parameters (what a settings file names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SensitivityKind {
    Exact,
    Signorini,
    #[default]
    Relaxed,
}

/// A sensitivity name or parameter that does not parse, or a parameter out of range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SensitivityError(pub String);

impl SensitivityKind {
    pub const ALL: [SensitivityKind; 3] =
        [SensitivityKind::Exact, SensitivityKind::Signorini, SensitivityKind::Relaxed];

    pub fn name(self) -> &'static str {
        match self {
            SensitivityKind::Exact => "exact",
            SensitivityKind::Signorini => "signorini",
            SensitivityKind::Relaxed => "relaxed",
        }
    }

    /// The sensitivity of this family with `kappa` and `delta` (each used where it applies).
    pub fn with(self, kappa: f64, delta: f64) -> Sensitivity {
        match self {
            SensitivityKind::Exact => Sensitivity::Exact,
            SensitivityKind::Signorini => Sensitivity::SignoriniRelaxed { kappa },
            SensitivityKind::Relaxed => Sensitivity::Relaxed { kappa, delta },
        }
    }

    /// `all` or a comma-separated list of names, in the order given (`all`: exact, signorini,
    /// relaxed).
    pub fn parse_list(text: &str) -> Result<Vec<SensitivityKind>, SensitivityError> {
        let mut out = Vec::new();
        for name in text.split(',').map(str::trim) {
            if name == "all" {
                out.extend(Self::ALL);
            } else {
                out.push(name.parse()?);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for SensitivityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SensitivityKind {
    type Err = SensitivityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "exact" => Ok(SensitivityKind::Exact),
            "signorini" => Ok(SensitivityKind::Signorini),
            "relaxed" => Ok(SensitivityKind::Relaxed),
            other => {
                Err(SensitivityError(format!("unknown sensitivity `{other}`: expected exact, signorini or relaxed")))
            }
        }
    }
}

impl Serialize for SensitivityKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for SensitivityKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Default for Sensitivity {
    /// The relaxed sensitivity with the default parameters.
    fn default() -> Self {
        Sensitivity::Relaxed { kappa: DEFAULT_KAPPA, delta: DEFAULT_DELTA }
    }
}

impl Sensitivity {
    /// A checked sensitivity: `kappa > 0` and `delta >= 0`, both finite, where they apply.
    pub fn new(kind: SensitivityKind, kappa: f64, delta: f64) -> Result<Sensitivity, SensitivityError> {
        let s = kind.with(kappa, delta);
        s.check()?;
        Ok(s)
    }

    pub fn kind(&self) -> SensitivityKind {
        match self {
            Sensitivity::Exact => SensitivityKind::Exact,
            Sensitivity::SignoriniRelaxed { .. } => SensitivityKind::Signorini,
            Sensitivity::Relaxed { .. } => SensitivityKind::Relaxed,
        }
    }

    /// `exact`, `signorini` or `relaxed` (file and table names).
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// `kappa` and `delta` in range (module docs).
    pub fn check(&self) -> Result<(), SensitivityError> {
        let (kappa, delta) = match *self {
            Sensitivity::Exact => return Ok(()),
            Sensitivity::SignoriniRelaxed { kappa } => (kappa, 0.0),
            Sensitivity::Relaxed { kappa, delta } => (kappa, delta),
        };
        if !(kappa.is_finite() && kappa > 0.0) {
            return Err(SensitivityError(format!("kappa {kappa} is out of range: allowed (0, inf)")));
        }
        if !(delta.is_finite() && delta >= 0.0) {
            return Err(SensitivityError(format!("delta {delta} is out of range: allowed [0, inf)")));
        }
        Ok(())
    }

    /// Writes this sensitivity into the `(sensitivity, kappa, delta)` fields a settings struct
    /// carries (a file names the family and its parameters separately); a parameter the family
    /// does not have keeps its value.
    pub fn store(self, kind: &mut SensitivityKind, kappa: &mut f64, delta: &mut f64) {
        *kind = self.kind();
        match self {
            Sensitivity::Exact => {}
            Sensitivity::SignoriniRelaxed { kappa: k } => *kappa = k,
            Sensitivity::Relaxed { kappa: k, delta: d } => (*kappa, *delta) = (k, d),
        }
    }

    /// What to try, in order, when this sensitivity's linear system fails at a knot (an exact
    /// sliding system at a vanishing slip, a relaxed Newton solve that broke down): the other
    /// family at the default parameters, then a strongly relaxed one. Callers count the
    /// knots that took a fallback.
    pub fn fallbacks(&self) -> [Sensitivity; 2] {
        let other = match self {
            Sensitivity::Exact => Sensitivity::default(),
            _ => Sensitivity::Exact,
        };
        [other, Sensitivity::Relaxed { kappa: 1e-2, delta: 1e-2 }]
    }
}

impl fmt::Display for Sensitivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sensitivity::Exact => write!(f, "exact"),
            Sensitivity::SignoriniRelaxed { kappa } => write!(f, "signorini(kappa={kappa:e})"),
            Sensitivity::Relaxed { kappa, delta } => write!(f, "relaxed(kappa={kappa:e}, delta={delta:e})"),
        }
    }
}

impl FromStr for Sensitivity {
    type Err = SensitivityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, params) = match s.find('(') {
            Some(i) => {
                let inner = s[i + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| SensitivityError(format!("`{s}`: expected name(kappa=.., delta=..)")))?;
                (&s[..i], inner)
            }
            None => (s, ""),
        };
        let kind: SensitivityKind = name.parse()?;
        let (mut kappa, mut delta) = (DEFAULT_KAPPA, DEFAULT_DELTA);
        for item in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| SensitivityError(format!("`{item}` in `{s}`: expected key=value")))?;
            let value: f64 =
                value.trim().parse().map_err(|_| SensitivityError(format!("`{item}` in `{s}`: not a number")))?;
            match (key.trim(), kind) {
                ("kappa", SensitivityKind::Signorini | SensitivityKind::Relaxed) => kappa = value,
                ("delta", SensitivityKind::Relaxed) => delta = value,
                (key, _) => return Err(SensitivityError(format!("`{key}` is not a parameter of `{}`", kind.name()))),
            }
        }
        Sensitivity::new(kind, kappa, delta)
    }
}

impl Serialize for Sensitivity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Sensitivity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_defaults_apply() {
        for s in [
            Sensitivity::Exact,
            Sensitivity::SignoriniRelaxed { kappa: 1e-3 },
            Sensitivity::Relaxed { kappa: 2.5e-4, delta: 0.0 },
        ] {
            assert_eq!(s.to_string().parse::<Sensitivity>().unwrap(), s);
        }
        assert_eq!("relaxed".parse::<Sensitivity>().unwrap(), Sensitivity::default());
        assert_eq!("signorini".parse::<Sensitivity>().unwrap(), Sensitivity::SignoriniRelaxed { kappa: DEFAULT_KAPPA });
        assert_eq!(
            "relaxed(delta=0.01)".parse::<Sensitivity>().unwrap(),
            Sensitivity::Relaxed { kappa: DEFAULT_KAPPA, delta: 0.01 }
        );
    }

    #[test]
    fn unknown_names_and_bad_parameters_are_errors() {
        assert!("Exact ".parse::<Sensitivity>().is_err());
        assert!("exactt".parse::<SensitivityKind>().is_err());
        assert!("relaxed(kappa=0)".parse::<Sensitivity>().is_err());
        assert!("relaxed(delta=-1)".parse::<Sensitivity>().is_err());
        assert!("signorini(delta=1)".parse::<Sensitivity>().is_err());
        assert!("exact(kappa=1)".parse::<Sensitivity>().is_err());
        assert!(SensitivityKind::parse_list("exact,foo").is_err());
        assert_eq!(SensitivityKind::parse_list("all").unwrap(), SensitivityKind::ALL.to_vec());
    }
}
