//! Second-order-cone algebra for the 3-D cone `Q = {(x0, x1): x0 >= ||x1||}`: determinant,
//! Jordan product `x o y = (x^T y, x0 y1 + y0 x1)` with identity `e = (1, 0, 0)`, the arrow
//! matrix `Arw(x)` (`x o y = Arw(x) y`) and its inverse, Nesterov-Todd scaling, the longest step
//! that stays in the cone, and the 3x3 products the solver needs. Row-major 3x3 matrices as
//! `[f64; 9]`.

/// `sqrt(a^2 + b^2)` without `hypot`'s overflow protection (normalized data never needs it, and
/// `hypot` costs tens of nanoseconds).
pub(super) fn norm2(a: f64, b: f64) -> f64 {
    (a * a + b * b).sqrt()
}

/// The Euclidean projection of `x = (x_n, x_t)` onto the friction cone
/// `K_mu = {(l_n, l_t): ||l_t|| <= mu l_n}`: `x` itself inside, `0` inside the polar cone, else
/// the nearest point of the boundary ray through `x_t`.
pub(super) fn project_friction_cone(x: [f64; 3], mu: f64) -> [f64; 3] {
    let r = norm2(x[1], x[2]);
    if r <= mu * x[0] {
        x
    } else if mu * r <= -x[0] {
        [0.0; 3]
    } else {
        let t = (x[0] + mu * r) / (1.0 + mu * mu);
        [t, mu * t * x[1] / r, mu * t * x[2] / r]
    }
}

/// `det(x) = x0^2 - ||x1||^2` of the second-order cone, as `(x0 - ||x1||)(x0 + ||x1||)`, which
/// loses less precision near the boundary.
pub(super) fn soc_det(x: [f64; 3]) -> f64 {
    let nx = norm2(x[1], x[2]);
    (x[0] - nx) * (x[0] + nx)
}

/// Jordan product of the second-order cone, `x o y = (x^T y, x0 y1 + y0 x1)`.
pub(super) fn jordan(x: [f64; 3], y: [f64; 3]) -> [f64; 3] {
    [x[0] * y[0] + x[1] * y[1] + x[2] * y[2], x[0] * y[1] + y[0] * x[1], x[0] * y[2] + y[0] * x[2]]
}

/// Arrow matrix `Arw(x) = [[x0, x1^T], [x1, x0 I]]`, row-major.
pub(super) fn arrow(x: [f64; 3]) -> [f64; 9] {
    [x[0], x[1], x[2], x[1], x[0], 0.0, x[2], 0.0, x[0]]
}

/// `Arw(x)^-1 = 1/det [[x0, -x1^T], [-x1, (det/x0) I + x1 x1^T / x0]]`, `det = x0^2 - ||x1||^2`;
/// `x` is strictly inside the cone (guaranteed by the step rule).
pub(super) fn arrow_inverse(x: [f64; 3]) -> [f64; 9] {
    let inv = 1.0 / soc_det(x);
    let inv0 = 1.0 / x[0];
    [
        x[0] * inv,
        -x[1] * inv,
        -x[2] * inv,
        -x[1] * inv,
        inv0 + x[1] * x[1] * inv * inv0,
        x[1] * x[2] * inv * inv0,
        -x[2] * inv,
        x[1] * x[2] * inv * inv0,
        inv0 + x[2] * x[2] * inv * inv0,
    ]
}

/// `Arw(x)^-1 v` given `1 / det(x)`: `y0 = (x0 v0 - x1^T v1) / det`, `y1 = (v1 - y0 x1) / x0`.
pub(super) fn arrow_solve(x: [f64; 3], inv_det: f64, v: [f64; 3]) -> [f64; 3] {
    let y0 = (x[0] * v[0] - x[1] * v[1] - x[2] * v[2]) * inv_det;
    let inv0 = 1.0 / x[0];
    [y0, (v[1] - y0 * x[1]) * inv0, (v[2] - y0 * x[2]) * inv0]
}

/// Nesterov-Todd scaling of one cone pair (see [`nt_scaling`]).
pub(super) struct NtScaling {
    /// `W` (3x3 row-major, symmetric).
    pub(super) w: [f64; 9],
    /// `W^-1` (3x3 row-major).
    pub(super) winv: [f64; 9],
    /// The scaled point `lambda = W z = W^-1 s`.
    pub(super) l: [f64; 3],
    /// `det(lambda) = sqrt(det(s) det(z))`.
    pub(super) det_l: f64,
}

/// Nesterov-Todd scaling of `s, z` strictly inside the second-order cone (as in ECOS, Domahidi
/// et al. 2013, and CVXOPT, Vandenberghe 2010): the symmetric `W` with `W z = W^-1 s = lambda`,
/// given `det_s = s'Js`, `det_z = z'Jz` (computed by [`soc_det`]). With `J = diag(1, -1, -1)`,
/// `s_ = s / sqrt(s'Js)`, `z_ = z / sqrt(z'Jz)`, `g = sqrt((1 + z_'s_) / 2)`,
/// `a = (s_0 + z_0) / (2g)`, `q = (s_1 - z_1) / (2g)` (so `a^2 - |q|^2 = 1`) and
/// `eta = (s'Js / z'Jz)^(1/4)`: `W = eta [[a, q'], [q, I + q q' / (1 + a)]]`,
/// `W^-1 = J W J / eta^2`.
pub(super) fn nt_scaling(s: [f64; 3], z: [f64; 3], det_s: f64, det_z: f64) -> NtScaling {
    let (ds, dz) = (det_s.sqrt(), det_z.sqrt());
    let (is, iz) = (1.0 / ds, 1.0 / dz);
    let sb = [s[0] * is, s[1] * is, s[2] * is];
    let zb = [z[0] * iz, z[1] * iz, z[2] * iz];
    let g = ((1.0 + zb[0] * sb[0] + zb[1] * sb[1] + zb[2] * sb[2]) * 0.5).sqrt();
    let ig = 0.5 / g;
    let a = (sb[0] + zb[0]) * ig;
    let q = [(sb[1] - zb[1]) * ig, (sb[2] - zb[2]) * ig];
    let eta = (ds * iz).sqrt();
    let ieta = 1.0 / eta;
    let c = 1.0 / (1.0 + a);
    let (m11, m12, m22) = (1.0 + c * q[0] * q[0], c * q[0] * q[1], 1.0 + c * q[1] * q[1]);
    let w = [eta * a, eta * q[0], eta * q[1], eta * q[0], eta * m11, eta * m12, eta * q[1], eta * m12, eta * m22];
    let winv = [
        ieta * a,
        -ieta * q[0],
        -ieta * q[1],
        -ieta * q[0],
        ieta * m11,
        ieta * m12,
        -ieta * q[1],
        ieta * m12,
        ieta * m22,
    ];
    let l = mat3_vec(&w, z);
    NtScaling { w, winv, l, det_l: ds * dz }
}

/// `A x` for the leading 3x3 row-major block of `a`.
pub(super) fn mat3_vec(a: &[f64], x: [f64; 3]) -> [f64; 3] {
    let a = &a[..9];
    [
        a[0] * x[0] + a[1] * x[1] + a[2] * x[2],
        a[3] * x[0] + a[4] * x[1] + a[5] * x[2],
        a[6] * x[0] + a[7] * x[1] + a[8] * x[2],
    ]
}

/// `A B` of two row-major 3x3 matrices.
pub(super) fn mat3_mul(a: &[f64; 9], b: &[f64; 9]) -> [f64; 9] {
    let mut c = [0.0; 9];
    for r in 0..3 {
        for j in 0..3 {
            c[3 * r + j] = a[3 * r] * b[j] + a[3 * r + 1] * b[3 + j] + a[3 * r + 2] * b[6 + j];
        }
    }
    c
}

/// Largest `alpha >= 0` with `x + alpha dx >= 0` (for `x > 0`).
pub(super) fn ray_step(x: f64, dx: f64) -> f64 {
    if dx < 0.0 {
        -x / dx
    } else {
        f64::INFINITY
    }
}

/// Largest `alpha >= 0` with `x + alpha dx` in the second-order cone, for `x` strictly inside
/// with `c = det(x)` (from [`soc_det`]): the first positive root of
/// `det(x + alpha dx) = a alpha^2 + 2 b alpha + c`.
pub(super) fn soc_step(x: [f64; 3], dx: [f64; 3], c: f64) -> f64 {
    let a = dx[0] * dx[0] - dx[1] * dx[1] - dx[2] * dx[2];
    let b = x[0] * dx[0] - x[1] * dx[1] - x[2] * dx[2];
    let scale = dx[0].abs().max(dx[1].abs()).max(dx[2].abs());
    if scale == 0.0 {
        return f64::INFINITY;
    }
    if a.abs() <= 1e-14 * scale * scale {
        return if b < 0.0 { -c / (2.0 * b) } else { f64::INFINITY };
    }
    let disc = b * b - a * c;
    if disc < 0.0 {
        // det never vanishes: the ray stays inside.
        return f64::INFINITY;
    }
    // Stable roots of a t^2 + 2 b t + c: q = -(b + sign(b) sqrt(disc)), t = q / a and c / q.
    let q = -(b + b.signum() * disc.sqrt());
    let mut best = f64::INFINITY;
    for t in [q / a, c / q] {
        if t > 0.0 && t < best {
            best = t;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_inverse_is_inverse() {
        let x = [2.0, 0.7, -1.1];
        let p = arrow_inverse(x);
        let a = arrow(x);
        for r in 0..3 {
            for c in 0..3 {
                let v: f64 = (0..3).map(|j| a[3 * r + j] * p[3 * j + c]).sum();
                let e = if r == c { 1.0 } else { 0.0 };
                assert!((v - e).abs() < 1e-12, "{r} {c} {v}");
            }
        }
    }

    #[test]
    fn arrow_solve_inverts_arrow() {
        let x = [2.0, 0.7, -1.1];
        let v = [0.3, -1.2, 0.8];
        let y = arrow_solve(x, 1.0 / soc_det(x), v);
        let back = mat3_vec(&arrow(x), y);
        for j in 0..3 {
            assert!((back[j] - v[j]).abs() < 1e-12, "{back:?}");
        }
    }

    #[test]
    fn nt_scaling_maps_both_points_to_lambda() {
        let s = [2.0, 0.7, -1.1];
        let z = [0.5, -0.2, 0.3];
        let nt = nt_scaling(s, z, soc_det(s), soc_det(z));
        let (w, winv, l) = (nt.w, nt.winv, nt.l);
        let a = mat3_vec(&w, z);
        let b = mat3_vec(&winv, s);
        let id = mat3_mul(&w, &winv);
        for j in 0..3 {
            assert!((a[j] - l[j]).abs() < 1e-12 && (b[j] - l[j]).abs() < 1e-12, "{a:?} {b:?}");
            for c in 0..3 {
                let e = if j == c { 1.0 } else { 0.0 };
                assert!((id[3 * j + c] - e).abs() < 1e-12);
            }
        }
        assert!((w[1] - w[3]).abs() < 1e-14, "W is symmetric");
    }

    #[test]
    fn soc_step_hits_boundary() {
        let x = [1.0, 0.2, 0.1];
        let dx = [-0.3, 0.5, -0.2];
        let t = soc_step(x, dx, soc_det(x));
        let y = [x[0] + t * dx[0], x[1] + t * dx[1], x[2] + t * dx[2]];
        assert!((y[0] - y[1].hypot(y[2])).abs() < 1e-12 && y[0] > 0.0);
        // Moving towards the axis never leaves.
        assert_eq!(soc_step(x, [1.0, 0.0, 0.0], soc_det(x)), f64::INFINITY);
    }
}
