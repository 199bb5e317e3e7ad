//! placeholder with the agreed API; replaced by the real solver.
#![allow(unused)]
use nalgebra::DMatrixView;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub tolerance: f64,
    pub max_iterations: usize,
}
impl Default for Settings {
    fn default() -> Self {
        Self {
            tolerance: 1e-8,
            max_iterations: 60,
        }
    }
}
#[derive(Debug, thiserror::Error)]
#[error("bad {0}")]
pub struct SettingsError(pub String);
impl Settings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        Ok(())
    }
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Converged,
    MaxIterations,
    NonFinite,
    LinearSolveFailed,
}
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Info {
    pub status: Status,
    pub iterations: usize,
    pub residual: f64,
    pub complementarity: f64,
    pub cone_margin: f64,
    pub min_iterate_cone_margin: f64,
    pub kappa: f64,
    pub warm_started: bool,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContactMode {
    Separated,
    Sticking,
    Sliding,
}
#[derive(Clone, Debug)]
pub struct ContactSolver {}
impl ContactSolver {
    pub fn new(max_contacts: usize) -> Self {
        Self {}
    }
    pub fn solve(
        &mut self,
        settings: &Settings,
        g: DMatrixView<f64>,
        b: &[f64],
        mu: &[f64],
        warm: Option<&[f64]>,
        lambda: &mut [f64],
        w: &mut [f64],
    ) -> Info {
        todo!()
    }
}
pub fn classify(lambda_i: &[f64], w_i: &[f64], mu: f64, settings: &Settings) -> ContactMode {
    todo!()
}
impl Info {
    pub fn not_run() -> Self {
        todo!()
    }
}
