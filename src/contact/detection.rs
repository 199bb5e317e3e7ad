//! Contact candidates and their Jacobians.
//!
//! Every contact point of the model is a candidate; the candidates whose gap is below a margin
//! (`StepSettings::contact_margin`, 5 cm by default) are *active* and enter the contact problem,
//! whether or not they touch: a separated active contact has gap `phi > 0`, which enters the
//! free-contact term as `phi / h`, so the solver returns a zero impulse for it unless the step
//! would close the gap. The margin keeps the problem small (a standing quadruped solves for its
//! four feet, not its trunk corners) while the relaxed sensitivities still see contacts that are
//! about to happen. A point approaching faster than `margin / h` could pass the margin in one
//! step unseen; at the defaults that is 25 m/s.
//!
//! A point has up to two candidates: its nearest terrain primitive (candidate `i`, for point `i`)
//! and, in a concave corner, a second primitive (candidate `points + i`; see
//! [`Terrain::query_pair`]): a foot on the ground against the face of a step touches both, and
//! with the nearest one alone the face would only be seen once the foot is inside the step. A
//! second candidate that is absent has `phi = +inf` and is never active. Candidates `0..points`
//! are in the model's contact point order, so per-point consumers read them as before.
//!
//! For a sphere of radius `r` centred at `c` with terrain normal `n` at distance `d`:
//! `phi = d - r`, contact point `p = c - r n` (the material point of the body at the sphere's
//! lowest point), and `J_i = [n^T; t1^T; t2^T] J_p` (3 x nv) with `J_p` the LOCAL_WORLD_ALIGNED
//! linear Jacobian of `p` (DESIGN 1).

use super::terrain::{tangent_basis, Terrain, TerrainQuery};
use crate::dynamics::kinematics::subspace_point_velocity;
use crate::model::{Data, JointKind, Model};
use nalgebra::{DMatrix, Vector3};

/// Contact geometry of the current configuration, preallocated for the model's `k` contacts.
#[derive(Clone, Debug)]
pub struct Contacts {
    /// Number of contact candidates `k` (twice the contact points: module docs).
    pub k: usize,
    /// Number of contact points of the model: candidates `0..points` are their nearest
    /// primitives, `points..k` the second ones.
    pub points: usize,
    /// Gap `phi_i` (m), positive when separated (k).
    pub phi: Vec<f64>,
    /// Terrain normal in the world (k).
    pub normal: Vec<Vector3<f64>>,
    /// First and second tangent in the world (k), set by `detect` for the active candidates
    /// only; `tangent_basis(normal)` gives them for any other.
    pub t1: Vec<Vector3<f64>>,
    pub t2: Vec<Vector3<f64>>,
    /// World contact point (k).
    pub point: Vec<Vector3<f64>>,
    /// Friction coefficient (k).
    pub mu: Vec<f64>,
    /// Terrain primitive touched: 0 ground, 1 + i box i (k).
    pub primitive: Vec<usize>,
    /// Candidates in the contact problem, in order (at most k).
    pub active: Vec<usize>,
    /// For each candidate, the dofs that move it, root first (its Jacobian rows are zero
    /// elsewhere; two candidates share exactly the common prefix of their lists).
    pub dofs: Vec<Vec<usize>>,
    /// Stacked Jacobian of the active contacts, rows `(n, t1, t2)` per contact: the first
    /// `3 * active.len()` rows are used (3k x nv).
    pub jac: DMatrix<f64>,
}

impl Contacts {
    /// Candidates of a model: two per contact point (module docs).
    pub fn capacity(model: &Model) -> usize {
        2 * model.contact_points.len()
    }

    /// The contact point of candidate `i`.
    pub fn point_of(&self, i: usize) -> usize {
        if i < self.points {
            i
        } else {
            i - self.points
        }
    }

    pub fn new(model: &Model) -> Self {
        let k = Self::capacity(model);
        Self {
            k,
            points: model.contact_points.len(),
            phi: vec![f64::INFINITY; k],
            normal: vec![Vector3::z(); k],
            t1: vec![Vector3::x(); k],
            t2: vec![Vector3::y(); k],
            point: vec![Vector3::zeros(); k],
            mu: vec![0.0; k],
            primitive: vec![0; k],
            active: Vec::with_capacity(k),
            dofs: model
                .contact_points
                .iter()
                .chain(&model.contact_points)
                .map(|cp| {
                    model.supports[cp.body]
                        .iter()
                        .flat_map(|&b| model.joints[b].idx_v..model.joints[b].idx_v + model.joints[b].nv())
                        .collect()
                })
                .collect(),
            jac: DMatrix::zeros(3 * k, model.nv),
        }
    }

    /// Number of active contacts.
    pub fn n_active(&self) -> usize {
        self.active.len()
    }

    /// Gaps, frames and friction of every candidate, and the active set (`phi <= margin`).
    /// Needs `forward_kinematics`.
    pub fn detect(&mut self, model: &Model, data: &Data, terrain: &Terrain, margin: f64) {
        self.active.clear();
        let np = self.points;
        for (i, cp) in model.contact_points.iter().enumerate() {
            let c = data.o_m_i[cp.body].act_point(&cp.position);
            let (first, second) = terrain.query_pair(&c, margin + cp.radius);
            self.set(i, &c, cp.radius, &first);
            if self.phi[i] <= margin {
                self.active.push(i);
                self.set_tangents(i);
            }
            match second {
                Some(s) => self.set(np + i, &c, cp.radius, &s),
                None => self.phi[np + i] = f64::INFINITY,
            }
        }
        // Second contacts after every first one, so a terrain of one primitive keeps the
        // problem's order.
        for i in np..self.k {
            if self.phi[i] <= margin {
                self.active.push(i);
                self.set_tangents(i);
            }
        }
    }

    // The frame of an active candidate only: most candidates (a trunk's corners) are far from
    // the terrain at every step, and their tangents would be a normalization each for nothing.
    fn set_tangents(&mut self, i: usize) {
        let (t1, t2) = tangent_basis(&self.normal[i]);
        self.t1[i] = t1;
        self.t2[i] = t2;
    }

    fn set(&mut self, i: usize, c: &Vector3<f64>, radius: f64, q: &TerrainQuery) {
        self.phi[i] = q.distance - radius;
        self.normal[i] = q.normal;
        self.point[i] = c - radius * q.normal;
        self.mu[i] = q.friction;
        self.primitive[i] = q.primitive;
    }

    /// The stacked Jacobian `J` of the active contacts (first `3 * n_active()` rows). Needs
    /// `detect`; uses `data.jac3` as scratch.
    pub fn jacobian(&mut self, model: &Model, data: &mut Data) {
        // Rows (n, t1, t2) of the point Jacobian, written directly: only the contact's branch
        // has nonzero columns. The active rows are zeroed column by column first (a row of the
        // column-major matrix is strided).
        let rows = self.jac.nrows();
        let used = 3 * self.active.len();
        if used > 0 {
            for col in self.jac.as_mut_slice().chunks_exact_mut(rows) {
                col[..used].fill(0.0);
            }
        }
        for (a, &i) in self.active.iter().enumerate() {
            let cp = &model.contact_points[self.point_of(i)];
            let p = self.point[i];
            let axes = [self.normal[i], self.t1[i], self.t2[i]];
            for &b in &model.supports[cp.body] {
                let j = &model.joints[b];
                let o = &data.o_m_i[b];
                if j.kind == JointKind::FreeFlyer {
                    // Unit motion subspace: the columns are R e_c (linear) and
                    // (R e_c) x (p - o) (angular), without the products by zeros.
                    let arm = p - o.trans;
                    for c in 0..3 {
                        let lin = o.rot.column(c).into_owned();
                        let ang = lin.cross(&arm);
                        for (r, axis) in axes.iter().enumerate() {
                            self.jac[(3 * a + r, j.idx_v + c)] = axis.dot(&lin);
                            self.jac[(3 * a + r, j.idx_v + 3 + c)] = axis.dot(&ang);
                        }
                    }
                    continue;
                }
                for c in 0..j.nv() {
                    let v = subspace_point_velocity(o, &j.kind.subspace_col(c), &p);
                    for (r, axis) in axes.iter().enumerate() {
                        self.jac[(3 * a + r, j.idx_v + c)] = axis.dot(&v);
                    }
                }
            }
        }
    }
}
