//! Tikhonov continuation: the last resort of the globalized phase (math in the
//! [module docs](super::super), "Continuation"). Along a soft direction of an ill-conditioned or
//! singular `G~` a solution's impulses reach `1e5` to `1e6` impulse scales, at slip angles next
//! to a pole of the sliding equations, where neither the fixed point nor the enumeration's
//! angle starts arrive. `G~ + eps I` is well conditioned for a large `eps` and always has a
//! solution; the enumeration solves it from projected Gauss-Seidel's answer, and then each
//! smaller `eps` (tenfold steps, then `eps = 0`) from the previous answer, whose mode set is
//! the first it tries. The impulses grow along the path as the regularization lets them.

use super::ContactSolver;
use crate::contact::solver::{Info, Settings};

/// First regularization, relative to the largest diagonal entry of `G~` (one).
const EPS_START: f64 = 1e-1;
/// Factor between stages; the last nonzero `eps` is the first below `EPS_END`.
const EPS_FACTOR: f64 = 0.1;
const EPS_END: f64 = 1e-12;
/// Largest factor a failed stage may retry with (the fourth root of `0.1` is 0.56, the eighth
/// 0.75).
const MAX_FACTOR: f64 = 0.9;
/// Sweeps of projected Gauss-Seidel on the first, well-conditioned problem.
const SWEEPS: usize = 100_000;

impl ContactSolver {
    /// Runs the continuation from the current iterate, the phase's best (kept in `glam`, `w` up
    /// to date). On success the iterate is the accepted answer of the unregularized problem and
    /// `info` says `Converged`; otherwise the iterate is restored from `glam` and `info` is
    /// untouched but for the iterations. `G~` is restored bit for bit either way.
    pub(super) fn continue_in_regularization(&mut self, settings: &Settings, info: &mut Info) -> bool {
        let n = 3 * self.k;
        let status = info.status;
        for i in 0..n {
            self.cdiag[i] = self.gt[i * n + i];
        }
        // The stage's factor: tenfold while stages succeed, its square root after a failure
        // (from the last answer), given up once it is above `MAX_FACTOR`.
        let (mut last, mut factor) = (f64::NAN, EPS_FACTOR);
        let mut eps = EPS_START;
        let solved = loop {
            for i in 0..n {
                self.gt[i * n + i] = self.cdiag[i] + eps;
            }
            if last.is_nan() {
                info.iterations += self.projected_gauss_seidel(SWEEPS);
            }
            self.update_w();
            let ok = self.iterate_finite() && self.enumerate_from_iterate(settings, info, usize::MAX);
            if ok {
                if eps == 0.0 {
                    break true;
                }
                info.status = status;
                self.cprev[..n].copy_from_slice(&self.lam[..n]);
                last = eps;
                factor = EPS_FACTOR;
            } else {
                if last.is_nan() || factor.sqrt() > MAX_FACTOR {
                    break false;
                }
                factor = factor.sqrt();
                self.lam[..n].copy_from_slice(&self.cprev[..n]);
            }
            eps = if last * factor < EPS_END { 0.0 } else { last * factor };
        };
        for i in 0..n {
            self.gt[i * n + i] = self.cdiag[i];
        }
        if !solved {
            info.status = status;
            self.lam[..n].copy_from_slice(&self.glam[..n]);
        }
        self.update_w();
        if solved {
            // The answer's residual against the restored `G~` (equal to the last stage's).
            self.coulomb_residual(info);
        }
        solved
    }
}
