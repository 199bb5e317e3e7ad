//! The lab notebook: record a run, open a recording or a result file as a replay to scrub and
//! play, copy the state on screen as a scene keyframe, export a video ([`super::video`]), and
//! the profiler window.
//!
//! Recording itself happens in the simulation plugin (every input passes through it, see
//! [`super::record`]); this plugin starts and stops it, saves it (atomically, every few
//! seconds while it runs and when it stops or the app closes), and loads replays: a
//! recording is re-simulated on a background thread, a CSV is read there, and the snapshots
//! replace the history (the recording's scene is loaded first), paused at the start. Play in
//! the top bar continues live from the entry on screen, as after any scrub; the notebook's own
//! play button moves the history cursor at the chosen speed instead.

use super::record::{self, Recording};
use super::sim::{SimCommand, SimCommands, SimControl, SimHistory, SimWorker};
use super::{cost_scope, AppSet, CurrentScene, ToolWindows, ViewerOptions};
use crate::scene::Scene;
use crate::sim::snapshot::Snapshot;
use bevy::prelude::*;
use bevy::tasks::{futures::check_ready, Task};
use bevy_egui::egui;
use std::path::{Path, PathBuf};

/// Seconds between saves of a running recording.
const AUTOSAVE_SECONDS: f64 = 3.0;

/// A video the video plugin should write.
#[derive(Clone, Debug)]
pub struct VideoRequest {
    pub path: PathBuf,
    pub fps: u32,
    /// Exit the app when it is written (the command line's `--video`).
    pub exit: bool,
}

/// A replay read in the background.
pub struct LoadedReplay {
    pub scene: Scene,
    pub snapshots: Vec<Snapshot>,
    pub label: String,
}

#[derive(Resource)]
pub struct Notebook {
    /// Typed paths.
    pub record_path: String,
    pub replay_path: String,
    pub video_path: String,
    pub fps: u32,
    pub message: Option<String>,
    /// Where the running recording is saved.
    pub saving_to: Option<PathBuf>,
    since_save: f64,
    loading: Option<Task<Result<LoadedReplay, String>>>,
    /// A replay whose scene is being loaded, and the scene generation that will hold it.
    pending: Option<(LoadedReplay, u64)>,
    /// What is in the history, if it is a replay.
    pub replay_label: Option<String>,
    /// Replays put into the history (tests wait on it).
    pub replays_loaded: u64,
    /// Playing the replay: history time shown, and speed.
    pub playing: bool,
    pub playhead: f64,
    pub speed: f64,
    pub keyframe: String,
    /// For the video plugin.
    pub video_request: Option<VideoRequest>,
    started: bool,
}

impl Default for Notebook {
    fn default() -> Self {
        Self {
            record_path: "run.clrec".into(),
            replay_path: String::new(),
            video_path: "run.mp4".into(),
            fps: 30,
            message: None,
            saving_to: None,
            since_save: 0.0,
            loading: None,
            pending: None,
            replay_label: None,
            replays_loaded: 0,
            playing: false,
            playhead: 0.0,
            speed: 1.0,
            keyframe: String::new(),
            video_request: None,
            started: false,
        }
    }
}

impl Notebook {
    /// Starts recording to `path` (the simulation resets to the scene's initial state).
    pub fn start_recording(&mut self, path: PathBuf, commands: &mut SimCommands) {
        commands.push(SimCommand::Record(true));
        commands.push(SimCommand::Play);
        self.message = Some(format!("Recording to {} (from the scene's initial state)", path.display()));
        self.saving_to = Some(path);
        self.since_save = 0.0;
    }

    /// Reads a recording (re-simulated) or a result CSV of `scene`'s robot in the background.
    pub fn open_replay(&mut self, path: PathBuf, scene: &Scene) {
        let scene = scene.clone();
        self.message = Some(format!("Loading {}...", path.display()));
        self.loading = Some(super::jobs::spawn("replay", move || load_replay(&path, &scene)));
    }

    pub fn busy(&self) -> bool {
        self.loading.is_some() || self.pending.is_some()
    }
}

/// A `.clrec` recording replayed, or a CSV of `scene`'s robot.
pub fn load_replay(path: &Path, scene: &Scene) -> Result<LoadedReplay, String> {
    let is_csv = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if is_csv {
        let snapshots = record::load_csv(path, scene).map_err(|e| e.to_string())?;
        let label = format!("{} ({} rows of {})", path.display(), snapshots.len(), scene.file.name);
        return Ok(LoadedReplay { scene: scene.clone(), snapshots, label });
    }
    let rec = Recording::load(path).map_err(|e| e.to_string())?;
    let run = record::replay(&rec, &record::plain_driver, None).map_err(|e| e.to_string())?;
    let mut label = format!(
        "{}: {} steps of {}, {} checkpoints equal bit for bit",
        path.display(),
        run.snapshots.len() - 1,
        run.scene.file.name,
        run.checkpoints_checked
    );
    if let Some(s) = &run.stopped {
        label.push_str(&format!("; {s}"));
    }
    Ok(LoadedReplay { scene: run.scene, snapshots: run.snapshots, label })
}

/// The video frames of `snapshots`: for frame `k` the first entry at or after `t0 + k / fps`,
/// `round(duration * fps)` frames.
pub fn video_frames(snapshots: &std::collections::VecDeque<Snapshot>, fps: u32) -> Vec<usize> {
    let (Some(first), Some(last)) = (snapshots.front(), snapshots.back()) else { return vec![] };
    let n = ((last.t - first.t) * fps as f64).round() as usize;
    (0..n)
        .map(|k| {
            let t = first.t + k as f64 / fps as f64;
            snapshots.partition_point(|s| s.t < t - 1e-9).min(snapshots.len() - 1)
        })
        .collect()
}

pub struct NotebookPlugin;

impl Plugin for NotebookPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Notebook>()
            .init_resource::<HotReload>()
            .add_systems(
                Update,
                (from_options, poll, save_recording, playback, hot_reload).chain().in_set(AppSet::Background),
            )
            .add_systems(Last, save_on_exit);
    }
}

/// `--record` and `--replay` at start.
fn from_options(
    opts: Option<Res<ViewerOptions>>,
    scene: Res<CurrentScene>,
    mut nb: ResMut<Notebook>,
    mut commands: ResMut<SimCommands>,
) {
    if nb.started {
        return;
    }
    nb.started = true;
    let Some(opts) = opts else { return };
    if let Some(p) = &opts.record {
        nb.record_path = p.display().to_string();
        nb.start_recording(p.clone(), &mut commands);
    }
    if let Some(p) = &opts.replay {
        nb.replay_path = p.display().to_string();
        nb.open_replay(p.clone(), &scene.scene);
    }
    if let Some(v) = &opts.video {
        nb.video_path = v.display().to_string();
    }
    nb.fps = opts.fps.max(1);
}

/// Takes a loaded replay: loads its scene, then (once loaded, the simulation idle) puts its
/// snapshots into the history.
#[allow(clippy::too_many_arguments)]
fn poll(
    mut nb: ResMut<Notebook>,
    scene: Res<CurrentScene>,
    worker: Option<Res<SimWorker>>,
    mut history: ResMut<SimHistory>,
    mut control: ResMut<SimControl>,
    mut commands: ResMut<SimCommands>,
    opts: Option<Res<ViewerOptions>>,
) {
    let _cost = cost_scope();
    if let Some(task) = nb.loading.as_mut() {
        if let Some(r) = check_ready(task) {
            nb.loading = None;
            match r {
                Ok(l) => {
                    commands.push(SimCommand::Pause);
                    commands.push(SimCommand::Load(Box::new(l.scene.clone())));
                    nb.pending = Some((l, scene.generation + 1));
                }
                Err(e) => {
                    nb.message = Some(format!("Could not open the replay: {e}"));
                    if opts.as_ref().is_some_and(|o| o.video.is_some()) {
                        eprintln!("error: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
    let ready = nb.pending.as_ref().is_some_and(|(_, g)| scene.generation >= *g)
        && worker.as_ref().is_some_and(|w| !w.busy())
        && commands.0.is_empty();
    if !ready {
        return;
    }
    let (l, _) = nb.pending.take().expect("pending");
    control.playing = false;
    history.replace(l.snapshots);
    history.cursor = Some(0);
    nb.playhead = 0.0;
    nb.playing = false;
    nb.message = Some(format!("Replay: {}", l.label));
    nb.replay_label = Some(l.label);
    nb.replays_loaded += 1;
    if let Some(o) = opts.as_ref().filter(|o| o.video.is_some()) {
        nb.video_request = Some(VideoRequest { path: o.video.clone().expect("video"), fps: o.fps.max(1), exit: true });
    }
}

/// Saves the running recording every few seconds, and a stopped one at once.
fn save_recording(time: Res<Time>, mut nb: ResMut<Notebook>, worker: Option<ResMut<SimWorker>>) {
    let _cost = cost_scope();
    let Some(mut worker) = worker else { return };
    // A recording stopped: saved if the notebook started it (one started through the API is
    // left to its caller).
    if worker.finished_recording.is_some() && nb.saving_to.is_some() {
        let done = worker.finished_recording.take().expect("checked");
        let path = nb.saving_to.take().expect("checked");
        nb.message = Some(match done.save(&path) {
            Ok(()) => format!("Saved {} ({} steps, {} inputs)", path.display(), done.steps, done.events.len()),
            Err(e) => format!("{}: cannot save: {e}", path.display()),
        });
        return;
    }
    nb.since_save += time.delta_secs_f64();
    if nb.since_save < AUTOSAVE_SECONDS {
        return;
    }
    nb.since_save = 0.0;
    if let (Some(rec), Some(path)) = (worker.recording.as_ref(), nb.saving_to.as_ref()) {
        if let Err(e) = rec.save(path) {
            nb.message = Some(format!("{}: cannot save: {e}", path.display()));
        }
    }
}

/// The notebook's play button: moves the history cursor in time.
fn playback(time: Res<Time>, mut nb: ResMut<Notebook>, mut history: ResMut<SimHistory>) {
    if !nb.playing || history.snapshots.is_empty() {
        return;
    }
    let t0 = history.snapshots.front().map_or(0.0, |s| s.t);
    let t1 = history.snapshots.back().map_or(0.0, |s| s.t);
    nb.playhead += time.delta_secs_f64() * nb.speed;
    if t0 + nb.playhead >= t1 {
        nb.playhead = t1 - t0;
        nb.playing = false;
    }
    let t = t0 + nb.playhead;
    let i = history.snapshots.partition_point(|s| s.t < t - 1e-9).min(history.snapshots.len() - 1);
    history.cursor = Some(i);
}

/// A recording in progress is saved when the app closes.
fn save_on_exit(mut exits: MessageReader<AppExit>, nb: Res<Notebook>, worker: Option<Res<SimWorker>>) {
    if exits.read().next().is_none() {
        return;
    }
    if let (Some(w), Some(path)) = (worker, nb.saving_to.as_ref()) {
        if let Some(rec) = w.recording.as_ref() {
            match rec.save(path) {
                Ok(()) => println!("recording: {} ({} steps)", path.display(), rec.steps),
                Err(e) => eprintln!("error: {}: {e}", path.display()),
            }
        }
    }
}

/// Seconds between looks at the open files' modification times.
const RELOAD_POLL_SECONDS: f64 = 0.5;

/// The files behind the open scene (the scene file and its URDF, or the URDF it was guessed
/// from) and their modification times when last loaded.
#[derive(Resource, Default)]
pub struct HotReload {
    generation: Option<u64>,
    files: Vec<(PathBuf, Option<std::time::SystemTime>)>,
    since: f64,
    /// Reloads done (tests wait on it) and the last failure.
    pub reloads: u64,
    pub failures: u64,
}

fn modified(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The files a scene was built from.
fn scene_files(scene: &Scene) -> Vec<PathBuf> {
    let mut out = vec![scene.path.clone()];
    if let crate::scene::RobotSpec::Urdf { path, .. } = &scene.file.robot {
        let full =
            if path.is_absolute() { path.clone() } else { scene.path.parent().unwrap_or(Path::new(".")).join(path) };
        if full != scene.path {
            out.push(full);
        }
    }
    out
}

/// Editing the open scene file or its URDF on disk reloads it; an invalid file leaves the
/// current scene and says why (file, line, field).
fn hot_reload(
    time: Res<Time>,
    mut hr: ResMut<HotReload>,
    scene: Res<CurrentScene>,
    mut control: ResMut<SimControl>,
    mut commands: ResMut<SimCommands>,
    worker: Option<Res<SimWorker>>,
) {
    let _cost = cost_scope();
    if hr.generation != Some(scene.generation) {
        hr.generation = Some(scene.generation);
        hr.files = scene_files(&scene.scene).into_iter().map(|p| (p.clone(), modified(&p))).collect();
        hr.since = 0.0;
        return;
    }
    hr.since += time.delta_secs_f64();
    if hr.since < RELOAD_POLL_SECONDS {
        return;
    }
    hr.since = 0.0;
    // A replay or a recording owns the scene it runs.
    if worker.as_ref().is_some_and(|w| w.recording.is_some()) {
        return;
    }
    let changed = hr.files.iter().any(|(p, t)| modified(p) != *t);
    if !changed {
        return;
    }
    for f in hr.files.iter_mut() {
        f.1 = modified(&f.0);
    }
    let path = scene.scene.path.clone();
    match crate::scene::guess::load_scene_or_urdf(&path) {
        Ok(s) => {
            commands.push(SimCommand::Load(Box::new(s)));
            hr.reloads += 1;
        }
        Err(e) => {
            hr.failures += 1;
            control.message = Some(format!("The edited file does not load; the current scene stays.\n{e}"));
        }
    }
}

/// The notebook and profiler windows.
pub struct NotebookUiPlugin;

impl Plugin for NotebookUiPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(bevy_egui::EguiPrimaryContextPass, (notebook_window, profiler_window));
    }
}

#[allow(clippy::too_many_arguments)]
fn notebook_window(
    mut contexts: bevy_egui::EguiContexts,
    mut tools: ResMut<ToolWindows>,
    mut nb: ResMut<Notebook>,
    scene: Res<CurrentScene>,
    history: Res<SimHistory>,
    worker: Option<Res<SimWorker>>,
    mut commands: ResMut<SimCommands>,
) -> Result {
    let _cost = cost_scope();
    if !tools.notebook {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let mut open = true;
    let recording = worker.as_ref().and_then(|w| w.recording.as_ref()).map(|r| (r.steps, r.events.len()));
    egui::Window::new("Record & export").open(&mut open).default_width(340.0).default_pos([860.0, 80.0]).show(&ctx, |u| {
        u.heading("Record");
        u.horizontal(|u| {
            u.label("file");
            u.text_edit_singleline(&mut nb.record_path);
        });
        u.horizontal(|u| match recording {
            Some((steps, inputs)) => {
                u.colored_label(egui::Color32::from_rgb(200, 40, 40), format!("REC {steps} steps, {inputs} inputs"));
                if u.button("Stop and save").clicked() {
                    commands.push(SimCommand::Record(false));
                }
            }
            None => {
                if u.button("Record").on_hover_text("Reset to the scene's initial state and record every input").clicked() {
                    let p = PathBuf::from(nb.record_path.trim());
                    nb.start_recording(p, &mut commands);
                }
            }
        });
        u.separator();
        u.heading("Replay");
        u.horizontal(|u| {
            u.label("file");
            u.text_edit_singleline(&mut nb.replay_path).on_hover_text(
                "A recording (.clrec), or a result CSV of this scene's robot: simulate's run, cito's trajectory.csv, mpc's trace.csv",
            );
        });
        u.horizontal(|u| {
            if u.add_enabled(!nb.busy(), egui::Button::new("Open")).clicked() {
                let p = PathBuf::from(nb.replay_path.trim());
                nb.open_replay(p, &scene.scene);
            }
            if nb.replay_label.is_some() {
                let label = if nb.playing { "pause" } else { "play" };
                if u.button(label).clicked() {
                    nb.playing = !nb.playing;
                    let (t0, t1) = (history.snapshots.front().map_or(0.0, |s| s.t), history.snapshots.back().map_or(0.0, |s| s.t));
                    let now = history.displayed().map_or(t0, |s| s.t);
                    nb.playhead = if now >= t1 { 0.0 } else { now - t0 };
                }
                u.label("speed");
                u.add(egui::DragValue::new(&mut nb.speed).range(0.05..=10.0).speed(0.05));
            }
        });
        if let Some(l) = &nb.replay_label {
            u.weak(l);
        }
        u.separator();
        u.heading("Export");
        u.horizontal(|u| {
            u.label("video");
            u.text_edit_singleline(&mut nb.video_path);
            u.label("fps");
            u.add(egui::DragValue::new(&mut nb.fps).range(1..=120));
        });
        if u
            .button("Export video of the history")
            .on_hover_text("MP4 through ffmpeg when it is installed, otherwise PNG frames beside the path")
            .clicked()
        {
            nb.video_request = Some(VideoRequest { path: PathBuf::from(nb.video_path.trim()), fps: nb.fps, exit: false });
        }
        if u.button("Copy keyframe").on_hover_text("The state on screen as a scene's `initial` section").clicked() {
            if let Some(s) = history.displayed() {
                let text = crate::scene::guess::keyframe_ron(&scene.scene.model, s.q.as_slice(), s.v.as_slice());
                ctx.copy_text(text.clone());
                nb.keyframe = text;
            }
        }
        if !nb.keyframe.is_empty() {
            egui::ScrollArea::vertical().max_height(120.0).show(u, |u| {
                u.add(egui::TextEdit::multiline(&mut nb.keyframe).code_editor().desired_width(f32::INFINITY));
            });
        }
        if let Some(m) = &nb.message {
            u.separator();
            u.label(m);
        }
    });
    tools.notebook = open;
    Ok(())
}

fn profiler_window(
    mut contexts: bevy_egui::EguiContexts,
    mut tools: ResMut<ToolWindows>,
    history: Res<SimHistory>,
    profile: Res<super::sim::StepProfile>,
    cost: Option<Res<super::capture::FrameCost>>,
) -> Result {
    let _cost = cost_scope();
    if !tools.profiler {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let mut open = true;
    egui::Window::new("Profiler").open(&mut open).default_width(420.0).default_pos([340.0, 420.0]).show(&ctx, |u| {
        super::plots::profiler(u, &history, &profile, cost.as_deref());
    });
    tools.profiler = open;
    Ok(())
}
