//! Exact slip angles of a mode set with one sliding contact: starts for the enumeration
//! ([`super::enumerate`]) that its angle search cannot miss.
//!
//! With the modes fixed and one contact `j` sliding at angle `th`, the mode equations `F` of
//! the enumeration (every sticking contact's `w_i = 0`; the slider's `w_jn = 0` and
//! `w_jt x (cos th, sin th) = 0`) are affine in the impulse unknowns `x = (lambda_S, gamma_j)`:
//! `F = M(th) x + r(th)`, with `q` equations and `q - 1` unknowns. They have a solution exactly
//! when `[M(th) | r(th)]` (square) is singular, and since `det [M | M x + r] = det [M | r]`, that
//! determinant can be read at any `x`. Only `gamma_j`'s column (through the friction ray
//! `(1, -mu cos th, -mu sin th)`) and the slider's tangent row depend on `th`, each affinely in
//! `(cos th, sin th)`, so the determinant is a trigonometric polynomial of degree two,
//!
//! `D(th) = a0 + a1 cos th + b1 sin th + a2 cos 2th + b2 sin 2th`,
//!
//! with at most four zeros on the circle unless it vanishes identically. Its coefficients are
//! the discrete Fourier transform of eight samples (exact: no harmonic above two to alias), and
//! its zeros are bracketed on a fine grid of the closed form and bisected. Each zero is a slip
//! angle at which the linear least-squares solve of the enumeration is exact; the sign of the
//! slip and of `gamma` are left to the enumeration's acceptance test. When `G` is singular
//! enough that `M(th)` loses rank for every angle the determinant vanishes identically and no
//! start is proposed (the enumeration's own angle search remains).
//!
//! Found on random problems where the Gauss-Newton angle search from the guessed angle and
//! from the free slip's direction converged to a non-zero minimum of `|F|` (a problem of seed
//! 18 of `tests/contact_solver_random.rs` whose only solution slides one contact and separates
//! the other).

use super::ContactSolver;
use crate::linalg::{lu_factor, PivotRule};
use std::f64::consts::TAU;

/// Samples of the determinant (eight: exact for a degree-two trigonometric polynomial).
const SAMPLES: usize = 8;
/// Grid on which zeros of the closed form are bracketed.
const GRID: usize = 720;
/// Bisection steps per bracket (the enumeration's Newton polish refines further).
const BISECTIONS: usize = 60;
/// The determinant counts as identically zero below this fraction of its Hadamard bound.
const DEGENERATE: f64 = 1e-10;
/// A grid minimum of `|D|` below this fraction of the coefficients' size is a double zero.
const DOUBLE_ZERO: f64 = 1e-9;

/// The closed form of `D` from its coefficients `[a0, a1, b1, a2, b2]`.
fn trig(c: &[f64; 5], th: f64) -> f64 {
    c[0] + c[1] * th.cos() + c[2] * th.sin() + c[3] * (2.0 * th).cos() + c[4] * (2.0 * th).sin()
}

impl ContactSolver {
    /// For the mode set `etry` with exactly one sliding contact, whose angle sits at `ey[a]`
    /// (`q` unknowns), stores the zeros of the consistency determinant in `eroots` and returns
    /// how many there are (at most four; zero if the determinant vanishes identically). Leaves
    /// `ey[a]` as it found it; `lambda`, `w` and `F` are scratch.
    pub(super) fn slip_angle_roots(&mut self, q: usize, a: usize) -> usize {
        let saved = self.ey[a];
        let mut d = [0.0; SAMPLES];
        let mut bound = 0.0_f64;
        for (t, dt) in d.iter_mut().enumerate() {
            self.ey[a] = TAU * t as f64 / SAMPLES as f64;
            let (value, hadamard) = self.consistency_determinant(q);
            *dt = value;
            bound = bound.max(hadamard);
        }
        self.ey[a] = saved;
        let dmax = d.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        if !(dmax.is_finite() && bound.is_finite()) || dmax <= DEGENERATE * bound {
            return 0;
        }
        let mut c = [0.0; 5];
        for (t, &dt) in d.iter().enumerate() {
            let th = TAU * t as f64 / SAMPLES as f64;
            let f = 2.0 / SAMPLES as f64;
            c[0] += dt / SAMPLES as f64;
            c[1] += f * dt * th.cos();
            c[2] += f * dt * th.sin();
            c[3] += f * dt * (2.0 * th).cos();
            c[4] += f * dt * (2.0 * th).sin();
        }
        let size: f64 = c.iter().map(|x| x.abs()).sum();
        let mut found = 0;
        let h = TAU / GRID as f64;
        let mut prev = trig(&c, 0.0);
        let mut before = trig(&c, -h);
        for g in 1..=GRID {
            if found == self.eroots.len() {
                break;
            }
            let (lo, hi) = ((g - 1) as f64 * h, g as f64 * h);
            let next = trig(&c, hi);
            if prev == 0.0 {
                self.eroots[found] = lo;
                found += 1;
            } else if prev.signum() != next.signum() && next != 0.0 {
                self.eroots[found] = bisect(&c, lo, hi, prev);
                found += 1;
            } else if prev.abs() < before.abs() && prev.abs() <= next.abs() && prev.abs() <= DOUBLE_ZERO * size {
                // A zero the polynomial touches without crossing (or two too close to bracket).
                self.eroots[found] = lo;
                found += 1;
            }
            (before, prev) = (prev, next);
        }
        found
    }

    /// `det [M | F]` at the current unknowns (module docs) and its Hadamard bound, from the
    /// enumeration's residual and impulse Jacobian; `0` if the LU finds no pivot.
    fn consistency_determinant(&mut self, q: usize) -> (f64, f64) {
        self.mode_residual();
        let m = self.mode_jacobian(q);
        debug_assert_eq!(m + 1, q);
        let mut bound = 1.0;
        for c in 0..q {
            let mut norm = 0.0;
            for r in 0..q {
                let v = if c < m { self.ejac[r * m + c] } else { self.ef[r] };
                self.lu[r * q + c] = v;
                norm += v * v;
            }
            bound *= norm.sqrt();
        }
        if !lu_factor(&mut self.lu[..q * q], q, &mut self.piv[..q], PivotRule::Absolute) {
            return (0.0, bound);
        }
        let mut det = 1.0;
        for r in 0..q {
            det *= self.lu[r * q + r];
            if self.piv[r] != r {
                det = -det;
            }
        }
        (det, bound)
    }
}

/// A zero of the closed form in `[lo, hi]`, where it changes sign (`f_lo = D(lo)`).
fn bisect(c: &[f64; 5], mut lo: f64, mut hi: f64, f_lo: f64) -> f64 {
    for _ in 0..BISECTIONS {
        let mid = 0.5 * (lo + hi);
        let f = trig(c, mid);
        if f == 0.0 {
            return mid;
        }
        if f.signum() == f_lo.signum() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trig_zeros_are_found_by_the_grid_and_bisection() {
        // D = cos 2th has zeros at pi/4 + k pi/2.
        let c = [0.0, 0.0, 0.0, 1.0, 0.0];
        let z = bisect(&c, 0.7, 0.9, trig(&c, 0.7));
        assert!((z - std::f64::consts::FRAC_PI_4).abs() < 1e-12);
    }
}
