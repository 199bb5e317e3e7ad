//! Projected Gauss-Seidel on De Saxce's fixed point (the NSGS of Jourdan, Alart & Jean 1998
//! with the projection of De Saxce & Feng 1998): contact by contact,
//!
//! ```text
//! lambda_i <- P_K_mu( lambda_i - rho_i (w_i + (mu_i ||w_t,i||, 0, 0)) ),   rho_i = 1 / ||G~_ii||_F
//! ```
//!
//! whose fixed points are exactly the Coulomb solutions. It converges slowly, and not always,
//! but its iterates do not jam against a cone boundary the way an interior-point iterate can,
//! so the mode enumeration reads a second guess from it (module docs of the solver,
//! "Enumeration").

use super::super::cone::{norm2, project_friction_cone};
use super::ContactSolver;

impl ContactSolver {
    /// At most `sweeps` sweeps over the contacts from the current `lambda~` (moved into the
    /// cones first), fewer if a sweep leaves every impulse where it was (to `1e-15` relative);
    /// `w` is left stale (callers update it). Returns the sweeps taken.
    pub(super) fn projected_gauss_seidel(&mut self, sweeps: usize) -> usize {
        let k = self.k;
        let n = 3 * k;
        for i in 0..k {
            let l = &mut self.lam[3 * i..3 * i + 3];
            let p = project_friction_cone([l[0], l[1], l[2]], self.mu[i]);
            l.copy_from_slice(&p);
        }
        for sweep in 0..sweeps {
            let mut change = 0.0_f64;
            let mut size = 0.0_f64;
            for i in 0..k {
                let mut w = [0.0; 3];
                let mut frob = 0.0;
                for (r, wr) in w.iter_mut().enumerate() {
                    let row = &self.gt[(3 * i + r) * n..(3 * i + r) * n + n];
                    *wr = row.iter().zip(&self.lam[..n]).map(|(g, l)| g * l).sum::<f64>() + self.bt[3 * i + r];
                    frob += row[3 * i..3 * i + 3].iter().map(|g| g * g).sum::<f64>();
                }
                if frob.is_nan() || frob <= 0.0 {
                    continue;
                }
                let rho = 1.0 / frob.sqrt();
                let mu = self.mu[i];
                let shift = mu * norm2(w[1], w[2]);
                let l = &mut self.lam[3 * i..3 * i + 3];
                let x = [l[0] - rho * (w[0] + shift), l[1] - rho * w[1], l[2] - rho * w[2]];
                let p = project_friction_cone(x, mu);
                if p.iter().all(|v| v.is_finite()) {
                    for (old, new) in l.iter_mut().zip(p) {
                        change = change.max((new - *old).abs());
                        size = size.max(new.abs());
                        *old = new;
                    }
                }
            }
            if change <= 1e-15 * (1.0 + size) {
                return sweep + 1;
            }
        }
        sweeps
    }
}
