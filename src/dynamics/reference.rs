//! Cross-check of the rigid-body algorithms against reference values in the format of
//! `../shared/fixtures/rbd/` (Pinocchio): M, nle, rnea, aba, foot positions and
//! LOCAL_WORLD_ALIGNED foot Jacobians, per sample, mapped by joint and frame name.
//!
//! The error of a quantity on a sample is `||x - x_ref||_F / max(||x_ref||_F, 1e-12)`; the
//! report gives the maximum over samples.

use crate::dynamics::{aba, crba, forward_kinematics, nle, point_jacobian, rnea, update_frame_placements};
use crate::model::{Data, Model};
use crate::spatial::Se3;
use nalgebra::{DMatrix, DVector, Matrix3, Vector3};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum FixtureError {
    #[error("{file}: cannot read: {message}")]
    Io { file: PathBuf, message: String },
    #[error("{file}: line {line}, column {column}: {message}")]
    Parse { file: PathBuf, line: usize, column: usize, message: String },
    #[error("{file}: {field}: {message}")]
    Mismatch { file: PathBuf, field: String, message: String },
}

#[derive(Deserialize)]
struct Fixture {
    meta: Meta,
    samples: Vec<Sample>,
}

#[derive(Deserialize)]
struct Meta {
    nq: usize,
    nv: usize,
    joints: Vec<FixtureJoint>,
    contact_frames: Vec<ContactFrame>,
}

#[derive(Deserialize)]
struct FixtureJoint {
    name: String,
    idx_q: usize,
    nq: usize,
    idx_v: usize,
    nv: usize,
}

#[derive(Deserialize)]
struct ContactFrame {
    name: String,
    parent_joint: String,
    placement_in_parent_joint: Placement,
}

#[derive(Deserialize)]
struct Placement {
    translation: [f64; 3],
    rotation: [[f64; 3]; 3],
}

#[derive(Deserialize)]
struct Sample {
    q: Vec<f64>,
    v: Vec<f64>,
    tau: Vec<f64>,
    a: Vec<f64>,
    #[serde(rename = "M")]
    m: Vec<Vec<f64>>,
    nle: Vec<f64>,
    rnea: Vec<f64>,
    aba: Vec<f64>,
    #[serde(alias = "corners")]
    feet: BTreeMap<String, Foot>,
}

#[derive(Deserialize)]
struct Foot {
    pos: [f64; 3],
    #[serde(rename = "J_lin_lwa")]
    j_lin_lwa: Vec<Vec<f64>>,
}

/// Maximum relative error per quantity over all samples.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub samples: usize,
    /// `(quantity, max relative error)`, in a fixed order.
    pub errors: Vec<(&'static str, f64)>,
    /// `aba(rnea(a)) == a` round trip, relative.
    pub aba_rnea_roundtrip: f64,
}

impl Report {
    pub fn max_error(&self) -> f64 {
        self.errors.iter().map(|e| e.1).chain([self.aba_rnea_roundtrip]).fold(0.0, f64::max)
    }
}

fn rel(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    (a - b).norm() / b.norm().max(1e-12)
}

/// Runs every sample of `fixture` through `model`.
pub fn check(model: &Model, fixture: &Path) -> Result<Report, FixtureError> {
    let file = fixture.to_path_buf();
    let text = std::fs::read_to_string(fixture)
        .map_err(|e| FixtureError::Io { file: file.clone(), message: e.to_string() })?;
    let fx: Fixture = serde_json::from_str(&text).map_err(|e| FixtureError::Parse {
        file: file.clone(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let mismatch = |field: String, message: String| FixtureError::Mismatch { file: file.clone(), field, message };
    if fx.meta.nq != model.nq || fx.meta.nv != model.nv {
        return Err(mismatch(
            "meta.nq/nv".into(),
            format!("fixture has nq={}, nv={}; model has nq={}, nv={}", fx.meta.nq, fx.meta.nv, model.nq, model.nv),
        ));
    }
    // perm_q[k] = our q index of fixture q index k (likewise v).
    let mut perm_q = vec![usize::MAX; model.nq];
    let mut perm_v = vec![usize::MAX; model.nv];
    for fj in &fx.meta.joints {
        let Some(ji) = model.joint_index(&fj.name) else {
            return Err(mismatch(format!("meta.joints[{}]", fj.name), "no joint of that name in the model".into()));
        };
        let j = &model.joints[ji];
        if j.nq() != fj.nq || j.nv() != fj.nv {
            return Err(mismatch(format!("meta.joints[{}]", fj.name), "joint dimensions differ".into()));
        }
        for k in 0..fj.nq {
            perm_q[fj.idx_q + k] = j.idx_q + k;
        }
        for k in 0..fj.nv {
            perm_v[fj.idx_v + k] = j.idx_v + k;
        }
    }
    if perm_q.contains(&usize::MAX) || perm_v.contains(&usize::MAX) {
        return Err(mismatch("meta.joints".into(), "does not cover every model joint".into()));
    }
    // Contact frames: the model's own frame of that name when it has one (this exercises the
    // URDF fixed-link merge), else the fixture's placement on the named joint's body.
    let mut frames = Vec::new();
    for cf in &fx.meta.contact_frames {
        let (body, placement) = match model.frame_index(&cf.name) {
            Some(f) => (model.frames[f].body, model.frames[f].placement),
            None => {
                let Some(b) = model.joint_index(&cf.parent_joint) else {
                    return Err(mismatch(format!("meta.contact_frames[{}]", cf.name), "unknown parent_joint".into()));
                };
                let r = &cf.placement_in_parent_joint.rotation;
                let rot = Matrix3::from_fn(|i, k| r[i][k]);
                (b, Se3::new(rot, Vector3::from(cf.placement_in_parent_joint.translation)))
            }
        };
        frames.push((cf.name.clone(), body, placement));
    }

    let (nq, nv) = (model.nq, model.nv);
    let mut data = Data::new(model);
    let mut names = ["M", "nle", "rnea", "aba", "foot_pos", "foot_J"].map(|n| (n, 0.0f64));
    let mut roundtrip: f64 = 0.0;
    let vec_v = |x: &[f64]| {
        let mut out = DVector::zeros(nv);
        for (k, &p) in perm_v.iter().enumerate() {
            out[p] = x[k];
        }
        out
    };
    for (s_idx, s) in fx.samples.iter().enumerate() {
        let field = |f: &str| format!("samples[{s_idx}].{f}");
        if s.q.len() != nq || s.v.len() != nv || s.m.len() != nv {
            return Err(mismatch(field("q/v/M"), "wrong length".into()));
        }
        let mut q = DVector::zeros(nq);
        for (k, &p) in perm_q.iter().enumerate() {
            q[p] = s.q[k];
        }
        let (v, tau, a) = (vec_v(&s.v), vec_v(&s.tau), vec_v(&s.a));
        let mut m_ref = DMatrix::zeros(nv, nv);
        for r in 0..nv {
            for c in 0..nv {
                m_ref[(perm_v[r], perm_v[c])] = s.m[r][c];
            }
        }
        let as_mat = |x: DVector<f64>| DMatrix::from_column_slice(x.len(), 1, x.as_slice());

        crba(model, &mut data, q.as_slice());
        names[0].1 = names[0].1.max(rel(&data.mass_matrix, &m_ref));
        nle(model, &mut data, q.as_slice(), v.as_slice());
        names[1].1 = names[1].1.max(rel(&as_mat(data.nle.clone()), &as_mat(vec_v(&s.nle))));
        rnea(model, &mut data, q.as_slice(), v.as_slice(), a.as_slice());
        names[2].1 = names[2].1.max(rel(&as_mat(data.tau.clone()), &as_mat(vec_v(&s.rnea))));
        let tau_rnea = data.tau.clone();
        if !aba(model, &mut data, q.as_slice(), v.as_slice(), tau.as_slice()) {
            return Err(mismatch(field("aba"), "articulated inertia is singular".into()));
        }
        names[3].1 = names[3].1.max(rel(&as_mat(data.ddq.clone()), &as_mat(vec_v(&s.aba))));
        aba(model, &mut data, q.as_slice(), v.as_slice(), tau_rnea.as_slice());
        roundtrip = roundtrip.max(rel(&as_mat(data.ddq.clone()), &as_mat(a.clone())));

        forward_kinematics(model, &mut data, q.as_slice(), None);
        update_frame_placements(model, &mut data);
        for (name, body, placement) in &frames {
            let Some(foot) = s.feet.get(name) else {
                return Err(mismatch(field(&format!("feet.{name}")), "missing".into()));
            };
            let p = data.o_m_i[*body].compose(placement).trans;
            let p_ref = Vector3::from(foot.pos);
            names[4].1 = names[4].1.max((p - p_ref).norm() / p_ref.norm().max(1e-12));
            let mut jac = DMatrix::zeros(3, nv);
            point_jacobian(model, &data.o_m_i, *body, &p, &mut jac);
            let mut j_ref = DMatrix::zeros(3, nv);
            for r in 0..3 {
                for c in 0..nv {
                    j_ref[(r, perm_v[c])] = foot.j_lin_lwa[r][c];
                }
            }
            names[5].1 = names[5].1.max(rel(&jac, &j_ref));
        }
    }
    Ok(Report { samples: fx.samples.len(), errors: names.to_vec(), aba_rnea_roundtrip: roundtrip })
}
