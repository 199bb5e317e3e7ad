//! Robots that ship with ContactLab, all written for this project: a 12-DoF quadruped with
//! point feet (`assets/robots/quadruped.urdf`), a planar one-leg hopper
//! (`assets/robots/hopper.urdf`) and a rigid box with its eight corners as contacts.
//! The URDFs are compiled into the binary so builtins work from any directory.

use super::urdf::{load_str, Loaded, RootJoint, UrdfError};
use super::{JointKind, JointLimits, Model, ModelBuilder, ModelError, Shape};
use crate::spatial::{Inertia, Se3};
use nalgebra::Vector3;
use std::path::Path;

pub const QUADRUPED_URDF: &str = include_str!("../../assets/robots/quadruped.urdf");
pub const HOPPER_URDF: &str = include_str!("../../assets/robots/hopper.urdf");

/// The 12-DoF, ~12 kg quadruped (floating base).
pub fn quadruped() -> Result<Loaded, UrdfError> {
    load_str(QUADRUPED_URDF, Path::new("assets/robots/quadruped.urdf"), RootJoint::FreeFlyer)
}

/// The planar one-leg hopper (its x, z and pitch slides are passive joints to the world).
pub fn hopper() -> Result<Loaded, UrdfError> {
    load_str(HOPPER_URDF, Path::new("assets/robots/hopper.urdf"), RootJoint::Fixed)
}

/// A free rigid box of uniform density with contact points at its eight corners.
pub fn rigid_box(size: [f64; 3], mass: f64) -> Result<Model, ModelError> {
    let mut b = ModelBuilder::new("box");
    let body = b.add_body(
        "root_joint",
        JointKind::FreeFlyer,
        None,
        Se3::identity(),
        JointLimits::default(),
        "box",
        Inertia::solid_box(mass, size),
    )?;
    let half = Vector3::from(size) * 0.5;
    for (i, name) in ["mmm", "mmp", "mpm", "mpp", "pmm", "pmp", "ppm", "ppp"].iter().enumerate() {
        let s = |bit: usize| if i >> (2 - bit) & 1 == 1 { 1.0 } else { -1.0 };
        let p = Vector3::new(s(0) * half.x, s(1) * half.y, s(2) * half.z);
        b.add_frame(format!("corner_{name}"), body, Se3::from_translation(p))?;
        b.add_contact_point(format!("corner_{name}"), body, p, 0.0)?;
    }
    b.add_geometry(body, Se3::identity(), Shape::Box { size }, [0.85, 0.55, 0.2, 1.0]);
    b.build()
}
