//! Rollout metrics against the number of training tosses, per method and seed (ContactNets,
//! figure 5): for each seed the dataset is split (duplicate-aware, seeded by that seed), each
//! method trains on the first `N` training tosses with the first `max(1, ceil(N / 4))`
//! validation tosses for early stopping, and is evaluated by rollouts of the whole test split.

use super::data::{split, Dataset, SplitSettings};
use super::eval::{evaluate, vertex_error};
use super::model::Method;
use super::train::{train, TrainSettings};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What to sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepSettings {
    /// Numbers of training tosses. Default 1, 4, 16, 64, 256.
    pub tosses: Vec<usize>,
    /// Seeds (of the split, the initialization and the batches). Default 0, 1.
    pub seeds: Vec<u64>,
    /// Default poly, deep, e2e.
    pub methods: Vec<Method>,
    /// Base training settings (method and seed are set per run).
    pub train: TrainSettings,
    /// Split fractions (the seed is set per run).
    pub split: SplitSettings,
}

impl Default for SweepSettings {
    fn default() -> Self {
        Self {
            tosses: vec![1, 4, 16, 64, 256],
            seeds: vec![0, 1],
            methods: vec![Method::Poly, Method::Deep, Method::E2e],
            train: TrainSettings::default(),
            split: SplitSettings::default(),
        }
    }
}

/// One trained and evaluated model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub method: Method,
    pub tosses: usize,
    pub seed: u64,
    pub position_error_pct: f64,
    pub angle_error_deg: f64,
    pub penetration_pct: f64,
    /// Largest learned-vertex error (scaled units = fraction of the half width); NaN for e2e.
    pub vertex_error: f64,
    pub mu: f64,
    pub train_seconds: f64,
    pub steps: usize,
    pub test_tosses: usize,
}

/// Runs the sweep, calling `progress` after every run.
pub fn run(data: &Dataset, s: &SweepSettings, mut progress: impl FnMut(&SweepRow)) -> Result<Vec<SweepRow>, String> {
    s.split.validate().map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for &seed in &s.seeds {
        let sp = split(data, &SplitSettings { seed, ..s.split });
        let test: Vec<_> = sp.test.iter().map(|&i| &data.tosses[i]).collect();
        for &n in &s.tosses {
            let Some((train_idx, valid_idx)) = sp.first(n) else {
                return Err(format!("{n} training tosses requested, the split has {}", sp.train.len()));
            };
            let tr = data.transitions(train_idx);
            let va = data.transitions(valid_idx);
            for &method in &s.methods {
                let ts = TrainSettings { method, seed, ..s.train.clone() };
                let (model, rep) = train(&data.body, &tr, &va, &ts)?;
                let ev = evaluate(&model, &test, ts.threads);
                let row = SweepRow {
                    method,
                    tosses: n,
                    seed,
                    position_error_pct: ev.position_error_pct,
                    angle_error_deg: ev.angle_error_deg,
                    penetration_pct: ev.penetration_pct,
                    vertex_error: if method == Method::E2e { f64::NAN } else { vertex_error(&model) },
                    mu: model.mu,
                    train_seconds: rep.wall_seconds,
                    steps: rep.steps,
                    test_tosses: ev.tosses,
                };
                progress(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// Means over seeds per (method, tosses), in the order of first appearance.
pub fn means(rows: &[SweepRow]) -> Vec<(Method, usize, [f64; 5], usize)> {
    let mut out: Vec<(Method, usize, [f64; 5], usize)> = Vec::new();
    for r in rows {
        let vals = [r.position_error_pct, r.angle_error_deg, r.penetration_pct, r.vertex_error, r.train_seconds];
        match out.iter_mut().find(|(m, n, _, _)| *m == r.method && *n == r.tosses) {
            Some((_, _, acc, c)) => {
                for (a, v) in acc.iter_mut().zip(vals) {
                    *a += v;
                }
                *c += 1;
            }
            None => out.push((r.method, r.tosses, vals, 1)),
        }
    }
    for (_, _, acc, c) in out.iter_mut() {
        acc.iter_mut().for_each(|a| *a /= *c as f64);
    }
    out
}

/// A Markdown table of the means over seeds.
pub fn table(rows: &[SweepRow]) -> String {
    let mut s = String::from(
        "| method | tosses | seeds | position error (% width) | angle error (deg) | penetration (% width) | max vertex error (half widths) | train time (s) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut m = means(rows);
    m.sort_by_key(|(method, n, _, _)| (method.name(), *n));
    for (method, n, v, c) in m {
        let ve = if v[3].is_nan() { "-".to_string() } else { format!("{:.3}", v[3]) };
        s.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.3} | {} | {:.1} |\n",
            method.name(),
            n,
            c,
            v[0],
            v[1],
            v[2],
            ve,
            v[4]
        ));
    }
    s
}

/// Three panels (position error, angle error, penetration) against training tosses (log
/// scale), one line per method, means over seeds.
pub fn png(rows: &[SweepRow], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    crate::plot::fonts();
    let m = means(rows);
    let root = BitMapBackend::new(path, (1500, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let nmax = m.iter().map(|x| x.1).max().unwrap_or(2).max(2) as f64;
    let titles = ["position error (% block width)", "angle error (deg)", "penetration (% block width)"];
    let methods = [Method::Poly, Method::Deep, Method::E2e];
    let colours = [RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(214, 39, 40)];
    for (k, panel) in panels.iter().enumerate() {
        let hi = m.iter().map(|x| x.2[k]).filter(|v| v.is_finite()).fold(0.0f64, f64::max).max(1e-3) * 1.1;
        let mut chart = ChartBuilder::on(panel)
            .caption(titles[k], ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((1f64..nmax).log_scale(), 0f64..hi)?;
        chart.configure_mesh().x_desc("training tosses").label_style(("sans-serif", 15)).draw()?;
        for (method, c) in methods.iter().zip(colours) {
            let mut pts: Vec<(f64, f64)> = m.iter().filter(|x| x.0 == *method).map(|x| (x.1 as f64, x.2[k])).collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))?
                .label(method.name())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
