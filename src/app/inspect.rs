//! The per-contact inspector: click a contact (its mode sphere) to pin it; the Inspector window
//! shows the step's record for it and what the chosen contact sensitivity makes of it.
//!
//! * **The record** (the snapshot on screen, i.e. the step that produced it): gap `phi` at the
//!   start of the step, impulse `lambda = (l_n, l_t1, l_t2)` and its force `lambda / h`, the
//!   realized mode, the solver's Newton iterations and scaled residual of the step, the
//!   contact's complementarity product `l_n (phi + h v_n+)`, and the contact point's velocity
//!   after the step in the contact frame (`v_n`, `|v_t|`).
//! * **The sensitivity rows**: `d lambda_i / d (dq, dv, du)` (3 rows, `2 nv + nu` columns) of
//!   the same step, recomputed on a background task as the raw step from the previous
//!   snapshot's state with the torque that step applied (implicit damping included) and the
//!   pulls that acted (their generalized force at that state), through
//!   [`crate::diff::transition_jacobians_ext`], once with the chosen sensitivity (the Contact
//!   panel's, with the sweep's `kappa` and `delta`) and once exact; drawn as two heat maps (signed,
//!   `sign(x) log10(1 + |x| / s)` with `s` the larger map's 1e-3 of its maximum) and their
//!   difference, which is what the relaxation does. The recomputation starts cold, so its
//!   impulse agrees with the record to the solver tolerance; the window shows both.
//!   A contact outside the contact problem (gap above the margin) has no rows.
//! * **Timelines** of the pinned contact's gap, normal and tangential impulse and mode over the
//!   history on screen.

use super::sim::SimHistory;
use super::view::MainCamera;
use super::{cost_scope, to_bevy, AppSet, CurrentScene};
use crate::contact::ContactMode;
use crate::diff::{transition_jacobians_ext, Sensitivity, TransitionStatus, TransitionWorkspace};
use crate::dynamics::{forward_kinematics, point_jacobian};
use crate::model::Data;
use crate::scene::Scene;
use crate::sim::snapshot::Snapshot;
use crate::sim::StepWorkspace;
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, Task};
use nalgebra::{DMatrix, DVector, Vector3};

/// What the inspector shows of one contact at one history entry.
#[derive(Clone, Debug)]
pub struct ContactInspection {
    pub contact: usize,
    pub name: String,
    /// Time of the snapshot (after the step).
    pub t: f64,
    /// The record (copied from the snapshot).
    pub phi: f64,
    pub lambda: Vector3<f64>,
    pub mode: ContactMode,
    pub in_problem: bool,
    pub iterations: usize,
    pub residual: f64,
    /// `l_n (phi + h v_n+)` (N s m).
    pub complementarity: f64,
    /// Contact point velocity after the step: normal and tangential magnitude (m/s).
    pub v_normal: f64,
    pub v_tangential: f64,
    /// The recomputed step: its impulse for this contact, its statuses and the rows.
    pub recomputed_lambda: Option<Vector3<f64>>,
    pub sensitivity: String,
    pub status: Option<TransitionStatus>,
    pub exact_status: Option<TransitionStatus>,
    /// Backward Newton iterations of the chosen (relaxed) sensitivity.
    pub backward_iterations: usize,
    /// `d lambda / d (dq, dv, du)`: 3 x (2nv + nu), chosen and exact.
    pub rows: Option<DMatrix<f64>>,
    pub exact_rows: Option<DMatrix<f64>>,
}

/// The step that led to `shown` (from `prev`), recomputed with `sensitivity` and exact, for
/// contact `i` (module docs).
pub fn inspect(
    scene: &Scene,
    prev: Option<&Snapshot>,
    shown: &Snapshot,
    i: usize,
    sensitivity: Sensitivity,
) -> ContactInspection {
    let model = &*scene.model;
    let c = &shown.contacts[i];
    let cp = &model.contact_points[i];
    let mut data = Data::new(model);
    // Velocity of the contact point after the step.
    forward_kinematics(model, &mut data, shown.q.as_slice(), None);
    let p = data.o_m_i[cp.body].act_point(&cp.position) - c.normal * cp.radius;
    let mut jac = DMatrix::zeros(3, model.nv);
    point_jacobian(model, &data.o_m_i, cp.body, &p, &mut jac);
    let w = &jac * &shown.v;
    let v_n = w.dot(&c.normal);
    let v_t = (w - c.normal * v_n).norm();
    let mut out = ContactInspection {
        contact: i,
        name: cp.name.clone(),
        t: shown.t,
        phi: c.phi,
        lambda: c.lambda,
        mode: c.mode,
        in_problem: c.in_problem,
        iterations: shown.iterations,
        residual: shown.residual,
        complementarity: c.lambda.x * (c.phi + shown.dt * v_n),
        v_normal: v_n,
        v_tangential: v_t,
        recomputed_lambda: None,
        sensitivity: sensitivity.name().to_string(),
        status: None,
        exact_status: None,
        backward_iterations: 0,
        rows: None,
        exact_rows: None,
    };
    let Some(prev) = prev else { return out };
    // The step's inputs: the previous state, the torque it applied, the pulls' generalized force.
    let mut sim = scene.simulation();
    prev.restore(&mut sim);
    let (nv, nu) = (model.nv, model.nu);
    let mut tau_ext = DVector::zeros(nv);
    forward_kinematics(model, &mut data, prev.q.as_slice(), None);
    let mut j3 = DMatrix::zeros(3, nv);
    for pull in &shown.pulls {
        let body_point = shown.bodies[pull.body].inverse().act_point(&pull.point);
        let at = data.o_m_i[pull.body].act_point(&body_point);
        point_jacobian(model, &data.o_m_i, pull.body, &at, &mut j3);
        tau_ext.gemv_tr(1.0, &j3, &pull.force, 1.0);
    }
    let mut settings = scene.settings;
    settings.dt = shown.dt;
    let mut ws = StepWorkspace::new(model);
    let mut tw = TransitionWorkspace::new(model);
    let (mut a, mut b) = (DMatrix::zeros(2 * nv, 2 * nv), DMatrix::zeros(2 * nv, nu));
    let x = (prev.q.as_slice(), prev.v.as_slice(), shown.u.as_slice(), tau_ext.as_slice());
    let mut run = |s: Sensitivity| {
        let info = transition_jacobians_ext(
            model,
            &scene.terrain,
            &settings,
            &mut ws,
            &mut tw,
            x,
            &[],
            None,
            s,
            &mut a,
            &mut b,
            None,
        );
        let row = ws.contacts.active.iter().position(|&k| k == i);
        let lambda = row.map(|r| Vector3::new(ws.lambda[3 * r], ws.lambda[3 * r + 1], ws.lambda[3 * r + 2]));
        let rows = match (row, info.status) {
            (Some(r), TransitionStatus::Ok) => {
                Some(tw.dlambda(ws.contacts.n_active(), nv, nu).rows(3 * r, 3).into_owned())
            }
            _ => None,
        };
        (info, lambda, rows)
    };
    let (info, lambda, rows) = run(sensitivity);
    out.status = Some(info.status);
    out.backward_iterations = info.backward.iterations;
    out.recomputed_lambda = lambda;
    out.rows = rows;
    let (info_x, _, rows_x) = run(Sensitivity::Exact);
    out.exact_status = Some(info_x.status);
    out.exact_rows = rows_x;
    out
}

/// The pinned contact and its inspection.
#[derive(Resource, Default)]
pub struct Inspector {
    pub pinned: Option<usize>,
    /// The sensitivity the rows are computed with (set by the window from the Contact panel).
    pub sensitivity: Option<Sensitivity>,
    pub result: Option<ContactInspection>,
    task: Option<Task<Result<ContactInspection, String>>>,
    /// (history.pushed, cursor, pinned, sensitivity) of the result or the running task.
    key: Option<(u64, Option<usize>, usize, String)>,
    /// Inspections finished (tests wait on it).
    pub finished: u64,
}

impl Inspector {
    pub fn busy(&self) -> bool {
        self.task.is_some()
    }
}

pub struct InspectPlugin;

impl Plugin for InspectPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Inspector>().add_systems(Update, update.in_set(AppSet::Background));
    }
}

/// Starts an inspection when the pinned contact, the entry on screen or the sensitivity
/// changed (one at a time; the latest wins), and takes finished ones.
fn update(mut ins: ResMut<Inspector>, history: Res<SimHistory>, scene: Res<CurrentScene>) {
    let _cost = cost_scope();
    if let Some(task) = ins.task.as_mut() {
        if let Some(r) = check_ready(task) {
            ins.task = None;
            ins.finished += 1;
            if let Ok(r) = r {
                ins.result = Some(r);
            }
        }
    }
    let Some(pinned) = ins.pinned else {
        ins.result = None;
        ins.key = None;
        return;
    };
    let sens = ins.sensitivity.unwrap_or(Sensitivity::Exact);
    let key = (history.pushed, history.cursor, pinned, format!("{sens:?}"));
    if ins.task.is_some() || ins.key.as_ref() == Some(&key) {
        return;
    }
    let n = history.snapshots.len();
    if n == 0 {
        return;
    }
    let idx = history.cursor.unwrap_or(n - 1).min(n - 1);
    let shown = history.snapshots[idx].clone();
    // Per-point nearest contacts only: a concave corner's second contacts follow them in the
    // snapshot and are not inspected.
    if pinned >= shown.contacts.len().min(scene.scene.model.contact_points.len()) {
        ins.pinned = None;
        return;
    }
    let prev = idx.checked_sub(1).map(|i| history.snapshots[i].clone());
    let scene = scene.scene.clone();
    ins.key = Some(key);
    ins.task = Some(super::jobs::spawn("inspector", move || Ok(inspect(&scene, prev.as_ref(), &shown, pinned, sens))));
}

/// Click (without Ctrl or Shift) on a contact's mode sphere pins it.
pub fn pick_contact(
    buttons: Res<ButtonInput<MouseButton>>,
    keys: Res<ButtonInput<KeyCode>>,
    window: Query<&Window, With<bevy::window::PrimaryWindow>>,
    camera: Query<(&Camera, &GlobalTransform), With<MainCamera>>,
    egui: Option<Res<bevy_egui::input::EguiWantsInput>>,
    history: Res<SimHistory>,
    mut ins: ResMut<Inspector>,
    mut tools: ResMut<super::ToolWindows>,
    mut pressed_at: Local<Option<Vec2>>,
) {
    let _cost = cost_scope();
    let (Ok(window), Ok((cam, cam_t))) = (window.single(), camera.single()) else { return };
    let Some(cursor) = window.cursor_position() else { return };
    if buttons.just_pressed(MouseButton::Left) {
        let modifier =
            keys.any_pressed([KeyCode::ControlLeft, KeyCode::ControlRight, KeyCode::ShiftLeft, KeyCode::ShiftRight]);
        *pressed_at = (!modifier && !egui.as_ref().is_some_and(|e| e.wants_any_pointer_input())).then_some(cursor);
    }
    if !buttons.just_released(MouseButton::Left) {
        return;
    }
    // A click, not an orbit drag.
    let Some(start) = pressed_at.take() else { return };
    if start.distance(cursor) > 4.0 {
        return;
    }
    let Some(snap) = history.displayed() else { return };
    let best = snap
        .contacts
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let s = cam.world_to_viewport(cam_t, to_bevy(&c.point)).ok()?;
            let offset = cam.logical_viewport_rect().map_or(Vec2::ZERO, |r| r.min);
            Some((i, (s + offset).distance(cursor)))
        })
        .filter(|(_, d)| *d < 18.0)
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((i, _)) = best {
        ins.pinned = Some(i);
        tools.inspector = true;
    }
}

/// The pinned contact in the 3D view: a ring, and its impulse inside its cone.
pub fn draw_pinned(mut gizmos: Gizmos, history: Res<SimHistory>, ins: Res<Inspector>) {
    let _cost = cost_scope();
    let (Some(i), Some(snap)) = (ins.pinned, history.displayed()) else { return };
    let Some(c) = snap.contacts.get(i) else { return };
    let p = to_bevy(&c.point);
    let n = to_bevy(&c.normal).normalize_or_zero();
    let rot = Quat::from_rotation_arc(Vec3::Z, n);
    let white = Color::srgb(1.0, 1.0, 1.0);
    gizmos.circle(Isometry3d::new(p, rot), 0.03, white).resolution(32);
    // The cone at this scale (height 8 cm) and the impulse direction scaled to it.
    let h = 0.08f32;
    let r = h * c.mu as f32;
    gizmos.circle(Isometry3d::new(p + n * h, rot), r, Color::srgb(0.7, 0.7, 0.7)).resolution(32);
    let l = c.lambda;
    if l.x > 0.0 {
        let dir = c.normal * l.x + c.t1 * l.y + c.t2 * l.z;
        let tip = c.point + dir * (h as f64 / l.x);
        gizmos.arrow(p, to_bevy(&tip), Color::srgb(1.0, 0.3, 0.1));
    }
}

/// The pinning, the ring and the Inspector window.
pub struct InspectUiPlugin;

impl Plugin for InspectUiPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(Update, pick_contact.in_set(AppSet::Input))
            .add_systems(Update, draw_pinned.in_set(AppSet::Overlay))
            .add_systems(bevy_egui::EguiPrimaryContextPass, inspector_window)
            .add_systems(Startup, pin_from_options);
    }
}

/// `--open inspector` pins the first contact.
fn pin_from_options(opts: Option<Res<super::ViewerOptions>>, mut ins: ResMut<Inspector>) {
    if opts.is_some_and(|o| o.open.iter().any(|w| w == "inspector")) && ins.pinned.is_none() {
        ins.pinned = Some(0);
    }
}

use bevy_egui::egui;

/// Signed log scale of `x` against `s`, in [-1, 1] for |x| up to `max`.
fn signed_log(x: f64, s: f64, max: f64) -> f32 {
    let f = |v: f64| (1.0 + v.abs() / s).log10();
    (x.signum() * f(x) / f(max).max(1e-12)) as f32
}

fn heat_color(v: f32) -> egui::Color32 {
    let v = v.clamp(-1.0, 1.0);
    let k = (255.0 * (1.0 - v.abs())) as u8;
    if v >= 0.0 {
        egui::Color32::from_rgb(255, k, k)
    } else {
        egui::Color32::from_rgb(k, k, 255)
    }
}

/// A 3 x n heat map of `m` (shared scale `s`, `max`).
fn heat_map(u: &mut egui::Ui, label: &str, m: &DMatrix<f64>, s: f64, max: f64) {
    u.label(label);
    let cell = egui::vec2((u.available_width() / m.ncols().max(1) as f32).clamp(2.0, 10.0), 10.0);
    let (rect, _) = u.allocate_exact_size(egui::vec2(cell.x * m.ncols() as f32, cell.y * 3.0), egui::Sense::hover());
    let painter = u.painter_at(rect);
    for r in 0..m.nrows() {
        for c in 0..m.ncols() {
            let min = rect.min + egui::vec2(c as f32 * cell.x, r as f32 * cell.y);
            painter.rect_filled(egui::Rect::from_min_size(min, cell), 0.0, heat_color(signed_log(m[(r, c)], s, max)));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn inspector_window(
    mut contexts: bevy_egui::EguiContexts,
    mut tools: ResMut<super::ToolWindows>,
    mut ins: ResMut<Inspector>,
    ui_state: Option<Res<super::ui::UiState>>,
    sweep: Option<Res<super::sweep::SweepSetup>>,
    history: Res<SimHistory>,
    scene: Res<CurrentScene>,
) -> Result {
    let _cost = cost_scope();
    if let (Some(ui), Some(sw)) = (ui_state.as_ref(), sweep.as_ref()) {
        let s = ui.sensitivity.with(sw.kappa, sw.delta);
        if ins.sensitivity != Some(s) {
            ins.sensitivity = Some(s);
        }
    }
    if !tools.inspector {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let mut open = true;
    egui::Window::new("Contact inspector").open(&mut open).default_width(400.0).default_pos([860.0, 80.0]).show(&ctx, |u| {
        let Some(pinned) = ins.pinned else {
            u.label("Click a contact (its mode sphere) in the 3D view to pin it.");
            return;
        };
        let names: Vec<String> = scene.scene.model.contact_points.iter().map(|c| c.name.clone()).collect();
        u.horizontal(|u| {
            u.label("contact");
            let mut sel = pinned;
            egui::ComboBox::from_id_salt("inspect_contact").selected_text(names.get(pinned).cloned().unwrap_or_default()).show_ui(
                u,
                |u| {
                    for (i, n) in names.iter().enumerate() {
                        u.selectable_value(&mut sel, i, n);
                    }
                },
            );
            if sel != pinned {
                ins.pinned = Some(sel);
            }
            if u.small_button("unpin").clicked() {
                ins.pinned = None;
            }
        });
        let Some(r) = ins.result.as_ref().filter(|r| r.contact == pinned) else {
            u.spinner();
            return;
        };
        egui::Grid::new("inspect_record").num_columns(2).striped(true).show(u, |u| {
            let h = history.displayed().map_or(1.0, |s| s.dt);
            let rows: [(&str, String); 10] = [
                ("t (s)", format!("{:.4}", r.t)),
                ("gap phi (mm)", format!("{:.4}", r.phi * 1e3)),
                ("impulse (N s)", format!("({:.3e}, {:.3e}, {:.3e})", r.lambda.x, r.lambda.y, r.lambda.z)),
                ("force (N)", format!("({:.2}, {:.2}, {:.2})", r.lambda.x / h, r.lambda.y / h, r.lambda.z / h)),
                ("mode", format!("{:?}{}", r.mode, if r.in_problem { "" } else { " (not in the problem)" })),
                ("v_n, |v_t| after (m/s)", format!("{:.2e}, {:.2e}", r.v_normal, r.v_tangential)),
                ("l_n (phi + h v_n)", format!("{:.2e}", r.complementarity)),
                ("step: iterations, residual", format!("{}, {:.1e}", r.iterations, r.residual)),
                (
                    "recomputed impulse",
                    r.recomputed_lambda.map_or("-".into(), |l| format!("({:.3e}, {:.3e}, {:.3e})", l.x, l.y, l.z)),
                ),
                (
                    "backward",
                    format!(
                        "{}: {:?}, {} Newton iterations; exact: {:?}",
                        r.sensitivity,
                        r.status.unwrap_or(TransitionStatus::StepFailed),
                        r.backward_iterations,
                        r.exact_status.unwrap_or(TransitionStatus::StepFailed)
                    ),
                ),
            ];
            for (k, v) in rows {
                u.label(k);
                u.label(v);
                u.end_row();
            }
        });
        u.separator();
        match (&r.rows, &r.exact_rows) {
            (Some(a), Some(x)) => {
                let max = a.amax().max(x.amax());
                let s = (1e-3 * max).max(1e-300);
                let nv = scene.scene.model.nv;
                u.label(format!(
                    "d lambda / d (dq | dv | du), rows (n, t1, t2), columns {} | {} | {}; red +, blue -, signed log scale, max {:.2e}",
                    nv,
                    nv,
                    a.ncols() - 2 * nv,
                    max
                ));
                heat_map(u, &r.sensitivity, a, s, max);
                heat_map(u, "exact", x, s, max);
                heat_map(u, "difference (what the relaxation does)", &(a - x), s, max);
            }
            _ => {
                u.label("No sensitivity rows: the contact is not in the contact problem (or the step has no predecessor).");
            }
        }
        u.separator();
        contact_timelines(u, &history, pinned);
    });
    tools.inspector = open;
    if !open {
        ins.pinned = None;
    }
    Ok(())
}

/// Gap, impulses and mode of contact `i` over the history.
fn contact_timelines(u: &mut egui::Ui, history: &SimHistory, i: usize) {
    use egui_plot::{Legend, Line, Plot, PlotPoints, Points};
    // The last 3000 entries, at most 400 points a line (plot tessellation is the frame's cost).
    let n = history.snapshots.len();
    let shown = n.min(3000);
    let stride = shown.div_ceil(400).max(1);
    let snaps: Vec<&Snapshot> = history.snapshots.iter().skip(n - shown).step_by(stride).collect();
    let get = |s: &Snapshot| s.contacts.get(i).copied();
    let h = 80.0;
    Plot::new("insp_gap").height(h).legend(Legend::default()).link_axis("insp", [true, false]).show(u, |p| {
        p.add(
            Line::new(
                "gap (mm)",
                PlotPoints::from_iter(snaps.iter().filter_map(|s| get(s).map(|c| [s.t, c.phi * 1e3]))),
            )
            .color(egui::Color32::from_rgb(60, 110, 230)),
        );
    });
    Plot::new("insp_imp").height(h).legend(Legend::default()).link_axis("insp", [true, false]).show(u, |p| {
        p.add(
            Line::new(
                "l_n / h (N)",
                PlotPoints::from_iter(snaps.iter().filter_map(|s| get(s).map(|c| [s.t, c.lambda.x / s.dt]))),
            )
            .color(egui::Color32::from_rgb(230, 180, 30)),
        );
        p.add(
            Line::new(
                "|l_t| / h (N)",
                PlotPoints::from_iter(snaps.iter().filter_map(|s| get(s).map(|c| [s.t, c.lambda.yz().norm() / s.dt]))),
            )
            .color(egui::Color32::from_rgb(200, 80, 40)),
        );
    });
    Plot::new("insp_mode").height(50.0).link_axis("insp", [true, false]).show(u, |p| {
        for (mode, color) in [
            (ContactMode::Separated, egui::Color32::GRAY),
            (ContactMode::Sticking, egui::Color32::from_rgb(40, 180, 60)),
            (ContactMode::Sliding, egui::Color32::from_rgb(240, 130, 20)),
        ] {
            let pts = PlotPoints::from_iter(
                snaps.iter().filter_map(|s| get(s).filter(|c| c.mode == mode).map(|_| [s.t, 0.0])),
            );
            p.add(Points::new(format!("{mode:?}"), pts).color(color).radius(2.0));
        }
    });
}
