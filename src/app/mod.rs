//! The ContactLab desktop app (Bevy + egui): a live 3D contact explorer.
//!
//! It is a group of small plugins around resources, one per file:
//!
//! | plugin | owns |
//! |---|---|
//! | [`sim::SimPlugin`] | the simulation, stepped on a background task; history; commands |
//! | [`sweep::SweepPlugin`] | gradient-quality sweeps from the current state, on a background task |
//! | [`view::ViewPlugin`] | camera, lights, terrain and robot meshes posed from the displayed snapshot |
//! | [`overlay::OverlayPlugin`] | contact frames, friction cones, impulse arrows, pulls |
//! | [`pick::PickPlugin`] | Ctrl + left drag on a body: a spring pull, as in MuJoCo's viewer |
//! | [`ui::UiPlugin`] | the egui panels and plots (they write commands, never physics) |
//! | [`capture::CapturePlugin`] | `--screenshot`: render N frames, save, exit; frame-cost statistics |
//! | [`control::ControlPlugin`] | the Control window: CITO and MPC on background tasks, target gizmos, ghost plans |
//! | [`policy::PolicyPlugin`] | the Policy window: a learned policy driving the robot live; training in the background |
//! | [`replay::ReplayPlugin`] | ContactNets: a learned model's rollout beside a real toss (tasks, clock; the window and gizmos in [`replay::ReplayUiPlugin`]) |
//!
//! The tool windows (Control, Policy, ContactNets) float over the 3D view and are toggled from
//! the top bar ([`ToolWindows`]).
//!
//! Data flows one way: the panels and the mouse write [`sim::SimCommand`]s and settings; the
//! simulation plugin applies them between step batches; views read the snapshot on screen.
//! System order within a frame is declared once, by the chained [`AppSet`].
//!
//! World coordinates are z-up (robotics); Bevy's are y-up. [`to_bevy`] and [`from_bevy`]
//! convert at the render boundary (`(x, y, z) -> (x, z, -y)`, a proper rotation), and every
//! `f64` quantity becomes `f32` only there.

pub mod capture;
pub mod control;
pub mod inspect;
pub mod jobs;
pub mod notebook;
pub mod overlay;
pub mod pick;
pub mod plots;
pub mod policy;
pub mod record;
pub mod replay;
pub mod sim;
pub mod sweep;
pub mod ui;
pub mod video;
pub mod view;

use crate::scene::Scene;
use crate::spatial::Se3;
use bevy::prelude::*;
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The scene being shown, and a counter that changes whenever a new one is loaded (views
/// rebuild their entities on change).
#[derive(Resource, Clone)]
pub struct CurrentScene {
    pub scene: Scene,
    pub generation: u64,
}

/// The order of our systems in `Update`.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppSet {
    /// Mouse and keyboard to commands.
    Input,
    /// Apply commands, poll and start the step task.
    Simulate,
    /// Poll and start background sweeps.
    Background,
    /// Pose entities from the displayed snapshot.
    Writeback,
    /// Gizmo overlays.
    Overlay,
}

/// How the app was started.
#[derive(Resource, Clone, Debug, Default)]
pub struct ViewerOptions {
    /// Scene file, or `None` for the default scene.
    pub scene: Option<PathBuf>,
    /// Save a screenshot after `frames` frames and exit.
    pub screenshot: Option<PathBuf>,
    pub frames: u32,
    /// Start a gradient sweep at once and show its plot (in screenshot mode: wait for it).
    pub sweep: bool,
    /// Window size (logical pixels).
    pub width: u32,
    pub height: u32,
    /// Tool windows open at start (`control`, `policy`, `contactnets`).
    pub open: Vec<String>,
    /// Start each opened tool's main job at once.
    pub start: bool,
    /// Files for the policy and ContactNets windows.
    pub policy: Option<PathBuf>,
    pub model: Option<PathBuf>,
    pub toss: Option<PathBuf>,
    /// Record the run to this file.
    pub record: Option<PathBuf>,
    /// Open this recording or result CSV.
    pub replay: Option<PathBuf>,
    /// Export the replay as a video here and exit.
    pub video: Option<PathBuf>,
    pub fps: u32,
}

/// Which tool windows are open.
#[derive(Resource, Clone, Debug, Default)]
pub struct ToolWindows {
    pub control: bool,
    pub policy: bool,
    pub replay: bool,
    /// Record, replay, export (the lab notebook).
    pub notebook: bool,
    pub profiler: bool,
    pub inspector: bool,
}

impl ToolWindows {
    pub fn from_options(opts: &ViewerOptions) -> Self {
        let has = |n: &str| opts.open.iter().any(|o| o == n);
        Self {
            control: has("control"),
            policy: has("policy"),
            replay: has("contactnets"),
            // Not while exporting a video: tool windows float over the 3D view.
            notebook: has("notebook") || ((opts.record.is_some() || opts.replay.is_some()) && opts.video.is_none()),
            profiler: has("profiler"),
            inspector: has("inspector"),
        }
    }
}

/// The default scene of `contactlab` with no arguments.
pub const DEFAULT_SCENE: &str = "scenes/quadruped_stand.ron";

/// Nanoseconds spent in our own systems this frame (see [`cost_scope`]).
static FRAME_COST_NS: AtomicU64 = AtomicU64::new(0);

/// Adds the time until it is dropped to this frame's cost of our own systems. Each of our
/// systems opens one at its top; [`capture::CapturePlugin`] reports the sum per frame.
pub struct CostScope(Instant);

pub fn cost_scope() -> CostScope {
    CostScope(Instant::now())
}

impl Drop for CostScope {
    fn drop(&mut self) {
        FRAME_COST_NS.fetch_add(self.0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// Takes and resets this frame's cost (ms).
pub fn take_frame_cost_ms() -> f64 {
    FRAME_COST_NS.swap(0, Ordering::Relaxed) as f64 * 1e-6
}

/// z-up world point to Bevy's y-up frame.
pub fn to_bevy(p: &Vector3<f64>) -> Vec3 {
    Vec3::new(p.x as f32, p.z as f32, -p.y as f32)
}

/// Bevy point to the z-up world.
pub fn from_bevy(p: Vec3) -> Vector3<f64> {
    Vector3::new(p.x as f64, -p.z as f64, p.y as f64)
}

/// z-up world rotation to Bevy's frame: `R_b = C R C^T` with `C` the axis map of [`to_bevy`].
pub fn rot_to_bevy(r: &Matrix3<f64>) -> Quat {
    let c = Matrix3::new(1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0, 0.0);
    let rb = c * r * c.transpose();
    let q = UnitQuaternion::from_matrix(&rb);
    Quat::from_xyzw(q.i as f32, q.j as f32, q.k as f32, q.w as f32).normalize()
}

/// A world placement as a Bevy transform.
pub fn se3_to_transform(m: &Se3) -> Transform {
    Transform { translation: to_bevy(&m.trans), rotation: rot_to_bevy(&m.rot), scale: Vec3::ONE }
}

/// Loads the scene to show: the given file, or the default one.
pub fn load_scene(opts: &ViewerOptions) -> anyhow::Result<Scene> {
    // A recording opened without a scene starts on its own.
    if let (None, Some(r)) = (&opts.scene, &opts.replay) {
        if r.extension().is_some_and(|e| e == "clrec") {
            return record::Recording::load(r).and_then(|rec| rec.scene()).map_err(anyhow::Error::from);
        }
    }
    let path = opts.scene.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_SCENE));
    // A URDF stands on the posture guessed from its joint limits.
    crate::scene::guess::load_scene_or_urdf(&path).map_err(anyhow::Error::from)
}

/// The plugins shared by the windowed app and the headless tests (no rendering).
pub fn core_plugins(app: &mut App) {
    app.configure_sets(
        Update,
        (AppSet::Input, AppSet::Simulate, AppSet::Background, AppSet::Writeback, AppSet::Overlay).chain(),
    )
    .init_resource::<ToolWindows>()
    .add_plugins((
        sim::SimPlugin,
        sweep::SweepPlugin,
        control::ControlPlugin,
        policy::PolicyPlugin,
        replay::ReplayPlugin,
        notebook::NotebookPlugin,
        inspect::InspectPlugin,
    ));
}

/// Opens the app and runs until the window closes (or the screenshot is saved).
pub fn run(opts: ViewerOptions) -> anyhow::Result<()> {
    let scene = load_scene(&opts)?;
    for w in &scene.warnings {
        eprintln!("warning: {w}");
    }
    let mut app = App::new();
    let screenshot_mode = opts.screenshot.is_some() || opts.video.is_some();
    let title = format!("ContactLab: {}", scene.file.name);
    app.add_plugins(
        DefaultPlugins
            .set(WindowPlugin {
                primary_window: Some(Window {
                    title,
                    resolution: (opts.width.max(640), opts.height.max(480)).into(),
                    ..default()
                }),
                ..default()
            })
            .set(bevy::render::RenderPlugin {
                // In software rendering, pipelines compiled in the background leave the first
                // frames of a screenshot black for up to a minute.
                synchronous_pipeline_compilation: screenshot_mode,
                ..default()
            }),
    )
    .insert_resource(CurrentScene { scene, generation: 0 })
    .insert_resource(ToolWindows::from_options(&opts))
    .insert_resource(opts.clone());
    core_plugins(&mut app);
    app.add_plugins((
        bevy_egui::EguiPlugin::default(),
        bevy_panorbit_camera::PanOrbitCameraPlugin,
        view::ViewPlugin,
        overlay::OverlayPlugin,
        pick::PickPlugin,
        ui::UiPlugin,
        policy::PolicyUiPlugin,
        capture::CapturePlugin,
        control::ControlUiPlugin,
        replay::ReplayUiPlugin,
        notebook::NotebookUiPlugin,
        video::VideoPlugin,
        inspect::InspectUiPlugin,
    ));
    let exit = app.run();
    match exit {
        AppExit::Success => Ok(()),
        AppExit::Error(code) => anyhow::bail!("the app exited with code {code}"),
    }
}
