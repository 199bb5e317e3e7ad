//! Composite rigid-body algorithm (Featherstone 2008, table 6.2): the joint-space inertia
//! matrix `M(q)`.
//!
//! Backward pass over bodies with composite inertias in body frames:
//! `Yc_i = I_i + sum_children cX*Yc_c cX^-1` (kept as mass, centre of mass and rotational
//! inertia, so the transform and the sum are a few dozen flops instead of 6 x 6 products), `F = Yc_i S_i`, `M_ii = S_i^T F`, and for each
//! ancestor `j` of `i` (walking up, transforming `F` as a force): `M_ji = S_j^T F`.
//! The full symmetric matrix is written (Pinocchio fills only the upper triangle).

use super::kinematics::joint_transform;
use crate::model::{Data, Model};

/// `M(q)` into `data.mass_matrix`; also updates body placements.
pub fn crba(model: &Model, data: &mut Data, q: &[f64]) {
    for (i, j) in model.joints.iter().enumerate() {
        let xj = joint_transform(&j.kind, &q[j.idx_q..j.idx_q + j.nq()]);
        data.li_m_i[i] = j.placement.compose(&xj);
        data.o_m_i[i] = match j.parent {
            Some(p) => data.o_m_i[p].compose(&data.li_m_i[i]),
            None => data.li_m_i[i],
        };
    }
    crba_from_placements(model, data);
}

/// `M(q)` from the placements `data.li_m_i` already computed for this `q` (by `rnea`, `nle`
/// or `forward_kinematics`), saving the kinematics pass.
pub fn crba_from_placements(model: &Model, data: &mut Data) {
    crate::linalg::avx2_dispatch!(crba_body, (model: &Model, data: &mut Data))
}

#[inline(always)]
fn crba_body(model: &Model, data: &mut Data) {
    let nb = model.joints.len();
    for i in 0..nb {
        data.ycrb[i] = model.inertias[i];
    }
    for i in (0..nb).rev() {
        let ji = &model.joints[i];
        for c in 0..ji.nv() {
            let col = ji.idx_v + c;
            let mut f = data.ycrb[i].mul_motion(&ji.kind.subspace_col(c));
            for r in c..ji.nv() {
                let val = ji.kind.project_force(r, &f);
                data.mass_matrix[(ji.idx_v + r, col)] = val;
                data.mass_matrix[(col, ji.idx_v + r)] = val;
            }
            let mut k = i;
            while let Some(p) = model.joints[k].parent {
                f = data.li_m_i[k].act_force(&f);
                let jp = &model.joints[p];
                for r in 0..jp.nv() {
                    let val = jp.kind.project_force(r, &f);
                    data.mass_matrix[(jp.idx_v + r, col)] = val;
                    data.mass_matrix[(col, jp.idx_v + r)] = val;
                }
                k = p;
            }
        }
        if let Some(p) = ji.parent {
            let y = data.ycrb[i].transformed(&data.li_m_i[i]);
            data.ycrb[p] = data.ycrb[p].add(&y);
        }
    }
}
