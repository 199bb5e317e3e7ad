//! `contactlab view`: the desktop app (behind the default `viewer` feature).

#[cfg(not(feature = "viewer"))]
use anyhow::bail;
use anyhow::Result;
use std::path::PathBuf;

/// `contactlab view`'s arguments (also the app's defaults without a subcommand).
#[derive(clap::Parser)]
pub struct ViewArgs {
    /// Scene file (RON), or a URDF to stand up on a guessed posture.
    pub scene: Option<PathBuf>,
    /// Render `--frames` frames, save a screenshot of the window here and exit.
    #[arg(long)]
    pub screenshot: Option<PathBuf>,
    /// Frames to render before the screenshot.
    #[arg(long, default_value_t = 30)]
    pub frames: u32,
    /// Start a gradient-quality sweep from the initial state and show its plot (with
    /// --screenshot: wait for it before the screenshot).
    #[arg(long)]
    pub sweep: bool,
    /// Window size in logical pixels.
    #[arg(long, default_value_t = 1280)]
    pub width: u32,
    #[arg(long, default_value_t = 800)]
    pub height: u32,
    /// Open a tool window at start: control (CITO and MPC), policy (learned policies and
    /// training) or contactnets (learned contact geometry against real tosses). Repeatable.
    #[arg(long, value_parser = ["control", "policy", "contactnets", "notebook", "profiler", "inspector"])]
    pub open: Vec<String>,
    /// Start each opened tool's main job at once (control: MPC if the scene has an `mpc`
    /// section, else CITO; policy: run the loaded policy; contactnets: replay the toss).
    #[arg(long)]
    pub start: bool,
    /// A policy file (JSON) for the policy window.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// A learned ContactNets model (JSON) and a toss CSV for the contactnets window.
    #[arg(long)]
    pub model: Option<PathBuf>,
    #[arg(long)]
    pub toss: Option<PathBuf>,
    /// Record the run (from the scene's initial state) to this file (.clrec); saved every
    /// few seconds and when the window closes.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Open a recording (.clrec, replayed bit for bit) or a result CSV (`simulate`'s run,
    /// `cito`'s trajectory.csv, `mpc`'s trace.csv; of SCENE's robot) to scrub and play.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// With --replay: export the 3D view as a video (MP4 through ffmpeg when it is on the
    /// PATH, otherwise PNG frames in OUT_frames/) and exit.
    #[arg(long)]
    pub video: Option<PathBuf>,
    /// Video frame rate (frames per simulated second).
    #[arg(long, default_value_t = 30)]
    pub fps: u32,
}

#[cfg(feature = "viewer")]
pub fn view(a: ViewArgs) -> Result<()> {
    contactlab::app::run(contactlab::app::ViewerOptions {
        scene: a.scene,
        screenshot: a.screenshot,
        frames: a.frames,
        sweep: a.sweep,
        width: a.width,
        height: a.height,
        open: a.open,
        start: a.start,
        policy: a.policy,
        model: a.model,
        toss: a.toss,
        record: a.record,
        replay: a.replay,
        video: a.video,
        fps: a.fps,
    })
}

#[cfg(not(feature = "viewer"))]
pub fn view(a: ViewArgs) -> Result<()> {
    // Say what was asked for, so a headless build's user knows which run they did not get.
    let scene = a.scene;
    bail!(
        "cannot open {}: this build has no desktop app (built without the `viewer` feature).\n\
         Headless: contactlab simulate scenes/quadruped_stand.ron --duration 2 --out run.csv\n\
         (contactlab --help lists every command)",
        scene.map_or_else(|| "the default scene".to_string(), |p| p.display().to_string())
    )
}
