//! PNG reports with plotters (bitmap backend, fonts from `epaint_default_fonts`, so no system
//! font library is needed).

use crate::contact::ContactMode;
use crate::diff::sweep::SweepResult;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::path::Path;
use std::sync::Once;

static FONTS: Once = Once::new();

pub(crate) fn fonts() {
    FONTS.call_once(|| {
        // Both calls only fail on a malformed font, and these are compiled in.
        let _ = register_font("sans-serif", FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT);
        let _ = register_font("sans-serif", FontStyle::Bold, epaint_default_fonts::UBUNTU_LIGHT);
    });
}

/// Colour of a sensitivity's curve by its report name.
fn colour(name: &str, k: usize) -> RGBColor {
    match name {
        "exact" => RGBColor(214, 39, 40),
        "signorini" => RGBColor(255, 127, 14),
        "relaxed" => RGBColor(31, 119, 180),
        _ => {
            let (r, g, b) = Palette99::pick(k).to_rgba().rgb();
            RGBColor(r, g, b)
        }
    }
}

/// Colour of a realized contact mode in the strip.
pub fn mode_colour(m: ContactMode) -> RGBColor {
    match m {
        ContactMode::Separated => RGBColor(200, 200, 200),
        ContactMode::Sticking => RGBColor(44, 160, 44),
        ContactMode::Sliding => RGBColor(255, 187, 120),
    }
}

/// `df/ds` per sensitivity with the local and smoothed truths (band: two standard errors), and
/// the mode strip of the watched contacts underneath.
pub fn sweep_png(r: &SweepResult, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    fonts();
    let root = BitMapBackend::new(path, (1200, 820)).into_drawing_area();
    root.fill(&WHITE)?;
    let strip_h = 40 + 28 * r.watch_names.len().max(1) as u32;
    let (top, bottom) = root.split_vertically(820 - strip_h);
    let xs: Vec<f64> = r.points.iter().map(|p| p.s).collect();
    let (x0, x1) = (xs[0], *xs.last().expect("at least two points"));
    // The y range covers the truths and the finite gradients, clipped to a few times the
    // smoothed truth's range so one exploding point does not flatten the rest.
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for p in &r.points {
        for v in [p.smoothed - 2.0 * p.smoothed_se, p.smoothed + 2.0 * p.smoothed_se, p.fd] {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    let span = (hi - lo).max(1e-9);
    let (clip_lo, clip_hi) = (lo - 2.0 * span, hi + 2.0 * span);
    for p in &r.points {
        for &g in &p.grads {
            if g.is_finite() {
                lo = lo.min(g.max(clip_lo));
                hi = hi.max(g.min(clip_hi));
            }
        }
    }
    let pad = 0.08 * (hi - lo).max(1e-9);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("{}: df/ds against {} (sigma = {:.3e})", r.spec_name, r.param_name, r.sigma),
            ("sans-serif", 26),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(90)
        .build_cartesian_2d(x0..x1, (lo - pad)..(hi + pad))?;
    chart.configure_mesh().x_desc(r.param_name.as_str()).y_desc("df/ds").label_style(("sans-serif", 16)).draw()?;

    let band: Vec<(f64, f64)> = r
        .points
        .iter()
        .map(|p| (p.s, p.smoothed + 2.0 * p.smoothed_se))
        .chain(r.points.iter().rev().map(|p| (p.s, p.smoothed - 2.0 * p.smoothed_se)))
        .collect();
    chart.draw_series(std::iter::once(Polygon::new(band, RGBColor(0, 0, 0).mix(0.12).filled())))?;
    chart
        .draw_series(LineSeries::new(r.points.iter().map(|p| (p.s, p.smoothed)), BLACK.stroke_width(3)))?
        .label("smoothed truth (±2 s.e.)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(3)));
    chart
        .draw_series(r.points.iter().filter(|p| p.fd.is_finite() && p.fd > clip_lo && p.fd < clip_hi).map(|p| {
            let style = if p.fd_mode_change {
                RGBColor(120, 120, 120).filled()
            } else {
                RGBColor(120, 120, 120).stroke_width(2)
            };
            Circle::new((p.s, p.fd), 4, style)
        }))?
        .label("local finite difference (filled: mode change in stencil)")
        .legend(|(x, y)| Circle::new((x + 10, y), 4, RGBColor(120, 120, 120).stroke_width(2)));
    for (k, name) in r.sensitivity_names.iter().enumerate() {
        let c = colour(name, k);
        let pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .filter(|p| p.grads[k].is_finite())
            .map(|p| (p.s, p.grads[k].clamp(clip_lo, clip_hi)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(format!("{name}: cosine {:.3}, rel. error {:.3}", r.summaries[k].cosine, r.summaries[k].rel_error))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()?;

    // Mode strip: one row per watched contact, a cell per sweep point.
    let bottom = bottom.margin(4, 16, 106, 16);
    let rows = r.watch_names.len().max(1);
    let mut strip = ChartBuilder::on(&bottom)
        .x_label_area_size(0)
        .y_label_area_size(0)
        .build_cartesian_2d(x0..x1, 0.0..rows as f64 + 0.9)?;
    let half = if xs.len() > 1 { 0.5 * (x1 - x0) / (xs.len() - 1) as f64 } else { 0.5 };
    for (w, name) in r.watch_names.iter().enumerate() {
        let y = (rows - 1 - w) as f64;
        strip.draw_series(r.points.iter().map(|p| {
            let c = mode_colour(p.final_modes[w]);
            Rectangle::new([((p.s - half).max(x0), y + 0.1), ((p.s + half).min(x1), y + 0.9)], c.filled())
        }))?;
        strip.draw_series(std::iter::once(Text::new(
            format!("{name} (final mode)"),
            (x0, y + 0.75),
            ("sans-serif", 15).into_font().color(&BLACK),
        )))?;
    }
    let legend_y = rows as f64 + 0.45;
    for (i, m) in [ContactMode::Separated, ContactMode::Sticking, ContactMode::Sliding].into_iter().enumerate() {
        let xa = x0 + (x1 - x0) * (0.55 + 0.15 * i as f64);
        let xb = xa + (x1 - x0) * 0.02;
        strip.draw_series(std::iter::once(Rectangle::new(
            [(xa, legend_y), (xb, legend_y + 0.4)],
            mode_colour(m).filled(),
        )))?;
        strip.draw_series(std::iter::once(Text::new(
            format!("{m:?}"),
            (xb + (x1 - x0) * 0.005, legend_y + 0.38),
            ("sans-serif", 15).into_font().color(&BLACK),
        )))?;
    }
    root.present()?;
    Ok(())
}
