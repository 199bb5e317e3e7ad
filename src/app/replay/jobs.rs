//! The ContactNets window's background work: rollouts, training and file dialogs on threads of
//! their own, the systems that start and poll them, and the playback clock's tick.

use super::state::{
    DialogFor, ModelSource, Replay, ReplayPlayback, ReplaySettings, ReplayState, ReplayUiState, TossSource,
    TrainedModel,
};
use crate::app::cost_scope;
use crate::learn::contactnets::data::{load_toss, Body, Dataset};
use crate::learn::contactnets::eval;
use crate::learn::contactnets::model::{self, LearnedModel, Method};
use crate::learn::contactnets::train::{self, TrainMonitor, TrainReport, TrainSettings};
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, Task};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// What a finished replay was made from; a replay whose inputs changed is re-run.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ReplayKey {
    toss: PathBuf,
    model: ModelSource,
    trained: u64,
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
    state.task = Some(crate::app::jobs::spawn("rollout", move || run_replay(key.toss, job)));
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
                Ok(t) if t.report.status == train::TrainStatus::Cancelled => state.train_error = None,
                Ok(t) => {
                    state.trained = Some(t);
                    state.train_error = None;
                    settings.model = ModelSource::Trained;
                    state.requested = true;
                }
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
    state.training = Some(crate::app::jobs::spawn("ContactNets training", move || {
        let (m, report) = run_training(dir, n, seed, steps, cancel, progress)?;
        Ok(TrainedModel { model: Arc::new(m), report, tosses: n, seed, generation })
    }));
}

/// Advances the playback clock by the frame's time.
pub(super) fn advance_clock(time: Res<Time>, state: Res<ReplayState>, mut playback: ResMut<ReplayPlayback>) {
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

pub(super) fn spawn_dialog(what: DialogFor, dir: PathBuf) -> Task<Option<PathBuf>> {
    crate::app::jobs::dialog(move || {
        let (name, ext) = match what {
            DialogFor::Model => ("ContactNets model", "json"),
            DialogFor::Toss => ("Toss CSV", "csv"),
        };
        rfd::FileDialog::new().add_filter(name, &[ext]).set_directory(dir).pick_file()
    })
}

pub(super) fn poll_dialog(
    mut ui: ResMut<ReplayUiState>,
    mut settings: ResMut<ReplaySettings>,
    mut state: ResMut<ReplayState>,
) {
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
