//! Regression: the Signorini-relaxed backward solve once had its own LU whose solve interleaved
//! the row swaps with forward substitution while the factorization swapped whole rows, so any
//! system that pivoted after its first column was solved wrongly (an O(1) residual; it showed
//! only on the 8-corner box scenes, as extra backward Newton iterations). All callers now share
//! `linalg::lu_factor` / `lu_solve`; this checks them on matrices that pivot late, for both
//! pivot rules and for the fixed-size (n = 3, 6, 9, 12) and general paths.

use contactlab::linalg::{lu_factor, lu_solve, PivotRule};

/// A well-conditioned matrix whose first column needs no swap (a dominant `a_00`) and whose
/// later columns, pseudo-random, do.
fn late_pivoting(n: usize) -> Vec<f64> {
    let mut state = 0x2545_f491_4f6c_dd1du64 ^ n as u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let mut a: Vec<f64> = (0..n * n).map(|_| next()).collect();
    a[0] = 100.0;
    // Small entries on the diagonal below the first row so the pivots come from other rows.
    for r in 1..n {
        a[r * n + r] *= 1e-3;
    }
    a
}

#[test]
fn lu_solves_systems_that_pivot_after_the_first_column() {
    for n in [3, 5, 6, 9, 12, 14] {
        for rule in [PivotRule::Absolute, PivotRule::Relative(1e-14)] {
            let a = late_pivoting(n);
            let x_true: Vec<f64> = (0..n).map(|i| 1.0 + i as f64).collect();
            let mut b = vec![0.0; n];
            for r in 0..n {
                b[r] = (0..n).map(|c| a[r * n + c] * x_true[c]).sum();
            }
            let mut lu = a.clone();
            let mut piv = vec![0; n];
            assert!(lu_factor(&mut lu, n, &mut piv, rule), "n {n}: factorization failed");
            assert!(piv.iter().enumerate().skip(1).any(|(i, &p)| p != i), "n {n}: the test matrix must pivot late");
            lu_solve(&lu, n, &piv, &mut b);
            let err = b.iter().zip(&x_true).map(|(x, t)| (x - t).abs()).fold(0.0, f64::max);
            assert!(err < 1e-9, "n {n}, {rule:?}: max error {err:e}");
        }
    }
}
