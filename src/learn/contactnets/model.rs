//! Learned models: their parameterizations, JSON files and rollouts.
//!
//! - **poly**: a polytope, the learned vertices `c_i` (body frame) as contact points, and a learned
//!   friction coefficient `mu` that scales the tangent Jacobian (see `loss`).
//! - **deep**: the polytope plus a configuration-dependent correction: a small MLP of the body-frame
//!   up axis `d = R^T e_z` gives one gap correction `delta_i(d)` per vertex, applied by moving the
//!   vertex along `d`: `c_i(q) = c_i + s delta_i(d) d`, so `phi_i(q) = p_z + c_i . d + s delta_i(d)`
//!   (because `d . d = 1`). The contact Jacobian is that of the moved point held fixed over the
//!   step (the `d delta / dq` term is left out of `J`, in the loss and in the rollout alike), which
//!   keeps the learned model a set of contact points the repo's simulator can step.
//! - **e2e**: the end-to-end baseline, an MLP regressing the velocity change
//!   `nu' - nu - dt g` from `(p_z, R, v_world, w_body)` with normalized inputs and outputs;
//!   it rolls out by feeding its own predictions and integrating the pose.
//!
//! Rollouts of poly and deep run the repo's hard-contact step ([`crate::sim::step()`]) on a free
//! rigid body with the learned vertices as contact points (radius 0), the learned `mu` as ground
//! friction, gravity `-g e_z` and the data's `dt`, all in scaled units.

use super::data::{Body, Frame};
use super::mlp::Mlp;
use crate::contact::terrain::Ground;
use crate::contact::Terrain;
use crate::model::{JointKind, JointLimits, Model, ModelBuilder, ModelError};
use crate::sim::step::{step, StepSettings, StepStatus, StepWorkspace};
use crate::spatial::{Inertia, Se3};
use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3, Vector6};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Which parameterization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Poly,
    Deep,
    E2e,
}

impl Method {
    pub fn name(&self) -> &'static str {
        match self {
            Method::Poly => "poly",
            Method::Deep => "deep",
            Method::E2e => "e2e",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "poly" => Ok(Method::Poly),
            "deep" => Ok(Method::Deep),
            "e2e" => Ok(Method::E2e),
            _ => Err(format!("unknown method `{s}`: expected poly, deep or e2e")),
        }
    }
}

/// The end-to-end network with its normalization (`x_n = (x - in_mean) / in_std`, output
/// `y = out_mean + out_std * f(x_n)`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct E2eNet {
    pub mlp: Mlp,
    pub in_mean: Vec<f64>,
    pub in_std: Vec<f64>,
    pub out_mean: Vec<f64>,
    pub out_std: Vec<f64>,
}

/// Number of e2e input features: `p_z`, `R` (row-major), `v_world`, `w_body`.
pub const E2E_INPUTS: usize = 16;

impl E2eNet {
    pub fn features(pz: f64, r: &Matrix3<f64>, nu: &Vector6<f64>) -> [f64; E2E_INPUTS] {
        let mut x = [0.0; E2E_INPUTS];
        x[0] = pz;
        for i in 0..3 {
            for j in 0..3 {
                x[1 + 3 * i + j] = r[(i, j)];
            }
        }
        for i in 0..6 {
            x[10 + i] = nu[i];
        }
        x
    }

    pub fn normalize(&self, x: &[f64]) -> Vec<f64> {
        x.iter().zip(&self.in_mean).zip(&self.in_std).map(|((x, m), s)| (x - m) / s).collect()
    }

    /// Predicted `nu' - nu - dt g`.
    pub fn predict(&self, pz: f64, r: &Matrix3<f64>, nu: &Vector6<f64>) -> Vector6<f64> {
        let y = self.mlp.eval(&self.normalize(&Self::features(pz, r, nu)));
        Vector6::from_fn(|i, _| self.out_mean[i] + self.out_std[i] * y[i])
    }
}

/// A learned model, as written to and read from its JSON file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LearnedModel {
    pub method: Method,
    /// Physical constants used in training and rollouts.
    pub body: Body,
    /// Learned vertices (body frame, scaled units); for e2e, the true ones (not learned).
    pub vertices: Vec<[f64; 3]>,
    /// Learned friction coefficient (poly, deep).
    pub mu: f64,
    /// Gap correction of the deep model: `d (3) -> delta (one per vertex)`.
    #[serde(default)]
    pub correction: Option<Mlp>,
    /// Scale `s` of the correction (scaled units).
    #[serde(default)]
    pub correction_scale: f64,
    /// The e2e network.
    #[serde(default)]
    pub e2e: Option<E2eNet>,
    /// Free-form training record (tosses, seed, steps, losses, time).
    #[serde(default)]
    pub info: serde_json::Value,
}

#[derive(Debug, Error)]
pub enum ModelFileError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}:{column}: {field}: {message}")]
    Parse { path: PathBuf, line: usize, column: usize, field: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid { path: PathBuf, field: &'static str, message: String },
}

/// Reads and validates a learned model file.
pub fn load(path: &Path) -> Result<LearnedModel, ModelFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ModelFileError::Io { path: path.into(), source })?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    let m: LearnedModel = serde_path_to_error::deserialize(de).map_err(|e| ModelFileError::Parse {
        path: path.into(),
        line: e.inner().line(),
        column: e.inner().column(),
        field: e.path().to_string(),
        message: e.inner().to_string(),
    })?;
    m.validate().map_err(|(field, message)| ModelFileError::Invalid { path: path.into(), field, message })?;
    Ok(m)
}

/// A pose of the body: centre position (world) and orientation body -> world.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    pub p: Vector3<f64>,
    pub q: UnitQuaternion<f64>,
}

#[derive(Debug, Error, PartialEq)]
pub enum RolloutError {
    #[error("step {step}: the simulator could not advance ({status:?})")]
    Step { step: usize, status: StepStatus },
    #[error("step {step}: the e2e prediction is not finite")]
    NonFinite { step: usize },
    #[error("building the rigid body: {0}")]
    Model(#[from] ModelError),
}

impl LearnedModel {
    /// The ground-truth polytope: the body's true vertices and friction.
    pub fn truth(body: &Body) -> LearnedModel {
        LearnedModel {
            method: Method::Poly,
            body: body.clone(),
            vertices: body.vertices.clone(),
            mu: body.mu,
            correction: None,
            correction_scale: 0.0,
            e2e: None,
            info: serde_json::Value::Null,
        }
    }

    /// Writes the model as pretty JSON, atomically.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        crate::io::write_atomic(path, text.as_bytes())
    }

    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        self.body.validate().map_err(|(f, m)| (f, format!("body: {m}")))?;
        if self.vertices.is_empty() || !self.vertices.iter().flatten().all(|x| x.is_finite()) {
            return Err(("vertices", "must be a non-empty list of finite [x, y, z]".into()));
        }
        if !(self.mu.is_finite() && self.mu >= 0.0) {
            return Err(("mu", format!("must be finite and >= 0, got {}", self.mu)));
        }
        match self.method {
            Method::Deep => match &self.correction {
                Some(c) if c.consistent() && c.n_in() == 3 && c.n_out() == self.vertices.len() => {}
                _ => return Err(("correction", "deep needs an MLP from 3 inputs to one output per vertex".into())),
            },
            Method::E2e => match &self.e2e {
                Some(e)
                    if e.mlp.consistent()
                        && e.mlp.n_in() == E2E_INPUTS
                        && e.mlp.n_out() == 6
                        && e.in_mean.len() == E2E_INPUTS
                        && e.in_std.len() == E2E_INPUTS
                        && e.out_mean.len() == 6
                        && e.out_std.len() == 6
                        && e.in_std.iter().chain(&e.out_std).all(|s| s.is_finite() && *s > 0.0) => {}
                _ => return Err(("e2e", "e2e needs an MLP 16 -> 6 with its normalization".into())),
            },
            Method::Poly => {}
        }
        Ok(())
    }

    /// The learned vertices in the body frame (for deep: the polytope part, before its
    /// configuration-dependent correction).
    pub fn vertices(&self) -> Vec<Vector3<f64>> {
        self.vertices.iter().map(|v| Vector3::from(*v)).collect()
    }

    /// The contact points in effect at orientation `r` (body -> world): the vertices, moved
    /// along the body-frame up axis by the deep correction.
    pub fn vertices_at(&self, r: &Matrix3<f64>) -> Vec<Vector3<f64>> {
        let mut v = self.vertices();
        if let (Method::Deep, Some(c)) = (self.method, &self.correction) {
            let d = r.row(2).transpose();
            let delta = c.eval(d.as_slice());
            for (vi, di) in v.iter_mut().zip(delta) {
                *vi += self.correction_scale * di * d;
            }
        }
        v
    }

    /// The pose trajectory from `first` for `steps` steps (`steps + 1` poses, the first one
    /// `first`'s).
    pub fn rollout(&self, first: &Frame, steps: usize) -> Result<Vec<Pose>, RolloutError> {
        Ok(self.simulate(first, steps)?.iter().map(|f| Pose { p: f.p, q: f.q }).collect())
    }

    /// Like [`LearnedModel::rollout`] with the velocities: frames in the data's format
    /// (`t` counts from `first.t`).
    pub fn simulate(&self, first: &Frame, steps: usize) -> Result<Vec<Frame>, RolloutError> {
        match self.method {
            Method::E2e => self.rollout_e2e(first, steps),
            _ => self.rollout_sim(first, steps),
        }
    }

    fn rollout_e2e(&self, first: &Frame, steps: usize) -> Result<Vec<Frame>, RolloutError> {
        let net = self.e2e.as_ref().expect("validated e2e model has its network");
        let (mut p, mut q, mut nu) = (first.p, first.q, first.nu());
        let mut out = vec![*first];
        let dt = self.body.dt;
        for k in 0..steps {
            let r = *q.to_rotation_matrix().matrix();
            let mut next = nu + net.predict(p.z, &r, &nu);
            next[2] -= dt * self.body.g;
            if !next.iter().all(|x| x.is_finite()) {
                return Err(RolloutError::NonFinite { step: k });
            }
            nu = next;
            // The data's velocities are backward differences: p' = p + dt v', R' = R exp(dt w').
            p += dt * Vector3::new(nu[0], nu[1], nu[2]);
            q *= UnitQuaternion::from_scaled_axis(dt * Vector3::new(nu[3], nu[4], nu[5]));
            out.push(Frame {
                t: first.t + (k + 1) as f64 * dt,
                p,
                q,
                v: Vector3::new(nu[0], nu[1], nu[2]),
                w: Vector3::new(nu[3], nu[4], nu[5]),
            });
        }
        Ok(out)
    }

    /// A free rigid body with the given contact points, in scaled units.
    pub fn sim_model(&self, points: &[Vector3<f64>]) -> Result<Model, ModelError> {
        let mut b = ModelBuilder::new("contactnets_body");
        let inertia = Inertia::new(self.body.mass, Vector3::zeros(), Matrix3::identity() * self.body.inertia);
        let body = b.add_body(
            "root_joint",
            JointKind::FreeFlyer,
            None,
            Se3::identity(),
            JointLimits::default(),
            "body",
            inertia,
        )?;
        for (i, c) in points.iter().enumerate() {
            b.add_contact_point(format!("vertex_{i}"), body, *c, 0.0)?;
        }
        b.set_gravity(Vector3::new(0.0, 0.0, -self.body.g));
        b.build()
    }

    /// The terrain and step settings of rollouts: ground `z = 0` with the learned friction,
    /// the data's `dt`, and a contact margin of one half width (a corner would have to approach
    /// faster than 148 half widths per second to cross it in one step unseen).
    pub fn sim_settings(&self) -> (Terrain, StepSettings) {
        let terrain = Terrain { ground: Ground { height: 0.0, slope: 0.0, friction: self.mu }, ..Terrain::default() };
        let settings = StepSettings { dt: self.body.dt, contact_margin: 1.0, ..StepSettings::default() };
        (terrain, settings)
    }

    fn rollout_sim(&self, first: &Frame, steps: usize) -> Result<Vec<Frame>, RolloutError> {
        let r0 = *first.q.to_rotation_matrix().matrix();
        let mut model = self.sim_model(&self.vertices_at(&r0))?;
        let (terrain, settings) = self.sim_settings();
        let mut ws = StepWorkspace::new(&model);
        let (nq, nv) = (model.nq, model.nv);
        let mut q = vec![0.0; nq];
        let mut v = vec![0.0; nv];
        let quat = first.q.into_inner();
        q[..3].copy_from_slice(first.p.as_slice());
        q[3..7].copy_from_slice(&[quat.i, quat.j, quat.k, quat.w]);
        // The simulator's free-flyer velocity is the body twist; the data's linear velocity is
        // in the world.
        let vb = r0.transpose() * first.v;
        v[..3].copy_from_slice(vb.as_slice());
        v[3..6].copy_from_slice(first.w.as_slice());
        let (mut qn, mut vn) = (q.clone(), v.clone());
        let (u, tau) = (vec![0.0; model.nu], vec![0.0; nv]);
        let mut out = vec![*first];
        for k in 0..steps {
            if self.method == Method::Deep {
                let pose = pose_of(&q);
                let pts = self.vertices_at(pose.q.to_rotation_matrix().matrix());
                for (cp, c) in model.contact_points.iter_mut().zip(pts) {
                    cp.position = c;
                }
            }
            let info = step(&model, &terrain, &settings, &mut ws, &q, &v, &u, &tau, &mut qn, &mut vn);
            if !info.status.advanced() {
                return Err(RolloutError::Step { step: k, status: info.status });
            }
            std::mem::swap(&mut q, &mut qn);
            std::mem::swap(&mut v, &mut vn);
            let pose = pose_of(&q);
            let vw = pose.q * Vector3::new(v[0], v[1], v[2]);
            out.push(Frame {
                t: first.t + (k + 1) as f64 * self.body.dt,
                p: pose.p,
                q: pose.q,
                v: vw,
                w: Vector3::new(v[3], v[4], v[5]),
            });
        }
        Ok(out)
    }
}

/// The pose in a free-flyer configuration `[p; qx, qy, qz, qw]`.
fn pose_of(q: &[f64]) -> Pose {
    Pose {
        p: Vector3::new(q[0], q[1], q[2]),
        q: UnitQuaternion::from_quaternion(Quaternion::new(q[6], q[3], q[4], q[5])),
    }
}
