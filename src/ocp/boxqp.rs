//! Box-constrained QP `min 0.5 x^T H x + g^T x` s.t. `lower <= x <= upper` by projected Newton
//! (Bertsekas 1982, as used by Tassa et al.'s control-limited DDP): Newton steps on the free
//! set (variables not held at a bound by their gradient), projected back into the box with an
//! Armijo line search. Returns the minimizer and the free set, whose Cholesky factor gives the
//! DDP feedback gains.

use nalgebra::{DMatrix, DVector};

const MAX_ITERATIONS: usize = 100;
const GRADIENT_TOLERANCE: f64 = 1e-10;
const ARMIJO: f64 = 0.1;

/// `None` if the free block of `h` is not positive definite.
pub fn solve(
    h: &DMatrix<f64>,
    g: &DVector<f64>,
    lower: &DVector<f64>,
    upper: &DVector<f64>,
    x0: &DVector<f64>,
) -> Option<(DVector<f64>, Vec<bool>)> {
    let n = g.len();
    let mut x = DVector::from_fn(n, |i, _| x0[i].clamp(lower[i], upper[i].max(lower[i])));
    let value = |x: &DVector<f64>| 0.5 * x.dot(&(h * x)) + g.dot(x);
    let mut free = vec![true; n];
    for _ in 0..MAX_ITERATIONS {
        let grad = g + h * &x;
        for i in 0..n {
            let at_lower = x[i] <= lower[i] && grad[i] > 0.0;
            let at_upper = x[i] >= upper[i] && grad[i] < 0.0;
            free[i] = !(at_lower || at_upper);
        }
        let idx: Vec<usize> = (0..n).filter(|&i| free[i]).collect();
        if idx.is_empty() {
            break;
        }
        let gf = DVector::from_fn(idx.len(), |a, _| grad[idx[a]]);
        if gf.norm() <= GRADIENT_TOLERANCE * (1.0 + g.norm()) {
            break;
        }
        let hff = DMatrix::from_fn(idx.len(), idx.len(), |a, b| h[(idx[a], idx[b])]);
        let step = -hff.cholesky()?.solve(&gf);
        let f0 = value(&x);
        let mut alpha = 1.0;
        let mut moved = false;
        while alpha > 1e-12 {
            let mut trial = x.clone();
            for (a, &i) in idx.iter().enumerate() {
                trial[i] = (x[i] + alpha * step[a]).clamp(lower[i], upper[i]);
            }
            let decrease = grad.dot(&(&trial - &x));
            if value(&trial) <= f0 + ARMIJO * decrease {
                moved = (&trial - &x).norm() > 0.0;
                x = trial;
                break;
            }
            alpha *= 0.5;
        }
        if !moved {
            break;
        }
    }
    // The free set at the answer (for the gains) and its positive definiteness.
    let grad = g + h * &x;
    for i in 0..n {
        free[i] = !((x[i] <= lower[i] && grad[i] > 0.0) || (x[i] >= upper[i] && grad[i] < 0.0));
    }
    Some((x, free))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unconstrained_minimum_inside_the_box() {
        let h = DMatrix::from_row_slice(2, 2, &[2.0, 0.5, 0.5, 1.0]);
        let g = DVector::from_vec(vec![-1.0, 0.3]);
        let (x, free) =
            solve(&h, &g, &DVector::from_element(2, -10.0), &DVector::from_element(2, 10.0), &DVector::zeros(2))
                .unwrap();
        let exact = -h.clone().cholesky().unwrap().solve(&g);
        assert!((x - exact).norm() < 1e-12);
        assert_eq!(free, vec![true, true]);
    }

    #[test]
    fn active_bound_matches_the_reduced_problem() {
        // Minimum at x = (2, -1.5) unconstrained; with x0 <= 1 the first is clamped and the
        // second solves its row with x0 = 1.
        let h = DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, 2.0]);
        let g = DVector::from_vec(vec![-2.0, 3.0]);
        let (x, free) =
            solve(&h, &g, &DVector::from_element(2, -5.0), &DVector::from_vec(vec![1.0, 5.0]), &DVector::zeros(2))
                .unwrap();
        assert!((x[0] - 1.0).abs() < 1e-14 && (x[1] + 1.5).abs() < 1e-12, "{x}");
        assert_eq!(free, vec![false, true]);
    }
}
