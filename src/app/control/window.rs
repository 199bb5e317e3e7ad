//! The Control window: panels as plain functions of `&mut egui::Ui` that edit the settings,
//! start, cancel and plot the CITO solve and the MPC, and the system that shows them.

use super::jobs::{displayed_simulation, start_mpc};
use super::state::{slider_target, CitoState, ControlSettings, MpcLink, MPC_DRIVER};
use crate::app::sim::{SimCommand, SimCommands, SimHistory, SimWorker};
use crate::app::{cost_scope, CurrentScene, ToolWindows};
use crate::diff::SensitivityKind;
use crate::ocp::cito::CitoReport;
use crate::ocp::mpc::StepSampling;
use crate::scene::Scene;
use bevy::prelude::*;
use bevy_egui::egui;
use egui_plot::{HLine, Legend, Line, Plot, PlotPoints};

/// Sensitivity choice widgets on a spec's fields.
fn sensitivity_ui(u: &mut egui::Ui, id: &str, kind: &mut SensitivityKind, kappa: &mut f64, delta: &mut f64) {
    u.horizontal(|u| {
        u.label("sensitivity");
        egui::ComboBox::from_id_salt(id).selected_text(kind.name()).show_ui(u, |u| {
            for k in SensitivityKind::ALL {
                u.selectable_value(kind, k, k.name());
            }
        });
    });
    if *kind != SensitivityKind::Exact {
        u.horizontal(|u| {
            u.label("kappa");
            u.add(
                egui::DragValue::new(kappa).range(1e-8..=1.0).speed(1e-5).custom_formatter(|v, _| format!("{v:.1e}")),
            );
            if *kind == SensitivityKind::Relaxed {
                u.label("delta");
                u.add(
                    egui::DragValue::new(delta)
                        .range(0.0..=1.0)
                        .speed(1e-4)
                        .custom_formatter(|v, _| format!("{v:.1e}")),
                );
            }
        });
    }
}

/// Offset (cm) and roll, pitch, yaw (degrees) sliders; true when one changed.
fn pose_sliders(u: &mut egui::Ui, offset: &mut [f64; 3], rpy: &mut [f64; 3]) -> bool {
    let mut changed = false;
    for (i, axis) in ["x", "y", "z"].iter().enumerate() {
        let mut cm = offset[i] * 100.0;
        // Not clamped: a task's target (a 30 cm walk) may lie beyond the slider's travel.
        let slider = egui::Slider::new(&mut cm, -50.0..=50.0).clamping(egui::SliderClamping::Never);
        if u.add(slider.text(format!("{axis} (cm)"))).changed() {
            offset[i] = cm / 100.0;
            changed = true;
        }
    }
    for (i, axis) in ["roll", "pitch", "yaw"].iter().enumerate() {
        let mut deg = rpy[i].to_degrees();
        let slider = egui::Slider::new(&mut deg, -60.0..=60.0).clamping(egui::SliderClamping::Never);
        if u.add(slider.text(format!("{axis} (deg)"))).changed() {
            rpy[i] = deg.to_radians();
            changed = true;
        }
    }
    changed
}

#[allow(clippy::too_many_arguments)]
pub(super) fn window_system(
    mut contexts: bevy_egui::EguiContexts,
    mut tools: ResMut<ToolWindows>,
    settings: Option<ResMut<ControlSettings>>,
    mut cito: ResMut<CitoState>,
    mut link: ResMut<MpcLink>,
    worker: Option<Res<SimWorker>>,
    history: Res<SimHistory>,
    scene: Res<CurrentScene>,
    mut commands: ResMut<SimCommands>,
) -> Result {
    let _cost = cost_scope();
    let Some(mut settings) = settings else { return Ok(()) };
    if !tools.control {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let mpc_on = worker.as_ref().and_then(|w| w.driver()) == Some(MPC_DRIVER);
    let floating = scene.scene.model.nq >= 7 && scene.scene.model.nu > 0;
    let mut open = true;
    let right = ctx.viewport_rect().right();
    let has_mpc = scene.scene.file.mpc.is_some();
    egui::Window::new("Control: CITO and MPC")
        .open(&mut open)
        .default_pos([right - 400.0, 70.0])
        .default_width(390.0)
        .default_height((ctx.viewport_rect().height() - 120.0).max(300.0))
        .resizable(true)
        .vscroll(true)
        .show(&ctx, |u| {
            if !floating {
                u.label("CITO and MPC need an actuated floating-base robot; open the quadruped scenes.");
                return;
            }
            egui::CollapsingHeader::new("Trajectory optimization (CITO)").default_open(!has_mpc && !mpc_on).show(
                u,
                |u| {
                    cito_ui(u, &mut settings, &mut cito, &scene.scene, &history);
                },
            );
            egui::CollapsingHeader::new("Model-predictive control (MPC)").default_open(true).show(u, |u| {
                mpc_ui(u, &mut settings, &mut link, &mut cito, &mut commands, mpc_on);
            });
            u.horizontal(|u| {
                u.checkbox(&mut settings.show_ghost, "ghost");
                u.checkbox(&mut settings.show_traces, "foot traces");
            });
            if let Some(e) = &cito.error {
                u.colored_label(egui::Color32::from_rgb(220, 40, 40), e);
            }
        });
    if !open {
        tools.control = false;
    }
    Ok(())
}

/// The shipped CITO tasks, compiled in so the list works from any directory: the settings of
/// each scene's `cito` section (its terrain is not loaded: the climb needs its own scene).
const CITO_TASKS: [(&str, &str); 11] = [
    ("raise 4 cm", include_str!("../../../scenes/cito_raise.ron")),
    ("lower 5 cm", include_str!("../../../scenes/cito_lower.ron")),
    ("shift 4 cm", include_str!("../../../scenes/cito_shift.ron")),
    ("roll 0.15 rad", include_str!("../../../scenes/cito_roll.ron")),
    ("pitch 0.15 rad", include_str!("../../../scenes/cito_pitch.ron")),
    ("yaw 0.2 rad", include_str!("../../../scenes/cito_yaw.ron")),
    ("far shift 20 cm", include_str!("../../../scenes/cito_far.ron")),
    ("walk 0.3 m", include_str!("../../../scenes/cito_walk.ron")),
    ("walk sideways 0.2 m", include_str!("../../../scenes/cito_side.ron")),
    ("turn 45 deg", include_str!("../../../scenes/cito_turn.ron")),
    ("climb 5 cm (its scene)", include_str!("../../../scenes/cito_climb.ron")),
];

fn cito_ui(u: &mut egui::Ui, s: &mut ControlSettings, cito: &mut CitoState, scene: &Scene, history: &SimHistory) {
    egui::ComboBox::from_label("task").selected_text("load a shipped task's settings").show_ui(u, |u| {
        for (name, text) in CITO_TASKS {
            if u.selectable_label(false, name).clicked() {
                if let Some(c) = Scene::from_str(text, std::path::Path::new(name)).ok().and_then(|sc| sc.file.cito) {
                    s.cito = c;
                }
            }
        }
    });
    u.label("Target base pose, relative to the pose on screen (Shift + drag on the ground moves it):");
    pose_sliders(u, &mut s.cito.target_offset, &mut s.cito.target_rpy);
    u.horizontal(|u| {
        u.label("horizon (s)");
        u.add(egui::DragValue::new(&mut s.cito.horizon).range(0.05..=2.0).speed(0.01));
        u.label("iterations");
        u.add(egui::DragValue::new(&mut s.cito.iterations).range(1..=500));
    });
    let spec = &mut s.cito;
    sensitivity_ui(u, "cito_sens", &mut spec.sensitivity, &mut spec.kappa, &mut spec.delta);
    u.horizontal(|u| {
        if cito.busy() {
            if u.button("Cancel").clicked() {
                cito.cancel();
            }
            let n = cito.progress.lock().map(|p| p.len()).unwrap_or(0);
            u.spinner();
            u.label(format!("iteration {n}, {:.1} s", cito.elapsed().unwrap_or(0.0)));
        } else if u
            .button("Plan from this state")
            .on_hover_text("CITO on a background task, from the state on screen: let the robot settle first")
            .clicked()
        {
            cito.start(displayed_simulation(scene, history), s.cito.clone());
        }
    });
    if let Some(run) = &cito.result {
        let r = &run.report;
        u.label(format!(
            "{:?} after {} iterations in {:.2} s ({}), cost {:.4}",
            r.info.status, r.info.iterations, r.solve_time, r.sensitivity, r.info.cost
        ));
        u.label(format!(
            "pose error {:.2} cm, {:.2} deg; penetration {:.1e} m; cone violation {:.1e}",
            100.0 * r.pose_error_m,
            r.pose_error_deg,
            r.max_penetration_m,
            r.max_cone_violation
        ));
        u.label(if r.feet_repositioned.is_empty() {
            "no foot repositioned".to_string()
        } else {
            format!("repositioned: {}", r.feet_repositioned.join(", "))
        });
        schedule(u, r);
        u.horizontal(|u| {
            u.checkbox(&mut s.animate, "animate");
            let n = run.ghost.len().max(1);
            u.add_enabled(!s.animate, egui::Slider::new(&mut s.ghost_knot, 0..=n - 1).text("knot"));
        });
    }
    let its = cito.progress.lock().map(|p| p.clone()).unwrap_or_default();
    if !its.is_empty() {
        Plot::new("cito_cost").height(120.0).x_axis_label("iteration").y_axis_label("log10 cost").show(u, |p| {
            let pts: Vec<[f64; 2]> =
                its.iter().filter(|i| i.cost > 0.0).map(|i| [i.iteration as f64, i.cost.log10()]).collect();
            p.add(Line::new("cost", PlotPoints::from(pts)).width(2.0).color(egui::Color32::from_rgb(60, 140, 230)));
        });
    }
}

/// The contact schedule that emerged: one row per foot, labelled with its footfalls, a cell per
/// knot (green: in contact).
fn schedule(u: &mut egui::Ui, r: &CitoReport) {
    let n = r.knots.len();
    if n == 0 {
        return;
    }
    let row_h = 10.0;
    let label_w = 70.0;
    let width = u.available_width().max(label_w + 50.0);
    let (rect, _) = u.allocate_exact_size(egui::vec2(width, row_h * r.feet.len() as f32 + 2.0), egui::Sense::hover());
    let painter = u.painter_at(rect);
    let cell = (width - label_w) / n as f32;
    for (f, name) in r.feet.iter().enumerate() {
        let y = rect.top() + f as f32 * row_h;
        painter.text(
            egui::pos2(rect.left(), y),
            egui::Align2::LEFT_TOP,
            format!("{} {}", name.trim_end_matches("_foot"), r.footfalls.get(f).copied().unwrap_or(0)),
            egui::FontId::monospace(8.0),
            u.visuals().text_color(),
        );
        for (k, knot) in r.knots.iter().enumerate() {
            let on = knot.contact.get(f).copied().unwrap_or(false);
            let c = if on { egui::Color32::from_rgb(26, 190, 64) } else { egui::Color32::from_gray(150) };
            let x = rect.left() + label_w + k as f32 * cell;
            painter.rect_filled(
                egui::Rect::from_min_size(egui::pos2(x, y + 1.0), egui::vec2(cell.max(1.0), row_h - 2.0)),
                0.0,
                c,
            );
        }
    }
}

fn mpc_ui(
    u: &mut egui::Ui,
    s: &mut ControlSettings,
    link: &mut MpcLink,
    cito: &mut CitoState,
    commands: &mut SimCommands,
    on: bool,
) {
    u.add_enabled_ui(!on, |u| {
        u.horizontal(|u| {
            u.label("horizon (s)");
            u.add(egui::DragValue::new(&mut s.mpc.horizon).range(0.05..=1.0).speed(0.01));
            u.label("iterations / cycle");
            u.add(egui::DragValue::new(&mut s.mpc.iterations).range(1..=20));
        });
        let spec = &mut s.mpc;
        sensitivity_ui(u, "mpc_sens", &mut spec.sensitivity, &mut spec.kappa, &mut spec.delta);
        u.horizontal(|u| {
            let mut sampling = spec.step_sampling.is_some();
            let hint = "each replan also rolls out trots of the scene's joint PD and starts DDP from the \
                        cheapest of them and the shifted plan (ocp::mpc, step sampling)";
            if u.checkbox(&mut sampling, "step sampling").on_hover_text(hint).changed() {
                spec.step_sampling = sampling.then(StepSampling::default);
            }
            if let Some(t) = &mut spec.step_sampling {
                u.label("trots / replan");
                u.add(egui::DragValue::new(&mut t.per_replan).range(1..=8));
            }
        });
    });
    u.horizontal(|u| {
        if on {
            if u.button("Stop MPC").clicked() {
                commands.push(SimCommand::StopDriving);
            }
        } else if u.button("Start MPC").on_hover_text("MPC takes the controls from the state on screen").clicked() {
            s.mpc_offset = [0.0; 3];
            s.mpc_rpy = [0.0; 3];
            start_mpc(s, link, commands, cito);
        }
        u.label("Ctrl + drag the robot to push it");
    });
    u.weak(
        "Start on a settled stance. With one iteration per cycle it rejects trunk pulls up to about \
         40 N for 0.3 s (3 iterations: 60 N sideways, by stepping); with step sampling and 3 \
         iterations, 100 N sideways by stepping, slower than real time. A failed replan keeps the \
         previous plan, and a harder pull ends in a fall.",
    );
    let t = link.snapshot();
    u.label("Target, relative to the pose at start:");
    if pose_sliders(u, &mut s.mpc_offset, &mut s.mpc_rpy) {
        if let Some(home) = &t.home {
            let (p, r) = slider_target(s, home);
            commands.push(SimCommand::SetTarget(p, r));
        }
    }
    if t.cycles.is_empty() {
        return;
    }
    let mut ms: Vec<f64> = t.cycles.iter().map(|c| c.solve_ms).collect();
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| ms[((p * (ms.len() - 1) as f64).round()) as usize];
    let last = t.cycles.back().expect("non-empty");
    u.label(format!(
        "{} cycles; solve median {:.1} ms, p95 {:.1} ms (period {:.0} ms); base error {:.1} cm; \
         failed replans (plotted window): {}",
        t.total_cycles,
        pct(0.5),
        pct(0.95),
        1e3 * t.period,
        100.0 * last.base_error_m,
        t.cycles.iter().filter(|c| c.kept_previous).count()
    ));
    Plot::new("mpc_solve")
        .height(110.0)
        .legend(Legend::default())
        .x_axis_label("t (s)")
        .y_axis_label("solve (ms)")
        .include_y(0.0)
        .show(u, |p| {
            p.add(
                Line::new(
                    "solve time",
                    PlotPoints::new(bucket_max(t.cycles.iter().map(|c| [c.t, c.solve_ms]), t.cycles.len())),
                )
                .color(egui::Color32::from_rgb(60, 140, 230)),
            );
            p.add(HLine::new("control period", 1e3 * t.period).color(egui::Color32::from_rgb(220, 50, 50)));
        });
    Plot::new("mpc_error").height(90.0).x_axis_label("t (s)").y_axis_label("base error (cm)").include_y(0.0).show(
        u,
        |p| {
            p.add(
                Line::new(
                    "base error",
                    PlotPoints::new(bucket_max(t.cycles.iter().map(|c| [c.t, 100.0 * c.base_error_m]), t.cycles.len())),
                )
                .color(egui::Color32::from_rgb(230, 150, 40)),
            );
        },
    );
}

/// Points drawn per plot line: tessellating thousands every frame was most of the window's
/// frame cost with MPC running.
const MAX_POINTS: usize = 400;

/// At most [`MAX_POINTS`] of `n` points: each bucket of consecutive points keeps its largest
/// value (at the bucket's first time), so a slow replan or an error peak still shows.
fn bucket_max(points: impl Iterator<Item = [f64; 2]>, n: usize) -> Vec<[f64; 2]> {
    let size = n.div_ceil(MAX_POINTS).max(1);
    let mut out: Vec<[f64; 2]> = Vec::with_capacity(n.min(MAX_POINTS) + 1);
    for (i, p) in points.enumerate() {
        if i % size == 0 {
            out.push(p);
        } else if let Some(last) = out.last_mut() {
            last[1] = last[1].max(p[1]);
        }
    }
    out
}
