//! Realized contact modes from an answer of the solver (thresholds in [`Settings`]).

use super::Settings;
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

/// Mode of one contact from its impulse `(l_n, l_t1, l_t2)` and velocity `(w_n, w_t1, w_t2)`,
/// with absolute thresholds. `mu` is part of the contact's data but the modes are defined by
/// the thresholds alone (a sliding impulse is on the cone boundary by construction).
pub fn classify(lambda_i: &[f64], w_i: &[f64], _mu: f64, settings: &Settings) -> ContactMode {
    classify_with(lambda_i, w_i, settings.separated_impulse, settings)
}

/// Modes of all contacts; `Separated` uses `max(separated_impulse, separated_impulse_rel *
/// max_i l_n,i)` so that it scales with the load.
pub fn classify_all(lambda: &[f64], w: &[f64], mu: &[f64], settings: &Settings, modes: &mut [ContactMode]) {
    let k = mu.len();
    let ln_max = (0..k).map(|i| lambda[3 * i]).fold(0.0_f64, f64::max);
    let eps_n = settings.separated_impulse.max(settings.separated_impulse_rel * ln_max);
    for i in 0..k {
        modes[i] = classify_with(&lambda[3 * i..3 * i + 3], &w[3 * i..3 * i + 3], eps_n, settings);
    }
}

fn classify_with(lambda_i: &[f64], w_i: &[f64], eps_n: f64, settings: &Settings) -> ContactMode {
    if lambda_i[0] <= eps_n {
        ContactMode::Separated
    } else if w_i[1].hypot(w_i[2]) <= settings.sticking_velocity {
        ContactMode::Sticking
    } else {
        ContactMode::Sliding
    }
}
