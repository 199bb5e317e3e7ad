//! The ContactNets window: panels as plain functions of `&mut egui::Ui` (inputs, training,
//! the replay's metrics and playback) and the system that shows them.

use super::jobs::spawn_dialog;
use super::state::{
    DialogFor, ModelSource, Replay, ReplayPlayback, ReplaySettings, ReplayState, ReplayUiState, ReplayView, TossSource,
};
use crate::app::{cost_scope, ToolWindows};
use crate::learn::contactnets::eval;
use bevy::prelude::*;
use bevy_egui::egui;
use std::path::{Path, PathBuf};

const ERROR_RED: egui::Color32 = egui::Color32::from_rgb(220, 40, 40);
const REAL_EGUI: egui::Color32 = egui::Color32::from_rgb(50, 115, 255);
const MODEL_EGUI: egui::Color32 = egui::Color32::from_rgb(255, 140, 25);

#[allow(clippy::too_many_arguments)]
pub(super) fn window_system(
    mut contexts: bevy_egui::EguiContexts,
    mut tools: ResMut<ToolWindows>,
    mut settings: ResMut<ReplaySettings>,
    mut state: ResMut<ReplayState>,
    mut view: ResMut<ReplayView>,
    mut playback: ResMut<ReplayPlayback>,
    mut ui: ResMut<ReplayUiState>,
) -> Result {
    let _cost = cost_scope();
    if !tools.replay {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let right = ctx.viewport_rect().right();
    let mut open = true;
    egui::Window::new("ContactNets")
        .open(&mut open)
        .default_pos([right - 400.0, 90.0])
        .default_width(380.0)
        .default_height((ctx.viewport_rect().height() - 120.0).max(300.0))
        .resizable(true)
        .show(&ctx, |u| {
            egui::ScrollArea::vertical().show(u, |u| {
                inputs_ui(u, &mut settings, &mut state, &mut ui);
                u.separator();
                training_ui(u, &mut settings, &mut state, &mut ui);
                u.separator();
                replay_ui(u, &mut state, &mut view, &mut playback);
            });
        });
    if !open {
        tools.replay = false;
    }
    Ok(())
}

/// Data folder, toss and model.
fn inputs_ui(u: &mut egui::Ui, settings: &mut ReplaySettings, state: &mut ReplayState, ui: &mut ReplayUiState) {
    u.horizontal(|u| {
        u.label("data");
        let r = u.add(egui::TextEdit::singleline(&mut ui.data_dir).desired_width(220.0));
        if (r.lost_focus() || u.button("list").clicked())
            && settings.data_dir.as_path() != Path::new(ui.data_dir.trim())
        {
            settings.data_dir = PathBuf::from(ui.data_dir.trim());
        }
    });
    if let Some(e) = &state.list_error {
        u.colored_label(ERROR_RED, e);
    }
    let n = state.tosses.len();
    u.horizontal(|u| {
        u.label("toss");
        let from_folder = matches!(settings.toss, TossSource::Index(_));
        if u.radio(from_folder, format!("folder ({n})")).clicked() && !from_folder {
            settings.toss = TossSource::Index(0);
        }
        if u.radio(!from_folder, "file").clicked() && from_folder {
            if ui.toss_path.trim().is_empty() {
                // Start from the folder's toss on screen rather than from nothing.
                ui.toss_path = state.toss_path(settings).map(|p| p.display().to_string()).unwrap_or_default();
            }
            settings.toss = TossSource::File(PathBuf::from(ui.toss_path.trim()));
        }
    });
    match &mut settings.toss {
        TossSource::Index(i) => {
            if n > 0 {
                let mut k = (*i).min(n - 1);
                u.horizontal(|u| {
                    u.add(egui::Slider::new(&mut k, 0..=n - 1).clamping(egui::SliderClamping::Always));
                    if u.small_button("<").clicked() {
                        k = k.saturating_sub(1);
                    }
                    if u.small_button(">").clicked() {
                        k = (k + 1).min(n - 1);
                    }
                    let name =
                        state.tosses[k].file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                    u.label(name);
                });
                *i = k;
            }
        }
        TossSource::File(p) => {
            u.horizontal(|u| {
                let r = u.add(egui::TextEdit::singleline(&mut ui.toss_path).desired_width(220.0));
                if r.lost_focus() || u.button("load").clicked() {
                    *p = PathBuf::from(ui.toss_path.trim());
                    state.requested = true;
                }
                if u.button("browse").clicked() && ui.dialog.is_none() {
                    ui.dialog = Some((DialogFor::Toss, spawn_dialog(DialogFor::Toss, settings.data_dir.clone())));
                }
            });
        }
    }
    u.horizontal(|u| {
        u.label("model");
        if u.radio(settings.model == ModelSource::Truth, "true cube").clicked() {
            settings.model = ModelSource::Truth;
        }
        let is_file = matches!(settings.model, ModelSource::File(_));
        if u.radio(is_file, "file").clicked() && !is_file {
            settings.model = ModelSource::File(PathBuf::from(ui.model_path.trim()));
        }
        let has_trained = state.trained.is_some();
        let r =
            u.add_enabled(has_trained, egui::RadioButton::new(settings.model == ModelSource::Trained, "trained here"));
        if r.clicked() {
            settings.model = ModelSource::Trained;
        }
    });
    if let ModelSource::File(p) = &mut settings.model {
        u.horizontal(|u| {
            let r = u.add(egui::TextEdit::singleline(&mut ui.model_path).hint_text("model.json").desired_width(220.0));
            if r.lost_focus() || u.button("load").clicked() {
                *p = PathBuf::from(ui.model_path.trim());
                state.requested = true;
            }
            if u.button("browse").clicked() && ui.dialog.is_none() {
                ui.dialog = Some((DialogFor::Model, spawn_dialog(DialogFor::Model, PathBuf::from("."))));
            }
        });
    }
    if let Some(n) = &ui.notice {
        u.label(n);
    }
    u.horizontal(|u| {
        if u.add_enabled(!state.busy(), egui::Button::new("Replay")).clicked() {
            state.requested = true;
        }
        if state.busy() {
            u.spinner();
            u.label("rolling out ...");
        }
    });
    if let Some(e) = &state.error {
        u.colored_label(ERROR_RED, e);
    }
}

/// Training a polytope in the background, and saving it.
fn training_ui(u: &mut egui::Ui, settings: &mut ReplaySettings, state: &mut ReplayState, ui: &mut ReplayUiState) {
    u.horizontal(|u| {
        u.label("train poly on");
        u.add(egui::DragValue::new(&mut settings.train_tosses).range(1..=368).suffix(" tosses"));
        u.label("seed");
        u.add(egui::DragValue::new(&mut settings.train_seed).range(0..=9999));
        u.label("max steps");
        u.add(egui::DragValue::new(&mut settings.train_steps).range(1..=20000));
    });
    u.horizontal(|u| {
        if state.training() {
            if u.button("Cancel").clicked() {
                state.train_cancel_requested = true;
            }
            let done = state.train_progress();
            let total = state.train_total.max(1);
            u.add(
                egui::ProgressBar::new(done as f32 / total as f32)
                    .text(format!("step {done} / at most {total}"))
                    .desired_width(220.0),
            );
        } else if u.button("Train in background").clicked() {
            state.train_requested = true;
        }
    });
    if let Some(e) = &state.train_error {
        u.colored_label(ERROR_RED, e);
    }
    if let Some(t) = &state.trained {
        let r = &t.report;
        u.label(format!(
            "trained: {} tosses, seed {}: {} steps (best {}, valid loss {:.3e}) in {:.1} s; mu {:.3}, vertex error {:.3} half widths",
            t.tosses,
            t.seed,
            r.steps,
            r.best_step,
            r.best_valid,
            r.wall_seconds,
            t.model.mu,
            eval::vertex_error(&t.model)
        ));
        u.horizontal(|u| {
            u.add(egui::TextEdit::singleline(&mut ui.save_path).desired_width(220.0));
            if u.button("Save").clicked() {
                let path = PathBuf::from(ui.save_path.trim());
                ui.notice = Some(match t.model.save(&path) {
                    Ok(()) => format!("Saved {}", path.display()),
                    Err(e) => format!("{}: cannot save: {e}", path.display()),
                });
            }
        });
    }
}

/// Metrics, playback and view options of the replay on screen.
fn replay_ui(u: &mut egui::Ui, state: &mut ReplayState, view: &mut ReplayView, playback: &mut ReplayPlayback) {
    let Some(r) = &state.replay else {
        u.label("No replay yet: choose a toss and a model and press \"Replay\".");
        return;
    };
    let mut focus = false;
    let m = &r.metrics;
    egui::Grid::new("replay_metrics").num_columns(2).striped(true).show(u, |u| {
        u.label("toss");
        u.label(format!("{} ({} steps, {:.2} s)", m.name, m.steps, r.duration()));
        u.end_row();
        u.label("model");
        u.label(format!("{}, mu {:.3}", r.model_label, r.model.mu));
        u.end_row();
        u.label("position error");
        u.label(format!("{:.2} % of block width", m.position_error_pct));
        u.end_row();
        u.label("angle error");
        u.label(format!("{:.2} deg", m.angle_error_deg));
        u.end_row();
        u.label("penetration");
        u.label(format!("{:.3} % of block width", m.penetration_pct));
        u.end_row();
        u.label("vertex error");
        u.label(match r.vertex_error {
            Some(e) => format!("{e:.3} half widths (largest)"),
            None => "none: e2e has no geometry".into(),
        });
        u.end_row();
    });
    if let Some(f) = &m.failure {
        u.colored_label(ERROR_RED, format!("rollout stopped: {f}"));
    }
    u.horizontal(|u| {
        u.colored_label(REAL_EGUI, "real toss (true cube)");
        u.colored_label(MODEL_EGUI, "model rollout (learned vertices)");
    });
    let end = r.duration();
    u.horizontal(|u| {
        if u.button(if playback.playing { "Pause" } else { "Play" }).clicked() {
            if !playback.playing && playback.time >= end {
                playback.time = 0.0;
            }
            playback.playing = !playback.playing;
        }
        u.add(egui::Slider::new(&mut playback.time, 0.0..=end).suffix(" s").max_decimals(3));
    });
    u.horizontal(|u| {
        u.label("speed");
        u.add(egui::Slider::new(&mut playback.speed, 0.05..=2.0).logarithmic(true));
        u.checkbox(&mut playback.looping, "loop");
    });
    let k = r.frame_at(playback.time);
    let (real, sim) = (&r.toss.frames[k], &r.rollout[k]);
    u.label(format!(
        "frame {k}: position error {:.1} % width, angle error {:.1} deg",
        (sim.p - real.p).norm() / r.model.body.block_width() * 100.0,
        sim.q.angle_to(&real.q).to_degrees()
    ));
    height_plot(u, r, playback.time);
    u.horizontal(|u| {
        u.label("side by side");
        u.add(egui::Slider::new(&mut view.separation, 0.0..=1.0).suffix(" m"));
    });
    u.horizontal(|u| {
        u.label("board origin");
        u.add(egui::DragValue::new(&mut view.origin.x).speed(0.01).prefix("x "));
        u.add(egui::DragValue::new(&mut view.origin.y).speed(0.01).prefix("y "));
        u.add(egui::DragValue::new(&mut view.origin.z).speed(0.01).prefix("z "));
    });
    u.horizontal(|u| {
        u.checkbox(&mut view.traces, "traces");
        u.checkbox(&mut view.vertices, "learned vertices on the real cube");
        focus = u.button("Focus camera").clicked();
    });
    if focus {
        state.focus_requested = true;
    }
}

/// Centre height of the real toss and of the rollout over time (m), with the time on screen.
fn height_plot(u: &mut egui::Ui, r: &Replay, now: f64) {
    use egui_plot::{Legend, Line, Plot, PlotPoints, VLine};
    let h = r.model.body.block_half_width_m;
    let t0 = r.toss.frames[0].t;
    let real: Vec<[f64; 2]> = r.toss.frames.iter().map(|f| [f.t - t0, f.p.z * h]).collect();
    let dt = r.dt();
    let sim: Vec<[f64; 2]> = r.rollout.iter().enumerate().map(|(k, p)| [k as f64 * dt, p.p.z * h]).collect();
    Plot::new("replay_height")
        .height(110.0)
        .legend(Legend::default())
        .y_axis_label("height (m)")
        .allow_scroll(false)
        .show(u, |p| {
            p.add(Line::new("real", PlotPoints::from(real)).color(REAL_EGUI));
            p.add(Line::new("rollout", PlotPoints::from(sim)).color(MODEL_EGUI));
            p.add(VLine::new("now", now).color(egui::Color32::from_gray(150)));
        });
}
