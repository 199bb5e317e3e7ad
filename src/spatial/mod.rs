//! Spatial algebra in Pinocchio's conventions (Featherstone 2008, ch. 2).
//!
//! * A motion (twist, spatial velocity or acceleration) is a `Vector6` `[v (linear); w (angular)]`.
//! * A force (wrench) is a `Vector6` `[f (force); n (torque)]`.
//! * [`Se3`] `aMb = (R, p)` maps coordinates in frame b to frame a: `x_a = R x_b + p`.
//!   `aMb.act_motion(m_b)` expresses a motion given in b in frame a, `act_inv_motion` goes the
//!   other way; likewise for forces.
//! * [`Inertia`] is stored as (mass, centre of mass `c`, rotational inertia about the centre of
//!   mass), expressed in the body frame, so that `I * m = (mass (v - c x w), Ic w + c x f)`.

pub mod lie;

use nalgebra::{Matrix3, Matrix6, Vector3, Vector6};

/// Skew-symmetric matrix `[x]` with `[x] y = x × y`.
#[inline]
pub fn skew(x: &Vector3<f64>) -> Matrix3<f64> {
    Matrix3::new(0.0, -x.z, x.y, x.z, 0.0, -x.x, -x.y, x.x, 0.0)
}

#[inline]
pub fn lin(m: &Vector6<f64>) -> Vector3<f64> {
    Vector3::new(m[0], m[1], m[2])
}

#[inline]
pub fn ang(m: &Vector6<f64>) -> Vector3<f64> {
    Vector3::new(m[3], m[4], m[5])
}

#[inline]
pub fn motion(v: &Vector3<f64>, w: &Vector3<f64>) -> Vector6<f64> {
    Vector6::new(v.x, v.y, v.z, w.x, w.y, w.z)
}

/// Motion cross product `m1 × m2` (the `crm` operator).
#[inline]
pub fn cross_motion(m1: &Vector6<f64>, m2: &Vector6<f64>) -> Vector6<f64> {
    let (v1, w1, v2, w2) = (lin(m1), ang(m1), lin(m2), ang(m2));
    motion(&(w1.cross(&v2) + v1.cross(&w2)), &w1.cross(&w2))
}

/// Force cross product `m ×* f` (the `crf` operator).
#[inline]
pub fn cross_force(m: &Vector6<f64>, f: &Vector6<f64>) -> Vector6<f64> {
    let (v, w, ff, n) = (lin(m), ang(m), lin(f), ang(f));
    motion(&w.cross(&ff), &(w.cross(&n) + v.cross(&ff)))
}

/// A rigid transform `aMb`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Se3 {
    /// Rotation `aRb` (3 x 3).
    pub rot: Matrix3<f64>,
    /// Position of b's origin in a (3).
    pub trans: Vector3<f64>,
}

impl Default for Se3 {
    fn default() -> Self {
        Self::identity()
    }
}

impl Se3 {
    pub fn identity() -> Self {
        Self { rot: Matrix3::identity(), trans: Vector3::zeros() }
    }

    pub fn new(rot: Matrix3<f64>, trans: Vector3<f64>) -> Self {
        Self { rot, trans }
    }

    pub fn from_translation(trans: Vector3<f64>) -> Self {
        Self { rot: Matrix3::identity(), trans }
    }

    /// URDF-style origin: translation `xyz` and fixed-axis roll-pitch-yaw `R = Rz(y) Ry(p) Rx(r)`.
    pub fn from_xyz_rpy(xyz: [f64; 3], rpy: [f64; 3]) -> Self {
        let r = nalgebra::Rotation3::from_euler_angles(rpy[0], rpy[1], rpy[2]);
        Self { rot: *r.matrix(), trans: Vector3::from(xyz) }
    }

    /// `self * other` (`aMc = aMb * bMc`).
    #[inline]
    pub fn compose(&self, other: &Se3) -> Se3 {
        Se3 { rot: self.rot * other.rot, trans: self.rot * other.trans + self.trans }
    }

    #[inline]
    pub fn inverse(&self) -> Se3 {
        let rt = self.rot.transpose();
        Se3 { rot: rt, trans: -(rt * self.trans) }
    }

    /// Point in b expressed in a.
    #[inline]
    pub fn act_point(&self, p: &Vector3<f64>) -> Vector3<f64> {
        self.rot * p + self.trans
    }

    #[inline]
    pub fn act_motion(&self, m: &Vector6<f64>) -> Vector6<f64> {
        let w = self.rot * ang(m);
        motion(&(self.rot * lin(m) + self.trans.cross(&w)), &w)
    }

    #[inline]
    pub fn act_inv_motion(&self, m: &Vector6<f64>) -> Vector6<f64> {
        let rt = self.rot.transpose();
        let (v, w) = (lin(m), ang(m));
        motion(&(rt * (v - self.trans.cross(&w))), &(rt * w))
    }

    #[inline]
    pub fn act_force(&self, f: &Vector6<f64>) -> Vector6<f64> {
        let ff = self.rot * lin(f);
        motion(&ff, &(self.rot * ang(f) + self.trans.cross(&ff)))
    }

    #[inline]
    pub fn act_inv_force(&self, f: &Vector6<f64>) -> Vector6<f64> {
        let rt = self.rot.transpose();
        let (ff, n) = (lin(f), ang(f));
        motion(&(rt * ff), &(rt * (n - self.trans.cross(&ff))))
    }

    /// The 6 x 6 motion action matrix `aXb` (`act_motion` as a matrix).
    pub fn action_matrix(&self) -> Matrix6<f64> {
        let mut x = Matrix6::zeros();
        x.fixed_view_mut::<3, 3>(0, 0).copy_from(&self.rot);
        x.fixed_view_mut::<3, 3>(3, 3).copy_from(&self.rot);
        x.fixed_view_mut::<3, 3>(0, 3).copy_from(&(skew(&self.trans) * self.rot));
        x
    }
}

/// Spatial inertia of a rigid body, expressed in some body frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inertia {
    /// Mass (kg).
    pub mass: f64,
    /// Centre of mass in the body frame (m).
    pub com: Vector3<f64>,
    /// Rotational inertia about the centre of mass, in body-frame axes (kg m^2).
    pub inertia: Matrix3<f64>,
}

impl Default for Inertia {
    fn default() -> Self {
        Self::zero()
    }
}

impl Inertia {
    pub fn zero() -> Self {
        Self { mass: 0.0, com: Vector3::zeros(), inertia: Matrix3::zeros() }
    }

    pub fn new(mass: f64, com: Vector3<f64>, inertia: Matrix3<f64>) -> Self {
        Self { mass, com, inertia }
    }

    /// Solid box of the given full side lengths, centred at the origin.
    pub fn solid_box(mass: f64, size: [f64; 3]) -> Self {
        let [x, y, z] = size;
        let k = mass / 12.0;
        Self::new(
            mass,
            Vector3::zeros(),
            Matrix3::from_diagonal(&Vector3::new(k * (y * y + z * z), k * (x * x + z * z), k * (x * x + y * y))),
        )
    }

    /// `I * m` (a force).
    #[inline]
    pub fn mul_motion(&self, m: &Vector6<f64>) -> Vector6<f64> {
        let (v, w) = (lin(m), ang(m));
        let f = self.mass * (v - self.com.cross(&w));
        motion(&f, &(self.inertia * w + self.com.cross(&f)))
    }

    /// The same inertia expressed in frame a, given `aMb` with `self` in b.
    pub fn transformed(&self, a_m_b: &Se3) -> Inertia {
        Inertia {
            mass: self.mass,
            com: a_m_b.act_point(&self.com),
            inertia: a_m_b.rot * self.inertia * a_m_b.rot.transpose(),
        }
    }

    /// Sum of two inertias given in the same frame (parallel-axis theorem).
    pub fn add(&self, other: &Inertia) -> Inertia {
        let m = self.mass + other.mass;
        if m <= 0.0 {
            return Inertia::zero();
        }
        let c = (self.mass * self.com + other.mass * other.com) / m;
        let d1 = self.com - c;
        let d2 = other.com - c;
        // -m [d]^2 = m (|d|^2 I - d d^T), without forming the skew matrices.
        let steiner = |mass: f64, d: &Vector3<f64>| -> Matrix3<f64> {
            mass * (Matrix3::from_diagonal_element(d.norm_squared()) - d * d.transpose())
        };
        Inertia {
            mass: m,
            com: c,
            inertia: self.inertia + other.inertia + steiner(self.mass, &d1) + steiner(other.mass, &d2),
        }
    }

    /// The 6 x 6 matrix of this inertia.
    // Not inlined into callers' AVX2 copies: there LLVM builds its zero blocks with a
    // register-to-register VEX `vmovq`, which valgrind 3.19 (our instruction counter) cannot
    // decode.
    #[inline(never)]
    pub fn matrix(&self) -> Matrix6<f64> {
        let c = skew(&self.com);
        let mut m6 = Matrix6::zeros();
        m6.fixed_view_mut::<3, 3>(0, 0).copy_from(&(Matrix3::identity() * self.mass));
        m6.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-self.mass * c));
        m6.fixed_view_mut::<3, 3>(3, 0).copy_from(&(self.mass * c));
        m6.fixed_view_mut::<3, 3>(3, 3).copy_from(&(self.inertia - self.mass * c * c));
        m6
    }
}

/// `aXb^T`-free transform of a 6 x 6 inertia matrix from frame b to a: `X* I X^-1`.
#[inline]
pub fn transform_inertia_matrix(a_m_b: &Se3, i_b: &Matrix6<f64>) -> Matrix6<f64> {
    let x = a_m_b.inverse().action_matrix();
    x.transpose() * i_b * x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inertia_matrix_matches_mul() {
        let i =
            Inertia::new(2.0, Vector3::new(0.1, -0.2, 0.3), Matrix3::new(1.0, 0.1, 0.0, 0.1, 2.0, 0.2, 0.0, 0.2, 3.0));
        let m = Vector6::new(0.3, -1.0, 2.0, 0.5, 0.7, -0.2);
        assert!((i.matrix() * m - i.mul_motion(&m)).norm() < 1e-12);
        let x = Se3::from_xyz_rpy([0.1, 0.2, 0.3], [0.4, -0.5, 0.6]);
        let lhs = i.transformed(&x).matrix();
        let rhs = transform_inertia_matrix(&x, &i.matrix());
        assert!((lhs - rhs).norm() < 1e-12);
        let f = i.mul_motion(&m);
        assert!((x.act_force(&f) - i.transformed(&x).mul_motion(&x.act_motion(&m))).norm() < 1e-12);
    }

    #[test]
    fn duality_of_motion_and_force_actions() {
        let x = Se3::from_xyz_rpy([0.1, -0.2, 0.3], [0.4, 0.5, -0.6]);
        let m = Vector6::new(0.3, -1.0, 2.0, 0.5, 0.7, -0.2);
        let f = Vector6::new(1.0, 2.0, -3.0, 0.1, 0.2, 0.3);
        assert!((x.act_motion(&m).dot(&x.act_force(&f)) - m.dot(&f)).abs() < 1e-12);
        assert!((x.act_inv_motion(&x.act_motion(&m)) - m).norm() < 1e-12);
        assert!((x.act_inv_force(&x.act_force(&f)) - f).norm() < 1e-12);
        assert!((x.action_matrix() * m - x.act_motion(&m)).norm() < 1e-12);
    }
}
