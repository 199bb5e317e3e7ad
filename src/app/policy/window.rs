//! The window's panels: plain functions of `&mut egui::Ui` that edit settings, write the
//! command and queue requests.

use super::state::{lock, Learner, PolicyRequest, PolicyState, PolicyUi};
use crate::app::sim::SimWorker;
use crate::app::{cost_scope, CurrentScene, ToolWindows};
use crate::learn::{Command, TaskKind};
use crate::scene::Scene;
use bevy::prelude::*;
use bevy_egui::{egui, EguiContexts};
use egui::Color32;
use egui_plot::{HLine, Legend, Line, Plot, PlotPoints};
use std::path::PathBuf;

const RED: Color32 = Color32::from_rgb(220, 40, 40);

#[allow(clippy::too_many_arguments)]
pub(super) fn policy_window(
    mut contexts: EguiContexts,
    mut tools: ResMut<ToolWindows>,
    mut state: ResMut<PolicyState>,
    mut ui: ResMut<PolicyUi>,
    scene: Res<CurrentScene>,
    worker: Option<Res<SimWorker>>,
) -> Result {
    let _cost = cost_scope();
    if !tools.policy {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let mut open = true;
    let right = ctx.viewport_rect().right();
    egui::Window::new("Policy")
        .open(&mut open)
        .default_pos([right - 440.0, 70.0])
        .default_width(420.0)
        .default_height((ctx.viewport_rect().height() - 120.0).max(300.0))
        .vscroll(true)
        .show(&ctx, |u| {
            let driving = state.driving(worker.as_deref());
            file_panel(u, &mut state, &mut ui);
            u.separator();
            run_panel(u, &mut state, &mut ui, &scene.scene, driving);
            u.separator();
            egui::CollapsingHeader::new("Training")
                .default_open(state.training.is_some() || state.trained.is_some())
                .show(u, |u| train_panel(u, &mut state, driving));
        });
    if !open {
        tools.policy = false;
    }
    Ok(())
}

fn file_panel(u: &mut egui::Ui, state: &mut PolicyState, ui: &mut PolicyUi) {
    u.horizontal(|u| {
        u.label("file");
        u.add(egui::TextEdit::singleline(&mut state.path).desired_width(240.0));
        if u.add_enabled(!state.loading(), egui::Button::new("Load")).clicked() {
            let p = PathBuf::from(state.path.trim());
            state.request(PolicyRequest::Load(p));
        }
        if u.add_enabled(ui.dialog.is_none(), egui::Button::new("...")).on_hover_text("Choose a file").clicked() {
            ui.dialog = std::thread::Builder::new()
                .name("policy-dialog".into())
                .spawn(|| {
                    rfd::FileDialog::new()
                        .add_filter("ContactLab policy", &["json"])
                        .set_directory("assets/policies")
                        .pick_file()
                })
                .ok();
        }
    });
    if state.loading() {
        u.label("loading and settling the scene's stance ...");
    }
    if let Some(l) = &state.loaded {
        let p = &l.policy;
        u.label(format!(
            "{}: trained on `{}` for `{}`, {} -> {} network{}",
            p.algorithm,
            p.scene,
            p.task,
            p.mlp.n_in(),
            p.mlp.n_out(),
            if p.log_std.is_some() { " (Gaussian mean)" } else { "" }
        ));
        let info = &p.info;
        let summary = info.get("summary").unwrap_or(info);
        let num = |k: &str| summary.get(k).and_then(|v| v.as_f64());
        if let Some(r) = num("final_return") {
            let target = num("target_return").map(|t| format!(" (target {t:.2})")).unwrap_or_default();
            let steps = num("sim_steps").map(|s| format!(" after {s:.0} steps")).unwrap_or_default();
            u.label(format!("evaluation return {r:.2}{target}{steps}"));
        }
        if let Some(c) = info.get("command").and_then(|c| c.as_str()) {
            u.small(c);
        }
    }
    if let Some(m) = &state.message {
        u.colored_label(RED, m);
    }
}

fn run_panel(u: &mut egui::Ui, state: &mut PolicyState, ui: &mut PolicyUi, scene: &Scene, driving: bool) {
    let ready = state.loaded.as_ref().is_some_and(|l| l.task.is_ok());
    u.horizontal(|u| {
        if driving {
            if u.button("Stop").on_hover_text("Give the controls back to the scene's controller").clicked() {
                state.request(PolicyRequest::Stop);
            }
            u.colored_label(Color32::from_rgb(40, 120, 220), "driving; Ctrl + drag the trunk to push it");
        } else if u.add_enabled(ready, egui::Button::new("Run policy")).clicked() {
            state.request(PolicyRequest::Run);
        }
    });
    let Some(spec) = &scene.file.learn else { return };
    let walk = spec.task == "walk";
    let mut c = state.command();
    let old = c;
    // Slider ranges: 1.5 times the training range, so one can probe beyond it.
    let r = &spec.command;
    egui::Grid::new("policy_command").num_columns(2).show(u, |u| {
        if walk {
            u.label("speed (m/s)").on_hover_text(format!("trained on {:.2} to {:.2}", r.speed[0], r.speed[1]));
            u.add(egui::Slider::new(&mut c.speed, 0.0..=1.5 * r.speed[1]));
            u.end_row();
        } else {
            let mut cm = c.height * 100.0;
            u.label("height (cm)").on_hover_text(format!("trained on +-{:.1} cm", r.height * 100.0));
            if u.add(egui::Slider::new(&mut cm, -150.0 * r.height..=150.0 * r.height)).changed() {
                c.height = cm / 100.0;
            }
            u.end_row();
            for (i, name) in ["roll (deg)", "pitch (deg)", "yaw (deg)"].into_iter().enumerate() {
                let lim = 1.5 * r.rpy[i].to_degrees();
                let mut deg = c.rpy[i].to_degrees();
                u.label(name).on_hover_text(format!("trained on +-{:.1} deg", r.rpy[i].to_degrees()));
                if u.add(egui::Slider::new(&mut deg, -lim..=lim)).changed() {
                    c.rpy[i] = deg.to_radians();
                }
                u.end_row();
            }
        }
    });
    if u.small_button("zero command").clicked() {
        c = Command { speed: if walk { c.speed } else { 0.0 }, ..Command::default() };
    }
    if c != old {
        state.set_command(c);
    }
    let tel = lock(&state.telemetry).clone();
    let Some(last) = tel.samples.back() else { return };
    u.horizontal_wrapped(|u| {
        u.monospace(format!(
            "height {:.3} m (cmd {:.3}), tilt err {:.1} deg",
            last.height,
            last.target_height,
            last.orientation_error.to_degrees()
        ));
        if tel.kind == Some(TaskKind::Walk) {
            u.monospace(format!("speed {:.2} m/s (cmd {:.2})", last.speed, last.target_speed));
        }
        if let Some(r) = tel.recent_return() {
            u.monospace(format!("return over the last {} steps {r:.2}", tel.episode_steps))
                .on_hover_text("minus the task's summed cost: comparable with the evaluation returns");
        }
    });
    let t_end = last.t;
    let shown = tel.samples.iter().filter(|s| s.t >= t_end - ui.window);
    let (z, zc): (Vec<[f64; 2]>, Vec<[f64; 2]>) = shown.map(|s| ([s.t, s.height], [s.t, s.target_height])).unzip();
    // At least +-1 cm around the command, so millimetre noise does not fill the plot.
    let zc_last = last.target_height;
    Plot::new("policy_tracking")
        .height(140.0)
        .legend(Legend::default().position(egui_plot::Corner::LeftBottom).background_alpha(0.6))
        .y_axis_label("base height (m)")
        .x_axis_label("t (s)")
        .include_y(zc_last - 0.01)
        .include_y(zc_last + 0.01)
        .show(u, |p| {
            p.add(Line::new("base height", PlotPoints::from(z)).color(Color32::from_rgb(60, 110, 230)).width(2.0));
            p.add(Line::new("commanded", PlotPoints::from(zc)).color(Color32::from_rgb(200, 80, 40)));
        });
}

fn train_panel(u: &mut egui::Ui, state: &mut PolicyState, driving: bool) {
    let running = state.training.is_some();
    let s = &mut state.train_settings;
    u.add_enabled_ui(!running, |u| {
        egui::Grid::new("policy_train").num_columns(2).show(u, |u| {
            u.label("learner");
            egui::ComboBox::from_id_salt("policy_learner").selected_text(s.learner.name()).show_ui(u, |u| {
                for l in Learner::ALL {
                    if u.selectable_value(&mut s.learner, l, l.name()).changed() {
                        s.steps = l.default_steps();
                    }
                }
            });
            u.end_row();
            u.label("seed");
            u.add(egui::DragValue::new(&mut s.seed));
            u.end_row();
            u.label("simulated steps");
            u.add(egui::DragValue::new(&mut s.steps).range(1..=20_000_000).speed(1000.0));
            u.end_row();
        });
    });
    u.horizontal(|u| {
        if running {
            let cancelled = state.training.as_ref().is_some_and(|t| t.cancelled());
            if u.add_enabled(!cancelled, egui::Button::new("Cancel")).clicked() {
                state.request(PolicyRequest::CancelTraining);
            }
        } else if u.button("Train in background").clicked() {
            let s = state.train_settings;
            state.request(PolicyRequest::Train(s));
        }
    });
    let Some(curve) = state.curve() else { return };
    let total = state.training.as_ref().map_or(state.train_settings.steps, |t| t.settings.steps);
    match curve.logs.last() {
        Some(l) => {
            let last_eval = curve.logs.iter().rev().map(|l| l.eval_return).find(|r| r.is_finite());
            u.monospace(format!(
                "iteration {}, {} / {} steps, {:.1} s\nbatch return {:.2}, evaluation return {}{}",
                l.iteration,
                l.sim_steps,
                total,
                l.wall_s,
                l.train_return,
                last_eval.map_or("-".into(), |r| format!("{r:.2}")),
                curve.target_return.map(|t| format!(" (target {t:.2})")).unwrap_or_default()
            ));
            if running {
                u.add(egui::ProgressBar::new((l.sim_steps as f32 / total.max(1) as f32).min(1.0)));
            }
        }
        None => {
            u.label("building the task and scoring the reference controller ...");
        }
    }
    let eval: Vec<[f64; 2]> =
        curve.logs.iter().filter(|l| l.eval_return.is_finite()).map(|l| [l.sim_steps as f64, l.eval_return]).collect();
    let batch: Vec<[f64; 2]> =
        curve.logs.iter().filter(|l| l.iteration > 0).map(|l| [l.sim_steps as f64, l.train_return]).collect();
    Plot::new("policy_learning")
        .height(150.0)
        .legend(Legend::default().position(egui_plot::Corner::RightBottom).background_alpha(0.6))
        .x_axis_label("simulated training steps")
        .y_axis_label("return")
        .show(u, |p| {
            p.add(Line::new("evaluation", PlotPoints::from(eval)).color(Color32::from_rgb(30, 160, 90)).width(2.0));
            p.add(Line::new("batch", PlotPoints::from(batch)).color(Color32::from_gray(150)));
            if let Some(t) = curve.target_return {
                let label = if curve.task_kind == Some(TaskKind::Walk) { "scene PD" } else { "target" };
                p.add(HLine::new(label, t).color(RED));
            }
        });
    let Some(t) = &state.trained else { return };
    if running {
        return;
    }
    u.label(format!(
        "{} ({:?}): evaluation return {:.2} after {} steps in {:.1} s",
        t.result.policy.algorithm, t.result.status, t.result.final_return, t.result.sim_steps, t.result.seconds
    ));
    u.horizontal(|u| {
        if u.add_enabled(!driving, egui::Button::new("Run trained policy")).clicked() {
            state.request(PolicyRequest::RunTrained);
        }
        u.add(egui::TextEdit::singleline(&mut state.save_path).desired_width(200.0));
        if u.button("Save policy").on_hover_text("Written atomically (JSON, loadable above)").clicked() {
            let p = PathBuf::from(state.save_path.trim());
            state.request(PolicyRequest::Save(p));
        }
    });
}
