//! The immutable kinematic-tree [`Model`] and its builder.
//!
//! Bodies and joints are in one-to-one correspondence: joint `i` moves body `i` relative to the
//! body of its parent joint (or the world). Bodies are numbered so that a parent precedes its
//! children (Featherstone's regular numbering), which every recursive algorithm relies on.
//! Frame conventions follow Pinocchio (see `spatial`): body `i`'s frame is its joint frame, the
//! joint placement is `parentMjoint`, and body inertias are expressed in the body frame.
//!
//! Joint kinds: a free-flyer (`nq = 7`, `nv = 6`, only at the root), revolute and prismatic
//! joints about an arbitrary unit axis of the joint frame (`nq = nv = 1`). URDF fixed joints do
//! not appear here: the importer merges them into their movable parent and keeps them as frames.

pub mod builtin;
pub mod configuration;
pub mod data;
pub mod urdf;

pub use configuration::{difference, integrate, neutral, normalize};
pub use data::Data;

use crate::spatial::{Inertia, Se3};
use nalgebra::{Vector3, Vector6};
use thiserror::Error;

/// What a joint does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JointKind {
    /// Six-DoF floating base: `q = [p (world); quaternion (x, y, z, w)]`, `v` = body twist.
    FreeFlyer,
    /// Rotation about a unit axis of the joint frame.
    Revolute { axis: Vector3<f64> },
    /// Translation along a unit axis of the joint frame.
    Prismatic { axis: Vector3<f64> },
}

impl JointKind {
    pub fn nq(&self) -> usize {
        match self {
            JointKind::FreeFlyer => 7,
            _ => 1,
        }
    }

    pub fn nv(&self) -> usize {
        match self {
            JointKind::FreeFlyer => 6,
            _ => 1,
        }
    }

    /// `S[:, c]^T f` for a force `f` in the joint frame: the generalized force on dof `c`.
    #[inline]
    pub fn project_force(&self, c: usize, f: &Vector6<f64>) -> f64 {
        match self {
            JointKind::FreeFlyer => f[c],
            JointKind::Revolute { axis } => axis.x * f[3] + axis.y * f[4] + axis.z * f[5],
            JointKind::Prismatic { axis } => axis.x * f[0] + axis.y * f[1] + axis.z * f[2],
        }
    }

    /// Column `c` of the motion subspace `S` (6 x nv), in the joint (body) frame.
    #[inline]
    pub fn subspace_col(&self, c: usize) -> Vector6<f64> {
        match self {
            JointKind::FreeFlyer => {
                let mut s = Vector6::zeros();
                s[c] = 1.0;
                s
            }
            JointKind::Revolute { axis } => Vector6::new(0.0, 0.0, 0.0, axis.x, axis.y, axis.z),
            JointKind::Prismatic { axis } => Vector6::new(axis.x, axis.y, axis.z, 0.0, 0.0, 0.0),
        }
    }
}

/// Position, velocity and effort limits of a one-DoF joint (URDF `<limit>`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointLimits {
    pub lower: f64,
    pub upper: f64,
    /// Maximum actuator effort (N m or N); `0` for a passive joint.
    pub effort: f64,
    pub velocity: f64,
}

impl Default for JointLimits {
    fn default() -> Self {
        Self { lower: f64::NEG_INFINITY, upper: f64::INFINITY, effort: f64::INFINITY, velocity: f64::INFINITY }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Joint {
    pub name: String,
    pub kind: JointKind,
    /// Parent joint (body) index; `None` for a joint attached to the world.
    pub parent: Option<usize>,
    /// `parentMjoint`: placement of the joint frame in the parent body frame at `q = 0`.
    pub placement: Se3,
    /// Offsets into `q` and `v`.
    pub idx_q: usize,
    pub idx_v: usize,
    pub limits: JointLimits,
}

impl Joint {
    pub fn nq(&self) -> usize {
        self.kind.nq()
    }
    pub fn nv(&self) -> usize {
        self.kind.nv()
    }
}

/// A named placement rigidly attached to a body (URDF links, merged fixed links, feet, sites).
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub name: String,
    pub body: usize,
    /// `bodyMframe`.
    pub placement: Se3,
}

/// A candidate contact: a sphere of `radius` centred at `position` (body frame). Point feet are
/// small spheres, box corners have radius 0. The contact point is the sphere's lowest point
/// along the terrain normal.
#[derive(Clone, Debug, PartialEq)]
pub struct ContactPoint {
    pub name: String,
    pub body: usize,
    pub position: Vector3<f64>,
    pub radius: f64,
}

/// Visual shapes, for the viewer and reports; not used by the dynamics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Box { size: [f64; 3] },
    Sphere { radius: f64 },
    Cylinder { radius: f64, length: f64 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub body: usize,
    /// `bodyMgeometry`.
    pub placement: Se3,
    pub shape: Shape,
    pub rgba: [f32; 4],
}

/// [`Model::dof_parent`] of a dof with no parent (a root joint's first dof).
pub const NO_DOF: usize = usize::MAX;

/// Immutable description of a robot. Build it with [`ModelBuilder`] or [`urdf::load`].
#[derive(Clone, Debug)]
pub struct Model {
    pub name: String,
    pub joints: Vec<Joint>,
    /// Inertia of body `i` in its body frame.
    pub inertias: Vec<Inertia>,
    /// Name of the (URDF) link that body `i` stands for.
    pub body_names: Vec<String>,
    pub frames: Vec<Frame>,
    pub contact_points: Vec<ContactPoint>,
    pub geometries: Vec<Geometry>,
    /// `v` index of each actuator: `S` (nv x nu) has a 1 at `(actuated_dofs[k], k)`.
    pub actuated_dofs: Vec<usize>,
    /// Effort limit of each actuator.
    pub effort_limits: Vec<f64>,
    /// Armature per dof (nv; kg m^2 or kg, zero unless set): the reflected inertia of a geared
    /// motor's rotor, `I_rotor n^2`, which moves with the joint but not with the link. The step
    /// adds it to the diagonal of `M` (MuJoCo's `armature`, Pinocchio's `armature`); `M` itself
    /// (`Data::mass_matrix`, `crba`) stays the links' mass matrix. URDF has no field for it: a
    /// scene sets it (`armature:`).
    pub armature: Vec<f64>,
    pub nq: usize,
    pub nv: usize,
    pub nu: usize,
    /// Gravity in the world frame (m/s^2).
    pub gravity: Vector3<f64>,
    /// For each body, the chain of bodies from the root to it (inclusive), root first.
    pub supports: Vec<Vec<usize>>,
    /// Expanded parent array over dofs (nv): the dof preceding each dof on its path to the
    /// root, [`NO_DOF`] for none (Featherstone's `lambda`, for sparse factorizations).
    pub dof_parent: Vec<usize>,
}

#[derive(Debug, Error, PartialEq)]
pub enum ModelError {
    #[error("joint `{joint}`: parent body index {parent} does not exist yet")]
    UnknownParent { joint: String, parent: usize },
    #[error("joint `{joint}`: a free-flyer must be attached to the world")]
    FreeFlyerNotRoot { joint: String },
    #[error("joint `{joint}`: axis must be a finite non-zero vector")]
    BadAxis { joint: String },
    #[error("duplicate name `{0}`")]
    DuplicateName(String),
    #[error("body `{body}`: {field} must be {expected}")]
    BadInertia { body: String, field: &'static str, expected: &'static str },
    #[error("model has no bodies")]
    Empty,
    #[error("unknown body `{0}`")]
    UnknownBody(String),
}

impl Model {
    pub fn nbodies(&self) -> usize {
        self.joints.len()
    }

    pub fn has_free_flyer(&self) -> bool {
        matches!(self.joints.first().map(|j| j.kind), Some(JointKind::FreeFlyer))
    }

    /// The joints of the actuators, in actuator order (nu).
    pub fn actuated_joints(&self) -> impl Iterator<Item = &Joint> + '_ {
        self.actuated_dofs
            .iter()
            .map(|&dof| self.joints.iter().find(|j| j.idx_v == dof).expect("an actuated dof belongs to a joint"))
    }

    /// The positions in `q` (nq) of the actuated joints, in actuator order (nu): the posture a
    /// joint PD holds when `q` is its target.
    pub fn actuated_positions(&self, q: &[f64]) -> Vec<f64> {
        self.actuated_joints().map(|j| q[j.idx_q]).collect()
    }

    pub fn total_mass(&self) -> f64 {
        self.inertias.iter().map(|i| i.mass).sum()
    }

    pub fn body_index(&self, name: &str) -> Option<usize> {
        self.body_names.iter().position(|n| n == name)
    }

    pub fn joint_index(&self, name: &str) -> Option<usize> {
        self.joints.iter().position(|j| j.name == name)
    }

    pub fn frame_index(&self, name: &str) -> Option<usize> {
        self.frames.iter().position(|f| f.name == name)
    }

    /// Resolves a body by body name or frame name, returning the body and `bodyMframe`.
    pub fn resolve_body_or_frame(&self, name: &str) -> Option<(usize, Se3)> {
        if let Some(b) = self.body_index(name) {
            return Some((b, Se3::identity()));
        }
        self.frame_index(name).map(|f| (self.frames[f].body, self.frames[f].placement))
    }
}

/// Assembles a [`Model`] body by body; parents must be added before children.
#[derive(Clone, Debug)]
pub struct ModelBuilder {
    model: Model,
    passive: Vec<bool>,
}

impl ModelBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            model: Model {
                name: name.into(),
                joints: vec![],
                inertias: vec![],
                body_names: vec![],
                frames: vec![],
                contact_points: vec![],
                geometries: vec![],
                actuated_dofs: vec![],
                effort_limits: vec![],
                armature: vec![],
                nq: 0,
                nv: 0,
                nu: 0,
                gravity: Vector3::new(0.0, 0.0, -9.81),
                supports: vec![],
                dof_parent: vec![],
            },
            passive: vec![],
        }
    }

    /// Adds a joint and the body it moves; returns the body index. One-DoF joints are actuated
    /// unless `limits.effort == 0`.
    #[allow(clippy::too_many_arguments)]
    pub fn add_body(
        &mut self,
        joint_name: impl Into<String>,
        kind: JointKind,
        parent: Option<usize>,
        placement: Se3,
        limits: JointLimits,
        body_name: impl Into<String>,
        inertia: Inertia,
    ) -> Result<usize, ModelError> {
        let joint = joint_name.into();
        let body = body_name.into();
        if let Some(p) = parent {
            if p >= self.model.joints.len() {
                return Err(ModelError::UnknownParent { joint, parent: p });
            }
        }
        let kind = match kind {
            JointKind::FreeFlyer if parent.is_some() => return Err(ModelError::FreeFlyerNotRoot { joint }),
            JointKind::Revolute { axis } | JointKind::Prismatic { axis }
                if !(axis.iter().all(|x| x.is_finite()) && axis.norm() > 1e-12) =>
            {
                return Err(ModelError::BadAxis { joint });
            }
            JointKind::Revolute { axis } => JointKind::Revolute { axis: axis.normalize() },
            JointKind::Prismatic { axis } => JointKind::Prismatic { axis: axis.normalize() },
            k => k,
        };
        if self.model.joints.iter().any(|j| j.name == joint) {
            return Err(ModelError::DuplicateName(joint));
        }
        check_inertia(&body, &inertia)?;
        let m = &mut self.model;
        m.joints.push(Joint { name: joint, kind, parent, placement, idx_q: m.nq, idx_v: m.nv, limits });
        m.nq += kind.nq();
        m.nv += kind.nv();
        m.inertias.push(inertia);
        m.frames.push(Frame { name: body.clone(), body: m.body_names.len(), placement: Se3::identity() });
        m.body_names.push(body);
        self.passive.push(limits.effort == 0.0);
        Ok(m.joints.len() - 1)
    }

    pub fn add_frame(&mut self, name: impl Into<String>, body: usize, placement: Se3) -> Result<usize, ModelError> {
        let name = name.into();
        if body >= self.model.joints.len() {
            return Err(ModelError::UnknownBody(name));
        }
        if self.model.frames.iter().any(|f| f.name == name) {
            return Err(ModelError::DuplicateName(name));
        }
        self.model.frames.push(Frame { name, body, placement });
        Ok(self.model.frames.len() - 1)
    }

    pub fn add_contact_point(
        &mut self,
        name: impl Into<String>,
        body: usize,
        position: Vector3<f64>,
        radius: f64,
    ) -> Result<(), ModelError> {
        let name = name.into();
        if body >= self.model.joints.len() {
            return Err(ModelError::UnknownBody(name));
        }
        self.model.contact_points.push(ContactPoint { name, body, position, radius });
        Ok(())
    }

    pub fn add_geometry(&mut self, body: usize, placement: Se3, shape: Shape, rgba: [f32; 4]) {
        self.model.geometries.push(Geometry { body, placement, shape, rgba });
    }

    /// Adds mass to an existing body (used when merging fixed links).
    pub fn lump_inertia(&mut self, body: usize, inertia: &Inertia) {
        let cur = self.model.inertias[body];
        self.model.inertias[body] = cur.add(inertia);
    }

    pub fn body_count(&self) -> usize {
        self.model.joints.len()
    }

    pub fn set_gravity(&mut self, g: Vector3<f64>) {
        self.model.gravity = g;
    }

    pub fn build(mut self) -> Result<Model, ModelError> {
        if self.model.joints.is_empty() {
            return Err(ModelError::Empty);
        }
        let m = &mut self.model;
        for (i, j) in m.joints.iter().enumerate() {
            if j.kind != JointKind::FreeFlyer && !self.passive[i] {
                m.actuated_dofs.push(j.idx_v);
                m.effort_limits.push(j.limits.effort);
            }
        }
        m.nu = m.actuated_dofs.len();
        m.armature = vec![0.0; m.nv];
        m.dof_parent = Vec::with_capacity(m.nv);
        for j in &m.joints {
            let before = j.parent.map(|p| m.joints[p].idx_v + m.joints[p].nv() - 1).unwrap_or(NO_DOF);
            for c in 0..j.nv() {
                m.dof_parent.push(if c == 0 { before } else { j.idx_v + c - 1 });
            }
        }
        m.supports = (0..m.joints.len())
            .map(|i| {
                let mut chain = vec![i];
                let mut k = i;
                while let Some(p) = m.joints[k].parent {
                    chain.push(p);
                    k = p;
                }
                chain.reverse();
                chain
            })
            .collect();
        Ok(self.model)
    }
}

fn check_inertia(body: &str, i: &Inertia) -> Result<(), ModelError> {
    let bad = |field, expected| Err(ModelError::BadInertia { body: body.to_string(), field, expected });
    if !(i.mass.is_finite() && i.mass >= 0.0) {
        return bad("mass", "finite and >= 0");
    }
    if !i.com.iter().all(|x| x.is_finite()) {
        return bad("com", "finite");
    }
    if !i.inertia.iter().all(|x| x.is_finite()) {
        return bad("inertia", "finite");
    }
    Ok(())
}
