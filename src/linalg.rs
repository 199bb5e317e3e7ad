//! Small dense kernels on preallocated storage. nalgebra's `gemm` on dynamic matrices goes
//! through `matrixmultiply`, which allocates packing buffers; at our sizes (tens of rows) a
//! column-by-column `axpy` is as fast and keeps hot paths allocation-free.
//!
//! # Dense LU
//! [`lu_factor`] and [`lu_solve`] are the crate's one dense LU: Doolittle elimination with
//! partial (row) pivoting, `P A = L U`, in place on a row-major `n x n` buffer (unit lower `L`
//! below the diagonal, `U` on and above it; every row interchange swaps whole rows, so `L` is
//! stored in the final row order, as LAPACK's `dgetrf` stores it). When to give up on a pivot
//! is the caller's choice, a [`PivotRule`]; everything else is common. The sizes of the contact
//! problem, `n = 3k` for `k <= 4` contacts, run through fully unrolled fixed-size kernels that
//! do the same operations in the same order as the general ones (tested), so results do not
//! depend on which path ran.

use nalgebra::{DMatrix, DMatrixView, DMatrixViewMut};
use std::cmp::Ordering;

/// Whether every entry of `s` is finite: `x * 0` is 0 for finite `x` and NaN for infinite or
/// NaN `x`, so the sum is 0 exactly when all are. Eight independent partial sums, which
/// vectorize, where one dependent sum costs a floating-point latency per entry (a DDP knot's
/// derivatives are about 4 000 numbers, checked at every knot of every iteration).
pub fn all_finite(s: &[f64]) -> bool {
    let mut acc = [0.0f64; 8];
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += x * 0.0;
        }
    }
    let tail = chunks.remainder().iter().fold(0.0, |a, &x| a + x * 0.0);
    acc.iter().sum::<f64>() + tail == 0.0
}

/// `dst = src` for two dense matrices of the same shape, as one `memcpy`: nalgebra's
/// `copy_from` and `fill` go element by element through generic strided indexing, which at a
/// DDP knot's 36 x 36 blocks costs several instructions per entry.
pub fn copy_dense(dst: &mut DMatrix<f64>, src: &DMatrix<f64>) {
    assert_eq!(dst.shape(), src.shape(), "copy_dense: shapes");
    dst.as_mut_slice().copy_from_slice(src.as_slice());
}

/// `m = 0` (see [`copy_dense`]).
pub fn zero_dense(m: &mut DMatrix<f64>) {
    m.as_mut_slice().fill(0.0);
}

/// In the body of a function, `avx2_dispatch!(body, (a: A, b: B) -> R)` runs `body(a, b)`
/// through a copy compiled for AVX2 where the CPU has it (a cached flag, checked per call), else
/// as it is. For code whose loops vectorize: both copies do the same multiplications and
/// additions in the same order (Rust never fuses them into FMA, the one instruction that would
/// round differently), so they give the same numbers bit for bit; only the width of the vector
/// instructions differs. `body` should be `#[inline(always)]`, so that it is compiled into the
/// copy, and so should what it calls in the hot loops.
macro_rules! avx2_dispatch {
    ($body:path, ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                return unsafe { avx2($($arg),*) };
            }
        }
        $body($($arg),*)
    }};
}
pub(crate) use avx2_dispatch;

/// `c = a b + beta c` for `beta` 0 or 1, equal bit for bit to nalgebra's `c.gemm(1.0, a, b,
/// beta)`, which it falls back to, but without `matrixmultiply`'s packing: at a DDP knot's
/// 36 x 36 and 36 x 12 blocks the packing, the allocation of its buffer and the masked edge tiles
/// cost about as much as the multiply-adds.
///
/// Why equal: where nalgebra hands a product to `matrixmultiply` (every dimension above 5) and
/// the CPU has FMA and AVX2, `matrixmultiply` runs its FMA kernel, which forms each entry of `a
/// b` as one fused multiply-add chain over `k` in increasing order from zero (one block of `k`
/// up to 256) and then stores `fma(1, ab, beta c)`. This kernel forms the same chain, eight rows
/// by four columns at a time (four at the last rows), and stores `ab + c` or `ab + 0`, the same
/// roundings. Anything else (other sizes, `beta`, CPUs) goes to nalgebra.
pub fn gemm(c: &mut DMatrix<f64>, a: &DMatrix<f64>, b: &DMatrix<f64>, beta: f64) {
    let ((m, k), n) = (a.shape(), b.ncols());
    assert!(b.nrows() == k && c.shape() == (m, n), "gemm: shapes");
    #[cfg(target_arch = "x86_64")]
    {
        let fits = m > 5 && n > 5 && k > 5 && k <= 256 && m.is_multiple_of(4) && n.is_multiple_of(4);
        if fits && (beta == 0.0 || beta == 1.0) && fma_avx2() {
            // SAFETY: the CPU has AVX2 and FMA (checked), and the shapes were asserted above.
            unsafe { gemm_fma_avx2(m, k, n, a.as_slice(), b.as_slice(), beta, c.as_mut_slice()) };
            return;
        }
    }
    c.gemm(1.0, a, b, beta);
}

#[cfg(target_arch = "x86_64")]
fn fma_avx2() -> bool {
    // The test `matrixmultiply` uses to pick its FMA kernel.
    std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2")
}

/// The kernel of [`gemm`]: column-major `a` (`m x k`), `b` (`k x n`), `c` (`m x n`), `m` and `n`
/// multiples of 4.
///
/// At DDP's shapes it already runs at the FMA units' peak: DDP's five products of a knot
/// (98.5k multiply-adds) take about 4.2 us on the EPYC VM, two 4-wide FMAs per cycle at about
/// 2.9 GHz. A 12 x 4 blocking that executes 19 % fewer instructions (callgrind) took 7.1 us, as
/// its twelve accumulators leave no register for the fourth broadcast and one accumulator goes
/// through the stack every step (scratch, 2026-12-07). So instruction counts mislead here; only
/// fewer multiply-adds would make the backward pass faster.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm_fma_avx2(m: usize, k: usize, n: usize, a: &[f64], b: &[f64], beta: f64, c: &mut [f64]) {
    use std::arch::x86_64::*;
    debug_assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n && m.is_multiple_of(4) && n.is_multiple_of(4)
    );
    let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    // SAFETY (every pointer offset below): rows `i + 8 <= m` or `i + 4 <= m`, columns `j + 4 <=
    // n`, `p < k`, so each index is below the length of its slice.
    unsafe {
        let zero = _mm256_setzero_pd();
        let store = |ptr: *mut f64, ab: __m256d| {
            let old = if beta == 0.0 { zero } else { _mm256_loadu_pd(ptr) };
            _mm256_storeu_pd(ptr, _mm256_add_pd(old, ab));
        };
        for j in (0..n).step_by(4) {
            let mut i = 0;
            while i + 8 <= m {
                let mut acc = [[zero; 4]; 2];
                for p in 0..k {
                    let a0 = _mm256_loadu_pd(ap.add(i + p * m));
                    let a1 = _mm256_loadu_pd(ap.add(i + 4 + p * m));
                    for jj in 0..4 {
                        let bb = _mm256_broadcast_sd(&*bp.add(p + (j + jj) * k));
                        acc[0][jj] = _mm256_fmadd_pd(a0, bb, acc[0][jj]);
                        acc[1][jj] = _mm256_fmadd_pd(a1, bb, acc[1][jj]);
                    }
                }
                for jj in 0..4 {
                    store(cp.add(i + (j + jj) * m), acc[0][jj]);
                    store(cp.add(i + 4 + (j + jj) * m), acc[1][jj]);
                }
                i += 8;
            }
            if i < m {
                let mut acc = [zero; 4];
                for p in 0..k {
                    let a0 = _mm256_loadu_pd(ap.add(i + p * m));
                    for (jj, acc) in acc.iter_mut().enumerate() {
                        let bb = _mm256_broadcast_sd(&*bp.add(p + (j + jj) * k));
                        *acc = _mm256_fmadd_pd(a0, bb, *acc);
                    }
                }
                for (jj, &acc) in acc.iter().enumerate() {
                    store(cp.add(i + (j + jj) * m), acc);
                }
            }
        }
    }
}

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

/// When [`lu_factor`] accepts a pivot (the largest `|a_rc|` of the remaining column) and how it
/// forms the multipliers `l_rc = a_rc / p`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PivotRule {
    /// Accept any finite pivot `|p| >= f64::MIN_POSITIVE` (not zero, subnormal, infinite or
    /// NaN), however small next to the rest of the matrix. For matrices whose rows differ in
    /// scale by design, such as the forward contact solver's reduced Newton matrix: rows of
    /// separated contacts carry `s / gamma` up to ~1e20 and must not make the others look
    /// singular. Because `1 / p` is then finite, the multipliers are `a_rc * (1 / p)`, one
    /// division per column.
    Absolute,
    /// Reject a pivot `|p| <= t * max_ij |a_ij|`, the maximum taken over the matrix as given
    /// (NaN entries ignored); fail at once if that maximum is zero or not finite. For systems
    /// whose rows are scaled to `O(1)`, where such a pivot means "numerically singular" and the
    /// caller has a better move than a huge solution (regularize, or report it). The pivot itself
    /// is not checked for finiteness (a NaN produced during elimination reaches the solution,
    /// where callers check it). A pivot of a tiny matrix may be subnormal, so the multipliers are
    /// true quotients `a_rc / p`.
    Relative(f64),
}

/// Dispatches a dense kernel to its fixed-size version for `n = 3k`, `k <= 4` (fully unrolled,
/// no bounds checks in the loops), else to the general one.
macro_rules! fixed_size {
    ($n:expr, $fixed:ident, $general:ident, ($($arg:expr),*)) => {
        match $n {
            3 => $fixed::<3>($($arg),*),
            6 => $fixed::<6>($($arg),*),
            9 => $fixed::<9>($($arg),*),
            12 => $fixed::<12>($($arg),*),
            n => $general(n, $($arg),*),
        }
    };
}

/// The leading `N x N` block of a row-major buffer as an array of rows.
fn rows<const N: usize>(a: &[f64]) -> &[[f64; N]; N] {
    a[..N * N].as_chunks::<N>().0.try_into().expect("N rows")
}

fn rows_mut<const N: usize>(a: &mut [f64]) -> &mut [[f64; N]; N] {
    a[..N * N].as_chunks_mut::<N>().0.try_into().expect("N rows")
}

/// `y = A x` for the row-major `n x n` matrix `a`; each `y_r` sums `a_rc x_c` in increasing `c`.
pub fn mat_vec(a: &[f64], n: usize, x: &[f64], y: &mut [f64]) {
    fixed_size!(n, mat_vec_fixed, mat_vec_general, (a, x, y))
}

fn mat_vec_fixed<const N: usize>(a: &[f64], x: &[f64], y: &mut [f64]) {
    let a = rows::<N>(a);
    let x: &[f64; N] = x[..N].try_into().expect("N");
    for (yr, row) in y[..N].iter_mut().zip(a) {
        let mut acc = 0.0;
        for c in 0..N {
            acc += row[c] * x[c];
        }
        *yr = acc;
    }
}

fn mat_vec_general(n: usize, a: &[f64], x: &[f64], y: &mut [f64]) {
    let x = &x[..n];
    for (yr, row) in y[..n].iter_mut().zip(a[..n * n].chunks_exact(n)) {
        let mut acc = 0.0;
        for (a, x) in row.iter().zip(x) {
            acc += a * x;
        }
        *yr = acc;
    }
}

/// In-place LU with partial pivoting of the row-major `n x n` matrix in `a[..n * n]` (module
/// docs): on success `a` holds `L` (strictly below the diagonal) and `U`, and `piv[c]` (`>= c`)
/// the row swapped with row `c` at step `c`. Returns `false` as soon as a pivot fails `rule`;
/// `a` and `piv` are then partly overwritten. The pivot is the first largest `|a_rc|`, `r >= c`.
/// Allocation-free.
pub fn lu_factor(a: &mut [f64], n: usize, piv: &mut [usize], rule: PivotRule) -> bool {
    match rule {
        PivotRule::Absolute => fixed_size!(n, lu_factor_fixed, lu_factor_general, (a, piv, AbsolutePivot)),
        PivotRule::Relative(t) => {
            let scale = a[..n * n].iter().fold(0.0f64, |m, x| m.max(x.abs()));
            if !(scale > 0.0 && scale.is_finite()) {
                return false;
            }
            let rule = RelativePivot { tol: t * scale };
            fixed_size!(n, lu_factor_fixed, lu_factor_general, (a, piv, rule))
        }
    }
}

/// A [`PivotRule`] resolved for one matrix; a type per rule so each kernel is compiled for it
/// (no branch in the elimination loops).
trait Pivoting: Copy {
    /// Whether the largest candidate `|p|` of a column is an acceptable pivot.
    fn accept(self, p: f64) -> bool;
    /// The multiplier `x / pivot`, given `inv = 1 / pivot`.
    fn multiplier(self, x: f64, pivot: f64, inv: f64) -> f64;
}

#[derive(Clone, Copy)]
struct AbsolutePivot;

impl Pivoting for AbsolutePivot {
    #[inline(always)]
    fn accept(self, p: f64) -> bool {
        p >= f64::MIN_POSITIVE && p.is_finite()
    }

    #[inline(always)]
    fn multiplier(self, x: f64, _pivot: f64, inv: f64) -> f64 {
        x * inv
    }
}

#[derive(Clone, Copy)]
struct RelativePivot {
    /// `t * max_ij |a_ij|`.
    tol: f64,
}

impl Pivoting for RelativePivot {
    #[inline(always)]
    fn accept(self, p: f64) -> bool {
        // The negated rejection test `!(p <= tol)`: the rule rejects small pivots only.
        !matches!(p.partial_cmp(&self.tol), Some(Ordering::Less | Ordering::Equal))
    }

    #[inline(always)]
    fn multiplier(self, x: f64, pivot: f64, _inv: f64) -> f64 {
        x / pivot
    }
}

fn lu_factor_fixed<const N: usize>(a: &mut [f64], piv: &mut [usize], rule: impl Pivoting) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { lu_factor_fixed_avx2::<N>(a, piv, rule) };
    }
    lu_factor_fixed_body::<N>(a, piv, rule)
}

/// [`lu_factor_fixed`] compiled for AVX2: the row updates run four entries per instruction
/// instead of two. The same multiplications and subtractions in the same order (no fused
/// multiply-add: Rust never contracts `a - l * b`), so the same results.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn lu_factor_fixed_avx2<const N: usize>(a: &mut [f64], piv: &mut [usize], rule: impl Pivoting) -> bool {
    lu_factor_fixed_body::<N>(a, piv, rule)
}

#[inline(always)]
fn lu_factor_fixed_body<const N: usize>(a: &mut [f64], piv: &mut [usize], rule: impl Pivoting) -> bool {
    let a = rows_mut::<N>(a);
    let piv: &mut [usize; N] = (&mut piv[..N]).try_into().expect("N");
    const { assert!(N <= 12, "lu_factor_fixed: one step per column up to 12") };
    // One monomorphized elimination step per column, so every loop bound is a constant: with a
    // runtime column the row updates `row[col + 1..]` were vectorized with a remainder and a
    // set-up per row (about 4 700 instructions for a 12 x 12 factor, against about 2 000).
    // `&&` stops at the first rejected pivot, as the loop did; steps past `N` are no-ops.
    lu_column::<N, 0>(a, piv, rule)
        && lu_column::<N, 1>(a, piv, rule)
        && lu_column::<N, 2>(a, piv, rule)
        && lu_column::<N, 3>(a, piv, rule)
        && lu_column::<N, 4>(a, piv, rule)
        && lu_column::<N, 5>(a, piv, rule)
        && lu_column::<N, 6>(a, piv, rule)
        && lu_column::<N, 7>(a, piv, rule)
        && lu_column::<N, 8>(a, piv, rule)
        && lu_column::<N, 9>(a, piv, rule)
        && lu_column::<N, 10>(a, piv, rule)
        && lu_column::<N, 11>(a, piv, rule)
}

/// Step `COL` of [`lu_factor_fixed`] (`N <= 12`): the pivot search, the row interchange and the
/// elimination below the pivot, in the order of [`lu_factor_general`].
#[inline(always)]
fn lu_column<const N: usize, const COL: usize>(
    a: &mut [[f64; N]; N],
    piv: &mut [usize; N],
    rule: impl Pivoting,
) -> bool {
    if COL >= N {
        return true;
    }
    let mut p = COL;
    let mut pmax = a[COL][COL].abs();
    for (r, row) in a.iter().enumerate().skip(COL + 1) {
        let v = row[COL].abs();
        if v > pmax {
            pmax = v;
            p = r;
        }
    }
    if !rule.accept(pmax) {
        return false;
    }
    piv[COL] = p;
    a.swap(COL, p);
    let (top, bottom) = a.split_at_mut(COL + 1);
    let prow = &top[COL];
    let d = prow[COL];
    let inv = 1.0 / d;
    for row in bottom {
        let l = rule.multiplier(row[COL], d, inv);
        row[COL] = l;
        if l != 0.0 {
            for c in COL + 1..N {
                row[c] -= l * prow[c];
            }
        }
    }
    true
}

fn lu_factor_general(n: usize, a: &mut [f64], piv: &mut [usize], rule: impl Pivoting) -> bool {
    let a = &mut a[..n * n];
    for col in 0..n {
        let mut p = col;
        let mut pmax = a[col * n + col].abs();
        for (r, row) in a[(col + 1) * n..].chunks_exact(n).enumerate() {
            let v = row[col].abs();
            if v > pmax {
                pmax = v;
                p = col + 1 + r;
            }
        }
        if !rule.accept(pmax) {
            return false;
        }
        piv[col] = p;
        let (top, bottom) = a.split_at_mut((col + 1) * n);
        let prow = &mut top[col * n..];
        if p != col {
            prow.swap_with_slice(&mut bottom[(p - col - 1) * n..(p - col) * n]);
        }
        let prow = &prow[col..];
        let d = prow[0];
        let inv = 1.0 / d;
        for row in bottom.chunks_exact_mut(n) {
            let row = &mut row[col..];
            let l = rule.multiplier(row[0], d, inv);
            row[0] = l;
            if l != 0.0 {
                for (x, &y) in row[1..].iter_mut().zip(&prow[1..]) {
                    *x -= l * y;
                }
            }
        }
    }
    true
}

/// Solves `A x = rhs` in place (`x[..n]` holds `rhs` on entry) with the factors and pivots of
/// [`lu_factor`]: all row interchanges first, then `L y = P rhs` and `U x = y` by rows, each row's
/// sum in increasing column order. Allocation-free.
pub fn lu_solve(a: &[f64], n: usize, piv: &[usize], x: &mut [f64]) {
    fixed_size!(n, lu_solve_fixed, lu_solve_general, (a, piv, x))
}

fn lu_solve_fixed<const N: usize>(a: &[f64], piv: &[usize], x: &mut [f64]) {
    let a = rows::<N>(a);
    let x: &mut [f64; N] = (&mut x[..N]).try_into().expect("N");
    for (col, &p) in piv[..N].iter().enumerate() {
        x.swap(col, p);
    }
    for r in 0..N {
        let mut acc = x[r];
        for c in 0..r {
            acc -= a[r][c] * x[c];
        }
        x[r] = acc;
    }
    for r in (0..N).rev() {
        let mut acc = x[r];
        for c in r + 1..N {
            acc -= a[r][c] * x[c];
        }
        x[r] = acc / a[r][r];
    }
}

fn lu_solve_general(n: usize, a: &[f64], piv: &[usize], x: &mut [f64]) {
    let a = &a[..n * n];
    let x = &mut x[..n];
    for (col, &p) in piv[..n].iter().enumerate() {
        x.swap(col, p);
    }
    for (r, row) in a.chunks_exact(n).enumerate() {
        let mut acc = x[r];
        for (a, x) in row[..r].iter().zip(&x[..r]) {
            acc -= a * x;
        }
        x[r] = acc;
    }
    for (r, row) in a.chunks_exact(n).enumerate().rev() {
        let mut acc = x[r];
        for (a, x) in row[r + 1..].iter().zip(&x[r + 1..]) {
            acc -= a * x;
        }
        x[r] = acc / row[r];
    }
}

/// `A^-1` from the factors and pivots of [`lu_factor`], written column by column into `inv`
/// (column-major, leading dimension `ld >= n`): column `c` is what [`lu_solve`] gives for the
/// unit vector `e_c`, bit for bit. The sizes of the contact problem solve all `n` unit columns
/// together, row by row, with each column's multiplications and subtractions in `lu_solve`'s
/// order: one substitution is a chain of dependent operations (each `x_r` waits for the ones
/// before it), and `n` of them side by side run in vector lanes and overlap instead of
/// waiting in turn.
pub fn lu_inverse(a: &[f64], n: usize, piv: &[usize], inv: &mut [f64], ld: usize) {
    assert!(ld >= n && inv.len() >= ld * n.saturating_sub(1) + n, "lu_inverse: inv is too small");
    match n {
        3 => lu_inverse_fixed::<3>(a, piv, inv, ld),
        6 => lu_inverse_fixed::<6>(a, piv, inv, ld),
        9 => lu_inverse_fixed::<9>(a, piv, inv, ld),
        12 => lu_inverse_fixed::<12>(a, piv, inv, ld),
        _ => {
            for (c, x) in inv.chunks_mut(ld).take(n).enumerate() {
                let x = &mut x[..n];
                x.fill(0.0);
                x[c] = 1.0;
                lu_solve_general(n, a, piv, x);
            }
        }
    }
}

fn lu_inverse_fixed<const N: usize>(a: &[f64], piv: &[usize], inv: &mut [f64], ld: usize) {
    let (a, piv): (&[[f64; N]; N], &[usize; N]) = (rows::<N>(a), piv[..N].try_into().expect("N"));
    // x[r][c]: entry r of column c, so that a row of all columns is one contiguous array.
    let mut x = [[0.0f64; N]; N];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { lu_inverse_avx2::<N>(a, piv, &mut x) };
    } else {
        lu_inverse_body::<N>(a, piv, &mut x);
    }
    #[cfg(not(target_arch = "x86_64"))]
    lu_inverse_body::<N>(a, piv, &mut x);
    for (c, col) in inv.chunks_mut(ld).take(N).enumerate() {
        for (r, v) in col[..N].iter_mut().enumerate() {
            *v = x[r][c];
        }
    }
}

/// [`lu_inverse_body`] compiled for AVX2 (four columns per instruction; the same operations).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn lu_inverse_avx2<const N: usize>(a: &[[f64; N]; N], piv: &[usize; N], x: &mut [[f64; N]; N]) {
    lu_inverse_body::<N>(a, piv, x)
}

/// `lu_solve_fixed` on the rows of `x` (every column at once): the identity, its rows
/// interchanged, then the two substitutions, each lane the scalar kernel's operations.
#[inline(always)]
fn lu_inverse_body<const N: usize>(a: &[[f64; N]; N], piv: &[usize; N], x: &mut [[f64; N]; N]) {
    for (r, row) in x.iter_mut().enumerate() {
        *row = [0.0; N];
        row[r] = 1.0;
    }
    for (col, &p) in piv.iter().enumerate() {
        x.swap(col, p);
    }
    for r in 0..N {
        let mut acc = x[r];
        for c in 0..r {
            let (arc, xc) = (a[r][c], &x[c]);
            for (s, &v) in acc.iter_mut().zip(xc) {
                *s -= arc * v;
            }
        }
        x[r] = acc;
    }
    for r in (0..N).rev() {
        let mut acc = x[r];
        for c in r + 1..N {
            let (arc, xc) = (a[r][c], &x[c]);
            for (s, &v) in acc.iter_mut().zip(xc) {
                *s -= arc * v;
            }
        }
        let d = a[r][r];
        for s in acc.iter_mut() {
            *s /= d;
        }
        x[r] = acc;
    }
}

/// One-sided Jacobi SVD (Hestenes 1958; Demmel & Veselic 1992) of the row-major `rows x cols`
/// matrix `a`, in place: on return column `j` of `a` is `sigma_j u_j` and `v` (`cols x cols`,
/// row-major) holds the right singular vectors as columns, `sigma` the singular values
/// (unsorted). Plane rotations orthogonalize the columns pairwise until every pair's cosine is
/// below `1e-15`; it resolves small singular values to high relative accuracy, which is what a
/// rank decision on an ill-conditioned system needs. At most 60 sweeps; allocation-free.
pub fn svd_jacobi(a: &mut [f64], rows: usize, cols: usize, v: &mut [f64], sigma: &mut [f64]) {
    for r in 0..cols {
        for c in 0..cols {
            v[r * cols + c] = if r == c { 1.0 } else { 0.0 };
        }
    }
    for _sweep in 0..60 {
        let mut off = 0.0_f64;
        for p in 0..cols {
            for q in p + 1..cols {
                let (mut alpha, mut beta, mut gamma) = (0.0, 0.0, 0.0);
                for r in 0..rows {
                    let (x, y) = (a[r * cols + p], a[r * cols + q]);
                    alpha += x * x;
                    beta += y * y;
                    gamma += x * y;
                }
                if gamma == 0.0 || alpha == 0.0 || beta == 0.0 {
                    continue;
                }
                let cosine = gamma.abs() / (alpha * beta).sqrt();
                if cosine <= 1e-15 {
                    continue;
                }
                off = off.max(cosine);
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                for r in 0..rows {
                    let (x, y) = (a[r * cols + p], a[r * cols + q]);
                    a[r * cols + p] = c * x - s * y;
                    a[r * cols + q] = s * x + c * y;
                }
                for r in 0..cols {
                    let (x, y) = (v[r * cols + p], v[r * cols + q]);
                    v[r * cols + p] = c * x - s * y;
                    v[r * cols + q] = s * x + c * y;
                }
            }
        }
        if off <= 1e-15 {
            break;
        }
    }
    for (j, s) in sigma[..cols].iter_mut().enumerate() {
        *s = (0..rows).map(|r| a[r * cols + j] * a[r * cols + j]).sum::<f64>().sqrt();
    }
}

/// `out = -A^+ rhs`, the least-norm least-squares step, from the factors [`svd_jacobi`] left
/// (`a` holding `sigma_j u_j` in its columns, `v`, `sigma`), singular values below `cutoff`
/// times the largest (or NaN) counting as zero.
#[allow(clippy::too_many_arguments)] // the factors and their shape, as `svd_jacobi` leaves them
pub fn svd_step(
    a: &[f64],
    rows: usize,
    cols: usize,
    v: &[f64],
    sigma: &[f64],
    cutoff: f64,
    rhs: &[f64],
    out: &mut [f64],
) {
    let smax = sigma[..cols].iter().fold(0.0_f64, |m, &s| m.max(s));
    out[..cols].fill(0.0);
    for j in 0..cols {
        let s = sigma[j];
        if s.is_nan() || s <= cutoff * smax {
            continue;
        }
        // u_j^T rhs / sigma_j, with sigma_j u_j the column of `a`.
        let c = (0..rows).map(|r| a[r * cols + j] * rhs[r]).sum::<f64>() / (s * s);
        for r in 0..cols {
            out[r] -= c * v[r * cols + j];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every non-finite value in every position (the eight partial sums and the tail) is caught.
    #[test]
    fn all_finite_finds_any_non_finite_entry() {
        let base: Vec<f64> = (0..21).map(|i| i as f64 * 1e300 - 3.0).collect();
        assert!(all_finite(&base) && all_finite(&[]) && all_finite(&[-0.0, f64::MAX]));
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for at in 0..base.len() {
                let mut v = base.clone();
                v[at] = bad;
                assert!(!all_finite(&v), "{bad} at {at}");
            }
        }
    }

    /// [`gemm`] equals nalgebra's `gemm` bit for bit at DDP's shapes (both paths of the kernel:
    /// eight-row tiles and the last four rows), at shapes of whole eight-row tiles only and of
    /// one four-row tile only, at other shapes (its fallback), for `beta` 0 and 1, with entries
    /// spread over many magnitudes and exact zeros (the sign of a zero sum).
    #[test]
    fn gemm_equals_nalgebra_bit_for_bit() {
        let mut s: u64 = 777;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let e = ((s >> 3) % 40) as i32 - 20;
            if s.is_multiple_of(11) {
                0.0
            } else {
                (2.0 * u - 1.0) * 2f64.powi(e)
            }
        };
        for (m, k, n) in [
            (36, 36, 36),
            (36, 36, 12),
            (12, 36, 36),
            (12, 36, 12),
            (36, 12, 36),
            (20, 7, 8),
            (16, 9, 12),
            (28, 9, 8),
            (8, 7, 12),
            (6, 6, 6),
            (5, 9, 9),
            (18, 18, 18),
        ] {
            let a = DMatrix::from_fn(m, k, |_, _| next());
            let b = DMatrix::from_fn(k, n, |_, _| next());
            let c0 = DMatrix::from_fn(m, n, |_, _| next());
            for beta in [0.0, 1.0] {
                let mut ours = c0.clone();
                gemm(&mut ours, &a, &b, beta);
                let mut theirs = c0.clone();
                theirs.gemm(1.0, &a, &b, beta);
                let same = ours.iter().zip(theirs.iter()).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{m} x {k} x {n}, beta {beta}: max difference {}", (&ours - &theirs).abs().max());
            }
        }
    }

    const RULES: [PivotRule; 2] = [PivotRule::Absolute, PivotRule::Relative(1e-14)];

    /// Entries uniform in `[-1, 1)` from a fixed linear congruential sequence.
    fn random_matrix(n: usize) -> Vec<f64> {
        let mut s: u64 = 12345;
        (0..n * n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    fn residual(a0: &[f64], n: usize, x: &[f64], rhs: &[f64]) -> f64 {
        let mut y = vec![0.0; n];
        mat_vec(a0, n, x, &mut y);
        y.iter().zip(rhs).map(|(y, r)| (y - r).abs()).fold(0.0, f64::max)
    }

    #[test]
    fn fixed_and_general_kernels_agree() {
        for rule in RULES {
            for n in [3, 6, 9, 12] {
                let a0 = random_matrix(n);
                let (mut a1, mut a2) = (a0.clone(), a0.clone());
                let (mut p1, mut p2) = (vec![0; n], vec![0; n]);
                let rhs: Vec<f64> = (0..n).map(|j| j as f64 - 2.5).collect();
                let (mut x1, mut x2) = (rhs.clone(), rhs.clone());
                let (mut y1, mut y2) = (vec![0.0; n], vec![0.0; n]);
                macro_rules! fixed {
                    ($n:literal) => {{
                        let ok = match rule {
                            PivotRule::Absolute => lu_factor_fixed::<$n>(&mut a1, &mut p1, AbsolutePivot),
                            PivotRule::Relative(t) => {
                                let tol = t * a0.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                                lu_factor_fixed::<$n>(&mut a1, &mut p1, RelativePivot { tol })
                            }
                        };
                        assert!(ok);
                        lu_solve_fixed::<$n>(&a1, &p1, &mut x1);
                        mat_vec_fixed::<$n>(&a0, &x1, &mut y1);
                    }};
                }
                match n {
                    3 => fixed!(3),
                    6 => fixed!(6),
                    9 => fixed!(9),
                    _ => fixed!(12),
                }
                let ok = match rule {
                    PivotRule::Absolute => lu_factor_general(n, &mut a2, &mut p2, AbsolutePivot),
                    PivotRule::Relative(t) => {
                        let tol = t * a0.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                        lu_factor_general(n, &mut a2, &mut p2, RelativePivot { tol })
                    }
                };
                assert!(ok);
                lu_solve_general(n, &a2, &p2, &mut x2);
                mat_vec_general(n, &a0, &x1, &mut y2);
                assert_eq!((&a1, &p1), (&a2, &p2), "{rule:?} n = {n}");
                assert_eq!(x1, x2, "{rule:?} n = {n}");
                assert_eq!(y1, y2, "{rule:?} n = {n}");
                assert!(residual(&a0, n, &x1, &rhs) < 1e-12, "{rule:?} n = {n}");
            }
        }
    }

    /// `lu_inverse` is `lu_solve` on the unit vectors bit for bit, on the fixed sizes and the
    /// general one, including a matrix that pivots late and one with zeros (signed zeros too).
    #[test]
    fn lu_inverse_is_lu_solve_on_unit_columns_bit_for_bit() {
        for n in [3, 4, 6, 9, 12, 13] {
            let mut a0 = random_matrix(n);
            a0[1] = 0.0;
            a0[n + 2] = -0.0;
            let mut a = a0.clone();
            let mut piv = vec![0; n];
            assert!(lu_factor(&mut a, n, &mut piv, PivotRule::Relative(1e-14)));
            let ld = n + 2;
            let mut inv = vec![f64::NAN; ld * n];
            lu_inverse(&a, n, &piv, &mut inv, ld);
            for c in 0..n {
                let mut x = vec![0.0; n];
                x[c] = 1.0;
                lu_solve(&a, n, &piv, &mut x);
                let got = &inv[c * ld..c * ld + n];
                assert!(got.iter().zip(&x).all(|(g, e)| g.to_bits() == e.to_bits()), "n = {n}, column {c}");
                assert!(inv[c * ld + n..(c * ld + ld).min(ld * n)].iter().all(|v| v.is_nan()), "rows past n untouched");
            }
        }
    }

    /// Regression: the Signorini solver's former copy interleaved the row interchanges with the
    /// forward substitution while its factorization swapped whole rows (LAPACK storage), which
    /// solves a different system as soon as a row is swapped after the first column (residual
    /// O(1) on every matrix below).
    #[test]
    fn lu_solves_systems_that_pivot_late() {
        for rule in RULES {
            for n in [4, 5, 6, 7, 9, 12, 13] {
                let a0 = random_matrix(n);
                let mut a = a0.clone();
                let mut piv = vec![0; n];
                assert!(lu_factor(&mut a, n, &mut piv, rule));
                assert!(piv.iter().enumerate().skip(1).any(|(c, &p)| p != c), "n = {n} must pivot late");
                let rhs: Vec<f64> = (0..n).map(|j| (j as f64).sin() + 0.5).collect();
                let mut x = rhs.clone();
                lu_solve(&a, n, &piv, &mut x);
                assert!(residual(&a0, n, &x, &rhs) < 1e-12, "{rule:?} n = {n}");
            }
        }
    }

    #[test]
    fn lu_solves_permuted_system() {
        for rule in RULES {
            let mut a = vec![0.0, 2.0, 1.0, 1.0, 1.0, 0.0, 3.0, 0.0, 1.0];
            let a0 = a.clone();
            let mut piv = [0; 3];
            assert!(lu_factor(&mut a, 3, &mut piv, rule));
            let mut x = [1.0, 2.0, 3.0];
            lu_solve(&a, 3, &piv, &mut x);
            assert!(residual(&a0, 3, &x, &[1.0, 2.0, 3.0]) < 1e-12);
        }
    }

    #[test]
    fn pivot_rules_differ_on_badly_scaled_rows() {
        // Row 0 is 1e20 times the others, as for a separated contact; the rest is regular.
        let a0 = [1e20, 0.0, 0.0, 0.0, 2.0, 1.0, 0.0, 1.0, 3.0];
        let mut a = a0;
        let mut piv = [0; 3];
        assert!(lu_factor(&mut a, 3, &mut piv, PivotRule::Absolute));
        let mut a = a0;
        assert!(!lu_factor(&mut a, 3, &mut piv, PivotRule::Relative(1e-14)));
        // Exactly singular: both fail.
        for rule in RULES {
            let mut a = [1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 0.0, 1.0, 1.0];
            assert!(!lu_factor(&mut a, 3, &mut piv, rule), "{rule:?}");
        }
        // Non-finite or zero input fails the relative rule before any elimination.
        for bad in [f64::INFINITY, 0.0] {
            let mut a = [bad; 9];
            assert!(!lu_factor(&mut a, 3, &mut piv, PivotRule::Relative(1e-14)));
            let mut a = [bad; 9];
            assert!(!lu_factor(&mut a, 3, &mut piv, PivotRule::Absolute));
        }
    }

    /// A 7 x 5 matrix of rank 3 (with singular values 1, 1e-4, 1e-7): the SVD reproduces it,
    /// `V` is orthogonal, and exactly two singular values vanish to rounding.
    #[test]
    fn jacobi_svd_reconstructs_and_finds_the_rank() {
        let (rows, cols) = (7, 5);
        let x = random_matrix(7);
        let y = random_matrix(5);
        let scales = [1.0, 1e-4, 1e-7];
        let mut a = vec![0.0; rows * cols];
        for (k, s) in scales.iter().enumerate() {
            for r in 0..rows {
                for c in 0..cols {
                    a[r * cols + c] += s * x[k * 7 + r] * y[k * 5 + c];
                }
            }
        }
        let orig = a.clone();
        let (mut v, mut sigma) = (vec![0.0; cols * cols], vec![0.0; cols]);
        svd_jacobi(&mut a, rows, cols, &mut v, &mut sigma);
        for r in 0..rows {
            for c in 0..cols {
                let back: f64 = (0..cols).map(|j| a[r * cols + j] * v[c * cols + j]).sum();
                assert!((back - orig[r * cols + c]).abs() < 1e-15, "{back} vs {}", orig[r * cols + c]);
            }
        }
        for p in 0..cols {
            for q in 0..cols {
                let dot: f64 = (0..cols).map(|r| v[r * cols + p] * v[r * cols + q]).sum();
                assert!((dot - f64::from(u8::from(p == q))).abs() < 1e-14);
            }
        }
        let big = sigma.iter().fold(0.0_f64, |m, &s| m.max(s));
        assert_eq!(sigma.iter().filter(|&&s| s > 1e-12 * big).count(), 3, "{sigma:?}");
        assert!(sigma.iter().any(|&s| s > 1e-8 * big && s < 1e-6 * big), "the 1e-7 direction is resolved: {sigma:?}");
    }
}
