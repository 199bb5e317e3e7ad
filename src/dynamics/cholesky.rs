//! In-place dense Cholesky factorization `M = L L^T` and solves, on preallocated storage.
//!
//! nalgebra's `Cholesky` takes its matrix by value; the step reuses one buffer per `Data`
//! instead so that it allocates nothing. For the sizes here (nv <= ~30) a dense factorization
//! costs about as much as a branch-sparse one and is simpler to verify.

use nalgebra::{DMatrix, DVectorViewMut};

/// Factors the symmetric positive-definite `a` into the lower triangle of `l`.
/// Returns `false` if `a` is not numerically positive definite.
pub fn factor(a: &DMatrix<f64>, l: &mut DMatrix<f64>) -> bool {
    let n = a.nrows();
    for j in 0..n {
        let mut d = a[(j, j)];
        for k in 0..j {
            d -= l[(j, k)] * l[(j, k)];
        }
        if d <= 0.0 || !d.is_finite() {
            return false;
        }
        let djj = d.sqrt();
        l[(j, j)] = djj;
        for i in j + 1..n {
            let mut s = a[(i, j)];
            for k in 0..j {
                s -= l[(i, k)] * l[(j, k)];
            }
            l[(i, j)] = s / djj;
        }
    }
    true
}

/// Solves `L L^T x = b` in place.
pub fn solve_in_place(l: &DMatrix<f64>, mut x: DVectorViewMut<f64>) {
    let n = l.nrows();
    for i in 0..n {
        let mut s = x[i];
        for k in 0..i {
            s -= l[(i, k)] * x[k];
        }
        x[i] = s / l[(i, i)];
    }
    for i in (0..n).rev() {
        let mut s = x[i];
        for k in i + 1..n {
            s -= l[(k, i)] * x[k];
        }
        x[i] = s / l[(i, i)];
    }
}

/// Solves `L L^T X = B` column by column in place.
pub fn solve_matrix_in_place(l: &DMatrix<f64>, b: &mut DMatrix<f64>) {
    for c in 0..b.ncols() {
        solve_in_place(l, b.column_mut(c));
    }
}
