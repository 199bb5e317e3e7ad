//! Realized contact modes from an answer of the solver (thresholds in [`Settings`]).

use super::Settings;
use nalgebra::DMatrixView;
use serde::{Deserialize, Serialize};

/// Realized contact mode of one contact (thresholds in [`Settings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContactMode {
    /// No normal impulse.
    Separated,
    /// Pressing, no tangential velocity.
    Sticking,
    /// Pressing and sliding; the impulse lies on the cone boundary.
    Sliding,
}

/// Mode of one contact from its impulse `(l_n, l_t1, l_t2)`, velocity `(w_n, w_t1, w_t2)` and
/// the diagonal entry `g_nn` of the Delassus matrix on its normal (module docs of
/// [`crate::contact::solver`], *Realized modes*).
pub fn classify(lambda_i: &[f64], w_i: &[f64], g_nn: f64, settings: &Settings) -> ContactMode {
    // An interior-point answer leaves `l_n w_n` at about the final centering on both sides of
    // the normal complementarity, so a separating contact keeps a residual impulse of about
    // `centering / w_n`: above any absolute threshold when it separates slowly. The side of the
    // complementarity that is zero is the one that is small against the other, measured in
    // velocity: the normal velocity against what the contact's own impulse produces.
    if lambda_i[0] <= settings.separated_impulse || w_i[0] >= g_nn * lambda_i[0] {
        ContactMode::Separated
    } else if w_i[1].hypot(w_i[2]) <= settings.sticking_velocity {
        ContactMode::Sticking
    } else {
        ContactMode::Sliding
    }
}

/// Modes of all contacts of a problem with Delassus matrix `g` (3k x 3k).
pub fn classify_all(lambda: &[f64], w: &[f64], g: DMatrixView<f64>, settings: &Settings, modes: &mut [ContactMode]) {
    for (i, m) in modes.iter_mut().enumerate() {
        let r = 3 * i..3 * i + 3;
        *m = classify(&lambda[r.clone()], &w[r], g[(3 * i, 3 * i)], settings);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slowly_separating_contact_with_a_residual_impulse_is_separated() {
        let s = Settings::default();
        // Lifting off at 1 cm/s with the interior point's residual impulse 3e-9 N s (above the
        // absolute threshold): separated. The same impulse on a contact at rest is pressing.
        assert_eq!(classify(&[3e-9, -2e-9, 0.0], &[1e-2, 0.7, 0.1], 2.0, &s), ContactMode::Separated);
        assert_eq!(classify(&[3e-9, -2e-9, 0.0], &[1e-12, 0.7, 0.1], 2.0, &s), ContactMode::Sliding);
        assert_eq!(classify(&[0.3, 0.1, 0.0], &[1e-11, 1e-10, 0.0], 2.0, &s), ContactMode::Sticking);
        assert_eq!(classify(&[5e-10, 0.0, 0.0], &[0.0, 0.0, 0.0], 2.0, &s), ContactMode::Separated);
    }
}
