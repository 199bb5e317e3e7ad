//! The Control window: contact-implicit trajectory optimization (CITO) and contact-implicit MPC
//! on the robot on screen (DESIGN 5; the library side is [`crate::ocp`]).
//!
//! - **CITO** plans from the state on screen toward a base-pose target (offset and roll, pitch,
//!   yaw relative to the present base pose) with no contact schedule. The solve runs on a
//!   background task that owns a copy of the simulation; each accepted DDP iteration is streamed
//!   to the window (cost per iteration, live). The result is drawn as a ghost robot (a stick
//!   figure from forward kinematics of the planned states, scrubbed or animated over the knots),
//!   the feet's traces, and the contact schedule that emerged; the report's pose error,
//!   penetration and cone violation are the same numbers `contactlab cito` writes.
//! - **MPC** takes over the simulation's controls through the simulation plugin's
//!   [`Driver`] hook: [`MpcControl`] wraps [`MpcDriver`], so replans run on the step batch's
//!   thread, one every knot step, between simulator steps. The base-pose target can be moved
//!   while it runs (sliders, or Shift + left drag on the ground plane in the 3D view), the mouse
//!   spring (Ctrl + left drag on a body) is the disturbance it must reject, and the window plots
//!   solve time per cycle against the control period and the base error. The plan is drawn as a
//!   ghost over the horizon.
//!
//! Data flow as elsewhere in the app: the window writes intent (a solve request, a
//! [`SimCommand::Drive`], a target in [`MpcLink::inbox`]); results come back through the task or
//! the link's telemetry; nothing here mutates the physics of the running simulation.

use super::sim::{Driver, DriverSlot, SimCommand, SimCommands, SimHistory, SimWorker};
use super::{cost_scope, from_bevy, rot_to_bevy, to_bevy, AppSet, CurrentScene, ToolWindows, ViewerOptions};
use crate::model::configuration::free_flyer_placement;
use crate::model::{Data, Model, Shape};
use crate::ocp::cito::{self, parse_sensitivity, CitoProblem, CitoReport};
use crate::ocp::mpc::{CycleInfo, MpcDriver};
use crate::ocp::IterationInfo;
use crate::scene::{CitoSpec, MpcSpec, Scene};
use crate::sim::Simulation;
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, Task};
use bevy_egui::egui;
use egui_plot::{HLine, Legend, Line, Plot, PlotPoints};
use nalgebra::{Matrix3, Rotation3, Vector3};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Name of the MPC driver in the top bar (and how the window recognises it).
pub const MPC_DRIVER: &str = "MPC";

/// A base pose: position and rotation (world frame).
pub type Pose = (Vector3<f64>, Matrix3<f64>);

/// MPC cycles kept for the plots.
const MAX_CYCLES: usize = 3000;

/// The window's settings: the CITO and MPC specs it edits (from the scene's `cito` and `mpc`
/// sections, or their defaults), and how the plans are drawn.
#[derive(Resource, Clone, Debug)]
pub struct ControlSettings {
    pub cito: CitoSpec,
    pub mpc: MpcSpec,
    /// MPC target relative to the base pose at engagement: offset (m) and roll, pitch, yaw (rad).
    pub mpc_offset: [f64; 3],
    pub mpc_rpy: [f64; 3],
    pub show_ghost: bool,
    pub show_traces: bool,
    /// Animate the CITO ghost over its knots (else show `ghost_knot`).
    pub animate: bool,
    pub ghost_knot: usize,
    /// The scene generation the specs were read from.
    generation: Option<u64>,
}

impl ControlSettings {
    pub fn for_scene(scene: &Scene) -> Self {
        // Without an `mpc` section: the relaxation scenes/mpc_pull.ron was tuned with (the
        // defaults' tighter kappa makes one-iteration replans stiffer under pushes).
        let mpc = scene.file.mpc.clone().unwrap_or(MpcSpec { kappa: 1e-3, delta: 1e-2, ..MpcSpec::default() });
        Self {
            cito: scene.file.cito.clone().unwrap_or_default(),
            mpc,
            mpc_offset: [0.0; 3],
            mpc_rpy: [0.0; 3],
            show_ghost: true,
            show_traces: true,
            animate: true,
            ghost_knot: 0,
            generation: None,
        }
    }
}

/// A robot drawn as a stick figure at a sequence of states: per state, each body's origin and
/// each foot's contact point in the world, and the base placement.
#[derive(Clone, Debug, Default)]
pub struct Ghost {
    pub bodies: Vec<Vec<Vector3<f64>>>,
    pub feet: Vec<Vec<Vector3<f64>>>,
    pub base: Vec<Pose>,
    /// Parent body of each body, and the body of each foot.
    pub parents: Vec<Option<usize>>,
    pub foot_bodies: Vec<usize>,
    /// The trunk's box (size, placement in the base frame), if it has one.
    pub trunk: Option<([f64; 3], crate::spatial::Se3)>,
}

/// The base body's box (size, placement in the base frame), if it has one.
fn trunk_box(model: &Model) -> Option<([f64; 3], crate::spatial::Se3)> {
    model.geometries.iter().find_map(|geo| match geo.shape {
        Shape::Box { size } if geo.body == 0 => Some((size, geo.placement)),
        _ => None,
    })
}

impl Ghost {
    /// Forward kinematics of each state `x = (q, v)` (only `q` is read).
    pub fn from_states<X: AsRef<[f64]>>(model: &Model, xs: &[X]) -> Ghost {
        let mut data = Data::new(model);
        let feet: Vec<usize> =
            (0..model.contact_points.len()).filter(|&k| model.contact_points[k].name.ends_with("foot")).collect();
        let mut g = Ghost {
            parents: model.joints.iter().map(|j| j.parent).collect(),
            foot_bodies: feet.iter().map(|&k| model.contact_points[k].body).collect(),
            trunk: trunk_box(model),
            ..Default::default()
        };
        for x in xs {
            let q = &x.as_ref()[..model.nq];
            crate::dynamics::forward_kinematics(model, &mut data, q, None);
            g.bodies.push(data.o_m_i.iter().map(|m| m.trans).collect());
            g.feet.push(
                feet.iter()
                    .map(|&k| {
                        let c = &model.contact_points[k];
                        data.o_m_i[c.body].act_point(&c.position)
                    })
                    .collect(),
            );
            let b = &data.o_m_i[0];
            g.base.push((b.trans, b.rot));
        }
        g
    }

    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Draws state `i` as lines (and the trunk box).
    fn draw(&self, gizmos: &mut Gizmos, i: usize, color: Color) {
        let Some(bodies) = self.bodies.get(i) else { return };
        for (b, p) in self.parents.iter().enumerate() {
            if let Some(p) = p {
                gizmos.line(to_bevy(&bodies[*p]), to_bevy(&bodies[b]), color);
            }
        }
        for (f, &b) in self.foot_bodies.iter().enumerate() {
            let foot = self.feet[i][f];
            gizmos.line(to_bevy(&bodies[b]), to_bevy(&foot), color);
            gizmos.sphere(Isometry3d::from_translation(to_bevy(&foot)), 0.015, color).resolution(8);
        }
        if let Some((size, placement)) = &self.trunk {
            let (p, r) = &self.base[i];
            draw_box(gizmos, p, r, size, placement, color);
        }
    }

    /// Each foot's path over the states.
    fn draw_traces(&self, gizmos: &mut Gizmos, color: Color) {
        for f in 0..self.foot_bodies.len() {
            gizmos.linestrip(self.feet.iter().map(|fs| to_bevy(&fs[f])), color);
        }
        gizmos.linestrip(self.base.iter().map(|(p, _)| to_bevy(p)), color);
    }
}

/// A box of `size` at `placement` in the frame `(p, r)`, as a wire cube.
fn draw_box(
    gizmos: &mut Gizmos,
    p: &Vector3<f64>,
    r: &Matrix3<f64>,
    size: &[f64; 3],
    placement: &crate::spatial::Se3,
    color: Color,
) {
    let centre = p + r * placement.trans;
    let rot = r * placement.rot;
    // A body point b is C b = (bx, bz, -by) in the Bevy-local frame of `rot_to_bevy(rot)`, so
    // the box's extents along Bevy's local axes are (sx, sz, sy).
    let t = Transform {
        translation: to_bevy(&centre),
        rotation: rot_to_bevy(&rot),
        scale: Vec3::new(size[0] as f32, size[2] as f32, size[1] as f32),
    };
    gizmos.cube(t, color);
}

/// One finished CITO solve, with what the window draws of it.
pub struct CitoRun {
    pub report: CitoReport,
    pub ghost: Ghost,
    /// Target pose (position, rotation) and the start's.
    pub target: Pose,
}

/// A CITO solve on a background task, its streamed iterations, and the last result.
#[derive(Resource, Default)]
pub struct CitoState {
    task: Option<Task<Result<CitoRun, String>>>,
    cancel: Arc<AtomicBool>,
    /// Accepted iterations of the running (or last) solve.
    pub progress: Arc<Mutex<Vec<IterationInfo>>>,
    /// Target of the running solve (drawn while it runs).
    pub pending_target: Option<Pose>,
    pub result: Option<CitoRun>,
    pub error: Option<String>,
    started: Option<Instant>,
    /// Solves finished (tests wait on it).
    pub finished: u64,
    /// Seconds into the ghost's animation.
    anim: f64,
}

impl CitoState {
    pub fn busy(&self) -> bool {
        self.task.is_some()
    }

    /// Starts a solve of `spec` from `sim`'s state (the task owns both).
    pub fn start(&mut self, sim: Simulation, spec: CitoSpec) {
        if self.busy() {
            return;
        }
        let problem = match CitoProblem::from_state(&sim, &spec, None) {
            Ok(p) => p,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        };
        if let Err(e) = problem.ddp.validate() {
            self.error = Some(format!("DDP settings: {e}"));
            return;
        }
        self.error = None;
        self.cancel = Arc::new(AtomicBool::new(false));
        self.progress = Arc::new(Mutex::new(Vec::new()));
        self.pending_target = Some((problem.cost.base_position, problem.cost.base_rotation));
        let (cancel, progress) = (self.cancel.clone(), self.progress.clone());
        self.started = Some(Instant::now());
        self.task = Some(super::jobs::spawn("CITO", move || {
            let report = cito::solve(&problem, Some(&cancel), &mut |it| {
                if let Ok(mut p) = progress.lock() {
                    p.push(*it);
                }
            });
            if !report.info.cost.is_finite() {
                return Err(format!("the solve ended {:?} with a non-finite cost", report.info.status));
            }
            let ghost = Ghost::from_states(&problem.model, &report.xs);
            Ok(CitoRun { report, ghost, target: (problem.cost.base_position, problem.cost.base_rotation) })
        }));
    }

    /// Stops the running solve after its current iteration (its result so far is kept).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Seconds the running solve has taken.
    pub fn elapsed(&self) -> Option<f64> {
        self.started.filter(|_| self.busy()).map(|s| s.elapsed().as_secs_f64())
    }
}

/// What the MPC driver reports back to the window.
#[derive(Default, Debug, Clone)]
pub struct MpcTelemetry {
    pub cycles: VecDeque<CycleInfo>,
    pub total_cycles: u64,
    /// The latest plan as a ghost (every state of the horizon).
    pub plan: Option<Ghost>,
    /// The target in force, and the base pose at engagement (the sliders are relative to it).
    pub target: Option<Pose>,
    pub home: Option<Pose>,
    /// Knot step and simulator steps per control period.
    pub period: f64,
    pub substeps: usize,
}

/// The window's end of the MPC driver: telemetry out, targets in.
#[derive(Resource, Clone, Default)]
pub struct MpcLink {
    pub telemetry: Arc<Mutex<MpcTelemetry>>,
    /// A target for the driver to take at its next step.
    pub inbox: Arc<Mutex<Option<Pose>>>,
}

impl MpcLink {
    /// A fresh link (old telemetry dropped) and the driver at its other end.
    pub fn driver(&mut self, spec: MpcSpec) -> Result<MpcControl, String> {
        let sensitivity = parse_sensitivity(&spec.sensitivity, spec.kappa, spec.delta)?;
        *self = MpcLink::default();
        Ok(MpcControl { inner: MpcDriver::new(spec, sensitivity), link: self.clone() })
    }

    /// Asks the running driver to track `(position, rotation)`.
    pub fn set_target(&self, position: Vector3<f64>, rotation: Matrix3<f64>) {
        if let Ok(mut i) = self.inbox.lock() {
            *i = Some((position, rotation));
        }
    }

    pub fn snapshot(&self) -> MpcTelemetry {
        self.telemetry.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

/// [`MpcDriver`] as the simulation plugin's [`Driver`], reporting through an [`MpcLink`].
pub struct MpcControl {
    inner: MpcDriver,
    link: MpcLink,
}

impl Driver for MpcControl {
    fn name(&self) -> String {
        MPC_DRIVER.into()
    }

    fn engage(&mut self, sim: &mut Simulation) -> Result<(), String> {
        let base = free_flyer_placement(&sim.q.as_slice()[..7.min(sim.q.len())]);
        if let Some((p, r)) = self.link.inbox.lock().ok().and_then(|mut i| i.take()) {
            self.inner.set_target(p, r);
        }
        self.inner.engage(sim)?;
        if let Ok(mut t) = self.link.telemetry.lock() {
            t.home = Some((base.trans, base.rot));
            t.target = self.inner.target();
            t.period = self.inner.spec.knot_dt;
            t.substeps = self.inner.substeps();
        }
        Ok(())
    }

    fn before_step(&mut self, sim: &mut Simulation) -> Result<(), String> {
        if let Some((p, r)) = self.link.inbox.lock().ok().and_then(|mut i| i.take()) {
            self.inner.set_target(p, r);
        }
        let cycle = self.inner.before_step(sim, None)?;
        if let Some(c) = cycle {
            // The ghost is built here, on the batch's thread, once per replan.
            let plan = Ghost::from_states(&sim.model, self.inner.planned_states());
            if let Ok(mut t) = self.link.telemetry.lock() {
                if t.cycles.len() == MAX_CYCLES {
                    t.cycles.pop_front();
                }
                t.cycles.push_back(c);
                t.total_cycles += 1;
                t.plan = Some(plan);
                t.target = self.inner.target();
            }
        }
        Ok(())
    }

    fn release(&mut self, sim: &mut Simulation) {
        self.inner.release(sim);
        if let Ok(mut t) = self.link.telemetry.lock() {
            t.plan = None;
        }
    }
}

/// Headless part: settings per scene, polling the CITO task, `--open control --start`.
pub struct ControlPlugin;

impl Plugin for ControlPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<CitoState>()
            .init_resource::<MpcLink>()
            .add_systems(Update, (sync_settings, poll_cito, autostart).chain().in_set(AppSet::Background));
    }
}

/// The window and the 3D drawing (windowed app only).
pub struct ControlUiPlugin;

impl Plugin for ControlUiPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<TargetDrag>()
            .add_systems(bevy_egui::EguiPrimaryContextPass, window_system)
            .add_systems(Update, (drag_target.in_set(AppSet::Input), draw.in_set(AppSet::Overlay)));
    }
}

fn sync_settings(mut commands: Commands, scene: Res<CurrentScene>, settings: Option<ResMut<ControlSettings>>) {
    if settings.as_ref().is_some_and(|s| s.generation == Some(scene.generation)) {
        return;
    }
    // A new scene: its own `cito` and `mpc` sections (or the defaults).
    let fresh = ControlSettings { generation: Some(scene.generation), ..ControlSettings::for_scene(&scene.scene) };
    match settings {
        Some(mut s) => *s = fresh,
        None => commands.insert_resource(fresh),
    }
}

fn poll_cito(mut state: ResMut<CitoState>) {
    let _cost = cost_scope();
    let Some(task) = state.task.as_mut() else { return };
    let Some(r) = check_ready(task) else { return };
    state.task = None;
    state.finished += 1;
    state.anim = 0.0;
    match r {
        Ok(run) => {
            state.error = None;
            state.result = Some(run);
        }
        Err(e) => state.error = Some(e),
    }
}

/// The simulation as it is on screen: the scene's simulation put into the displayed snapshot's
/// state (with the scene's own controller, whatever drives the live one).
pub fn displayed_simulation(scene: &Scene, history: &SimHistory) -> Simulation {
    let mut sim = scene.simulation();
    sim.pulls.clear();
    if let Some(s) = history.displayed() {
        s.restore(&mut sim);
    }
    sim
}

/// `--open control --start`: MPC if the scene has an `mpc` section, else CITO, once.
fn autostart(
    opts: Option<Res<ViewerOptions>>,
    tools: Res<ToolWindows>,
    scene: Res<CurrentScene>,
    history: Res<SimHistory>,
    settings: Option<Res<ControlSettings>>,
    mut cito: ResMut<CitoState>,
    mut link: ResMut<MpcLink>,
    mut commands: ResMut<SimCommands>,
    mut done: Local<bool>,
) {
    let (Some(opts), Some(settings)) = (opts, settings) else { return };
    if *done || !opts.start || !tools.control {
        return;
    }
    // Both start from a settled stance, as `contactlab cito` and `contactlab mpc` do: `settle`
    // seconds after the start and after the scene's last scheduled pull (which the scene's own
    // controller meets).
    let mpc = scene.scene.file.mpc.is_some();
    let settle = if mpc { settings.mpc.settle } else { settings.cito.settle };
    let last_pull = scene.scene.pulls.iter().map(|p| p.start + p.duration).fold(0.0, f64::max);
    let now = history.snapshots.back().map_or(0.0, |s| s.t);
    if now + 1e-9 < settle + last_pull {
        if history.snapshots.len() <= 1 {
            commands.push(SimCommand::Play);
        }
        return;
    }
    *done = true;
    if mpc {
        start_mpc(&settings, &mut link, &mut commands, &mut cito);
    } else {
        cito.start(displayed_simulation(&scene.scene, &history), settings.cito.clone());
    }
}

fn start_mpc(settings: &ControlSettings, link: &mut MpcLink, commands: &mut SimCommands, cito: &mut CitoState) {
    match link.driver(settings.mpc.clone()) {
        Ok(d) => {
            commands.push(SimCommand::Drive(DriverSlot::new(Box::new(d))));
            commands.push(SimCommand::Play);
        }
        Err(e) => cito.error = Some(format!("MPC: {e}")),
    }
}

/// `home` moved by `offset` (world frame) and turned by roll, pitch, yaw `rpy` (world frame),
/// as `CitoProblem::from_state` places its target.
fn offset_pose(home: &Pose, offset: [f64; 3], rpy: [f64; 3]) -> Pose {
    let [r, p, y] = rpy;
    (home.0 + Vector3::from(offset), Rotation3::from_euler_angles(r, p, y).matrix() * home.1)
}

/// The MPC target of the sliders, relative to the engagement pose.
fn slider_target(settings: &ControlSettings, home: &Pose) -> Pose {
    offset_pose(home, settings.mpc_offset, settings.mpc_rpy)
}

/// Shift + left drag on the ground moves the MPC target (or, without MPC, the CITO target)
/// horizontally, at the target's height.
#[derive(Resource, Default)]
struct TargetDrag {
    active: bool,
}

#[allow(clippy::too_many_arguments)]
fn drag_target(
    buttons: Res<ButtonInput<MouseButton>>,
    keys: Res<ButtonInput<KeyCode>>,
    window: Query<&Window, With<bevy::window::PrimaryWindow>>,
    camera: Query<(&Camera, &GlobalTransform), With<super::view::MainCamera>>,
    egui: Option<Res<bevy_egui::input::EguiWantsInput>>,
    tools: Res<ToolWindows>,
    worker: Option<Res<SimWorker>>,
    history: Res<SimHistory>,
    link: Res<MpcLink>,
    mut settings: Option<ResMut<ControlSettings>>,
    mut drag: ResMut<TargetDrag>,
) {
    let _cost = cost_scope();
    let Some(settings) = settings.as_mut() else { return };
    let shift = keys.any_pressed([KeyCode::ShiftLeft, KeyCode::ShiftRight]);
    if !buttons.pressed(MouseButton::Left) || !shift || !tools.control {
        drag.active = false;
        return;
    }
    if buttons.just_pressed(MouseButton::Left) {
        drag.active = !egui.is_some_and(|e| e.wants_any_pointer_input());
    }
    if !drag.active {
        return;
    }
    let (Ok(window), Ok((cam, cam_t))) = (window.single(), camera.single()) else { return };
    let Some(cursor) = window.cursor_position() else { return };
    let cursor = match cam.logical_viewport_rect() {
        Some(r) => cursor - r.min,
        None => cursor,
    };
    let Ok(ray) = cam.viewport_to_world(cam_t, cursor) else { return };
    let (o, d) = (from_bevy(ray.origin), from_bevy(*ray.direction));
    let mpc = worker.as_ref().and_then(|w| w.driver()) == Some(MPC_DRIVER);
    let home = if mpc {
        link.snapshot().home
    } else {
        history.displayed().and_then(|s| s.bodies.first()).map(|b| (b.trans, b.rot))
    };
    let Some(home) = home else { return };
    let offset = if mpc { settings.mpc_offset } else { settings.cito.target_offset };
    let z = home.0.z + offset[2];
    if d.z.abs() < 1e-6 {
        return;
    }
    let s = (z - o.z) / d.z;
    if s <= 0.0 {
        return;
    }
    let hit = o + d * s;
    let new = [hit.x - home.0.x, hit.y - home.0.y, offset[2]];
    if mpc {
        settings.mpc_offset = new;
        let t = slider_target(settings, &home);
        link.set_target(t.0, t.1);
    } else {
        settings.cito.target_offset = new;
    }
}

/// Ghosts, traces and targets.
#[allow(clippy::too_many_arguments)]
fn draw(
    mut gizmos: Gizmos,
    time: Res<Time>,
    tools: Res<ToolWindows>,
    settings: Option<Res<ControlSettings>>,
    mut cito: ResMut<CitoState>,
    link: Res<MpcLink>,
    worker: Option<Res<SimWorker>>,
    history: Res<SimHistory>,
    scene: Res<CurrentScene>,
) {
    let _cost = cost_scope();
    let Some(settings) = settings else { return };
    if !tools.control {
        return;
    }
    let target_color = Color::srgb(0.95, 0.75, 0.1);
    let trunk = trunk_box(&scene.scene.model);
    let draw_target = |gizmos: &mut Gizmos, (p, r): &Pose| {
        let t = Transform { translation: to_bevy(p), rotation: rot_to_bevy(r), scale: Vec3::ONE };
        gizmos.axes(t, 0.15);
        if let Some((size, placement)) = &trunk {
            draw_box(gizmos, p, r, size, placement, target_color);
        } else {
            gizmos.sphere(Isometry3d::from_translation(to_bevy(p)), 0.03, target_color);
        }
    };
    let mpc = worker.as_ref().and_then(|w| w.driver()) == Some(MPC_DRIVER);
    if mpc {
        let t = link.snapshot();
        if let Some(target) = &t.target {
            draw_target(&mut gizmos, target);
        }
        if let (Some(plan), true) = (&t.plan, settings.show_ghost) {
            let c = Color::srgba(0.2, 0.6, 1.0, 0.9);
            if settings.show_traces {
                plan.draw_traces(&mut gizmos, c);
            }
            plan.draw(&mut gizmos, plan.len().saturating_sub(1), c);
        }
        return;
    }
    // CITO: the running solve's target, or the finished plan.
    if cito.busy() {
        if let Some(t) = &cito.pending_target {
            draw_target(&mut gizmos, t);
        }
        return;
    }
    if let Some(run) = &cito.result {
        draw_target(&mut gizmos, &run.target);
        if settings.show_ghost && !run.ghost.is_empty() {
            let n = run.ghost.len();
            let dt = run.report.knots.get(1).map_or(0.01, |k| k.t).max(1e-3);
            let i = if settings.animate {
                // Real time through the plan, a short pause on its last knot, repeat.
                let period = n as f64 * dt + 0.5;
                ((cito.anim % period) / dt).floor() as usize
            } else {
                settings.ghost_knot
            }
            .min(n - 1);
            let c = Color::srgba(0.2, 0.6, 1.0, 0.9);
            if settings.show_traces {
                run.ghost.draw_traces(&mut gizmos, Color::srgba(0.2, 0.6, 1.0, 0.6));
            }
            run.ghost.draw(&mut gizmos, i, c);
            // Feet in contact at this knot, by the report's schedule.
            if let Some(k) = run.report.knots.get(i) {
                for (f, p) in k.feet.iter().enumerate() {
                    if k.contact.get(f).copied().unwrap_or(false) {
                        let p = Vector3::new(p[0], p[1], p[2]);
                        gizmos.sphere(Isometry3d::from_translation(to_bevy(&p)), 0.025, Color::srgb(0.1, 0.75, 0.25));
                    }
                }
            }
        }
        cito.anim += time.delta_secs_f64();
    } else if let Some(s) = history.displayed().and_then(|s| s.bodies.first()) {
        // Before any solve: where the sliders put the target.
        let target = offset_pose(&(s.trans, s.rot), settings.cito.target_offset, settings.cito.target_rpy);
        draw_target(&mut gizmos, &target);
    }
}

/// Sensitivity choice widgets on a spec's fields.
fn sensitivity_ui(u: &mut egui::Ui, id: &str, name: &mut String, kappa: &mut f64, delta: &mut f64) {
    u.horizontal(|u| {
        u.label("sensitivity");
        egui::ComboBox::from_id_salt(id).selected_text(name.as_str()).show_ui(u, |u| {
            for n in ["exact", "signorini", "relaxed"] {
                u.selectable_value(name, n.to_string(), n);
            }
        });
    });
    if name != "exact" {
        u.horizontal(|u| {
            u.label("kappa");
            u.add(
                egui::DragValue::new(kappa).range(1e-8..=1.0).speed(1e-5).custom_formatter(|v, _| format!("{v:.1e}")),
            );
            if name == "relaxed" {
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
        if u.add(egui::Slider::new(&mut cm, -20.0..=20.0).text(format!("{axis} (cm)"))).changed() {
            offset[i] = cm / 100.0;
            changed = true;
        }
    }
    for (i, axis) in ["roll", "pitch", "yaw"].iter().enumerate() {
        let mut deg = rpy[i].to_degrees();
        if u.add(egui::Slider::new(&mut deg, -30.0..=30.0).text(format!("{axis} (deg)"))).changed() {
            rpy[i] = deg.to_radians();
            changed = true;
        }
    }
    changed
}

#[allow(clippy::too_many_arguments)]
fn window_system(
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

fn cito_ui(u: &mut egui::Ui, s: &mut ControlSettings, cito: &mut CitoState, scene: &Scene, history: &SimHistory) {
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

/// The contact schedule that emerged: one row per foot, a cell per knot (green: in contact).
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
            name.trim_end_matches("_foot"),
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
         40 N for 0.3 s; a harder pull can make a replan diverge, and the scene's controller then \
         takes over again.",
    );
    let t = link.snapshot();
    u.label("Target, relative to the pose at start:");
    if pose_sliders(u, &mut s.mpc_offset, &mut s.mpc_rpy) {
        if let Some(home) = &t.home {
            let (p, r) = slider_target(s, home);
            link.set_target(p, r);
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
        "{} cycles; solve median {:.1} ms, p95 {:.1} ms (period {:.0} ms); base error {:.1} cm",
        t.total_cycles,
        pct(0.5),
        pct(0.95),
        1e3 * t.period,
        100.0 * last.base_error_m
    ));
    Plot::new("mpc_solve")
        .height(110.0)
        .legend(Legend::default())
        .x_axis_label("t (s)")
        .y_axis_label("solve (ms)")
        .include_y(0.0)
        .show(u, |p| {
            p.add(
                Line::new("solve time", PlotPoints::from_iter(t.cycles.iter().map(|c| [c.t, c.solve_ms])))
                    .color(egui::Color32::from_rgb(60, 140, 230)),
            );
            p.add(HLine::new("control period", 1e3 * t.period).color(egui::Color32::from_rgb(220, 50, 50)));
        });
    Plot::new("mpc_error").height(90.0).x_axis_label("t (s)").y_axis_label("base error (cm)").include_y(0.0).show(
        u,
        |p| {
            p.add(
                Line::new("base error", PlotPoints::from_iter(t.cycles.iter().map(|c| [c.t, 100.0 * c.base_error_m])))
                    .color(egui::Color32::from_rgb(230, 150, 40)),
            );
        },
    );
}
