//! Terrain: a ground plane (optionally sloped) and box steps/platforms, as a union of solids.
//!
//! The signed distance of a point to the terrain is the minimum over the primitives' signed
//! distances (exact for the union's exterior), and the contact normal and friction are those of
//! the primitive that attains it. Box normals are the outward normal of the nearest face inside
//! the box and the normalized offset from the nearest surface point outside it, so a point foot
//! walking off a step edge sees a normal that turns continuously around the edge.
//!
//! The plane passes through `(0, 0, height)` with normal `Ry(slope) e_z = (sin s, 0, cos s)`:
//! a positive slope makes the ground descend towards +x.

use crate::spatial::Se3;
use nalgebra::{Matrix3, Rotation3, Vector3};
use serde::{Deserialize, Serialize};

/// The ground plane.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ground {
    /// Height of the plane at the world origin (m).
    #[serde(default, deserialize_with = "crate::validate::finite")]
    pub height: f64,
    /// Inclination about the world y axis (rad); the plane descends towards +x.
    #[serde(default, deserialize_with = "crate::validate::slope")]
    pub slope: f64,
    /// Coulomb friction coefficient.
    #[serde(deserialize_with = "crate::validate::friction")]
    pub friction: f64,
}

impl Default for Ground {
    fn default() -> Self {
        Self { height: 0.0, slope: 0.0, friction: 0.8 }
    }
}

/// A solid box standing on or above the ground: a step or a platform.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerrainBox {
    /// Centre in the world (m).
    #[serde(deserialize_with = "crate::validate::finite3")]
    pub center: [f64; 3],
    /// Full side lengths (m).
    #[serde(deserialize_with = "crate::validate::positive3")]
    pub size: [f64; 3],
    /// Rotation about the world z axis (rad).
    #[serde(default, deserialize_with = "crate::validate::finite")]
    pub yaw: f64,
    /// Coulomb friction coefficient.
    #[serde(deserialize_with = "crate::validate::friction")]
    pub friction: f64,
}

/// A height map over a rectangle of the xy plane, bilinear between samples. Outside its
/// rectangle it is absent (the ground plane is still there).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heightfield {
    /// World xy of sample `heights[0][0]` (m).
    pub origin: [f64; 2],
    /// Distance between samples along x and y (m).
    #[serde(deserialize_with = "crate::validate::positive")]
    pub spacing: f64,
    /// `heights[j][i]` is the height at `origin + (i, j) * spacing` (m); at least 2 x 2, rows of
    /// equal length.
    #[serde(deserialize_with = "crate::validate::height_grid")]
    pub heights: Vec<Vec<f64>>,
    #[serde(deserialize_with = "crate::validate::friction")]
    pub friction: f64,
}

impl Heightfield {
    /// Signed distance along the local normal (first order in the height difference) and the
    /// normal, or `None` outside the rectangle.
    fn query(&self, p: &Vector3<f64>) -> Option<(f64, Vector3<f64>)> {
        let (ny, nx) = (self.heights.len(), self.heights[0].len());
        let fx = (p.x - self.origin[0]) / self.spacing;
        let fy = (p.y - self.origin[1]) / self.spacing;
        if !(fx >= 0.0 && fy >= 0.0 && fx <= (nx - 1) as f64 && fy <= (ny - 1) as f64) {
            return None;
        }
        let i = (fx.floor() as usize).min(nx - 2);
        let j = (fy.floor() as usize).min(ny - 2);
        let (tx, ty) = (fx - i as f64, fy - j as f64);
        let h = &self.heights;
        let (h00, h10, h01, h11) = (h[j][i], h[j][i + 1], h[j + 1][i], h[j + 1][i + 1]);
        let z = h00 * (1.0 - tx) * (1.0 - ty) + h10 * tx * (1.0 - ty) + h01 * (1.0 - tx) * ty + h11 * tx * ty;
        // The normal is (-dz/dx, -dz/dy, 1) normalized, computed as (-dx, -dy, spacing) scaled by
        // its largest component: a tiny spacing or a tall height step would otherwise overflow
        // the slope or its squared norm and leave a zero or NaN normal (and the contact solver
        // stalling for seconds on the degenerate frame). Where the slope is at most 1 the scale
        // is the spacing alone.
        let dx = (h10 - h00) * (1.0 - ty) + (h11 - h01) * ty;
        let dy = (h01 - h00) * (1.0 - tx) + (h11 - h10) * tx;
        let scale = dx.abs().max(dy.abs()).max(self.spacing);
        let n = Vector3::new(-dx / scale, -dy / scale, self.spacing / scale).normalize();
        Some(((p.z - z) * n.z, n))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Terrain {
    #[serde(default)]
    pub ground: Ground,
    #[serde(default)]
    pub boxes: Vec<TerrainBox>,
    #[serde(default)]
    pub heightfields: Vec<Heightfield>,
}

/// Closest terrain feature to a point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TerrainQuery {
    /// Signed distance (m), positive outside the terrain.
    pub distance: f64,
    /// Unit normal pointing out of the terrain.
    pub normal: Vector3<f64>,
    pub friction: f64,
    /// 0 for the ground, `1 + i` for box `i`, `1 + boxes + i` for heightfield `i`.
    pub primitive: usize,
}

impl Ground {
    pub fn normal(&self) -> Vector3<f64> {
        Vector3::new(self.slope.sin(), 0.0, self.slope.cos())
    }
    /// Frame with z along the normal and x along the downhill direction.
    pub fn frame(&self) -> Se3 {
        let r = Rotation3::from_axis_angle(&Vector3::y_axis(), self.slope);
        Se3::new(*r.matrix(), Vector3::new(0.0, 0.0, self.height))
    }
}

impl TerrainBox {
    pub fn placement(&self) -> Se3 {
        let r = Rotation3::from_axis_angle(&Vector3::z_axis(), self.yaw);
        Se3::new(*r.matrix(), Vector3::from(self.center))
    }

    /// Signed distance and outward normal; with `away`, the faces whose outward normal is
    /// within about 25 degrees of it are left out of the nearest-face choice inside the box
    /// (the bottom face of a step standing on the ground, for a point on the ground).
    fn query(&self, p: &Vector3<f64>, away: Option<&Vector3<f64>>) -> (f64, Vector3<f64>) {
        let m = self.placement();
        let local = m.rot.transpose() * (p - m.trans);
        let half = Vector3::from(self.size) * 0.5;
        let d = local.abs() - half;
        let outside = Vector3::new(d.x.max(0.0), d.y.max(0.0), d.z.max(0.0));
        let out_norm = outside.norm();
        if out_norm > 0.0 {
            let n_local =
                Vector3::new(outside.x * local.x.signum(), outside.y * local.y.signum(), outside.z * local.z.signum())
                    / out_norm;
            (out_norm, m.rot * n_local)
        } else {
            // Inside: the nearest face (largest, i.e. least negative, d).
            let face = |k: usize| {
                let mut n_local = Vector3::zeros();
                n_local[k] = if local[k] >= 0.0 { 1.0 } else { -1.0 };
                m.rot * n_local
            };
            let allowed = |k: usize| away.is_none_or(|a| face(k).dot(a) <= 0.9);
            let k = (0..3).filter(|&k| allowed(k)).fold(None, |best: Option<usize>, k| match best {
                Some(b) if d[b] >= d[k] => Some(b),
                _ => Some(k),
            });
            let k = k.unwrap_or(2);
            (d[k], face(k))
        }
    }
}

impl Terrain {
    /// Flat ground with the given friction.
    pub fn flat(friction: f64) -> Self {
        Self { ground: Ground { friction, ..Ground::default() }, boxes: vec![], heightfields: vec![] }
    }

    pub fn query(&self, p: &Vector3<f64>) -> TerrainQuery {
        let count = 1 + self.boxes.len() + self.heightfields.len();
        // The first of equals wins, the ground first.
        (1..count).filter_map(|i| self.primitive(i, p, None)).fold(self.ground_query(p), |best, q| {
            if q.distance < best.distance {
                q
            } else {
                best
            }
        })
    }

    fn ground_query(&self, p: &Vector3<f64>) -> TerrainQuery {
        let n = self.ground.normal();
        let distance = n.dot(&(p - Vector3::new(0.0, 0.0, self.ground.height)));
        TerrainQuery { distance, normal: n, friction: self.ground.friction, primitive: 0 }
    }

    /// Primitive `i` (numbered as [`TerrainQuery::primitive`]) seen from `p`, a box's faces
    /// toward `away` left out inside it; `None` for a heightfield outside its rectangle.
    fn primitive(&self, i: usize, p: &Vector3<f64>, away: Option<&Vector3<f64>>) -> Option<TerrainQuery> {
        let nb = self.boxes.len();
        let (distance, normal, friction) = if i == 0 {
            return Some(self.ground_query(p));
        } else if i <= nb {
            let b = &self.boxes[i - 1];
            let (d, n) = b.query(p, away);
            (d, n, b.friction)
        } else {
            let hf = &self.heightfields[i - 1 - nb];
            let (d, n) = hf.query(p)?;
            (d, n, hf.friction)
        };
        Some(TerrainQuery { distance, normal, friction, primitive: i })
    }

    /// The nearest primitive ([`Terrain::query`]) and, in a concave corner, a second one: the
    /// nearest other primitive within `within` of `p` whose closest surface point is exposed
    /// (just outside it, every other primitive is at a positive distance) and whose normal is
    /// more than about 25 degrees from the first's. A foot on the ground against the face of a
    /// step touches both; with one contact per point the face would be ignored until the foot
    /// is inside the step. The exposure test drops surfaces buried in the union (the ground
    /// under a step); the angle test drops the redundant second contact of a seam between
    /// coplanar primitives. The second primitive is measured from the first one's surface when
    /// `p` is inside the first (below).
    pub fn query_pair(&self, p: &Vector3<f64>, within: f64) -> (TerrainQuery, Option<TerrainQuery>) {
        let first = self.query(p);
        let count = 1 + self.boxes.len() + self.heightfields.len();
        if count == 1 {
            return (first, None);
        }
        // Measured from the first primitive's surface when `p` is inside it: a point sliding on
        // the ground a few 1e-5 m deep (within the solver's tolerance) next to a step standing
        // on the ground is below the step's bottom face, whose normal points down and whose
        // surface is buried in the ground; lifted back to the ground, it sees the step's face.
        // `LIFT` above the surface, so rounding cannot put it back below; inside a box the face
        // toward the first primitive (the step's bottom, on the ground) is not a candidate.
        const LIFT: f64 = 1e-9;
        let lifted = if first.distance < LIFT { p - first.normal * (first.distance - LIFT) } else { *p };
        let away = -first.normal;
        let mut second: Option<TerrainQuery> = None;
        for i in (0..count).filter(|&i| i != first.primitive) {
            if let Some(q) = self.primitive(i, &lifted, Some(&away)) {
                if q.distance <= within && second.is_none_or(|s| q.distance < s.distance) {
                    second = Some(q);
                }
            }
        }
        // Exposed: a point EXPOSED outside the surface is not inside another primitive (by more
        // than rounding: the step's face meets the ground at distance 0).
        let second = second.filter(|s| {
            const EXPOSED: f64 = 1e-7;
            let surface = lifted - s.normal * (s.distance - EXPOSED);
            s.normal.dot(&first.normal) < 0.9
                && (0..count)
                    .filter(|&j| j != s.primitive)
                    .all(|j| self.primitive(j, &surface, None).is_none_or(|q| q.distance > -0.5 * EXPOSED))
        });
        (first, second)
    }
}

/// Tangent basis `(t1, t2)` completing `n` to a right-handed frame `[t1 t2 n]`. For normals near
/// `e_z`, `t1` is close to the world x axis; the choice is smooth in `n` away from `n = -e_x`.
pub fn tangent_basis(n: &Vector3<f64>) -> (Vector3<f64>, Vector3<f64>) {
    let helper = if n.x.abs() < 0.9 { Vector3::x() } else { Vector3::y() };
    let t1 = (helper - n * n.dot(&helper)).normalize();
    let t2 = n.cross(&t1);
    (t1, t2)
}

/// Rotation whose columns are `(t1, t2, n)`.
pub fn contact_rotation(n: &Vector3<f64>) -> Matrix3<f64> {
    let (t1, t2) = tangent_basis(n);
    Matrix3::from_columns(&[t1, t2, *n])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_distance_and_normals() {
        let t = Terrain {
            ground: Ground::default(),
            boxes: vec![TerrainBox { center: [1.0, 0.0, 0.1], size: [0.4, 2.0, 0.2], yaw: 0.0, friction: 0.5 }],
            heightfields: vec![],
        };
        let q = t.query(&Vector3::new(1.0, 0.0, 0.25));
        assert!((q.distance - 0.05).abs() < 1e-12 && (q.normal - Vector3::z()).norm() < 1e-12 && q.primitive == 1);
        let q = t.query(&Vector3::new(1.0, 0.0, 0.19));
        assert!((q.distance + 0.01).abs() < 1e-12 && q.normal.z == 1.0);
        let q = t.query(&Vector3::new(0.0, 0.0, 0.05));
        assert!((q.distance - 0.05).abs() < 1e-12 && q.primitive == 0);
        let (t1, t2) = tangent_basis(&Vector3::new(0.3, -0.2, 0.9).normalize());
        assert!(t1.dot(&t2).abs() < 1e-12 && (t1.cross(&t2) - Vector3::new(0.3, -0.2, 0.9).normalize()).norm() < 1e-12);
    }

    #[test]
    fn a_point_in_a_concave_corner_has_two_contacts() {
        let t = Terrain {
            ground: Ground::default(),
            boxes: vec![TerrainBox { center: [1.0, 0.0, 0.1], size: [0.4, 2.0, 0.2], yaw: 0.0, friction: 0.5 }],
            heightfields: vec![],
        };
        // 5 mm above the ground 1 cm before the step's face: the ground first, the face second.
        let (a, b) = t.query_pair(&Vector3::new(0.79, 0.0, 0.005), 0.05);
        assert_eq!(a.primitive, 0);
        let b = b.expect("the face is a second contact");
        assert!(b.primitive == 1 && (b.distance - 0.01).abs() < 1e-12 && (b.normal + Vector3::x()).norm() < 1e-12);
        // In the edge itself, a hair into the face and the ground: the face, not the step's
        // bottom (which is buried in the ground).
        let (_, b) = t.query_pair(&Vector3::new(0.8 + 1e-7, 0.0, -1e-6), 0.05);
        let b = b.expect("the face, from inside the edge");
        assert!((b.normal + Vector3::x()).norm() < 1e-12 && (b.distance + 1e-7).abs() < 1e-12, "{b:?}");
        // A few 1e-5 m into the ground (the solver's tolerance), at the foot of the face: still
        // the face, with its own normal.
        let (a, b) = t.query_pair(&Vector3::new(0.7999, 0.0, -5e-5), 0.05);
        let b = b.expect("the face, from just below the ground");
        assert!(a.primitive == 0 && (b.normal + Vector3::x()).norm() < 1e-12 && (b.distance - 1e-4).abs() < 1e-12);
        // Beyond `within`: no second contact.
        assert!(t.query_pair(&Vector3::new(0.70, 0.0, 0.02), 0.05).1.is_none());
        // On top of the step: the ground below is buried in the step, not a contact.
        let (a, b) = t.query_pair(&Vector3::new(1.0, 0.0, 0.21), 0.5);
        assert!(a.primitive == 1 && b.is_none());
        // Flat ground alone: never a second contact.
        assert!(Terrain::flat(0.8).query_pair(&Vector3::new(0.0, 0.0, 0.01), 1.0).1.is_none());
    }

    #[test]
    fn heightfield_is_bilinear_with_upward_normals() {
        let t = Terrain {
            heightfields: vec![Heightfield {
                origin: [0.0, 0.0],
                spacing: 0.5,
                heights: vec![vec![0.0, 0.1, 0.2], vec![0.0, 0.1, 0.2]],
                friction: 0.7,
            }],
            ..Terrain::default()
        };
        // A ramp rising 0.2 per metre along x: at x = 0.75 the height is 0.15.
        let q = t.query(&Vector3::new(0.75, 0.25, 0.25));
        assert_eq!(q.primitive, 1);
        let n = Vector3::new(-0.2, 0.0, 1.0).normalize();
        assert!((q.normal - n).norm() < 1e-12);
        assert!((q.distance - 0.1 * n.z).abs() < 1e-12);
        // Outside the rectangle only the ground counts.
        assert_eq!(t.query(&Vector3::new(-1.0, 0.25, 0.25)).primitive, 0);
    }

    /// The tallest height step a scene may hold (1e6 m, `validate::height_grid`) over a spacing
    /// of 1e-300 m: the slope overflows `f64`, yet the normal must be a unit vector (it was NaN,
    /// and a 1e307 m sample gave a zero normal on which the contact solver stalled for seconds
    /// per step). Gentle slopes keep their normals bit for bit (the other heightfield test).
    #[test]
    fn a_steep_heightfield_still_gives_a_unit_normal() {
        let h = |spacing: f64| Heightfield {
            origin: [0.0, 0.0],
            spacing,
            heights: vec![vec![0.0, 1e6], vec![0.0, 0.0]],
            friction: 0.7,
        };
        for spacing in [0.25, 1e-300] {
            let t = Terrain { heightfields: vec![h(spacing)], ..Terrain::default() };
            let p = Vector3::new(0.4 * spacing, 0.4 * spacing, 0.5);
            let q = t.query(&p);
            assert_eq!(q.primitive, 1, "spacing {spacing}: {q:?}");
            assert!((q.normal.norm() - 1.0).abs() < 1e-12 && q.normal.z > 0.0, "spacing {spacing}: {q:?}");
            assert!(q.distance.is_finite(), "spacing {spacing}: {q:?}");
        }
    }

    #[test]
    fn slope_descends_towards_plus_x() {
        let g = Terrain { ground: Ground { height: 0.0, slope: 0.2, friction: 1.0 }, ..Terrain::default() };
        let z_at = |x: f64| -(0.2f64).tan() * x;
        assert!(g.query(&Vector3::new(2.0, 0.0, z_at(2.0))).distance.abs() < 1e-12);
        assert!(z_at(1.0) < 0.0);
    }
}
