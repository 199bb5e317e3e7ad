//! Robots: the builtins (and their URDF text) and URDF files with a choice of contact points.

use crate::value_error;
use contactlab::model::builtin;
use contactlab::model::configuration::neutral;
use contactlab::model::urdf::{load, RootJoint};
use contactlab::model::{ContactPoint, Model};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Arc;

/// The pairs of legs of a builtin name `legged<N>`.
pub(crate) fn legged_pairs(name: &str) -> PyResult<usize> {
    let unknown =
        || value_error(format!("unknown builtin robot `{name}`: quadruped, hopper or legged<N> (N = 4, 6, ..., 20)"));
    let legs: usize = name.strip_prefix("legged").and_then(|n| n.parse().ok()).ok_or_else(unknown)?;
    if !legs.is_multiple_of(2) || !builtin::LEG_PAIRS.contains(&(legs / 2)) {
        return Err(unknown());
    }
    Ok(legs / 2)
}

/// The URDF text of a builtin robot (`Model.builtin`'s names; the quadruped without the trunk
/// corners the builtin adds as contact points), e.g. to load the same robot into another
/// simulator.
#[pyfunction]
pub(crate) fn builtin_urdf(name: &str) -> PyResult<String> {
    match name {
        "quadruped" => Ok(builtin::QUADRUPED_URDF.to_string()),
        "hopper" => Ok(builtin::HOPPER_URDF.to_string()),
        other => builtin::legged_urdf(legged_pairs(other)?).map_err(value_error),
    }
}

/// One entry of `Model.from_urdf(contacts=...)`: a frame name, or a dict with `frame`,
/// `position` and `radius` (the fields of a scene's `robot.contacts`).
struct ContactEntry {
    frame: String,
    position: [f64; 3],
    radius: f64,
}

impl ContactEntry {
    fn parse(entry: &Bound<'_, PyAny>) -> Result<Self, String> {
        if let Ok(frame) = entry.extract::<String>() {
            return Ok(Self { frame, position: [0.0; 3], radius: 0.0 });
        }
        let Ok(d) = entry.cast::<PyDict>() else {
            return Err("expected a frame name or a dict {frame, position, radius}".into());
        };
        for key in d.keys() {
            let key: String = key.extract().map_err(|_| "keys must be strings".to_string())?;
            if !["frame", "position", "radius"].contains(&key.as_str()) {
                return Err(format!("unknown field `{key}`; fields: frame, position, radius"));
            }
        }
        let frame: String = match d.get_item("frame").map_err(|e| e.to_string())? {
            Some(f) => f.extract().map_err(|_| "frame: expected a string".to_string())?,
            None => return Err("frame: missing".into()),
        };
        let position: [f64; 3] = match d.get_item("position").map_err(|e| e.to_string())? {
            Some(p) => p.extract().map_err(|_| "position: expected 3 numbers".to_string())?,
            None => [0.0; 3],
        };
        if position.iter().any(|x| !x.is_finite()) {
            return Err("position: every value must be finite".into());
        }
        let radius: f64 = match d.get_item("radius").map_err(|e| e.to_string())? {
            Some(r) => r.extract().map_err(|_| "radius: expected a number".to_string())?,
            None => 0.0,
        };
        if !(radius.is_finite() && radius >= 0.0) {
            return Err(format!("radius: must be finite and >= 0, got {radius}"));
        }
        Ok(Self { frame, position, radius })
    }
}

/// A robot: kinematic tree, inertias, actuators and contact points (immutable).
#[pyclass(name = "Model", module = "contactlab", frozen)]
#[derive(Clone)]
pub(crate) struct PyModel {
    pub(crate) inner: Arc<Model>,
}

#[pymethods]
impl PyModel {
    /// A robot that ships with ContactLab: "quadruped" (12 DoF, point feet), "hopper", or
    /// "legged<N>" (the scaling family: N = 4, 6, ..., 20 legs of the quadruped's, 6 + 3 N DoF).
    #[staticmethod]
    fn builtin(name: &str) -> PyResult<Self> {
        let loaded = match name {
            "quadruped" => builtin::quadruped(),
            "hopper" => builtin::hopper(),
            other => builtin::legged(legged_pairs(other)?),
        }
        .map_err(value_error)?;
        Ok(Self { inner: Arc::new(loaded.model) })
    }

    /// A robot from a URDF file; `floating` adds a free-flyer root (else the root link is fixed).
    /// Contact points: by default every link whose name ends in `foot`, with the radius of its
    /// first collision sphere. `contacts` replaces that choice, as a scene's `robot.contacts`
    /// does: a list whose entries are a link or frame name (a point at its origin) or a dict
    /// `{"frame": name, "position": [x, y, z] (m, in that frame), "radius": r (m)}`. Errors name
    /// the file and element, or the entry.
    #[staticmethod]
    #[pyo3(signature = (path, floating = true, contacts = None))]
    fn from_urdf(path: PathBuf, floating: bool, contacts: Option<Vec<Bound<'_, PyAny>>>) -> PyResult<Self> {
        let root = if floating { RootJoint::FreeFlyer } else { RootJoint::Fixed };
        let mut model = load(&path, root).map_err(value_error)?.model;
        if let Some(list) = contacts {
            let mut points = Vec::with_capacity(list.len());
            for (i, entry) in list.iter().enumerate() {
                let spec = ContactEntry::parse(entry).map_err(|e| value_error(format!("contacts[{i}]: {e}")))?;
                let Some((body, placement)) = model.resolve_body_or_frame(&spec.frame) else {
                    return Err(value_error(format!(
                        "contacts[{i}].frame: no link or frame named `{}` in {}",
                        spec.frame,
                        path.display()
                    )));
                };
                points.push(ContactPoint {
                    name: spec.frame,
                    body,
                    position: placement.act_point(&nalgebra::Vector3::from(spec.position)),
                    radius: spec.radius,
                });
            }
            model.contact_points = points;
        }
        Ok(Self { inner: Arc::new(model) })
    }

    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    /// Configuration size (quaternion of a free-flyer counted as 4).
    #[getter]
    fn nq(&self) -> usize {
        self.inner.nq
    }
    /// Velocity (tangent) size.
    #[getter]
    fn nv(&self) -> usize {
        self.inner.nv
    }
    /// Actuated degrees of freedom.
    #[getter]
    fn nu(&self) -> usize {
        self.inner.nu
    }
    /// Body names (the names pulls and point costs use).
    #[getter]
    fn body_names(&self) -> Vec<String> {
        self.inner.body_names.clone()
    }
    /// Names of the actuated joints, in the order of `u` (nu).
    #[getter]
    fn actuated_joints(&self) -> Vec<String> {
        self.inner.actuated_joints().map(|j| j.name.clone()).collect()
    }
    /// Names of the contact candidates, in the order of `Simulation.contacts()`.
    #[getter]
    fn contact_names(&self) -> Vec<String> {
        self.inner.contact_points.iter().map(|c| c.name.clone()).collect()
    }
    /// The neutral configuration (nq).
    fn neutral<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_vec(py, neutral(&self.inner).as_slice().to_vec())
    }
    fn __repr__(&self) -> String {
        format!("Model({:?}: nq {}, nv {}, nu {})", self.inner.name, self.inner.nq, self.inner.nv, self.inner.nu)
    }
}
