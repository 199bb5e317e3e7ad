//! Statistics of BPTT's policy gradient (`learn::bptt`) against the rollout length: what decides
//! whether a contact sensitivity helps a learning task.
//!
//! For a policy, a sensitivity and a rollout length `T`, every one of `N` fixed episodes gives
//! its rollout's gradient `g_i = dL_i/dtheta` ([`super::bptt::rollout_gradient`] on the task
//! with `T` steps). Reported: the norm of the batch gradient `|g|` (`g` the mean of the `g_i`,
//! what BPTT's Adam step sees before clipping), the mean per-rollout norm, the **variance over
//! the batch** `tr Cov(g_i) = 1/(N-1) sum |g_i - g|^2`, and the cosine between `g` and the
//! batch gradient of a reference sensitivity. Independently of the sensitivity (the forward
//! step is the same), the fraction of steps whose realized contact modes (separated, sticking,
//! sliding per candidate; `sim::StepWorkspace::modes`) differ from the previous step's, and the
//! fraction whose contact set (separated or not) does: lift-offs and touchdowns.

use super::bptt::{rollout_gradient, BpttWork};
use super::mlp::MlpCache;
use super::policy::Policy;
use super::task::{Env, Episode, Task};
use crate::contact::ContactMode;
use crate::diff::Sensitivity;
use serde::Serialize;

/// The statistics of one (policy, sensitivity, rollout length) (module docs).
#[derive(Clone, Debug, Serialize)]
pub struct GradientStats {
    pub sensitivity: String,
    pub rollout_steps: usize,
    /// Episodes and the rollouts whose gradient was usable (finite, no failed step).
    pub episodes: usize,
    pub ok: usize,
    pub fallback_steps: usize,
    /// `|g|`, mean of `|g_i|`, `tr Cov(g_i)`, mean loss.
    pub batch_gradient_norm: f64,
    pub rollout_gradient_norm_mean: f64,
    pub variance: f64,
    pub loss_mean: f64,
    /// Cosine between `g` and the reference sensitivity's batch gradient (None for the
    /// reference itself or without one).
    pub cosine_to_reference: Option<f64>,
}

/// Contact changes along the rollouts (module docs).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ContactChanges {
    pub rollout_steps: usize,
    /// Fraction of steps (after the first, over every episode) with a mode change, with a
    /// contact-set change, and mean number of candidates in contact per step.
    pub mode_change_fraction: f64,
    pub contact_change_fraction: f64,
    pub contacts_mean: f64,
}

/// The task with rollouts of `steps` steps.
pub fn with_steps(task: &Task, steps: usize) -> Task {
    let mut t = task.clone();
    t.steps = steps;
    t
}

/// Per-rollout gradients of `policy` on `episodes` (task's rollout length) with `sensitivity`:
/// `(gradient, loss)` of the usable ones, and the fallback steps.
pub fn rollout_gradients(
    task: &Task,
    policy: &Policy,
    episodes: &[Episode],
    sensitivity: Sensitivity,
) -> (Vec<(Vec<f64>, f64)>, usize) {
    let n = policy.mlp.n_params();
    let mut w = BpttWork::new(task);
    let mut out = Vec::new();
    let mut fallbacks = 0;
    for ep in episodes {
        let mut g = vec![0.0; n];
        let o = rollout_gradient(task, policy, ep, sensitivity, &mut w, &mut g);
        fallbacks += o.fallback_steps;
        if o.ok {
            out.push((g, o.loss));
        }
    }
    (out, fallbacks)
}

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// Mean of the gradients (None without any).
pub fn mean_gradient(gs: &[(Vec<f64>, f64)]) -> Option<Vec<f64>> {
    let first = gs.first()?;
    let mut m = vec![0.0; first.0.len()];
    for (g, _) in gs {
        for (a, b) in m.iter_mut().zip(g) {
            *a += b;
        }
    }
    let s = 1.0 / gs.len() as f64;
    m.iter_mut().for_each(|x| *x *= s);
    Some(m)
}

/// The statistics of `sensitivities` on `episodes` for each rollout length (module docs); the
/// first sensitivity is the cosine's reference.
pub fn gradient_stats(
    task: &Task,
    policy: &Policy,
    episodes: &[Episode],
    sensitivities: &[Sensitivity],
    lengths: &[usize],
) -> Vec<GradientStats> {
    let mut out = Vec::new();
    for &len in lengths {
        let t = with_steps(task, len);
        let mut reference: Option<Vec<f64>> = None;
        for (i, &s) in sensitivities.iter().enumerate() {
            let (gs, fallbacks) = rollout_gradients(&t, policy, episodes, s);
            let mean = mean_gradient(&gs);
            let ok = gs.len();
            let (bn, rn, var, loss) = match &mean {
                Some(m) => (
                    norm(m),
                    gs.iter().map(|g| norm(&g.0)).sum::<f64>() / ok as f64,
                    gs.iter().map(|g| g.0.iter().zip(m).map(|(a, b)| (a - b) * (a - b)).sum::<f64>()).sum::<f64>()
                        / (ok.max(2) - 1) as f64,
                    gs.iter().map(|g| g.1).sum::<f64>() / ok as f64,
                ),
                None => (f64::NAN, f64::NAN, f64::NAN, f64::NAN),
            };
            let cosine = match (&reference, &mean) {
                (Some(r), Some(m)) if i > 0 => {
                    Some(r.iter().zip(m).map(|(a, b)| a * b).sum::<f64>() / (norm(r) * norm(m)).max(f64::MIN_POSITIVE))
                }
                _ => None,
            };
            if i == 0 {
                reference = mean;
            }
            out.push(GradientStats {
                sensitivity: s.name().to_string(),
                rollout_steps: len,
                episodes: episodes.len(),
                ok,
                fallback_steps: fallbacks,
                batch_gradient_norm: bn,
                rollout_gradient_norm_mean: rn,
                variance: var,
                loss_mean: loss,
                cosine_to_reference: cosine,
            });
        }
    }
    out
}

/// Contact changes of `policy`'s rollouts of `steps` steps on `episodes` (module docs).
pub fn contact_changes(task: &Task, policy: &Policy, episodes: &[Episode], steps: usize) -> ContactChanges {
    let mut env = Env::new(task);
    let mut cache = MlpCache::default();
    let (mut counted, mut mode_changes, mut set_changes, mut contacts, mut taken) = (0usize, 0usize, 0usize, 0usize, 0);
    for ep in episodes {
        env.reset(task, ep);
        let mut prev: Option<Vec<ContactMode>> = None;
        for _ in 0..steps {
            let a = policy.action(&env.obs.clone(), &mut cache);
            if env.step(task, &a, None).is_none() {
                break;
            }
            taken += 1;
            let modes = env.ws.modes.clone();
            contacts += modes.iter().filter(|m| **m != ContactMode::Separated).count();
            if let Some(p) = &prev {
                counted += 1;
                mode_changes += (p != &modes) as usize;
                let set = |m: &ContactMode| *m != ContactMode::Separated;
                set_changes += p.iter().zip(&modes).any(|(a, b)| set(a) != set(b)) as usize;
            }
            prev = Some(modes);
        }
    }
    let c = counted.max(1) as f64;
    ContactChanges {
        rollout_steps: steps,
        mode_change_fraction: mode_changes as f64 / c,
        contact_change_fraction: set_changes as f64 / c,
        contacts_mean: contacts as f64 / taken.max(1) as f64,
    }
}

/// The measurements of one policy: its label, the gradient statistics and the contact changes.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyGradients {
    pub policy: String,
    pub stats: Vec<GradientStats>,
    pub contacts: Vec<ContactChanges>,
}

fn colour(name: &str) -> plotters::style::RGBColor {
    use plotters::style::RGBColor;
    match name {
        "exact" => RGBColor(214, 39, 40),
        "signorini" => RGBColor(255, 127, 14),
        _ => RGBColor(31, 119, 180),
    }
}

/// Per policy a panel of `|g|` (solid) and `sqrt(tr Cov)` (dashed) per sensitivity against the
/// rollout length (log y), and a last panel of the contact-change fractions.
pub fn gradient_png(ps: &[PolicyGradients], path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    crate::plot::fonts();
    let w = 560;
    let root = BitMapBackend::new(path, (w * (ps.len() as u32 + 1), 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((1, ps.len() + 1));
    let lmax = ps.iter().flat_map(|p| p.stats.iter().map(|s| s.rollout_steps)).max().unwrap_or(1) as f64;
    let lmin = ps.iter().flat_map(|p| p.stats.iter().map(|s| s.rollout_steps)).min().unwrap_or(1) as f64;
    let vals = ps.iter().flat_map(|p| p.stats.iter().flat_map(|s| [s.batch_gradient_norm, s.variance.sqrt()]));
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        (lo, hi) = (1e-3, 1.0);
    }
    for (p, area) in ps.iter().zip(areas.iter()) {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("gradient, {} policy", p.policy), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(lmin - 2.0..lmax + 2.0, (lo / 2.0..hi * 2.0).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("rollout length (steps)")
            .y_desc("norm")
            .y_label_formatter(&|y| format!("{y:.0e}"))
            .label_style(("sans-serif", 14))
            .draw()?;
        let mut names: Vec<&str> = Vec::new();
        for s in &p.stats {
            if !names.contains(&s.sensitivity.as_str()) {
                names.push(&s.sensitivity);
            }
        }
        for name in names {
            let c = colour(name);
            let pts: Vec<&GradientStats> = p.stats.iter().filter(|s| s.sensitivity == name).collect();
            let mean: Vec<(f64, f64)> = pts.iter().map(|s| (s.rollout_steps as f64, s.batch_gradient_norm)).collect();
            let sd: Vec<(f64, f64)> = pts.iter().map(|s| (s.rollout_steps as f64, s.variance.sqrt())).collect();
            chart
                .draw_series(LineSeries::new(mean.clone(), c.stroke_width(2)))?
                .label(format!("{name}: |batch gradient|"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            chart.draw_series(mean.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))?;
            chart
                .draw_series(DashedLineSeries::new(sd, 6, 4, c.stroke_width(2)))?
                .label(format!("{name}: sqrt(variance over batch)"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(1)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    let area = areas.last().expect("one more panel than policies");
    let mut chart = ChartBuilder::on(area)
        .caption("contact changes per step", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(lmin - 2.0..lmax + 2.0, 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("rollout length (steps)")
        .y_desc("fraction of steps")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (k, p) in ps.iter().enumerate() {
        let c = Palette99::pick(k + 4).to_rgba();
        let modes: Vec<(f64, f64)> =
            p.contacts.iter().map(|c| (c.rollout_steps as f64, c.mode_change_fraction)).collect();
        let sets: Vec<(f64, f64)> =
            p.contacts.iter().map(|c| (c.rollout_steps as f64, c.contact_change_fraction)).collect();
        chart
            .draw_series(LineSeries::new(modes, c.stroke_width(2)))?
            .label(format!("{}: any mode change", p.policy))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(DashedLineSeries::new(sets, 6, 4, c.stroke_width(2)))?
            .label(format!("{}: lift-off or touchdown", p.policy))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(1)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()?;
    root.present()?;
    Ok(())
}
