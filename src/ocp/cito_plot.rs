//! The CITO summary PNG (`contactlab cito` writes it as `summary.png`): base pose against its
//! target over the plan, cost per DDP iteration, and each foot's contact strip.

use super::cito::CitoReport;
use crate::contact::ContactMode;
use crate::plot::{fonts, mode_colour};
use plotters::prelude::*;
use std::path::Path;

/// CITO summary: base position (per axis, relative to the start) and orientation error over
/// the plan with the targets dashed, the cost per DDP iteration, and each foot's contact strip
/// (green: in contact, grey: not), labelled with its footfalls: the stance/swing pattern
/// that emerged.
pub fn cito_png(r: &CitoReport, target: &[f64; 3], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    fonts();
    let root = BitMapBackend::new(path, (1200, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let strip_h = 40 + 28 * r.feet.len().max(1) as u32;
    let (top, bottom) = root.split_vertically(900 - strip_h);
    let (left, right) = top.split_horizontally(760);
    let t1 = r.knots.last().map(|k| k.t).unwrap_or(1.0).max(1e-6);
    let start = r.knots.first().map(|k| k.base).unwrap_or([0.0; 7]);
    let (mut lo, mut hi) = (-0.01f64, 0.01f64);
    for k in &r.knots {
        for a in 0..3 {
            lo = lo.min(k.base[a] - start[a]);
            hi = hi.max(k.base[a] - start[a]);
        }
    }
    for &t in target {
        lo = lo.min(t);
        hi = hi.max(t);
    }
    let pad = 0.1 * (hi - lo);
    let mut chart = ChartBuilder::on(&left)
        .caption(format!("base position from the start ({})", r.sensitivity), ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t1, (lo - pad)..(hi + pad))?;
    chart.configure_mesh().x_desc("t (s)").y_desc("m").label_style(("sans-serif", 15)).draw()?;
    for (a, name) in ["x", "y", "z"].iter().enumerate() {
        let c = Palette99::pick(a).to_rgba();
        let c = RGBColor(c.0, c.1, c.2);
        chart
            .draw_series(LineSeries::new(r.knots.iter().map(|k| (k.t, k.base[a] - start[a])), c.stroke_width(2)))?
            .label(format!("{name} (target {:+.3})", target[a]))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(DashedLineSeries::new(vec![(0.0, target[a]), (t1, target[a])], 6, 4, c.stroke_width(1)))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;

    let costs: Vec<(f64, f64)> = r.info.history.iter().map(|h| (h.iteration as f64, h.cost.max(1e-12))).collect();
    let (cmin, cmax) = costs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &(_, c)| (a.min(c), b.max(c)));
    let (cmin, cmax) = if cmin.is_finite() { (cmin * 0.8, cmax * 1.25) } else { (1e-3, 1.0) };
    let mut cc = ChartBuilder::on(&right)
        .caption(format!("cost per iteration: {:?}, {:.3e}", r.info.status, r.info.cost), ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            0.0..(r.info.history.last().map(|h| h.iteration).unwrap_or(1) as f64 + 1.0),
            (cmin..cmax).log_scale(),
        )?;
    cc.configure_mesh().x_desc("iteration").y_desc("cost").label_style(("sans-serif", 15)).draw()?;
    cc.draw_series(LineSeries::new(costs.iter().copied(), RGBColor(31, 119, 180).stroke_width(2)))?;

    let bottom = bottom.margin(4, 16, 86, 16);
    let rows = r.feet.len().max(1);
    let mut strip = ChartBuilder::on(&bottom)
        .x_label_area_size(0)
        .y_label_area_size(0)
        .build_cartesian_2d(0.0..t1, 0.0..rows as f64)?;
    let half = if r.knots.len() > 1 { 0.5 * t1 / (r.knots.len() - 1) as f64 } else { 0.5 };
    for (f, name) in r.feet.iter().enumerate() {
        let y = (rows - 1 - f) as f64;
        strip.draw_series(r.knots.iter().map(|k| {
            let c = if k.contact[f] { mode_colour(ContactMode::Sticking) } else { mode_colour(ContactMode::Separated) };
            Rectangle::new([((k.t - half).max(0.0), y + 0.1), ((k.t + half).min(t1), y + 0.9)], c.filled())
        }))?;
        let moved = if r.feet_repositioned.contains(name) { " (repositioned)" } else { "" };
        strip.draw_series(std::iter::once(Text::new(
            {
                let n = r.footfalls.get(f).copied().unwrap_or(0);
                format!("{name}: {n} footfall{}{moved}", if n == 1 { "" } else { "s" })
            },
            (0.0, y + 0.75),
            ("sans-serif", 15).into_font().color(&BLACK),
        )))?;
    }
    root.present()?;
    Ok(())
}
