//! Video export of the 3D view: the history (a live run, or a replay) is stepped through at the
//! requested frame rate of simulated time, each entry shown, rendered and captured
//! (`Screenshot::primary_window`, cropped to the 3D view's viewport), and the frames go to
//! `ffmpeg` (H.264 MP4, `yuv420p`) when it is on the PATH, or else to numbered PNG files in
//! `<path stem>_frames/`. The MP4 is written to a temporary name and renamed when ffmpeg
//! finished successfully, so an interrupted export leaves no half file under the asked name.
//!
//! One frame is in flight at a time: move the cursor, let two frames render it, capture,
//! write, next. In software rendering (Xvfb, lavapipe) that is about 2 captured frames per
//! second at 1280x800.

use super::notebook::{video_frames, Notebook, VideoRequest};
use super::sim::{SimCommand, SimCommands, SimHistory};
use super::view::MainCamera;
use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// Frames rendered between moving the cursor and capturing.
const SETTLE_FRAMES: u8 = 2;

enum Sink {
    Ffmpeg { child: Child, tmp: PathBuf, size: (u32, u32) },
    Pngs { dir: PathBuf },
}

struct Export {
    request: VideoRequest,
    frames: Vec<usize>,
    next: usize,
    wait: u8,
    in_flight: bool,
    inbox: Arc<Mutex<Option<Image>>>,
    sink: Option<Sink>,
    /// The tool windows, closed during the export (they float over the 3D view).
    windows: super::ToolWindows,
}

/// The export in progress and what the last one did.
#[derive(Resource, Default)]
pub struct VideoExport {
    job: Option<Export>,
    /// Frames written by the last finished export, and where.
    pub last: Option<(usize, PathBuf)>,
    pub finished: u64,
}

impl VideoExport {
    pub fn busy(&self) -> bool {
        self.job.is_some()
    }

    /// Frames written and total of the running export.
    pub fn progress(&self) -> Option<(usize, usize)> {
        self.job.as_ref().map(|j| (j.next, j.frames.len()))
    }
}

pub struct VideoPlugin;

impl Plugin for VideoPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<VideoExport>().add_systems(Last, drive);
    }
}

fn ffmpeg_available() -> bool {
    Command::new("ffmpeg")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The 3D view's part of a window capture, as RGB bytes.
fn crop_rgb(image: &Image, viewport: Option<(UVec2, UVec2)>) -> Result<(u32, u32, Vec<u8>), String> {
    let img = image.clone().try_into_dynamic().map_err(|e| format!("cannot convert the frame: {e:?}"))?.to_rgb8();
    let (w, h) = img.dimensions();
    let (pos, size) = viewport.unwrap_or((UVec2::ZERO, UVec2::new(w, h)));
    let x = pos.x.min(w);
    let y = pos.y.min(h);
    // Even sizes for yuv420p.
    let cw = (size.x.min(w - x)) & !1;
    let ch = (size.y.min(h - y)) & !1;
    if cw == 0 || ch == 0 {
        return Err("the 3D view has no area".into());
    }
    let sub = image::imageops::crop_imm(&img, x, y, cw, ch).to_image();
    Ok((cw, ch, sub.into_raw()))
}

fn open_sink(req: &VideoRequest, size: (u32, u32)) -> Result<Sink, String> {
    if ffmpeg_available() {
        let tmp = req.path.with_extension("partial.mp4");
        let child = Command::new("ffmpeg")
            .args(["-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s"])
            .arg(format!("{}x{}", size.0, size.1))
            .args(["-r", &req.fps.to_string(), "-i", "-", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-f", "mp4"])
            .arg(&tmp)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start ffmpeg: {e}"))?;
        Ok(Sink::Ffmpeg { child, tmp, size })
    } else {
        let stem = req.path.file_stem().map_or("video".into(), |s| s.to_string_lossy().into_owned());
        let dir = req.path.with_file_name(format!("{stem}_frames"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Sink::Pngs { dir })
    }
}

fn write_frame(sink: &mut Sink, k: usize, w: u32, h: u32, rgb: Vec<u8>) -> Result<(), String> {
    match sink {
        Sink::Ffmpeg { child, size, .. } => {
            if (w, h) != *size {
                return Err(format!("the 3D view changed size during the export ({}x{} -> {w}x{h})", size.0, size.1));
            }
            child.stdin.as_mut().ok_or("ffmpeg has no input")?.write_all(&rgb).map_err(|e| format!("ffmpeg: {e}"))
        }
        Sink::Pngs { dir } => {
            let img = image::RgbImage::from_raw(w, h, rgb).ok_or("bad frame")?;
            let path = dir.join(format!("frame_{k:05}.png"));
            crate::io::write_atomic_with(&path, |tmp| img.save_with_format(tmp, image::ImageFormat::Png))
                .map_err(|e| format!("{}: {e}", path.display()))
        }
    }
}

fn finish(sink: Sink, req: &VideoRequest) -> Result<PathBuf, String> {
    match sink {
        Sink::Ffmpeg { mut child, tmp, .. } => {
            drop(child.stdin.take());
            let status = child.wait().map_err(|e| format!("ffmpeg: {e}"))?;
            if !status.success() {
                return Err(format!("ffmpeg failed ({status})"));
            }
            std::fs::rename(&tmp, &req.path).map_err(|e| format!("{}: {e}", req.path.display()))?;
            Ok(req.path.clone())
        }
        Sink::Pngs { dir } => Ok(dir),
    }
}

#[allow(clippy::too_many_arguments)]
fn drive(
    mut commands: Commands,
    mut export: ResMut<VideoExport>,
    mut nb: ResMut<Notebook>,
    mut history: ResMut<SimHistory>,
    mut sim_commands: ResMut<SimCommands>,
    camera: Query<&Camera, With<MainCamera>>,
    mut exit: MessageWriter<AppExit>,
    mut tools: ResMut<super::ToolWindows>,
) {
    let _cost = super::cost_scope();
    if export.job.is_none() {
        let Some(req) = nb.video_request.take() else { return };
        let frames = video_frames(&history.snapshots, req.fps);
        if frames.is_empty() {
            nb.message = Some("Nothing to export: the history is shorter than one frame.".into());
            if req.exit {
                eprintln!("error: nothing to export");
                exit.write(AppExit::error());
            }
            return;
        }
        sim_commands.push(SimCommand::Pause);
        nb.playing = false;
        let windows = std::mem::take(&mut *tools);
        export.job = Some(Export {
            windows,
            request: req,
            frames,
            next: 0,
            wait: 0,
            in_flight: false,
            inbox: Arc::new(Mutex::new(None)),
            sink: None,
        });
    }
    let viewport =
        camera.single().ok().and_then(|c| c.viewport.as_ref().map(|v| (v.physical_position, v.physical_size)));
    let job = export.job.as_mut().expect("job");
    let mut failed: Option<String> = None;
    if job.in_flight {
        let Some(image) = job.inbox.lock().ok().and_then(|mut i| i.take()) else { return };
        job.in_flight = false;
        match crop_rgb(&image, viewport) {
            Ok((w, h, rgb)) => {
                if job.sink.is_none() {
                    match open_sink(&job.request, (w, h)) {
                        Ok(s) => job.sink = Some(s),
                        Err(e) => failed = Some(e),
                    }
                }
                if let (None, Some(sink)) = (&failed, job.sink.as_mut()) {
                    if let Err(e) = write_frame(sink, job.next, w, h, rgb) {
                        failed = Some(e);
                    }
                }
                job.next += 1;
            }
            Err(e) => failed = Some(e),
        }
    } else if job.next < job.frames.len() {
        if job.wait == 0 {
            history.cursor = Some(job.frames[job.next]);
            job.wait = SETTLE_FRAMES + 1;
        }
        job.wait -= 1;
        if job.wait == 0 {
            job.in_flight = true;
            let inbox = job.inbox.clone();
            commands.spawn(Screenshot::primary_window()).observe(move |shot: On<ScreenshotCaptured>| {
                if let Ok(mut i) = inbox.lock() {
                    *i = Some(shot.image.clone());
                }
            });
        }
        return;
    }
    let done = job.next >= job.frames.len();
    if failed.is_none() && !done {
        return;
    }
    let job = export.job.take().expect("job");
    *tools = job.windows.clone();
    let n = job.next;
    let result = match (failed, job.sink) {
        (Some(e), _) => Err(e),
        (None, Some(sink)) => finish(sink, &job.request),
        (None, None) => Err("no frame was captured".into()),
    };
    export.finished += 1;
    match result {
        Ok(path) => {
            let m = format!("video: {} ({n} frames at {} fps)", path.display(), job.request.fps);
            println!("{m}");
            nb.message = Some(m);
            export.last = Some((n, path));
            if job.request.exit {
                exit.write(AppExit::Success);
            }
        }
        Err(e) => {
            eprintln!("error: video export: {e}");
            nb.message = Some(format!("Video export failed: {e}"));
            if job.request.exit {
                exit.write(AppExit::error());
            }
        }
    }
}
