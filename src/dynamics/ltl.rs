//! Sparse `M = L^T L` factorization exploiting branch-induced sparsity (Featherstone 2008,
//! sec. 6.5, table 6.3), and the solves that go with it.
//!
//! In a kinematic tree, `M_ij` is zero unless dof `j` is an ancestor of dof `i` or vice versa.
//! Factorizing from the leaves to the root as `M = L^T L` (L lower triangular) keeps exactly that
//! pattern: `L_ij != 0` only for `j` an ancestor of `i` (or `i` itself), with no fill-in. With the
//! expanded parent array `lambda(i)` (the dof preceding `i` on the path to the root) the factor
//! and each solve cost O(nv * depth) instead of O(nv^3) and O(nv^2): for a quadruped leg, depth 9
//! instead of 18. `L^-T J^T` of a contact Jacobian stays supported on the contact's own branch.
//! Parents are given as `model.dof_parent` ([`NO_DOF`](crate::model::NO_DOF) for a dof with no parent).

use nalgebra::DMatrix;

use crate::model::NO_DOF;

/// Factors `a + diag(shift)` as `L^T L` into the lower triangle of `l` (the strict upper
/// triangle of `l` is not touched). Returns `false` if the matrix is not positive definite.
pub fn factor(a: &DMatrix<f64>, shift: Option<&[f64]>, parent: &[usize], l: &mut DMatrix<f64>) -> bool {
    let n = a.nrows();
    check(l, parent);
    assert!(a.ncols() == n && shift.is_none_or(|s| s.len() >= n), "ltl::factor: size mismatch");
    let (src, dst) = (a.as_slice(), l.as_mut_slice());
    // Column-major: element (r, c) at r + c * n. Only ancestor entries are read and written.
    // SAFETY (all `get_unchecked` below): `k < n`, and every index reached through `parent` is
    // `< n` (checked by `check`), so `r + c * n < n * n = len`.
    unsafe {
        for k in 0..n {
            *dst.get_unchecked_mut(k + k * n) = src.get_unchecked(k + k * n) + shift.map_or(0.0, |s| s[k]);
            let mut i = *parent.get_unchecked(k);
            while i != NO_DOF {
                *dst.get_unchecked_mut(k + i * n) = *src.get_unchecked(k + i * n);
                i = *parent.get_unchecked(i);
            }
        }
        for k in (0..n).rev() {
            let d = *dst.get_unchecked(k + k * n);
            if d <= 0.0 || !d.is_finite() {
                return false;
            }
            let lkk = d.sqrt();
            *dst.get_unchecked_mut(k + k * n) = lkk;
            let mut i = *parent.get_unchecked(k);
            while i != NO_DOF {
                *dst.get_unchecked_mut(k + i * n) /= lkk;
                i = *parent.get_unchecked(i);
            }
            let mut i = *parent.get_unchecked(k);
            while i != NO_DOF {
                let lki = *dst.get_unchecked(k + i * n);
                let mut j = i;
                while j != NO_DOF {
                    *dst.get_unchecked_mut(i + j * n) -= lki * *dst.get_unchecked(k + j * n);
                    j = *parent.get_unchecked(j);
                }
                i = *parent.get_unchecked(i);
            }
        }
    }
    true
}

/// The invariants the unchecked indexing relies on: a square factor, one parent per dof, and
/// parents that precede their children.
#[inline]
fn check(l: &DMatrix<f64>, parent: &[usize]) {
    let n = l.nrows();
    assert!(l.ncols() == n && parent.len() == n, "ltl: factor is {}x{}, {} parents", n, l.ncols(), parent.len());
    assert!(parent.iter().enumerate().all(|(i, &p)| p == NO_DOF || p < i), "ltl: a parent dof must precede its child");
}

/// `x <- L^-T x`.
pub fn solve_lt(l: &DMatrix<f64>, parent: &[usize], x: &mut [f64]) {
    let n = l.nrows();
    let s = l.as_slice();
    for i in (0..n).rev() {
        // Contact Jacobian columns live on one branch: skip the zeros of the other branches.
        if x[i] == 0.0 {
            continue;
        }
        let xi = x[i] / s[i + i * n];
        x[i] = xi;
        let mut j = parent[i];
        while j != NO_DOF {
            x[j] -= s[i + j * n] * xi;
            j = parent[j];
        }
    }
}

/// `x <- L^-T x` for three right-hand sides supported on one root-first chain of dofs `chain`
/// (the dofs that move one body; the three Jacobian rows of a contact), packed by chain
/// position: `x[p]` holds the three right-hand sides at dof `chain[p]` (the fourth lane is
/// carried along, zero in, zero out). The ancestors of `chain[p]` are `chain[..p]` and the
/// result stays on the chain, so this is a dense triangular solve of the chain's length, one
/// 4-wide pass for all three, with no index gathered per right-hand side.
#[inline(always)]
pub fn solve_lt_chain_packed(l: &DMatrix<f64>, chain: &[usize], x: &mut [[f64; 4]]) {
    let n = l.nrows();
    let s = l.as_slice();
    let x = &mut x[..chain.len()];
    for p in (0..chain.len()).rev() {
        let i = chain[p];
        let d = s[i + i * n];
        let (head, tail) = x.split_at_mut(p);
        let xp = &mut tail[0];
        *xp = [xp[0] / d, xp[1] / d, xp[2] / d, 0.0];
        let xp = *xp;
        for (xq, &j) in head.iter_mut().zip(&chain[..p]) {
            let lij = s[i + j * n];
            for k in 0..4 {
                xq[k] -= lij * xp[k];
            }
        }
    }
}

/// `x <- L^-1 x`.
pub fn solve_l(l: &DMatrix<f64>, parent: &[usize], x: &mut [f64]) {
    let n = l.nrows();
    let s = l.as_slice();
    for i in 0..n {
        let mut acc = x[i];
        let mut j = parent[i];
        while j != NO_DOF {
            acc -= s[i + j * n] * x[j];
            j = parent[j];
        }
        x[i] = acc / s[i + i * n];
    }
}

/// `X <- L^-T X` for every column of the `n x m` matrix `X` stored **by rows** (`x[i * m + c]`
/// is `X_ic`). The row operations run across all columns at once: one right-hand side is a
/// chain of dependent updates (latency bound), `m` of them are independent, and with the rows
/// contiguous each update `X_j -= L_ij X_i` is one vectorized pass over `m` numbers (a
/// column-major `X` would make it a strided gather). Every entry sees the operations of
/// [`solve_lt`] in the same order (with the division taken as a product by `1 / L_ii`).
pub fn solve_lt_multi(l: &DMatrix<f64>, parent: &[usize], x: &mut [f64], m: usize) {
    crate::linalg::avx2_dispatch!(solve_lt_multi_impl, (l: &DMatrix<f64>, parent: &[usize], x: &mut [f64], m: usize))
}

#[inline(always)]
fn solve_lt_multi_impl(l: &DMatrix<f64>, parent: &[usize], x: &mut [f64], m: usize) {
    let n = l.nrows();
    let s = l.as_slice();
    check(l, parent);
    assert_eq!(x.len(), n * m, "solve_lt_multi: x must be n x m");
    for i in (0..n).rev() {
        let inv = 1.0 / s[i + i * n];
        // A parent precedes its child (`check`), so row `i` is after every row it updates.
        let (before, rest) = x.split_at_mut(i * m);
        let xi = &mut rest[..m];
        for v in xi.iter_mut() {
            *v *= inv;
        }
        let mut j = parent[i];
        while j != NO_DOF {
            let lij = s[i + j * n];
            for (a, &b) in before[j * m..(j + 1) * m].iter_mut().zip(xi.iter()) {
                *a -= lij * b;
            }
            j = parent[j];
        }
    }
}

/// `X <- L^-1 X` for every column of the `n x m` matrix `X` stored by rows (see
/// [`solve_lt_multi`]).
pub fn solve_l_multi(l: &DMatrix<f64>, parent: &[usize], x: &mut [f64], m: usize) {
    crate::linalg::avx2_dispatch!(solve_l_multi_impl, (l: &DMatrix<f64>, parent: &[usize], x: &mut [f64], m: usize))
}

#[inline(always)]
fn solve_l_multi_impl(l: &DMatrix<f64>, parent: &[usize], x: &mut [f64], m: usize) {
    let n = l.nrows();
    let s = l.as_slice();
    check(l, parent);
    assert_eq!(x.len(), n * m, "solve_l_multi: x must be n x m");
    for i in 0..n {
        let (before, rest) = x.split_at_mut(i * m);
        let xi = &mut rest[..m];
        let mut j = parent[i];
        while j != NO_DOF {
            let lij = s[i + j * n];
            for (a, &b) in xi.iter_mut().zip(before[j * m..(j + 1) * m].iter()) {
                *a -= lij * b;
            }
            j = parent[j];
        }
        let inv = 1.0 / s[i + i * n];
        for v in xi.iter_mut() {
            *v *= inv;
        }
    }
}

/// `x <- (L^T L)^-1 x`.
pub fn solve(l: &DMatrix<f64>, parent: &[usize], x: &mut [f64]) {
    solve_lt(l, parent, x);
    solve_l(l, parent, x);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamics::crba;
    use crate::model::{builtin, neutral, Data};
    use nalgebra::DVector;

    #[test]
    fn solves_the_mass_matrix_of_the_quadruped() {
        let model = builtin::quadruped().unwrap().model;
        let mut data = Data::new(&model);
        let mut q = neutral(&model);
        for (i, x) in q.iter_mut().enumerate().skip(7) {
            *x = 0.3 * (i as f64).sin();
        }
        crba(&model, &mut data, q.as_slice());
        let mut l = DMatrix::zeros(model.nv, model.nv);
        let shift: Vec<f64> = (0..model.nv).map(|i| 0.01 * i as f64).collect();
        assert!(factor(&data.mass_matrix, Some(&shift), &model.dof_parent, &mut l));
        let a = &data.mass_matrix + DMatrix::from_diagonal(&DVector::from_vec(shift));
        let b = DVector::from_fn(model.nv, |i, _| (i as f64 * 0.7).cos());
        let mut x = b.clone();
        solve(&l, &model.dof_parent, x.as_mut_slice());
        assert!((&a * &x - &b).norm() < 1e-10 * b.norm());
        // Several right-hand sides at once agree with one at a time.
        // (Stored by rows: the n x 3 matrix is the column-major 3 x n one.)
        let bm = DMatrix::from_fn(3, model.nv, |c, i| ((i + 5 * c) as f64 * 0.3).sin());
        let mut xm = bm.clone();
        solve_lt_multi(&l, &model.dof_parent, xm.as_mut_slice(), 3);
        solve_l_multi(&l, &model.dof_parent, xm.as_mut_slice(), 3);
        for c in 0..3 {
            let mut xc = bm.row(c).transpose();
            solve(&l, &model.dof_parent, xc.as_mut_slice());
            assert!((xm.row(c).transpose() - &xc).norm() < 1e-12 * xc.norm());
        }
        // On a chain (the dofs of the front-left leg and the base) the chain solve agrees.
        let foot = model.body_index("FL_calf").unwrap();
        let chain: Vec<usize> = model.supports[foot]
            .iter()
            .flat_map(|&b| model.joints[b].idx_v..model.joints[b].idx_v + model.joints[b].nv())
            .collect();
        let mut xc = DVector::zeros(model.nv);
        for &c in &chain {
            xc[c] = b[c];
        }
        let mut full = xc.clone();
        solve_lt(&l, &model.dof_parent, full.as_mut_slice());
        let mut packed: Vec<[f64; 4]> = chain.iter().map(|&c| [xc[c], 2.0 * xc[c], -0.5 * xc[c], 0.0]).collect();
        solve_lt_chain_packed(&l, &chain, &mut packed);
        let mut off_chain = full.clone();
        for (p, &c) in chain.iter().enumerate() {
            // The same operations in the same order as `solve_lt` on the chain's entries.
            assert_eq!(packed[p][0], full[c]);
            assert!((packed[p][1] - 2.0 * full[c]).abs() < 1e-13 && (packed[p][2] + 0.5 * full[c]).abs() < 1e-13);
            assert_eq!(packed[p][3], 0.0);
            off_chain[c] = 0.0;
        }
        assert_eq!(off_chain.norm(), 0.0, "L^-T of a chain's column stays on the chain");
        // L^-T and L^-1 compose to the inverse, and G = Y^T Y with Y = L^-T J^T.
        let mut y = b.clone();
        solve_lt(&l, &model.dof_parent, y.as_mut_slice());
        let mut z = y.clone();
        solve_l(&l, &model.dof_parent, z.as_mut_slice());
        assert!((z - &x).norm() < 1e-12 * x.norm());
        assert!((y.norm_squared() - b.dot(&x)).abs() < 1e-10 * b.dot(&x));
    }
}
