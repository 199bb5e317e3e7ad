//! The plots of the bottom panel (egui_plot): gradient quality across a contact transition,
//! the contact-mode timeline, solver iterations and residual per step, contact forces over
//! time. Time plots show the last `window` seconds of the history up to the snapshot on
//! screen, decimated to at most [`MAX_POINTS`] points so a long history costs the same per
//! frame as a short one.

use super::sim::SimHistory;
use super::sweep::SweepState;
use crate::contact::ContactMode;
use crate::model::Model;
use crate::sim::snapshot::Snapshot;
use bevy_egui::egui::{self, Color32};
use egui_plot::{FilledArea, Legend, Line, MarkerShape, Plot, PlotPoints, Points, VLine};

/// Most points drawn per time series.
pub const MAX_POINTS: usize = 600;

pub fn mode_color32(m: ContactMode) -> Color32 {
    match m {
        ContactMode::Separated => Color32::from_rgb(140, 140, 148),
        ContactMode::Sticking => Color32::from_rgb(26, 190, 64),
        ContactMode::Sliding => Color32::from_rgb(255, 128, 13),
    }
}

fn sensitivity_color(name: &str) -> Color32 {
    match name {
        "exact" => Color32::from_rgb(220, 50, 50),
        "signorini" => Color32::from_rgb(60, 110, 230),
        _ => Color32::from_rgb(30, 160, 90),
    }
}

/// The snapshots in the window ending at the one on screen, every `stride`-th.
fn window<'a>(history: &'a SimHistory, seconds: f64) -> impl Iterator<Item = &'a Snapshot> + 'a {
    let n = history.snapshots.len();
    let end = history.cursor.map_or(n, |c| (c + 1).min(n));
    let t_end = if end > 0 { history.snapshots[end - 1].t } else { 0.0 };
    let start = history.snapshots.range(..end).rposition(|s| s.t < t_end - seconds).map_or(0, |i| i + 1);
    let stride = ((end - start) / MAX_POINTS).max(1);
    history.snapshots.range(start..end).step_by(stride)
}

/// `df/ds` of each sensitivity against the smoothed truth (band: 2 standard errors) and the
/// local finite difference (filled where the modes differ inside its stencil), with the
/// watched contact's mode at the end of the horizon as a strip underneath.
pub fn gradient(u: &mut egui::Ui, state: &SweepState, selected: &str) {
    let Some((settings, r)) = &state.result else {
        if state.busy() {
            u.label(format!("Sweeping ... {} / {} points", state.progress(), state.total));
        } else {
            u.label("No sweep yet: set one up under \"Gradient sweep\" and press \"Sweep from this state\".");
        }
        return;
    };
    u.horizontal_wrapped(|u| {
        u.label(format!(
            "d/ds [{}] of `{}`, s = {}, kappa {:.1e}, delta {:.1e}{}",
            settings.objective.label(),
            settings.objective_body,
            r.param_name,
            settings.kappa,
            settings.delta,
            if state.busy() { format!("  (updating {}/{})", state.progress(), state.total) } else { String::new() }
        ));
        for (name, s) in r.sensitivity_names.iter().zip(&r.summaries) {
            u.colored_label(
                sensitivity_color(name),
                format!("{name}: cos {:.3}, rel err {:.3}, sign {:.2}", s.cosine, s.rel_error, s.sign_agreement),
            );
        }
    });
    let xs: Vec<f64> = r.points.iter().map(|p| p.s).collect();
    let lo: Vec<f64> = r.points.iter().map(|p| p.smoothed - 2.0 * p.smoothed_se).collect();
    let hi: Vec<f64> = r.points.iter().map(|p| p.smoothed + 2.0 * p.smoothed_se).collect();
    let strip = 22.0;
    let height = (u.available_height() - strip - 8.0).max(80.0);
    let plot = Plot::new("gradient_plot")
        .height(height)
        .legend(Legend::default().position(egui_plot::Corner::RightBottom).background_alpha(0.6))
        .x_axis_label(r.param_name.clone());
    let resp = plot.show(u, |p| {
        p.add(FilledArea::new("smoothed +- 2 se", &xs, &lo, &hi).fill_color(Color32::from_black_alpha(40)));
        p.add(
            Line::new("smoothed truth", PlotPoints::from_iter(r.points.iter().map(|q| [q.s, q.smoothed])))
                .color(Color32::BLACK)
                .width(2.0),
        );
        let (same, changed): (Vec<_>, Vec<_>) = r.points.iter().partition(|q| !q.fd_mode_change);
        p.add(
            Points::new("local FD", PlotPoints::from_iter(same.iter().map(|q| [q.s, q.fd])))
                .shape(MarkerShape::Circle)
                .filled(false)
                .radius(3.0)
                .color(Color32::DARK_GRAY),
        );
        p.add(
            Points::new("local FD (mode change)", PlotPoints::from_iter(changed.iter().map(|q| [q.s, q.fd])))
                .shape(MarkerShape::Circle)
                .filled(true)
                .radius(3.0)
                .color(Color32::DARK_GRAY),
        );
        for (i, name) in r.sensitivity_names.iter().enumerate() {
            let pts: Vec<[f64; 2]> =
                r.points.iter().filter(|q| q.grads[i].is_finite()).map(|q| [q.s, q.grads[i]]).collect();
            p.add(
                Line::new(name.clone(), PlotPoints::from(pts))
                    .color(sensitivity_color(name))
                    .width(if name == selected { 3.0 } else { 1.5 }),
            );
        }
    });
    // Mode strip aligned with the plot's x axis: each point's mode from the midpoint to its
    // left neighbour to the midpoint to its right one.
    let (rect, _) = u.allocate_exact_size(egui::vec2(resp.response.rect.width(), strip), egui::Sense::hover());
    let painter = u.painter_at(rect);
    let tf = resp.transform;
    let n = r.points.len();
    for (k, q) in r.points.iter().enumerate() {
        let Some(&mode) = q.final_modes.first() else { break };
        let left = if k > 0 { 0.5 * (r.points[k - 1].s + q.s) } else { q.s };
        let right = if k + 1 < n { 0.5 * (r.points[k + 1].s + q.s) } else { q.s };
        let (x0, x1) = (tf.position_from_point_x(left), tf.position_from_point_x(right));
        painter.rect_filled(
            egui::Rect::from_x_y_ranges(x0.min(x1)..=x0.max(x1) + 1.0, rect.top()..=rect.bottom()),
            0.0,
            mode_color32(mode),
        );
    }
    if let Some(w) = r.watch_names.first() {
        painter.text(
            rect.left_center() + egui::vec2(4.0, 0.0),
            egui::Align2::LEFT_CENTER,
            format!("{w} at the end"),
            egui::FontId::proportional(12.0),
            Color32::WHITE,
        );
    }
}

/// One row per contact candidate that is a foot (radius > 0) or touched in the window: its
/// realized mode over time.
pub fn modes(u: &mut egui::Ui, history: &SimHistory, model: &Model, seconds: f64) {
    let snaps: Vec<&Snapshot> = window(history, seconds).collect();
    let (Some(first), Some(last)) = (snaps.first(), snaps.last()) else { return };
    let rows: Vec<usize> = (0..model.contact_points.len())
        .filter(|&i| {
            model.contact_points[i].radius > 0.0 || snaps.iter().any(|s| s.contacts[i].mode != ContactMode::Separated)
        })
        .collect();
    let label_w = 130.0;
    let row_h = ((u.available_height() - 24.0) / rows.len().max(1) as f32).clamp(8.0, 24.0);
    let width = u.available_width();
    let (rect, _) = u.allocate_exact_size(egui::vec2(width, row_h * rows.len() as f32 + 20.0), egui::Sense::hover());
    let painter = u.painter_at(rect);
    let (t0, t1) = (first.t, last.t.max(first.t + 1e-9));
    let x_of = |t: f64| rect.left() + label_w + (width - label_w - 4.0) * ((t - t0) / (t1 - t0)) as f32;
    for (r, &i) in rows.iter().enumerate() {
        let y0 = rect.top() + r as f32 * row_h;
        painter.text(
            egui::pos2(rect.left() + 2.0, y0 + 0.5 * row_h),
            egui::Align2::LEFT_CENTER,
            &model.contact_points[i].name,
            egui::FontId::proportional(row_h.clamp(9.0, 13.0)),
            u.visuals().text_color(),
        );
        let mut seg_start = 0;
        for k in 1..=snaps.len() {
            if k == snaps.len() || snaps[k].contacts[i].mode != snaps[seg_start].contacts[i].mode {
                let x0 = x_of(snaps[seg_start].t);
                let x1 = x_of(snaps[k - 1].t).max(x0 + 1.0);
                painter.rect_filled(
                    egui::Rect::from_x_y_ranges(x0..=x1, y0 + 1.0..=y0 + row_h - 1.0),
                    0.0,
                    mode_color32(snaps[seg_start].contacts[i].mode),
                );
                seg_start = k;
            }
        }
    }
    let y = rect.top() + row_h * rows.len() as f32 + 10.0;
    painter.text(
        egui::pos2(x_of(t0), y),
        egui::Align2::LEFT_CENTER,
        format!("{t0:.2} s"),
        egui::FontId::proportional(11.0),
        u.visuals().text_color(),
    );
    painter.text(
        egui::pos2(x_of(t1), y),
        egui::Align2::RIGHT_CENTER,
        format!("{t1:.2} s"),
        egui::FontId::proportional(11.0),
        u.visuals().text_color(),
    );
}

/// Newton iterations and log10 of the scaled residual per step.
pub fn solver(u: &mut egui::Ui, history: &SimHistory, seconds: f64) {
    let snaps: Vec<&Snapshot> = window(history, seconds).collect();
    let h = (u.available_height() * 0.5 - 6.0).max(60.0);
    Plot::new("solver_iterations").height(h).legend(Legend::default()).link_axis("solver", [true, false]).show(
        u,
        |p| {
            p.add(
                Line::new("Newton iterations", PlotPoints::from_iter(snaps.iter().map(|s| [s.t, s.iterations as f64])))
                    .color(Color32::from_rgb(60, 110, 230)),
            );
        },
    );
    Plot::new("solver_residual").height(h).legend(Legend::default()).link_axis("solver", [true, false]).show(u, |p| {
        p.add(
            Line::new(
                "log10 residual",
                PlotPoints::from_iter(snaps.iter().filter(|s| s.residual > 0.0).map(|s| [s.t, s.residual.log10()])),
            )
            .color(Color32::from_rgb(200, 80, 40)),
        );
    });
}

/// Normal force of each foot and the total vertical contact force against the weight.
pub fn forces(u: &mut egui::Ui, history: &SimHistory, model: &Model, seconds: f64) {
    let snaps: Vec<&Snapshot> = window(history, seconds).collect();
    let weight = model.total_mass() * model.gravity.norm();
    let feet: Vec<usize> = (0..model.contact_points.len()).filter(|&i| model.contact_points[i].radius > 0.0).collect();
    let shown: Vec<usize> = if feet.is_empty() { (0..model.contact_points.len()).collect() } else { feet };
    Plot::new("forces").legend(Legend::default()).y_axis_label("N").show(u, |p| {
        for &i in &shown {
            p.add(Line::new(
                format!("{} normal", model.contact_points[i].name),
                PlotPoints::from_iter(snaps.iter().map(|s| [s.t, s.contacts[i].lambda.x / s.dt])),
            ));
        }
        p.add(
            Line::new("total vertical", PlotPoints::from_iter(snaps.iter().map(|s| [s.t, s.total_contact_force().z])))
                .color(Color32::BLACK)
                .width(2.0),
        );
        p.add(egui_plot::HLine::new("weight", weight).color(Color32::GRAY));
        if let Some(s) = snaps.last() {
            p.add(VLine::new("now", s.t).color(Color32::from_gray(170)));
        }
    });
}

/// The profiler: wall time of each step (the step task's), solver iterations and residual
/// per step (the history's last 2000), and the frame cost of our systems.
pub fn profiler(
    u: &mut egui::Ui,
    history: &SimHistory,
    profile: &crate::app::sim::StepProfile,
    cost: Option<&crate::app::capture::FrameCost>,
) {
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v.get(((v.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or(0.0)
    };
    let mut st: Vec<f64> = profile.step_ms.iter().copied().collect();
    let (m, p95) = (pct(&mut st.clone(), 0.5), pct(&mut st, 0.95));
    u.label(format!("step: median {m:.3} ms, p95 {p95:.3} ms ({} steps timed)", profile.total));
    let frames: Vec<f64> = cost.map(|c| c.frames.iter().rev().take(600).rev().copied().collect()).unwrap_or_default();
    if !frames.is_empty() {
        let (fm, fp) = (pct(&mut frames.clone(), 0.5), pct(&mut frames.clone(), 0.95));
        u.label(format!("our systems per frame: median {fm:.3} ms, p95 {fp:.3} ms (last {} frames)", frames.len()));
    }
    let h = 90.0;
    Plot::new("prof_step").height(h).legend(Legend::default()).y_axis_label("ms").show(u, |p| {
        p.add(
            Line::new(
                "step time (ms)",
                PlotPoints::from_iter(profile.step_ms.iter().enumerate().map(|(i, &v)| [i as f64, v])),
            )
            .color(Color32::from_rgb(60, 110, 230)),
        );
    });
    // At most 400 points a line: plot tessellation is the frame's cost.
    let n = history.snapshots.len();
    let shown = n.min(2000);
    let snaps: Vec<&Snapshot> = history.snapshots.iter().skip(n - shown).step_by(shown.div_ceil(400).max(1)).collect();
    Plot::new("prof_iter").height(h).legend(Legend::default()).link_axis("prof", [true, false]).show(u, |p| {
        p.add(
            Line::new("Newton iterations", PlotPoints::from_iter(snaps.iter().map(|s| [s.t, s.iterations as f64])))
                .color(Color32::from_rgb(40, 160, 90)),
        );
    });
    Plot::new("prof_res").height(h).legend(Legend::default()).link_axis("prof", [true, false]).show(u, |p| {
        p.add(
            Line::new(
                "log10 residual",
                PlotPoints::from_iter(snaps.iter().filter(|s| s.residual > 0.0).map(|s| [s.t, s.residual.log10()])),
            )
            .color(Color32::from_rgb(200, 80, 40)),
        );
    });
    Plot::new("prof_frame").height(h).legend(Legend::default()).y_axis_label("ms").show(u, |p| {
        p.add(
            Line::new(
                "our systems per frame (ms)",
                PlotPoints::from_iter(frames.iter().enumerate().map(|(i, &v)| [i as f64, v])),
            )
            .color(Color32::from_rgb(150, 60, 200)),
        );
    });
}
