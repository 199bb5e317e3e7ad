//! URDF import, matching `pinocchio.buildModelFromUrdf(urdf, JointModelFreeFlyer())`.
//!
//! * The root link (the one link that is no joint's child) becomes the floating base, or is
//!   welded to the world with [`RootJoint::Fixed`].
//! * Bodies are numbered depth-first with sibling joints sorted by name, as Pinocchio does, so
//!   `q` and `v` line up with Pinocchio's for the same file.
//! * `fixed` joints are merged: the child's inertia is lumped into the movable ancestor's body
//!   (parallel-axis theorem), and the child link stays available as a frame.
//! * `continuous` joints are revolute joints with `nq = 1` (Pinocchio uses `nq = 2`); limits
//!   are infinite. `floating`, `planar` and `spherical` joints below the root are rejected.
//! * Actuation: a one-DoF joint is actuated unless its `<limit effort>` is 0.
//! * Contact points: every link whose name ends in `foot` (case-insensitive) becomes a contact
//!   point at its origin, with the radius of its first sphere collision (0 if none). Scenes can
//!   list contact frames explicitly instead.
//!
//! # Inertia policy
//! A link's inertia that is not a valid rigid-body inertia (negative mass, a rotational inertia
//! with a negative eigenvalue or violating the triangle inequality) is kept as written, with a
//! warning, when it is merged into a movable body; Pinocchio does the same, and the reference
//! fixtures rely on it (go1's 1e-6 dummy links). After merging, a movable body whose mass or
//! rotational inertia is not positive definite (a massless link, say) would make the dynamics
//! singular, so its mass is raised to at least [`MIN_MASS`] and the eigenvalues of its
//! rotational inertia to at least [`MIN_INERTIA`], again with a warning naming the link.

use super::{JointKind, JointLimits, Model, ModelBuilder, ModelError, Shape};
use crate::spatial::{Inertia, Se3};
use nalgebra::{Matrix3, SymmetricEigen, Vector3};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Smallest mass given to a movable body whose lumped mass is not positive (kg).
pub const MIN_MASS: f64 = 1e-6;
/// Smallest principal moment given to a movable body whose rotational inertia is not positive
/// definite (kg m^2).
pub const MIN_INERTIA: f64 = 1e-9;

#[derive(Debug, Error)]
pub enum UrdfError {
    #[error("{file}: cannot read: {message}")]
    Io { file: PathBuf, message: String },
    #[error("{file}: malformed URDF: {message}")]
    Parse { file: PathBuf, message: String },
    #[error("{file}: {element}: field `{field}`: {message}")]
    Invalid { file: PathBuf, element: String, field: &'static str, message: String },
}

/// How the URDF root link is attached to the world.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RootJoint {
    /// A free-flyer named `root_joint`, as Pinocchio's loader adds.
    #[default]
    FreeFlyer,
    /// The root link is the world; its children's joints attach to it.
    Fixed,
}

/// A loaded model and the warnings raised on the way.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub model: Model,
    pub warnings: Vec<String>,
}

/// Loads a URDF file.
pub fn load(path: &Path, root: RootJoint) -> Result<Loaded, UrdfError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UrdfError::Io { file: path.to_path_buf(), message: e.to_string() })?;
    load_str(&text, path, root)
}

/// Loads URDF text; `path` is used in messages.
pub fn load_str(text: &str, path: &Path, root: RootJoint) -> Result<Loaded, UrdfError> {
    let file = path.to_path_buf();
    let robot =
        urdf_rs::read_from_string(text).map_err(|e| UrdfError::Parse { file: file.clone(), message: e.to_string() })?;
    let invalid = |element: String, field: &'static str, message: String| UrdfError::Invalid {
        file: file.clone(),
        element,
        field,
        message,
    };

    let links: HashMap<&str, &urdf_rs::Link> = robot.links.iter().map(|l| (l.name.as_str(), l)).collect();
    if links.len() != robot.links.len() {
        let dup = robot.links.iter().find(|l| robot.links.iter().filter(|m| m.name == l.name).count() > 1);
        return Err(invalid(
            format!("link `{}`", dup.map(|l| l.name.as_str()).unwrap_or("?")),
            "name",
            "duplicate link name".into(),
        ));
    }
    let mut children: HashMap<&str, Vec<&urdf_rs::Joint>> = HashMap::new();
    let mut has_parent: HashMap<&str, &str> = HashMap::new();
    for j in &robot.joints {
        let element = format!("joint `{}`", j.name);
        if !links.contains_key(j.parent.link.as_str()) {
            return Err(invalid(element, "parent", format!("link `{}` does not exist", j.parent.link)));
        }
        if !links.contains_key(j.child.link.as_str()) {
            return Err(invalid(element, "child", format!("link `{}` does not exist", j.child.link)));
        }
        if let Some(other) = has_parent.insert(j.child.link.as_str(), j.name.as_str()) {
            return Err(invalid(
                element,
                "child",
                format!("link `{}` is already the child of joint `{other}`", j.child.link),
            ));
        }
        check_finite(&j.origin.xyz.0, &j.origin.rpy.0)
            .map_err(|_| invalid(format!("joint `{}`", j.name), "origin", "must be finite".into()))?;
        children.entry(j.parent.link.as_str()).or_default().push(j);
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    let roots: Vec<&str> =
        robot.links.iter().map(|l| l.name.as_str()).filter(|n| !has_parent.contains_key(n)).collect();
    let root_link = match roots.as_slice() {
        [r] => *r,
        [] => return Err(invalid(format!("robot `{}`", robot.name), "joint", "the joints form a cycle".into())),
        many => {
            return Err(invalid(
                format!("robot `{}`", robot.name),
                "link",
                format!("several root links ({}); exactly one link may have no parent joint", many.join(", ")),
            ))
        }
    };

    let mut warnings = Vec::new();
    let mut builder = ModelBuilder::new(robot.name.clone());
    let model_err = |e: ModelError| invalid(format!("robot `{}`", robot.name), "model", e.to_string());

    // The root link: (body it is rigidly attached to (None = world), bodyMlink).
    let root_body = match root {
        RootJoint::FreeFlyer => {
            let inertia = link_inertia(links[root_link], &mut warnings);
            let b = builder
                .add_body(
                    "root_joint",
                    JointKind::FreeFlyer,
                    None,
                    Se3::identity(),
                    JointLimits::default(),
                    root_link,
                    inertia,
                )
                .map_err(model_err)?;
            Some(b)
        }
        RootJoint::Fixed => None,
    };
    let mut link_geoms: Vec<(&str, Option<usize>, Se3)> = vec![(root_link, root_body, Se3::identity())];
    // Pending joints with the body their parent link is attached to and that link's
    // placement in it. Depth-first with siblings in name order, as Pinocchio numbers bodies:
    // push in reverse so the first name pops first, and finish a subtree before its siblings.
    let mut stack = Vec::new();
    push_children(&children, &mut stack, root_link, root_body, Se3::identity());
    while let Some((j, body, b_m_link)) = stack.pop() {
        {
            let element = format!("joint `{}`", j.name);
            let origin = Se3::from_xyz_rpy(j.origin.xyz.0, j.origin.rpy.0);
            let placement = b_m_link.compose(&origin);
            let child = j.child.link.as_str();
            let axis = Vector3::from(j.axis.xyz.0);
            let limits = JointLimits {
                lower: j.limit.lower,
                upper: j.limit.upper,
                effort: j.limit.effort,
                velocity: j.limit.velocity,
            };
            let kind = match &j.joint_type {
                urdf_rs::JointType::Fixed => {
                    let child_inertia = link_inertia(links[child], &mut warnings);
                    // Links welded to the world (fixed root) carry no dynamics and no frame.
                    if let Some(b) = body {
                        builder.lump_inertia(b, &child_inertia.transformed(&placement));
                        builder.add_frame(child, b, placement).map_err(model_err)?;
                    }
                    link_geoms.push((child, body, placement));
                    push_children(&children, &mut stack, child, body, placement);
                    continue;
                }
                urdf_rs::JointType::Revolute => JointKind::Revolute { axis },
                urdf_rs::JointType::Continuous => JointKind::Revolute { axis },
                urdf_rs::JointType::Prismatic => JointKind::Prismatic { axis },
                other => {
                    return Err(invalid(element, "type", format!("{other:?} joints are not supported")));
                }
            };
            if !(axis.iter().all(|x| x.is_finite()) && axis.norm() > 1e-12) {
                return Err(invalid(element, "axis", "must be a finite non-zero vector".into()));
            }
            let limits = if j.joint_type == urdf_rs::JointType::Continuous {
                JointLimits { lower: f64::NEG_INFINITY, upper: f64::INFINITY, ..limits }
            } else {
                limits
            };
            let inertia = link_inertia(links[child], &mut warnings);
            let b = builder
                .add_body(j.name.clone(), kind, body, placement, limits, child, inertia)
                .map_err(|e| invalid(element.clone(), "name", e.to_string()))?;
            link_geoms.push((child, Some(b), Se3::identity()));
            push_children(&children, &mut stack, child, Some(b), Se3::identity());
        }
    }

    for (link, body, b_m_link) in &link_geoms {
        let Some(b) = *body else { continue };
        let l = links[link];
        // Mesh visuals are not loaded: a link that has one is drawn with its primitive
        // collision shapes instead (go1's meshes: trunk box, thigh boxes, calf cylinders).
        let has_mesh = l.visual.iter().any(|v| matches!(v.geometry, urdf_rs::Geometry::Mesh { .. }));
        if has_mesh {
            for col in &l.collision {
                let placement = b_m_link.compose(&Se3::from_xyz_rpy(col.origin.xyz.0, col.origin.rpy.0));
                let shape = match col.geometry {
                    urdf_rs::Geometry::Box { size } => Shape::Box { size: size.0 },
                    urdf_rs::Geometry::Sphere { radius } => Shape::Sphere { radius },
                    urdf_rs::Geometry::Cylinder { radius, length } | urdf_rs::Geometry::Capsule { radius, length } => {
                        Shape::Cylinder { radius, length }
                    }
                    urdf_rs::Geometry::Mesh { .. } => continue,
                };
                builder.add_geometry(b, placement, shape, [0.62, 0.64, 0.68, 1.0]);
            }
        }
        for vis in &l.visual {
            let placement = b_m_link.compose(&Se3::from_xyz_rpy(vis.origin.xyz.0, vis.origin.rpy.0));
            let rgba = vis
                .material
                .as_ref()
                .and_then(|m| m.color.as_ref())
                .map(|c| c.rgba.0.map(|x| x as f32))
                .unwrap_or([0.7, 0.7, 0.75, 1.0]);
            let shape = match vis.geometry {
                urdf_rs::Geometry::Box { size } => Shape::Box { size: size.0 },
                urdf_rs::Geometry::Sphere { radius } => Shape::Sphere { radius },
                urdf_rs::Geometry::Cylinder { radius, length } | urdf_rs::Geometry::Capsule { radius, length } => {
                    Shape::Cylinder { radius, length }
                }
                urdf_rs::Geometry::Mesh { .. } => continue,
            };
            builder.add_geometry(b, placement, shape, rgba);
        }
        if link.to_ascii_lowercase().ends_with("foot") {
            let radius = l
                .collision
                .iter()
                .find_map(|c| match c.geometry {
                    urdf_rs::Geometry::Sphere { radius } => Some(radius),
                    _ => None,
                })
                .unwrap_or(0.0);
            builder.add_contact_point(*link, b, b_m_link.trans, radius).map_err(model_err)?;
        }
    }

    let mut model = builder.build().map_err(model_err)?;
    for (i, inertia) in model.inertias.iter_mut().enumerate() {
        if let Some(fixed) = regularize(inertia) {
            warnings.push(format!(
                "{}: link `{}`: lumped inertia is not positive definite; raised to mass {:.3e}, min principal moment {:.3e}",
                file.display(),
                model.body_names[i],
                fixed.mass,
                MIN_INERTIA
            ));
            *inertia = fixed;
        }
    }
    let warnings: Vec<String> = warnings
        .into_iter()
        .map(|w| if w.starts_with(&*file.to_string_lossy()) { w } else { format!("{}: {w}", file.display()) })
        .collect();
    Ok(Loaded { model, warnings })
}

type Pending<'a> = Vec<(&'a urdf_rs::Joint, Option<usize>, Se3)>;

fn push_children<'a>(
    children: &HashMap<&str, Vec<&'a urdf_rs::Joint>>,
    stack: &mut Pending<'a>,
    link: &str,
    body: Option<usize>,
    b_m_link: Se3,
) {
    if let Some(kids) = children.get(link) {
        for j in kids.iter().rev() {
            stack.push((*j, body, b_m_link));
        }
    }
}

fn check_finite(a: &[f64; 3], b: &[f64; 3]) -> Result<(), ()> {
    if a.iter().chain(b.iter()).all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err(())
    }
}

/// The link's inertia in the link frame, with a warning if it is not physically valid.
fn link_inertia(link: &urdf_rs::Link, warnings: &mut Vec<String>) -> Inertia {
    let i = &link.inertial;
    let t = &i.inertia;
    let ic = Matrix3::new(t.ixx, t.ixy, t.ixz, t.ixy, t.iyy, t.iyz, t.ixz, t.iyz, t.izz);
    let origin = Se3::from_xyz_rpy(i.origin.xyz.0, i.origin.rpy.0);
    let mass = i.mass.value;
    if !mass.is_finite() || mass < 0.0 || !ic.iter().all(|x| x.is_finite()) {
        warnings.push(format!("link `{}`: inertial: mass or inertia is negative or not finite; ignored", link.name));
        return Inertia::zero();
    }
    if mass > 0.0 && !is_physical(&ic) {
        warnings.push(format!(
            "link `{}`: inertial/inertia: not a physical rotational inertia (negative eigenvalue or triangle inequality violated); kept as written",
            link.name
        ));
    }
    Inertia::new(mass, origin.trans, origin.rot * ic * origin.rot.transpose())
}

fn is_physical(ic: &Matrix3<f64>) -> bool {
    let e = SymmetricEigen::new(*ic).eigenvalues;
    let tol = 1e-12 * e.amax().max(1e-300);
    e.iter().all(|&x| x >= -tol) && e[0] + e[1] >= e[2] - tol && e[1] + e[2] >= e[0] - tol && e[0] + e[2] >= e[1] - tol
}

/// A positive-definite replacement if `inertia` is not (see the module docs), else `None`.
fn regularize(inertia: &Inertia) -> Option<Inertia> {
    let eig = SymmetricEigen::new(inertia.inertia);
    let bad_rot = eig.eigenvalues.iter().any(|&x| x.is_nan() || x < MIN_INERTIA);
    if inertia.mass >= MIN_MASS && !bad_rot {
        return None;
    }
    let vals = eig.eigenvalues.map(|x| x.max(MIN_INERTIA));
    let rot = eig.eigenvectors * Matrix3::from_diagonal(&vals) * eig.eigenvectors.transpose();
    Some(Inertia::new(inertia.mass.max(MIN_MASS), inertia.com, rot))
}
