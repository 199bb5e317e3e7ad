//! The ContactNets window (issue 7): a learned contact model against real cube tosses.
//!
//! A replay takes one toss of the data folder (`../shared/data/cube_tosses`) and one model (the
//! true cube, a model file written by `contactlab contactnets train`, or a polytope trained here
//! in the background), rolls the model out from the toss's first frame for the toss's length
//! ([`eval::toss_rollout`]) and scores it with the metrics `contactlab contactnets eval` reports
//! ([`eval::rollout_metrics`], so the numbers in the window and in `eval.json` are the same
//! code). The real toss and the rollout then play side by side, or overlaid, in the 3D view.
//!
//! Two plugins split the work as [`super::sweep`] and [`super::ui`] do:
//! - [`ReplayPlugin`] (also in the headless tests) owns the settings, the replay and training
//!   tasks on threads of their own ([`super::jobs`]) (each owns its inputs: paths and an `Arc` of the model;
//!   files are read on the task, never on the frame) and the playback clock.
//! - [`ReplayUiPlugin`] (windowed app only) draws the window, the gizmos and aims the camera.
//!
//! The data are in the tosses' scaled units (lengths divided by the half width, board at
//! `z = 0`); the view draws them in metres at `origin + h p` with `h` the half width, the
//! rollout shifted by `separation` along the world y axis, over any scene.

use super::{cost_scope, to_bevy, AppSet, ToolWindows, ViewerOptions};
use crate::learn::contactnets::data::{load_toss, Body, Dataset, Toss};
use crate::learn::contactnets::eval::{self, TossMetrics};
use crate::learn::contactnets::model::{self, LearnedModel, Method, Pose};
use crate::learn::contactnets::train::{self, TrainMonitor, TrainReport, TrainSettings};
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, Task};
use bevy_egui::egui;
use nalgebra::Vector3;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The data folder, relative to the repository root (where `cargo run` starts the app).
pub const DEFAULT_DATA: &str = "../shared/data/cube_tosses";

/// The data folder: [`DEFAULT_DATA`] from the working directory, else beside the source tree
/// (so the app finds the data when started from elsewhere on the build machine).
pub fn default_data_dir() -> PathBuf {
    let here = PathBuf::from(DEFAULT_DATA);
    if here.is_dir() {
        return here;
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_DATA);
    if beside.is_dir() {
        beside
    } else {
        here
    }
}

/// Which model rolls out.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSource {
    /// The true cube: the data's corners and friction ([`LearnedModel::truth`]).
    Truth,
    /// A model file (JSON) of `contactlab contactnets train`.
    File(PathBuf),
    /// The last model trained in the window ([`ReplayState::trained`]).
    Trained,
}

/// Which toss is replayed.
#[derive(Clone, Debug, PartialEq)]
pub enum TossSource {
    /// The toss at this index of the data folder's sorted CSVs ([`ReplayState::tosses`]).
    Index(usize),
    /// A toss CSV anywhere (`--toss`).
    File(PathBuf),
}

/// What to replay and how to train (UI-editable).
#[derive(Resource, Clone, Debug, PartialEq)]
pub struct ReplaySettings {
    /// Folder of toss CSVs and `params.json`. Default [`default_data_dir`].
    pub data_dir: PathBuf,
    /// Default the folder's first toss.
    pub toss: TossSource,
    /// Default the true cube.
    pub model: ModelSource,
    /// Training tosses of a background run (the first N of the seeded split, as
    /// `contactnets train --tosses N`). Default 4.
    pub train_tosses: usize,
    /// Seed of the split, initialization and batches. Default 0.
    pub train_seed: u64,
    /// Most Adam steps (early stopping usually ends sooner). Default 3000, the CLI's.
    pub train_steps: usize,
}

impl Default for ReplaySettings {
    fn default() -> Self {
        Self {
            data_dir: default_data_dir(),
            toss: TossSource::Index(0),
            model: ModelSource::Truth,
            train_tosses: 4,
            train_seed: 0,
            train_steps: TrainSettings::default().steps,
        }
    }
}

/// How the replay is drawn (UI-editable).
#[derive(Resource, Clone, Debug, PartialEq)]
pub struct ReplayView {
    /// World position of the data's board origin (m).
    pub origin: Vector3<f64>,
    /// Shift of the rollout along world y (m); 0 overlays it on the real toss.
    pub separation: f64,
    /// Centre paths of both.
    pub traces: bool,
    /// The learned vertices at the real pose against the true corners.
    pub vertices: bool,
}

impl Default for ReplayView {
    fn default() -> Self {
        // Beside the scene's robot (which stands near the world origin), not inside it.
        Self { origin: Vector3::new(0.0, 1.2, 0.0), separation: 0.45, traces: true, vertices: true }
    }
}

/// The playback clock of the replay on screen.
#[derive(Resource, Clone, Debug, PartialEq)]
pub struct ReplayPlayback {
    /// Time since the toss's first frame (s).
    pub time: f64,
    pub playing: bool,
    /// Playback speed (1 = real time).
    pub speed: f64,
    /// Start over at the end instead of pausing.
    pub looping: bool,
}

impl Default for ReplayPlayback {
    fn default() -> Self {
        Self { time: 0.0, playing: false, speed: 0.5, looping: true }
    }
}

/// A finished replay: a real toss and a model's rollout from its first frame.
#[derive(Clone, Debug)]
pub struct Replay {
    pub toss: Toss,
    pub model: Arc<LearnedModel>,
    /// What the model is, for the window ("true cube", a file name, "trained ...").
    pub model_label: String,
    /// One pose per frame of the toss (a failed rollout is padded with its last pose).
    pub rollout: Vec<Pose>,
    /// As `contactlab contactnets eval` computes them (position and penetration in % of the
    /// block width, angle in degrees).
    pub metrics: TossMetrics,
    /// [`eval::vertex_error`] (half widths); `None` for e2e models, which have no geometry.
    pub vertex_error: Option<f64>,
}

impl Replay {
    /// Time step of the toss (s).
    pub fn dt(&self) -> f64 {
        let f = &self.toss.frames;
        let n = f.len().max(2) - 1;
        (f[f.len() - 1].t - f[0].t) / n as f64
    }

    /// Length of the toss (s).
    pub fn duration(&self) -> f64 {
        let f = &self.toss.frames;
        f[f.len() - 1].t - f[0].t
    }

    /// The frame shown at playback time `t` (s).
    pub fn frame_at(&self, t: f64) -> usize {
        let dt = self.dt();
        let k = if dt > 0.0 { (t / dt).round() } else { 0.0 };
        (k.max(0.0) as usize).min(self.toss.frames.len() - 1)
    }
}

/// A polytope trained in the window.
#[derive(Clone, Debug)]
pub struct TrainedModel {
    pub model: Arc<LearnedModel>,
    pub report: TrainReport,
    pub tosses: usize,
    pub seed: u64,
    /// Counts trained models (a new one re-runs the replay).
    pub generation: u64,
}

/// What a finished replay was made from; a replay whose inputs changed is re-run.
#[derive(Clone, Debug, PartialEq)]
struct ReplayKey {
    toss: PathBuf,
    model: ModelSource,
    trained: u64,
}

/// The replay on screen, the background tasks and their requests.
#[derive(Resource, Default)]
pub struct ReplayState {
    task: Option<Task<Result<Replay, String>>>,
    /// The last finished replay.
    pub replay: Option<Replay>,
    /// Why the last replay could not be made (names the file, line and field).
    pub error: Option<String>,
    /// Set by the UI (or `--start`): make a replay of the current settings.
    pub requested: bool,
    /// Inputs of the running or last requested replay: once one has been asked for, changing
    /// the toss or the model re-runs it.
    requested_key: Option<ReplayKey>,
    /// Completed replays (tests wait on it).
    pub finished: u64,
    /// Set when a replay arrives that the camera should be aimed at (`--start`, first one).
    pub focus_requested: bool,
    /// The CSVs of [`ReplaySettings::data_dir`], sorted by name.
    pub tosses: Vec<PathBuf>,
    /// Why the folder could not be listed.
    pub list_error: Option<String>,
    /// Folder that `tosses` lists.
    listed: Option<PathBuf>,
    training: Option<Task<Result<TrainedModel, String>>>,
    train_cancel: Arc<AtomicBool>,
    train_progress: Arc<AtomicUsize>,
    /// Most steps of the running training.
    pub train_total: usize,
    /// Set by the UI: train a polytope with the current settings.
    pub train_requested: bool,
    /// Set by the UI: stop the running training.
    pub train_cancel_requested: bool,
    /// The last trained model.
    pub trained: Option<TrainedModel>,
    pub train_error: Option<String>,
}

impl ReplayState {
    /// Whether a replay is being computed.
    pub fn busy(&self) -> bool {
        self.task.is_some()
    }

    /// Whether a model is being trained.
    pub fn training(&self) -> bool {
        self.training.is_some()
    }

    /// Finished steps of the running training.
    pub fn train_progress(&self) -> usize {
        self.train_progress.load(Ordering::Relaxed)
    }

    /// The toss file the settings point at, if any.
    pub fn toss_path(&self, settings: &ReplaySettings) -> Option<PathBuf> {
        match &settings.toss {
            TossSource::File(p) => Some(p.clone()),
            TossSource::Index(i) => self.tosses.get(*i).cloned(),
        }
    }
}

pub struct ReplayPlugin;

impl Plugin for ReplayPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<ReplaySettings>()
            .init_resource::<ReplayView>()
            .init_resource::<ReplayPlayback>()
            .init_resource::<ReplayState>()
            .add_systems(Startup, apply_options)
            .add_systems(Update, (drive_training, drive_replay, advance_clock).chain().in_set(AppSet::Background));
    }
}

/// `--model`, `--toss`, and `--open contactnets --start` (replay at once and play).
fn apply_options(
    opts: Option<Res<ViewerOptions>>,
    mut settings: ResMut<ReplaySettings>,
    mut state: ResMut<ReplayState>,
    mut playback: ResMut<ReplayPlayback>,
) {
    let Some(opts) = opts else { return };
    if let Some(m) = &opts.model {
        settings.model = ModelSource::File(m.clone());
    }
    if let Some(t) = &opts.toss {
        settings.toss = TossSource::File(t.clone());
    }
    if opts.start && opts.open.iter().any(|o| o == "contactnets") {
        state.requested = true;
        state.focus_requested = true;
        playback.playing = true;
    }
}

/// Lists the toss CSVs of a folder, sorted by name.
pub fn list_tosses(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    if out.is_empty() {
        return Err(format!("{}: no toss CSVs in this folder", dir.display()));
    }
    out.sort();
    Ok(out)
}

/// The body constants for a toss: `params.json` beside it, else the data's defaults.
fn body_for(toss: &Path) -> Result<Body, String> {
    let params = toss.parent().map(|d| d.join("params.json"));
    match params {
        Some(p) if p.is_file() => Body::load(&p).map_err(|e| e.to_string()),
        _ => Ok(Body::default()),
    }
}

/// The model half of a replay job, owned by the task.
enum ModelJob {
    Truth,
    File(PathBuf),
    Ready(Arc<LearnedModel>, String),
}

/// Loads the toss and the model, rolls out and scores (on the task).
fn run_replay(toss_path: PathBuf, job: ModelJob) -> Result<Replay, String> {
    let toss = load_toss(&toss_path).map_err(|e| e.to_string())?;
    let (model, model_label) = match job {
        ModelJob::Truth => (Arc::new(LearnedModel::truth(&body_for(&toss_path)?)), "true cube".to_string()),
        ModelJob::File(p) if p.as_os_str().is_empty() => {
            return Err("no model file chosen: type its path and press \"load\", or browse".into())
        }
        ModelJob::File(p) => {
            let m = model::load(&p).map_err(|e| e.to_string())?;
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let label = format!("{name} ({})", m.method.name());
            (Arc::new(m), label)
        }
        ModelJob::Ready(m, label) => (m, label),
    };
    let (rollout, failure) = eval::toss_rollout(&model, &toss);
    let metrics = eval::rollout_metrics(&model, &toss, &rollout, failure);
    let vertex_error = (model.method != Method::E2e).then(|| eval::vertex_error(&model));
    Ok(Replay { toss, model, model_label, rollout, metrics, vertex_error })
}

/// Re-lists the folder when it changed, polls the replay task, and starts one on request (or
/// when the toss or model of a requested replay changed).
pub fn drive_replay(
    settings: Res<ReplaySettings>,
    mut state: ResMut<ReplayState>,
    mut playback: ResMut<ReplayPlayback>,
) {
    let _cost = cost_scope();
    let state = &mut *state;
    if state.listed.as_ref() != Some(&settings.data_dir) {
        state.listed = Some(settings.data_dir.clone());
        match list_tosses(&settings.data_dir) {
            Ok(t) => {
                state.tosses = t;
                state.list_error = None;
            }
            Err(e) => {
                state.tosses.clear();
                state.list_error = Some(e);
            }
        }
    }
    if let Some(task) = state.task.as_mut() {
        if let Some(r) = check_ready(task) {
            state.task = None;
            state.finished += 1;
            match r {
                Ok(r) => {
                    let same_toss = state.replay.as_ref().is_some_and(|old| old.toss.path == r.toss.path);
                    if !same_toss {
                        playback.time = 0.0;
                    }
                    playback.time = playback.time.min(r.duration());
                    state.replay = Some(r);
                    state.error = None;
                }
                Err(e) => {
                    state.error = Some(e);
                    state.focus_requested = false;
                }
            }
        }
    }
    if state.task.is_some() {
        return;
    }
    let key = state.toss_path(&settings).map(|toss| ReplayKey {
        toss,
        model: settings.model.clone(),
        trained: state.trained.as_ref().map_or(0, |t| t.generation),
    });
    let changed = state.requested_key.is_some() && key != state.requested_key;
    if !(state.requested || changed) {
        return;
    }
    state.requested = false;
    state.requested_key = key.clone();
    let Some(key) = key else {
        state.error = Some(match &state.list_error {
            Some(e) => e.clone(),
            None => format!("no toss {:?} in {}", settings.toss, settings.data_dir.display()),
        });
        return;
    };
    let job = match &settings.model {
        ModelSource::Truth => ModelJob::Truth,
        ModelSource::File(p) => ModelJob::File(p.clone()),
        ModelSource::Trained => match &state.trained {
            Some(t) => {
                ModelJob::Ready(t.model.clone(), format!("trained here: poly on {} tosses, seed {}", t.tosses, t.seed))
            }
            None => {
                state.error = Some("no trained model yet: press \"Train\" first".into());
                return;
            }
        },
    };
    state.task = Some(super::jobs::spawn("rollout", move || run_replay(key.toss, job)));
}

/// Trains a polytope on the first `tosses` training tosses of `dir`'s seeded split, as
/// `contactlab contactnets train --method poly` does (on the task).
fn run_training(
    dir: PathBuf,
    tosses: usize,
    seed: u64,
    steps: usize,
    cancel: Arc<AtomicBool>,
    progress: Arc<AtomicUsize>,
) -> Result<(LearnedModel, TrainReport), String> {
    let d = Dataset::load(&dir).map_err(|e| e.to_string())?;
    // One loss thread: the app's frame and the replay task share the machine.
    let ts = TrainSettings { method: Method::Poly, seed, steps, threads: 1, ..Default::default() };
    let monitor = TrainMonitor { cancel: Some(&cancel), steps: Some(&progress) };
    let run = train::train_on_split(&d, tosses, &ts, monitor)?;
    let (mut m, rep) = (run.model, run.report);
    m.info["trained_by"] = "contactlab view (ContactNets window)".into();
    Ok((m, rep))
}

/// Polls the training task; starts or cancels one on request. A finished model becomes the
/// replayed one.
pub fn drive_training(mut settings: ResMut<ReplaySettings>, mut state: ResMut<ReplayState>) {
    let _cost = cost_scope();
    let state = &mut *state;
    if let Some(task) = state.training.as_mut() {
        if let Some(r) = check_ready(task) {
            state.training = None;
            match r {
                Ok(t) => {
                    state.trained = Some(t);
                    state.train_error = None;
                    settings.model = ModelSource::Trained;
                    state.requested = true;
                }
                Err(e) if e == train::CANCELLED => state.train_error = None,
                Err(e) => state.train_error = Some(e),
            }
        }
    }
    if state.train_cancel_requested {
        state.train_cancel_requested = false;
        state.train_requested = false;
        state.train_cancel.store(true, Ordering::Relaxed);
        return;
    }
    if !state.train_requested || state.training.is_some() {
        return;
    }
    state.train_requested = false;
    state.train_cancel = Arc::new(AtomicBool::new(false));
    state.train_progress = Arc::new(AtomicUsize::new(0));
    state.train_total = settings.train_steps;
    state.train_error = None;
    let (dir, n, seed, steps) =
        (settings.data_dir.clone(), settings.train_tosses, settings.train_seed, settings.train_steps);
    let (cancel, progress) = (state.train_cancel.clone(), state.train_progress.clone());
    let generation = state.trained.as_ref().map_or(0, |t| t.generation) + 1;
    state.training = Some(super::jobs::spawn("ContactNets training", move || {
        let (m, report) = run_training(dir, n, seed, steps, cancel, progress)?;
        Ok(TrainedModel { model: Arc::new(m), report, tosses: n, seed, generation })
    }));
}

/// Advances the playback clock by the frame's time.
fn advance_clock(time: Res<Time>, state: Res<ReplayState>, mut playback: ResMut<ReplayPlayback>) {
    let _cost = cost_scope();
    let Some(r) = &state.replay else { return };
    if !playback.playing {
        return;
    }
    let end = r.duration();
    playback.time += time.delta_secs_f64() * playback.speed;
    if playback.time > end {
        if playback.looping {
            playback.time = 0.0;
        } else {
            playback.time = end;
            playback.playing = false;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Windowed app only: the window, the gizmos, the camera.

/// The ContactNets window and its drawing; added by [`super::run`] only (it needs egui and a
/// renderer).
pub struct ReplayUiPlugin;

impl Plugin for ReplayUiPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<ReplayUiState>()
            .add_systems(Startup, init_ui_state)
            .add_systems(bevy_egui::EguiPrimaryContextPass, window_system)
            .add_systems(Update, (poll_dialog, (focus_camera, draw).chain().in_set(AppSet::Overlay)));
    }
}

/// Text fields and the file dialog of the window.
#[derive(Resource, Default)]
struct ReplayUiState {
    data_dir: String,
    model_path: String,
    toss_path: String,
    save_path: String,
    notice: Option<String>,
    /// A file dialog in progress and what its answer is for.
    dialog: Option<(DialogFor, Task<Option<PathBuf>>)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DialogFor {
    Model,
    Toss,
}

fn init_ui_state(mut ui: ResMut<ReplayUiState>, settings: Res<ReplaySettings>) {
    ui.data_dir = settings.data_dir.display().to_string();
    if let ModelSource::File(p) = &settings.model {
        ui.model_path = p.display().to_string();
    }
    if let TossSource::File(p) = &settings.toss {
        ui.toss_path = p.display().to_string();
    }
    ui.save_path = "poly_trained.json".into();
}

fn spawn_dialog(what: DialogFor, dir: PathBuf) -> Task<Option<PathBuf>> {
    super::jobs::dialog(move || {
        let (name, ext) = match what {
            DialogFor::Model => ("ContactNets model", "json"),
            DialogFor::Toss => ("Toss CSV", "csv"),
        };
        rfd::FileDialog::new().add_filter(name, &[ext]).set_directory(dir).pick_file()
    })
}

fn poll_dialog(mut ui: ResMut<ReplayUiState>, mut settings: ResMut<ReplaySettings>, mut state: ResMut<ReplayState>) {
    let _cost = cost_scope();
    let Some((what, task)) = ui.dialog.as_mut() else { return };
    let Some(answer) = check_ready(task) else { return };
    let what = *what;
    ui.dialog = None;
    let Some(path) = answer else {
        ui.notice = Some("No file dialog is available here (or it was cancelled): type a path instead.".into());
        return;
    };
    match what {
        DialogFor::Model => {
            ui.model_path = path.display().to_string();
            settings.model = ModelSource::File(path);
        }
        DialogFor::Toss => {
            ui.toss_path = path.display().to_string();
            settings.toss = TossSource::File(path);
        }
    }
    state.requested = true;
}

const ERROR_RED: egui::Color32 = egui::Color32::from_rgb(220, 40, 40);
const REAL_EGUI: egui::Color32 = egui::Color32::from_rgb(50, 115, 255);
const MODEL_EGUI: egui::Color32 = egui::Color32::from_rgb(255, 140, 25);

#[allow(clippy::too_many_arguments)]
fn window_system(
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

const REAL: Color = Color::srgb(0.20, 0.45, 1.0);
const MODEL: Color = Color::srgb(1.0, 0.55, 0.10);
const ERROR: Color = Color::srgb(0.90, 0.10, 0.10);
const BOARD: Color = Color::srgba(0.25, 0.25, 0.28, 0.8);

/// Pairs of vertices joined by an edge of the true cube: those at the shortest distance.
/// Learned vertex `i` starts from true corner `i` in training, so the same pairs draw the
/// learned polytope.
fn cube_edges(corners: &[Vector3<f64>]) -> Vec<(usize, usize)> {
    let mut shortest = f64::INFINITY;
    for i in 0..corners.len() {
        for j in i + 1..corners.len() {
            shortest = shortest.min((corners[i] - corners[j]).norm());
        }
    }
    let mut edges = vec![];
    for i in 0..corners.len() {
        for j in i + 1..corners.len() {
            if (corners[i] - corners[j]).norm() < shortest * (1.0 + 1e-6) {
                edges.push((i, j));
            }
        }
    }
    edges
}

/// World point (m, z-up) of a data point (scaled units) shifted by `shift` (m).
fn world(view: &ReplayView, h: f64, p: &Vector3<f64>, shift: f64) -> Vec3 {
    to_bevy(&(view.origin + Vector3::new(0.0, shift, 0.0) + p * h))
}

/// Polytope wireframe and vertex dots of `vertices` (body frame) at a pose.
#[allow(clippy::too_many_arguments)]
fn draw_body(
    gizmos: &mut Gizmos,
    view: &ReplayView,
    h: f64,
    pose: &Pose,
    vertices: &[Vector3<f64>],
    edges: &[(usize, usize)],
    shift: f64,
    color: Color,
) {
    let r = pose.q.to_rotation_matrix();
    let pts: Vec<Vec3> = vertices.iter().map(|v| world(view, h, &(pose.p + r * v), shift)).collect();
    for &(i, j) in edges {
        if let (Some(a), Some(b)) = (pts.get(i), pts.get(j)) {
            gizmos.line(*a, *b, color);
        }
    }
    for p in &pts {
        gizmos.sphere(Isometry3d::from_translation(*p), (0.07 * h) as f32, color).resolution(8);
    }
    // Body axes at the centre show the orientation where the wireframe is symmetric.
    let c = world(view, h, &pose.p, shift);
    let axis = to_bevy(&(r * Vector3::z())) * (0.6 * h) as f32;
    gizmos.line(c, c + axis, color);
}

fn draw(
    mut gizmos: Gizmos,
    state: Res<ReplayState>,
    view: Res<ReplayView>,
    playback: Res<ReplayPlayback>,
    tools: Res<ToolWindows>,
) {
    let _cost = cost_scope();
    let Some(r) = &state.replay else { return };
    if !tools.replay {
        return;
    }
    let h = r.model.body.block_half_width_m;
    let k = r.frame_at(playback.time);
    let corners: Vec<Vector3<f64>> = r.model.body.vertices.iter().map(|v| Vector3::from(*v)).collect();
    let edges = cube_edges(&corners);
    let real_pose = Pose { p: r.toss.frames[k].p, q: r.toss.frames[k].q };
    let sim_pose = r.rollout[k];
    // e2e models have no geometry: their rollout is drawn as the true cube.
    let learned = if r.model.method == Method::E2e {
        corners.clone()
    } else {
        r.model.vertices_at(sim_pose.q.to_rotation_matrix().matrix())
    };
    let learned_edges = if learned.len() == corners.len() { edges.clone() } else { vec![] };
    let shift = view.separation;

    // The board under both, covering both paths with a margin.
    let (mut lo, mut hi) = (Vector3::repeat(f64::INFINITY), Vector3::repeat(f64::NEG_INFINITY));
    for (p, s) in r.toss.frames.iter().map(|f| (f.p, 0.0)).chain(r.rollout.iter().map(|p| (p.p, shift))) {
        let w = view.origin + Vector3::new(0.0, s, 0.0) + p * h;
        lo = lo.inf(&w);
        hi = hi.sup(&w);
    }
    let cell = 2.0 * h;
    let margin = 3.0 * h;
    let (lo, hi) = (lo.add_scalar(-margin), hi.add_scalar(margin));
    let cells =
        UVec2::new(((hi.x - lo.x) / cell).ceil().max(1.0) as u32, ((hi.y - lo.y) / cell).ceil().max(1.0) as u32);
    let centre = Vector3::new(lo.x + cells.x as f64 * cell / 2.0, lo.y + cells.y as f64 * cell / 2.0, view.origin.z);
    // The grid lies in its local xy plane; this rotation takes local x, y, z to world x, y, z
    // in Bevy's axes (local z to Bevy's up).
    let rot = Quat::from_rotation_x(-std::f32::consts::FRAC_PI_2);
    gizmos.grid(Isometry3d::new(to_bevy(&centre), rot), cells, Vec2::splat(cell as f32), BOARD).outer_edges();

    draw_body(&mut gizmos, &view, h, &real_pose, &corners, &edges, 0.0, REAL);
    draw_body(&mut gizmos, &view, h, &sim_pose, &learned, &learned_edges, shift, MODEL);

    if view.traces {
        let real_path = r.toss.frames.iter().map(|f| world(&view, h, &f.p, 0.0));
        let sim_path = r.rollout.iter().map(|p| world(&view, h, &p.p, shift));
        gizmos.linestrip(real_path.clone().take(k + 1), REAL);
        gizmos.linestrip(sim_path.clone().take(k + 1), MODEL);
        gizmos.linestrip(real_path.skip(k), REAL.with_alpha(0.25));
        gizmos.linestrip(sim_path.skip(k), MODEL.with_alpha(0.25));
    }

    if view.vertices && r.model.method != Method::E2e {
        // Learned vertices on the real cube's pose, joined to the true corners they started
        // from: the segments are the vertex errors.
        let rr = real_pose.q.to_rotation_matrix();
        let at_real = r.model.vertices_at(rr.matrix());
        for (i, v) in at_real.iter().enumerate() {
            let p = world(&view, h, &(real_pose.p + rr * v), 0.0);
            gizmos.sphere(Isometry3d::from_translation(p), (0.1 * h) as f32, MODEL).resolution(10);
            if let Some(c) = corners.get(i) {
                gizmos.line(p, world(&view, h, &(real_pose.p + rr * c), 0.0), ERROR);
            }
        }
    }
}

/// Aims the orbit camera at the real toss and the rollout when asked.
fn focus_camera(
    mut state: ResMut<ReplayState>,
    view: Res<ReplayView>,
    mut camera: Query<&mut bevy_panorbit_camera::PanOrbitCamera, With<super::view::MainCamera>>,
) {
    let _cost = cost_scope();
    if !state.focus_requested {
        return;
    }
    let Some(r) = &state.replay else { return };
    let h = r.model.body.block_half_width_m;
    let (mut lo, mut hi) = (Vector3::repeat(f64::INFINITY), Vector3::repeat(f64::NEG_INFINITY));
    for p in r.toss.frames.iter().map(|f| f.p * h) {
        lo = lo.inf(&p);
        hi = hi.sup(&p);
    }
    let mid = view.origin + (lo + hi) / 2.0 + Vector3::new(0.0, view.separation / 2.0, 0.0);
    let extent = (hi - lo).norm() + view.separation;
    if let Ok(mut cam) = camera.single_mut() {
        cam.target_focus = to_bevy(&Vector3::new(mid.x, mid.y, h));
        cam.target_radius = (1.3 * extent as f32).clamp(0.4, 6.0);
    }
    state.focus_requested = false;
}
