//! Small dense kernels on preallocated storage. nalgebra's `gemm` on dynamic matrices goes
//! through `matrixmultiply`, which allocates packing buffers; at our sizes (tens of rows) a
//! column-by-column `axpy` is as fast and keeps hot paths allocation-free.

use nalgebra::{DMatrixView, DMatrixViewMut};

/// `out = alpha * a * b`, skipping zero entries of `b` (Jacobians here are mostly sparse).
pub fn gemm_into(alpha: f64, a: DMatrixView<f64>, b: DMatrixView<f64>, mut out: DMatrixViewMut<f64>) {
    assert!(a.ncols() == b.nrows() && out.nrows() == a.nrows() && out.ncols() == b.ncols(), "gemm_into: shapes");
    for c in 0..b.ncols() {
        let mut col = out.column_mut(c);
        col.fill(0.0);
        for k in 0..a.ncols() {
            let bkc = b[(k, c)];
            if bkc != 0.0 {
                col.axpy(alpha * bkc, &a.column(k), 1.0);
            }
        }
    }
}
