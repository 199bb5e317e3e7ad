//! `contactlab check-dynamics`: the rigid-body algorithms against Pinocchio reference values
//! ([`contactlab::dynamics::reference`]).

use anyhow::{bail, Result};
use contactlab::dynamics::reference;
use contactlab::model::urdf::{self, RootJoint};
use std::path::PathBuf;

pub fn check(urdf_path: PathBuf, fixture: PathBuf, tolerance: f64) -> Result<()> {
    let loaded = urdf::load(&urdf_path, RootJoint::FreeFlyer)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let report = reference::check(&loaded.model, &fixture)?;
    println!("{} samples from {}", report.samples, fixture.display());
    println!("{:<12} {:>12}", "quantity", "max rel err");
    for (name, err) in &report.errors {
        println!("{name:<12} {err:>12.3e}");
    }
    println!("{:<12} {:>12.3e}", "aba(rnea(a))", report.aba_rnea_roundtrip);
    if report.max_error() > tolerance {
        bail!("max relative error {:.3e} exceeds {tolerance:e}", report.max_error());
    }
    println!("ok: all within {tolerance:e}");
    Ok(())
}
