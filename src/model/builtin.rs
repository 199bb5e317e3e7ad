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

/// The 12-DoF, ~12 kg quadruped (floating base): contact points at its four feet (radius
/// 2 cm) and at the eight corners of its trunk, so that a fall lands on the trunk.
pub fn quadruped() -> Result<Loaded, UrdfError> {
    let mut l = load_str(QUADRUPED_URDF, Path::new("assets/robots/quadruped.urdf"), RootJoint::FreeFlyer)?;
    add_box_corners(&mut l.model, "trunk", [0.45, 0.25, 0.11]);
    Ok(l)
}

/// The planar one-leg hopper (its x, z and pitch slides are passive joints to the world), with
/// contact points at its foot and at the corners of its body.
pub fn hopper() -> Result<Loaded, UrdfError> {
    let mut l = load_str(HOPPER_URDF, Path::new("assets/robots/hopper.urdf"), RootJoint::Fixed)?;
    add_box_corners(&mut l.model, "body", [0.2, 0.1, 0.1]);
    Ok(l)
}

/// Contact points (radius 0) at the corners of a box of `size` centred on a link's origin.
fn add_box_corners(model: &mut Model, link: &str, size: [f64; 3]) {
    let body = model.body_index(link).expect("builtin robot has the link");
    for (name, p) in box_corners(size) {
        model.contact_points.push(super::ContactPoint {
            name: format!("{link}_{name}"),
            body,
            position: p,
            radius: 0.0,
        });
    }
}

/// The eight corners of a box centred at the origin, named `corner_xyz` with `m`/`p` for the
/// sign of each coordinate.
fn box_corners(size: [f64; 3]) -> impl Iterator<Item = (String, Vector3<f64>)> {
    let half = Vector3::from(size) * 0.5;
    ["mmm", "mmp", "mpm", "mpp", "pmm", "pmp", "ppm", "ppp"].into_iter().enumerate().map(move |(i, name)| {
        let s = |bit: usize| if i >> (2 - bit) & 1 == 1 { 1.0 } else { -1.0 };
        (format!("corner_{name}"), Vector3::new(s(0) * half.x, s(1) * half.y, s(2) * half.z))
    })
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
    for (name, p) in box_corners(size) {
        b.add_frame(name.clone(), body, Se3::from_translation(p))?;
        b.add_contact_point(name, body, p, 0.0)?;
    }
    b.add_geometry(body, Se3::identity(), Shape::Box { size }, [0.85, 0.55, 0.2, 1.0]);
    b.build()
}
