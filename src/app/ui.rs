//! The egui panels. Each panel is a plain function of `&mut egui::Ui` and the resources it
//! shows; it writes intent ([`SimCommand`]s, settings, sweep requests) and never touches the
//! simulation. The 3D viewport gets the rectangle the panels leave.
//!
//! Layout: a top bar (play, step, reset, speed, time, history scrub, messages, frame cost), a
//! left panel (Scene, Simulation, Contact, Pulls, Gradient sweep) and a bottom panel of plots
//! (gradient quality, contact modes, solver, contact forces).

use super::capture::OUR_SYSTEMS_MS;
use super::overlay::OverlaySettings;
use super::pick::DragSettings;
use super::plots;
use super::sim::{SimCommand, SimCommands, SimControl, SimHistory, SimWorker};
use super::sweep::{Objective, SweepSetup, SweepState};
use super::view::MainCamera;
use super::{cost_scope, CurrentScene, ToolWindows, ViewerOptions};
use crate::diff::SensitivityKind;
use crate::scene::Scene;
use crate::sim::Pull;
use bevy::camera::visibility::RenderLayers;
use bevy::camera::{CameraOutputMode, Viewport};
use bevy::diagnostic::DiagnosticsStore;
use bevy::prelude::*;
use bevy::render::render_resource::BlendState;
use bevy::tasks::{futures::check_ready, Task};
use bevy::window::PrimaryWindow;
use bevy_egui::{egui, EguiContexts, EguiGlobalSettings, EguiPrimaryContextPass, PrimaryEguiContext};
use nalgebra::Vector3;
use std::path::PathBuf;

/// The plot shown in the bottom panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotTab {
    Gradient,
    Modes,
    Solver,
    Forces,
}

/// Panel state that is not a setting of anything else.
#[derive(Resource)]
pub struct UiState {
    pub tab: PlotTab,
    /// Which sensitivity the user is tuning (highlighted in the gradient plot).
    pub sensitivity: SensitivityKind,
    /// Typed path of the scene to open or save (the fallback when no file dialog is available).
    pub path: String,
    pub pull_body: usize,
    pub pull_point: [f64; 3],
    pub pull_force: [f64; 3],
    pub pull_delay: f64,
    pub pull_duration: f64,
    /// Seconds of history shown by the time plots.
    pub window: f64,
    pub dt: f64,
    pub solver: crate::contact::solver::Settings,
    pub friction: f64,
    pub speed: f64,
    /// A dialog in progress: open (Some(true)) or save (Some(false)), and its result.
    dialog: Option<(bool, Task<Option<PathBuf>>)>,
    pub notice: Option<String>,
}

impl UiState {
    fn for_scene(scene: &Scene) -> Self {
        Self {
            tab: PlotTab::Modes,
            sensitivity: SensitivityKind::Relaxed,
            path: scene.path.display().to_string(),
            pull_body: 0,
            pull_point: [0.0; 3],
            pull_force: [0.0, 60.0, 0.0],
            pull_delay: 0.0,
            pull_duration: 0.25,
            window: 4.0,
            dt: scene.settings.dt,
            solver: scene.settings.solver,
            friction: scene.terrain.ground.friction,
            speed: 1.0,
            dialog: None,
            notice: None,
        }
    }
}

/// The builtin scenes, compiled in so they open from any directory.
const BUILTIN_SCENES: [(&str, &str, &str); 3] = [
    ("Quadruped (stand)", "scenes/quadruped_stand.ron", include_str!("../../scenes/quadruped_stand.ron")),
    ("Hopper (drop)", "scenes/hopper_drop.ron", include_str!("../../scenes/hopper_drop.ron")),
    ("Cube (toss)", "scenes/box_toss.ron", include_str!("../../scenes/box_toss.ron")),
];

pub struct UiPlugin;

impl Plugin for UiPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(Startup, setup_ui)
            .add_systems(EguiPrimaryContextPass, ui_system)
            .add_systems(Update, (sync_ui_with_scene, poll_dialog));
    }
}

fn setup_ui(
    mut commands: Commands,
    mut egui_settings: ResMut<EguiGlobalSettings>,
    scene: Res<CurrentScene>,
    opts: Res<ViewerOptions>,
    mut sweep: ResMut<SweepState>,
) {
    // egui draws with its own camera on top of the 3D one, so the 3D camera's viewport can be
    // shrunk to the space the panels leave.
    egui_settings.auto_create_primary_context = false;
    commands.spawn((
        PrimaryEguiContext,
        Camera2d,
        RenderLayers::none(),
        Camera {
            order: 1,
            output_mode: CameraOutputMode::Write {
                blend_state: Some(BlendState::ALPHA_BLENDING),
                clear_color: ClearColorConfig::None,
            },
            clear_color: ClearColorConfig::Custom(Color::NONE),
            ..default()
        },
    ));
    let mut ui = UiState::for_scene(&scene.scene);
    if opts.sweep {
        ui.tab = PlotTab::Gradient;
        sweep.requested = true;
    }
    commands.insert_resource(ui);
}

/// Keeps the panel fields in step with a newly loaded scene.
fn sync_ui_with_scene(scene: Res<CurrentScene>, ui: Option<ResMut<UiState>>, mut seen: Local<u64>) {
    let _cost = cost_scope();
    if scene.generation == *seen {
        return;
    }
    *seen = scene.generation;
    if let Some(mut ui) = ui {
        let tab = ui.tab;
        let fresh = UiState::for_scene(&scene.scene);
        ui.path = fresh.path;
        ui.dt = fresh.dt;
        ui.solver = fresh.solver;
        ui.friction = fresh.friction;
        ui.pull_body = 0;
        ui.tab = tab;
    }
}

/// Takes the file dialog's answer: loads the chosen scene (errors keep the current one) or
/// saves to the chosen path.
fn poll_dialog(mut ui: Option<ResMut<UiState>>, scene: Res<CurrentScene>, mut commands: ResMut<SimCommands>) {
    let _cost = cost_scope();
    let Some(ui) = ui.as_mut() else { return };
    let Some((open, task)) = ui.dialog.as_mut() else { return };
    let Some(answer) = check_ready(task) else { return };
    let open = *open;
    ui.dialog = None;
    match answer {
        Some(path) => {
            ui.path = path.display().to_string();
            if open {
                open_scene(ui, &mut commands);
            } else {
                save_scene(ui, &scene.scene);
            }
        }
        None => ui.notice = Some("No file dialog is available here (or it was cancelled): type a path instead.".into()),
    }
}

fn open_scene(ui: &mut UiState, commands: &mut SimCommands) {
    let path = PathBuf::from(ui.path.trim());
    // A URDF stands on the posture guessed from its joint limits (`scene::guess`).
    match crate::scene::guess::load_scene_or_urdf(&path) {
        Ok(s) => {
            commands.push(SimCommand::Load(Box::new(s)));
            ui.notice = Some(format!("Opened {}", path.display()));
        }
        Err(e) => ui.notice = Some(format!("Could not open the scene; the current one stays.\n{e}")),
    }
}

fn save_scene(ui: &mut UiState, scene: &Scene) {
    let path = PathBuf::from(ui.path.trim());
    ui.notice = Some(match Scene::save(&scene.file, &path) {
        Ok(()) => format!("Saved {}", path.display()),
        Err(e) => format!("{}: cannot save: {e}", path.display()),
    });
}

fn spawn_dialog(open: bool) -> Task<Option<PathBuf>> {
    super::jobs::dialog(move || {
        let d =
            rfd::FileDialog::new().add_filter("ContactLab scene or robot", &["ron", "urdf"]).set_directory("scenes");
        if open {
            d.pick_file()
        } else {
            d.save_file()
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn ui_system(
    mut contexts: EguiContexts,
    mut camera: Query<&mut Camera, With<MainCamera>>,
    window: Query<&Window, With<PrimaryWindow>>,
    mut ui_state: ResMut<UiState>,
    control: Res<SimControl>,
    history: Res<SimHistory>,
    mut commands: ResMut<SimCommands>,
    scene: Res<CurrentScene>,
    mut overlay: ResMut<OverlaySettings>,
    mut drag: ResMut<DragSettings>,
    mut sweep_settings: ResMut<SweepSetup>,
    mut sweep: ResMut<SweepState>,
    diagnostics: Res<DiagnosticsStore>,
    mut tools: ResMut<ToolWindows>,
    worker: Option<Res<SimWorker>>,
) -> Result {
    let _cost = cost_scope();
    let ctx = contexts.ctx_mut()?.clone();
    let mut root = egui::Ui::new(
        ctx.clone(),
        "root".into(),
        egui::UiBuilder::new().layer_id(egui::LayerId::background()).max_rect(ctx.viewport_rect()),
    );
    let frame_ms = diagnostics.get(&OUR_SYSTEMS_MS).and_then(|d| d.smoothed());
    let ui = &mut *ui_state;
    let top = egui::Panel::top("top")
        .show(&mut root, |u| {
            top_bar(u, ui, &control, &history, &mut commands, frame_ms);
            tool_bar(u, &mut tools, worker.as_ref().and_then(|w| w.driver()), &mut commands);
        })
        .response
        .rect
        .height();
    let left = egui::Panel::left("left")
        .resizable(true)
        .default_size(330.0)
        .show(&mut root, |u| {
            egui::ScrollArea::vertical().show(u, |u| {
                egui::CollapsingHeader::new("Scene")
                    .default_open(true)
                    .show(u, |u| scene_panel(u, ui, &scene.scene, &mut commands));
                egui::CollapsingHeader::new("Simulation")
                    .default_open(true)
                    .show(u, |u| simulation_panel(u, ui, &mut commands));
                egui::CollapsingHeader::new("Contact")
                    .default_open(true)
                    .show(u, |u| contact_panel(u, ui, &mut overlay, &mut sweep_settings, &mut commands));
                egui::CollapsingHeader::new("Pulls")
                    .default_open(false)
                    .show(u, |u| pulls_panel(u, ui, &scene.scene, &mut drag, &mut commands));
                egui::CollapsingHeader::new("Gradient sweep")
                    .default_open(ui.tab == PlotTab::Gradient)
                    .show(u, |u| sweep_panel(u, &scene.scene, &mut sweep_settings, &mut sweep, ui));
            });
        })
        .response
        .rect
        .width();
    let bottom = egui::Panel::bottom("plots")
        .resizable(true)
        .default_size(300.0)
        .min_size(260.0)
        .show(&mut root, |u| {
            u.horizontal(|u| {
                for (tab, label) in [
                    (PlotTab::Gradient, "Gradient quality"),
                    (PlotTab::Modes, "Contact modes"),
                    (PlotTab::Solver, "Solver"),
                    (PlotTab::Forces, "Contact forces"),
                ] {
                    u.selectable_value(&mut ui.tab, tab, label);
                }
                u.separator();
                u.label("window (s)");
                u.add(egui::DragValue::new(&mut ui.window).range(0.2..=60.0).speed(0.1));
            });
            u.separator();
            match ui.tab {
                PlotTab::Gradient => plots::gradient(u, &sweep, ui.sensitivity.name()),
                PlotTab::Modes => plots::modes(u, &history, &scene.scene.model, ui.window),
                PlotTab::Solver => plots::solver(u, &history, ui.window),
                PlotTab::Forces => plots::forces(u, &history, &scene.scene.model, ui.window),
            }
        })
        .response
        .rect
        .height();
    if let (Ok(mut cam), Ok(window)) = (camera.single_mut(), window.single()) {
        let s = window.scale_factor();
        let pos = UVec2::new((left * s) as u32, (top * s) as u32);
        let full = UVec2::new(window.physical_width(), window.physical_height());
        let rest = UVec2::new(pos.x, pos.y + (bottom * s) as u32);
        if full.x > rest.x + 16 && full.y > rest.y + 16 {
            let size = full - rest;
            let vp = Viewport { physical_position: pos, physical_size: size, ..default() };
            if cam.viewport.as_ref().map(|v| (v.physical_position, v.physical_size)) != Some((pos, size)) {
                cam.viewport = Some(vp);
            }
        }
    }
    Ok(())
}

/// Tool window toggles, and who is driving the robot.
fn tool_bar(u: &mut egui::Ui, tools: &mut ToolWindows, driver: Option<&str>, commands: &mut SimCommands) {
    u.horizontal(|u| {
        u.label("tools");
        u.toggle_value(&mut tools.control, "Control (CITO, MPC)");
        u.toggle_value(&mut tools.policy, "Policy");
        u.toggle_value(&mut tools.replay, "ContactNets");
        u.toggle_value(&mut tools.notebook, "Record & export");
        u.toggle_value(&mut tools.profiler, "Profiler");
        u.separator();
        match driver {
            Some(name) => {
                u.colored_label(egui::Color32::from_rgb(40, 120, 220), format!("driving: {name}"));
                if u.small_button("stop").on_hover_text("Give the controls back to the scene's controller").clicked() {
                    commands.push(SimCommand::StopDriving);
                }
            }
            None => {
                u.label("driving: scene controller");
            }
        }
    });
}

fn top_bar(
    u: &mut egui::Ui,
    ui: &mut UiState,
    control: &SimControl,
    history: &SimHistory,
    commands: &mut SimCommands,
    frame_ms: Option<f64>,
) {
    u.horizontal(|u| {
        if control.playing {
            if u.button("Pause").clicked() {
                commands.push(SimCommand::Pause);
            }
        } else if u.button("Play").clicked() {
            commands.push(SimCommand::Play);
        }
        if u.button("Step").on_hover_text("One step (pauses)").clicked() {
            commands.push(SimCommand::Step(1));
        }
        if u.button("Reset").clicked() {
            commands.push(SimCommand::Reset);
        }
        u.separator();
        u.label("speed");
        if u.add(egui::Slider::new(&mut ui.speed, 0.05..=4.0).logarithmic(true).suffix("x")).changed() {
            commands.push(SimCommand::SetSpeed(ui.speed));
        }
        u.separator();
        if let Some(s) = history.displayed() {
            u.monospace(format!("t = {:.3} s", s.t));
            u.monospace(format!("{} it, res {:.1e}", s.iterations, s.residual));
        }
        if control.behind {
            u.colored_label(egui::Color32::from_rgb(200, 120, 0), "slower than real time");
        }
        if let Some(ms) = frame_ms {
            u.separator();
            u.monospace(format!("our systems {ms:.2} ms/frame"));
        }
    });
    u.horizontal(|u| {
        let n = history.snapshots.len();
        u.label("history");
        let mut i = history.cursor.unwrap_or(n.saturating_sub(1));
        let resp = u.add_enabled(n > 1, egui::Slider::new(&mut i, 0..=n.saturating_sub(1)).show_value(false));
        if resp.changed() {
            commands.push(SimCommand::Scrub(i));
        }
        if let (Some(first), Some(shown)) = (history.snapshots.front(), history.displayed()) {
            u.monospace(format!("{:.2} s back", (history.snapshots.back().map_or(0.0, |b| b.t) - shown.t).max(0.0)));
            u.label(format!("({n} steps kept from t = {:.2} s)", first.t));
        }
        if history.cursor.is_some() && u.button("Live").clicked() {
            commands.push(SimCommand::Live);
        }
    });
    if let Some(m) = &control.message {
        u.colored_label(egui::Color32::from_rgb(220, 40, 40), m);
    }
    if let Some(n) = ui.notice.clone() {
        u.horizontal(|u| {
            u.label(n);
            if u.small_button("dismiss").clicked() {
                ui.notice = None;
            }
        });
    }
}

fn scene_panel(u: &mut egui::Ui, ui: &mut UiState, scene: &Scene, commands: &mut SimCommands) {
    u.label(egui::RichText::new(&scene.file.name).strong());
    if !scene.file.description.is_empty() {
        u.label(&scene.file.description);
    }
    u.label(format!(
        "{}: nq {}, nv {}, nu {}, {} contact candidates, {:.1} kg",
        scene.model.name,
        scene.model.nq,
        scene.model.nv,
        scene.model.nu,
        scene.model.contact_points.len(),
        scene.model.total_mass()
    ));
    u.horizontal(|u| {
        u.label("builtin");
        egui::ComboBox::from_id_salt("builtin").selected_text("choose...").show_ui(u, |u| {
            for (label, path, text) in BUILTIN_SCENES {
                if u.selectable_label(false, label).clicked() {
                    match Scene::from_str(text, std::path::Path::new(path)) {
                        Ok(s) => commands.push(SimCommand::Load(Box::new(s))),
                        Err(e) => ui.notice = Some(e.to_string()),
                    }
                }
            }
        });
    });
    u.horizontal(|u| {
        u.label("file");
        u.text_edit_singleline(&mut ui.path);
    });
    u.horizontal(|u| {
        let idle = ui.dialog.is_none();
        if u.add_enabled(idle, egui::Button::new("Open...")).clicked() {
            ui.dialog = Some((true, spawn_dialog(true)));
        }
        if u.button("Open path").clicked() {
            open_scene(ui, commands);
        }
        if u.button("Save").on_hover_text("Write the scene with the current settings to the path").clicked() {
            save_scene(ui, scene);
        }
        if u.add_enabled(idle, egui::Button::new("Save as...")).clicked() {
            ui.dialog = Some((false, spawn_dialog(false)));
        }
    });
}

fn simulation_panel(u: &mut egui::Ui, ui: &mut UiState, commands: &mut SimCommands) {
    egui::Grid::new("sim_grid").num_columns(2).show(u, |u| {
        u.label("time step (s)");
        if u.add(egui::Slider::new(&mut ui.dt, 2.5e-4..=0.02).logarithmic(true)).changed() {
            commands.push(SimCommand::SetDt(ui.dt));
        }
        u.end_row();
        u.label("tolerance");
        let mut changed = u.add(egui::Slider::new(&mut ui.solver.tolerance, 1e-12..=1e-3).logarithmic(true)).changed();
        u.end_row();
        u.label("max iterations");
        changed |= u.add(egui::Slider::new(&mut ui.solver.max_iterations, 1..=500).logarithmic(true)).changed();
        u.end_row();
        u.label("stall budget").on_hover_text(
            "Iteration budget of the contact solver's globalized phase (restarts, then Cadoux's fixed point; \
             a mode enumeration with its own limits follows, guessed from Gauss-Seidel, the plain fixed point \
             and a Tikhonov continuation), spent only when the interior-point iteration stalls; 0 turns the \
             whole phase off",
        );
        changed |= u.add(egui::Slider::new(&mut ui.solver.global_iterations, 0..=10_000).suffix(" it")).changed();
        u.end_row();
        if changed {
            ui.solver.kappa_target = ui.solver.kappa_target.min(ui.solver.tolerance);
            commands.push(SimCommand::SetSolver(ui.solver));
        }
    });
}

fn contact_panel(
    u: &mut egui::Ui,
    ui: &mut UiState,
    overlay: &mut OverlaySettings,
    sweep: &mut SweepSetup,
    commands: &mut SimCommands,
) {
    egui::Grid::new("contact_grid").num_columns(2).show(u, |u| {
        u.label("friction");
        if u.add(egui::Slider::new(&mut ui.friction, 0.0..=2.0)).changed() {
            commands.push(SimCommand::SetFriction(ui.friction));
        }
        u.end_row();
        u.label("sensitivity");
        egui::ComboBox::from_id_salt("sensitivity").selected_text(ui.sensitivity.name()).show_ui(u, |u| {
            for s in SensitivityKind::ALL {
                u.selectable_value(&mut ui.sensitivity, s, s.name());
            }
        });
        u.end_row();
        u.label("kappa (N s m/s)");
        u.add(egui::Slider::new(&mut sweep.kappa, 1e-8..=1.0).logarithmic(true));
        u.end_row();
        u.label("delta (m/s)");
        let mut off = sweep.delta == 0.0;
        u.horizontal(|u| {
            u.add_enabled(!off, egui::Slider::new(&mut sweep.delta, 1e-6..=1.0).logarithmic(true));
            if u.checkbox(&mut off, "0").changed() {
                sweep.delta = if off { 0.0 } else { 1e-3 };
            }
        });
        u.end_row();
    });
    u.label("Overlays");
    u.horizontal_wrapped(|u| {
        u.checkbox(&mut overlay.frames, "frames");
        u.checkbox(&mut overlay.cones, "cones");
        u.checkbox(&mut overlay.forces, "forces");
        u.checkbox(&mut overlay.modes, "modes");
        u.checkbox(&mut overlay.pulls, "pulls");
        u.checkbox(&mut overlay.follow, "follow").on_hover_text("The camera follows the robot's base");
    });
    u.horizontal(|u| {
        u.label("force scale (mm/N)");
        let mut mm = overlay.force_scale * 1e3;
        if u.add(egui::Slider::new(&mut mm, 0.1..=50.0).logarithmic(true)).changed() {
            overlay.force_scale = mm * 1e-3;
        }
    });
    u.horizontal(|u| {
        for (m, name) in [
            (crate::contact::ContactMode::Separated, "separated"),
            (crate::contact::ContactMode::Sticking, "sticking"),
            (crate::contact::ContactMode::Sliding, "sliding"),
        ] {
            u.colored_label(plots::mode_color32(m), format!("\u{25A0} {name}"));
        }
    });
}

fn pulls_panel(u: &mut egui::Ui, ui: &mut UiState, scene: &Scene, drag: &mut DragSettings, commands: &mut SimCommands) {
    u.label("Ctrl + left-drag a body in the view to pull it with a spring.");
    u.horizontal(|u| {
        u.label("stiffness (N/m/kg)");
        u.add(egui::Slider::new(&mut drag.stiffness_per_kg, 1.0..=500.0).logarithmic(true));
    });
    u.separator();
    let names = &scene.model.body_names;
    ui.pull_body = ui.pull_body.min(names.len().saturating_sub(1));
    egui::Grid::new("pull_grid").num_columns(2).show(u, |u| {
        u.label("body");
        egui::ComboBox::from_id_salt("pull_body")
            .selected_text(names.get(ui.pull_body).cloned().unwrap_or_default())
            .show_ui(u, |u| {
                for (i, n) in names.iter().enumerate() {
                    u.selectable_value(&mut ui.pull_body, i, n);
                }
            });
        u.end_row();
        u.label("point (m, body)");
        u.horizontal(|u| {
            for x in &mut ui.pull_point {
                u.add(egui::DragValue::new(x).speed(0.005));
            }
        });
        u.end_row();
        u.label("force (N, world)");
        u.horizontal(|u| {
            for x in &mut ui.pull_force {
                u.add(egui::DragValue::new(x).speed(1.0));
            }
        });
        u.end_row();
        u.label("in (s) / for (s)");
        u.horizontal(|u| {
            u.add(egui::DragValue::new(&mut ui.pull_delay).range(0.0..=10.0).speed(0.01));
            u.add(egui::DragValue::new(&mut ui.pull_duration).range(0.001..=10.0).speed(0.01));
        });
        u.end_row();
    });
    u.horizontal(|u| {
        if u.button("Fire").clicked() && !names.is_empty() {
            commands.push(SimCommand::FirePull(Pull {
                body: ui.pull_body,
                point: Vector3::from(ui.pull_point),
                force: Vector3::from(ui.pull_force),
                start: ui.pull_delay,
                duration: ui.pull_duration,
            }));
        }
        if u.button("Clear pulls").clicked() {
            commands.push(SimCommand::ClearPulls);
        }
    });
}

fn sweep_panel(u: &mut egui::Ui, scene: &Scene, s: &mut SweepSetup, state: &mut SweepState, ui: &mut UiState) {
    let model = &scene.model;
    let mut params: Vec<String> = Vec::new();
    if model.has_free_flyer() {
        params.extend(["base_x", "base_y", "base_z"].map(String::from));
    }
    for &d in &model.actuated_dofs {
        if let Some(j) = model.joints.iter().find(|j| j.idx_v == d) {
            params.push(format!("torque:{}", j.name));
        }
    }
    egui::Grid::new("sweep_grid").num_columns(2).show(u, |u| {
        u.label("parameter");
        egui::ComboBox::from_id_salt("sweep_param").selected_text(s.param.clone()).show_ui(u, |u| {
            for p in &params {
                u.selectable_value(&mut s.param, p.clone(), p);
            }
        });
        u.end_row();
        u.label("from / to");
        u.horizontal(|u| {
            u.add(egui::DragValue::new(&mut s.from).speed(0.001));
            u.add(egui::DragValue::new(&mut s.to).speed(0.001));
        });
        u.end_row();
        u.label("points / pairs");
        u.horizontal(|u| {
            u.add(egui::DragValue::new(&mut s.points).range(2..=101));
            u.add(egui::DragValue::new(&mut s.samples).range(1..=64));
        });
        u.end_row();
        u.label("horizon (s)");
        u.add(egui::DragValue::new(&mut s.horizon).range(0.004..=2.0).speed(0.005));
        u.end_row();
        u.label("objective");
        egui::ComboBox::from_id_salt("sweep_obj").selected_text(s.objective.label()).show_ui(u, |u| {
            for o in Objective::ALL {
                u.selectable_value(&mut s.objective, o, o.label());
            }
        });
        u.end_row();
        u.label("of body");
        egui::ComboBox::from_id_salt("sweep_body").selected_text(s.objective_body.clone()).show_ui(u, |u| {
            for n in &model.body_names {
                u.selectable_value(&mut s.objective_body, n.clone(), n);
            }
        });
        u.end_row();
        u.label("watch contact");
        egui::ComboBox::from_id_salt("sweep_watch").selected_text(s.watch.clone()).show_ui(u, |u| {
            for c in &model.contact_points {
                u.selectable_value(&mut s.watch, c.name.clone(), &c.name);
            }
        });
        u.end_row();
    });
    u.checkbox(&mut s.follow_sliders, "re-run when kappa or delta change");
    u.horizontal(|u| {
        if u.button("Sweep from this state").clicked() {
            state.requested = true;
            ui.tab = PlotTab::Gradient;
        }
        if state.busy() && u.button("Cancel").clicked() {
            state.cancel_requested = true;
        }
    });
    if state.busy() {
        let p = state.progress() as f32 / state.total.max(1) as f32;
        u.add(egui::ProgressBar::new(p).text(format!("{} / {} points", state.progress(), state.total)));
    }
    if let Some(e) = &state.error {
        u.colored_label(egui::Color32::from_rgb(220, 40, 40), e);
    }
}
