//! Per-step CSV records of a run: time, solver status and statistics, state, controls, and per
//! contact the gap, impulse and realized mode. Written through [`crate::io::AtomicFile`].

use super::{Simulation, StepInfo};
use crate::io::AtomicFile;
use crate::model::{JointKind, Model};
use std::io::Write;
use std::path::Path;

/// Column names of `q`, `v` and `u`.
pub fn state_names(model: &Model) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut q, mut v) = (Vec::new(), Vec::new());
    for j in &model.joints {
        match j.kind {
            JointKind::FreeFlyer => {
                q.extend(["x", "y", "z", "qx", "qy", "qz", "qw"].map(|s| format!("{}_{s}", j.name)));
                v.extend(["vx", "vy", "vz", "wx", "wy", "wz"].map(|s| format!("{}_{s}", j.name)));
            }
            _ => {
                q.push(format!("q_{}", j.name));
                v.push(format!("v_{}", j.name));
            }
        }
    }
    let u = model
        .actuated_dofs
        .iter()
        .map(|&d| format!("u_{}", model.joints.iter().find(|j| j.idx_v == d).map(|j| j.name.as_str()).unwrap_or("?")))
        .collect();
    (q, v, u)
}

pub struct CsvRecorder {
    file: AtomicFile,
    line: String,
}

impl CsvRecorder {
    pub fn create(path: &Path, model: &Model) -> std::io::Result<Self> {
        let mut file = AtomicFile::create(path)?;
        let (q, v, u) = state_names(model);
        let mut cols: Vec<String> =
            ["t", "status", "iterations", "residual", "cone_margin", "penetration"].map(String::from).to_vec();
        cols.extend(q);
        cols.extend(v);
        cols.extend(u);
        for c in &model.contact_points {
            cols.extend(["phi", "lambda_n", "lambda_t1", "lambda_t2", "mode"].map(|s| format!("{}_{s}", c.name)));
        }
        writeln!(file, "{}", cols.join(","))?;
        Ok(Self { file, line: String::with_capacity(4096) })
    }

    /// Appends the step just taken by `sim` (state after the step, impulses of the step).
    pub fn record(&mut self, sim: &Simulation, info: &StepInfo) -> std::io::Result<()> {
        use std::fmt::Write as _;
        let l = &mut self.line;
        l.clear();
        let _ = write!(
            l,
            "{},{:?},{},{:e},{:e},{:e}",
            sim.t, info.status, info.solver.iterations, info.solver.residual, info.solver.cone_margin, info.penetration
        );
        for x in sim.q.iter().chain(sim.v.iter()).chain(sim.u.iter()) {
            let _ = write!(l, ",{x}");
        }
        let c = &sim.ws.contacts;
        for i in 0..c.points {
            let lam = &sim.ws.lambda;
            let _ =
                write!(l, ",{},{},{},{},{:?}", c.phi[i], lam[3 * i], lam[3 * i + 1], lam[3 * i + 2], sim.ws.modes[i]);
        }
        l.push('\n');
        self.file.write_all(l.as_bytes())
    }

    pub fn finish(self) -> std::io::Result<()> {
        self.file.commit()
    }
}
