//! `contactlab view`: the desktop app (behind the default `viewer` feature).

#[cfg(not(feature = "viewer"))]
use anyhow::bail;
use anyhow::Result;
use std::path::PathBuf;

pub struct ViewArgs {
    pub scene: Option<PathBuf>,
    pub screenshot: Option<PathBuf>,
    pub frames: u32,
    pub sweep: bool,
    pub width: u32,
    pub height: u32,
    pub open: Vec<String>,
    pub start: bool,
    pub policy: Option<PathBuf>,
    pub model: Option<PathBuf>,
    pub toss: Option<PathBuf>,
    pub record: Option<PathBuf>,
    pub replay: Option<PathBuf>,
    pub video: Option<PathBuf>,
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
    let ViewArgs {
        scene,
        screenshot,
        frames,
        sweep,
        width,
        height,
        open,
        start,
        policy,
        model,
        toss,
        record,
        replay,
        video,
        fps,
    } = a;
    let _ = (screenshot, frames, sweep, width, height, open, start, policy, model, toss, record, replay, video, fps);
    bail!(
        "cannot open {}: this build has no desktop app (built without the `viewer` feature).\n\
         Headless: contactlab simulate scenes/quadruped_stand.ron --duration 2 --out run.csv\n\
         (contactlab --help lists every command)",
        scene.map_or_else(|| "the default scene".to_string(), |p| p.display().to_string())
    )
}
