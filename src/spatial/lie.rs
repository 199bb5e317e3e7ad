//! Exponential and logarithm maps of SO(3) and SE(3), body-frame (right) convention as in
//! Pinocchio: `integrate(M, nu) = M * exp6(nu)` with `nu = [v; w]` a body twist.
//!
//! `exp6(v, w) = (exp3(w), V(w) v)` with
//! `V(w) = I + (1 - cos t)/t^2 [w] + (t - sin t)/t^3 [w]^2`, `t = |w|` (Murray, Li, Sastry 1994).
//! Small angles use Taylor expansions so the maps stay smooth through `t = 0`.

use super::{skew, Se3};
use nalgebra::{Matrix3, Rotation3, UnitQuaternion, Vector3, Vector6};

/// `V(w)` of the SE(3) exponential (the left Jacobian of SO(3)).
pub fn se3_v(w: &Vector3<f64>) -> Matrix3<f64> {
    let t2 = w.norm_squared();
    let s = skew(w);
    let (a, b) = if t2 < 1e-8 {
        (0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0)
    } else {
        let t = t2.sqrt();
        ((1.0 - t.cos()) / t2, (t - t.sin()) / (t2 * t))
    };
    Matrix3::identity() + a * s + b * s * s
}

/// `V(w)^-1`.
pub fn se3_v_inv(w: &Vector3<f64>) -> Matrix3<f64> {
    let t2 = w.norm_squared();
    let s = skew(w);
    let c = if t2 < 1e-8 {
        1.0 / 12.0 + t2 / 720.0
    } else {
        let t = t2.sqrt();
        (1.0 - t * t.sin() / (2.0 * (1.0 - t.cos()))) / t2
    };
    Matrix3::identity() - 0.5 * s + c * s * s
}

/// `exp6([v; w])` as a transform.
pub fn exp6(nu: &Vector6<f64>) -> Se3 {
    let v = Vector3::new(nu[0], nu[1], nu[2]);
    let w = Vector3::new(nu[3], nu[4], nu[5]);
    let r = UnitQuaternion::from_scaled_axis(w);
    Se3::new(*r.to_rotation_matrix().matrix(), se3_v(&w) * v)
}

/// `log3(R)`: the rotation vector of `R`, `|w| <= pi`, through a unit quaternion. A rounded
/// product of rotations near the identity can have a trace above 3, where the axis-angle of the
/// matrix itself (`acos((tr R - 1) / 2)`) is NaN; this is finite and 0 there.
///
/// The quaternion comes from Shepperd's branch on the largest of the trace and the diagonal
/// (Shepperd 1978), which needs `R` orthogonal to rounding only, as every rotation here is:
/// `UnitQuaternion::from_matrix` iterates toward the closest rotation and cost ten times as
/// much (3 % of an MPC replan's instructions) for the same vector to 1e-16.
pub fn log3(r: &Matrix3<f64>) -> Vector3<f64> {
    UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(*r)).scaled_axis()
}

/// `log6(M)` as a twist `[v; w]`, with `|w| <= pi`.
pub fn log6(m: &Se3) -> Vector6<f64> {
    let w = log3(&m.rot);
    let v = se3_v_inv(&w) * m.trans;
    Vector6::new(v.x, v.y, v.z, w.x, w.y, w.z)
}

/// Right Jacobian of SE(3) for `xi = [v; w]` (Barfoot 2017, eq. 7.86 with `J_r(xi) = J_l(-xi)`):
/// `exp(xi + d) = exp(xi) exp(J_r(xi) d + O(d^2))`. Pinocchio's `Jexp6`.
pub fn jr6(xi: &Vector6<f64>) -> nalgebra::Matrix6<f64> {
    jl6(&-xi)
}

/// Left Jacobian of SE(3): `exp(xi + d) = exp(J_l(xi) d + O(d^2)) exp(xi)`.
pub fn jl6(xi: &Vector6<f64>) -> nalgebra::Matrix6<f64> {
    let rho = Vector3::new(xi[0], xi[1], xi[2]);
    let phi = Vector3::new(xi[3], xi[4], xi[5]);
    let j = se3_v(&phi);
    let (p, r) = (skew(&phi), skew(&rho));
    let t2 = phi.norm_squared();
    let (a, b, c) = if t2 < 1e-6 {
        (1.0 / 6.0 - t2 / 120.0, 1.0 / 24.0 - t2 / 720.0, 1.0 / 120.0 - t2 / 2520.0)
    } else {
        let t = t2.sqrt();
        let (s, co) = (t.sin(), t.cos());
        (
            (t - s) / (t2 * t),
            (t2 + 2.0 * co - 2.0) / (2.0 * t2 * t2),
            (2.0 * t - 3.0 * s + t * co) / (2.0 * t2 * t2 * t),
        )
    };
    let q = 0.5 * r
        + a * (p * r + r * p + p * r * p)
        + b * (p * p * r + r * p * p - 3.0 * p * r * p)
        + c * (p * r * p * p + p * p * r * p);
    let mut out = nalgebra::Matrix6::zeros();
    out.fixed_view_mut::<3, 3>(0, 0).copy_from(&j);
    out.fixed_view_mut::<3, 3>(3, 3).copy_from(&j);
    out.fixed_view_mut::<3, 3>(0, 3).copy_from(&q);
    out
}

/// `J_r^-1(phi)` of SO(3): `I + [phi]x / 2 + (1/theta^2 - (1 + cos theta) / (2 theta sin theta)) [phi]x^2`.
pub fn so3_right_jacobian_inv(phi: &Vector3<f64>) -> Matrix3<f64> {
    let t = phi.norm();
    let k = phi.cross_matrix();
    let c = if t < 1e-4 { 1.0 / 12.0 + t * t / 720.0 } else { 1.0 / (t * t) - (1.0 + t.cos()) / (2.0 * t * t.sin()) };
    Matrix3::identity() + 0.5 * k + c * k * k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn right_jacobian_matches_finite_differences() {
        for xi in [Vector6::new(0.3, -0.2, 0.5, 0.4, -0.7, 0.2), Vector6::new(0.3, -0.2, 0.5, 1e-5, 2e-5, -1e-5)] {
            let jr = jr6(&xi);
            let base = exp6(&xi);
            for k in 0..6 {
                let mut d = Vector6::zeros();
                d[k] = 1e-6;
                let plus = log6(&base.inverse().compose(&exp6(&(xi + d))));
                let minus = log6(&base.inverse().compose(&exp6(&(xi - d))));
                let col = (plus - minus) / 2e-6;
                assert!((col - jr.column(k)).norm() < 1e-8, "column {k}: {col} vs {}", jr.column(k));
            }
        }
    }

    #[test]
    fn exp_log_roundtrip() {
        for nu in [
            Vector6::new(0.1, -0.2, 0.3, 0.4, -0.5, 0.6),
            Vector6::new(0.1, -0.2, 0.3, 1e-9, 2e-9, -1e-9),
            Vector6::new(1.0, 2.0, 3.0, 0.0, 0.0, 3.0),
        ] {
            let back = log6(&exp6(&nu));
            assert!((back - nu).norm() < 1e-10, "{back} vs {nu}");
        }
    }
}

#[cfg(test)]
mod log3_tests {
    use super::*;

    /// A product of a rotation and its rounded transpose: not exactly orthogonal, trace just
    /// above 3 in some entries' rounding. The matrix axis-angle is NaN on such input; `log3`
    /// must not be.
    #[test]
    fn log3_is_finite_and_small_near_the_identity() {
        let mut worst = 0.0f64;
        let mut matrix_nan = 0;
        for i in 0..2000 {
            let a = 1e-3 * i as f64;
            let r0 = *Rotation3::from_euler_angles(0.3 + a, -0.2 * a, 1.0 - a).matrix();
            let r1 = *Rotation3::from_euler_angles(1e-12 * i as f64, 0.0, 0.0).matrix() * r0;
            let m = r0.transpose() * r1;
            let w = log3(&m);
            assert!(w.iter().all(|x| x.is_finite()), "{i}: {w:?}");
            worst = worst.max((w.norm() - 1e-12 * i as f64).abs());
            matrix_nan += Rotation3::from_matrix_unchecked(m).scaled_axis().iter().any(|x| x.is_nan()) as usize;
        }
        assert!(worst < 1e-14, "{worst}");
        eprintln!("matrix axis-angle NaN on {matrix_nan} of 2000");
    }

    /// `log3` inverts the exponential about each axis and a skew one, for angles from 1e-9 to
    /// just below pi: every branch of Shepperd's rule (the trace, then each diagonal entry).
    #[test]
    fn log3_inverts_the_exponential_on_every_branch() {
        for axis in [
            Vector3::new(1.0, 0.0, 0.0),
            Vector3::new(0.0, 1.0, 0.0),
            Vector3::new(0.0, 0.0, 1.0),
            Vector3::new(0.3, -0.5, 0.8),
        ] {
            for angle in [1e-9, 0.4, 2.0, 3.0, std::f64::consts::PI - 1e-6] {
                let w = axis.normalize() * angle;
                let r = *Rotation3::from_scaled_axis(w).matrix();
                let back = log3(&r);
                assert!((back - w).norm() < 1e-9, "{w:?} -> {back:?}");
            }
        }
    }
}
