//! The ContactNets window's resources: what to replay and how to train, how it is drawn, the
//! playback clock, the replay and training state, and the window's text fields.

use super::jobs::ReplayKey;
use crate::app::ViewerOptions;
use crate::learn::contactnets::data::Toss;
use crate::learn::contactnets::eval::TossMetrics;
use crate::learn::contactnets::model::{LearnedModel, Pose};
use crate::learn::contactnets::train::{TrainReport, TrainSettings};
use bevy::prelude::*;
use bevy::tasks::Task;
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
    ///
    /// [`eval::vertex_error`]: crate::learn::contactnets::eval::vertex_error
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

/// The replay on screen, the background tasks and their requests.
#[derive(Resource, Default)]
pub struct ReplayState {
    pub(super) task: Option<Task<Result<Replay, String>>>,
    /// The last finished replay.
    pub replay: Option<Replay>,
    /// Why the last replay could not be made (names the file, line and field).
    pub error: Option<String>,
    /// Set by the UI (or `--start`): make a replay of the current settings.
    pub requested: bool,
    /// Inputs of the running or last requested replay: once one has been asked for, changing
    /// the toss or the model re-runs it.
    pub(super) requested_key: Option<ReplayKey>,
    /// Completed replays (tests wait on it).
    pub finished: u64,
    /// Set when a replay arrives that the camera should be aimed at (`--start`, first one).
    pub focus_requested: bool,
    /// The CSVs of [`ReplaySettings::data_dir`], sorted by name.
    pub tosses: Vec<PathBuf>,
    /// Why the folder could not be listed.
    pub list_error: Option<String>,
    /// Folder that `tosses` lists.
    pub(super) listed: Option<PathBuf>,
    pub(super) training: Option<Task<Result<TrainedModel, String>>>,
    pub(super) train_cancel: Arc<AtomicBool>,
    pub(super) train_progress: Arc<AtomicUsize>,
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

/// `--model`, `--toss`, and `--open contactnets --start` (replay at once and play).
pub(super) fn apply_options(
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

/// Text fields and the file dialog of the window.
#[derive(Resource, Default)]
pub(super) struct ReplayUiState {
    pub(super) data_dir: String,
    pub(super) model_path: String,
    pub(super) toss_path: String,
    pub(super) save_path: String,
    pub(super) notice: Option<String>,
    /// A file dialog in progress and what its answer is for.
    pub(super) dialog: Option<(DialogFor, Task<Option<PathBuf>>)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DialogFor {
    Model,
    Toss,
}

pub(super) fn init_ui_state(mut ui: ResMut<ReplayUiState>, settings: Res<ReplaySettings>) {
    ui.data_dir = settings.data_dir.display().to_string();
    if let ModelSource::File(p) = &settings.model {
        ui.model_path = p.display().to_string();
    }
    if let TossSource::File(p) = &settings.toss {
        ui.toss_path = p.display().to_string();
    }
    ui.save_path = "poly_trained.json".into();
}
