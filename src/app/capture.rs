//! Frame-cost diagnostics and the headless screenshot mode.
//!
//! Every frame, the time spent in our own systems ([`super::cost_scope`]) goes to the Bevy
//! diagnostic [`OUR_SYSTEMS_MS`] and to [`FrameCost`]; the UI shows its smoothed value.
//!
//! `contactlab view SCENE --screenshot out.png --frames N` renders `N` frames (and, with
//! `--sweep`, until the gradient sweep has finished), saves the window to `out.png` (written
//! to a temporary file and renamed), prints the frame-cost statistics, writes them to
//! `out.frame_cost.json` and exits.

use super::sweep::SweepState;
use super::{take_frame_cost_ms, ViewerOptions};
use bevy::diagnostic::{Diagnostic, DiagnosticPath, Diagnostics, RegisterDiagnostic};
use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured};
use std::path::Path;

/// Milliseconds per frame spent in our own systems (main thread).
pub const OUR_SYSTEMS_MS: DiagnosticPath = DiagnosticPath::const_new("contactlab/our_systems_ms");

/// Per-frame cost of our systems (ms), every frame since start.
#[derive(Resource, Default, Debug)]
pub struct FrameCost {
    pub frames: Vec<f64>,
}

impl FrameCost {
    /// Median, 95th percentile and maximum (ms), skipping the first `skip` frames (start-up:
    /// mesh and pipeline creation).
    pub fn stats(&self, skip: usize) -> Option<(f64, f64, f64, usize)> {
        let mut v: Vec<f64> = self.frames.iter().skip(skip).copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        Some((at(0.5), at(0.95), v[v.len() - 1], v.len()))
    }
}

#[derive(Resource, Default)]
struct ShotState {
    frame: u32,
    requested: bool,
}

pub struct CapturePlugin;

impl Plugin for CapturePlugin {
    fn build(&self, app: &mut App) {
        app.register_diagnostic(Diagnostic::new(OUR_SYSTEMS_MS).with_suffix(" ms"))
            .init_resource::<FrameCost>()
            .init_resource::<ShotState>()
            .add_systems(Last, (record_frame_cost, screenshot_when_ready).chain());
    }
}

fn record_frame_cost(mut diagnostics: Diagnostics, mut cost: ResMut<FrameCost>) {
    let ms = take_frame_cost_ms();
    diagnostics.add_measurement(&OUR_SYSTEMS_MS, || ms);
    cost.frames.push(ms);
}

/// Frames skipped by the statistics (start-up).
const WARMUP_FRAMES: usize = 5;

fn screenshot_when_ready(
    mut commands: Commands,
    opts: Res<ViewerOptions>,
    mut state: ResMut<ShotState>,
    sweep: Res<SweepState>,
    history: Res<super::sim::SimHistory>,
    mut exit: MessageWriter<AppExit>,
) {
    let Some(path) = opts.screenshot.clone() else { return };
    state.frame += 1;
    if state.requested {
        // A screenshot that never arrives must not hang a test.
        if state.frame > opts.frames + 600 {
            eprintln!("error: the screenshot was not captured");
            exit.write(AppExit::error());
        }
        return;
    }
    let sweep_pending = opts.sweep && (sweep.busy() || sweep.finished == 0) && sweep.error.is_none();
    if state.frame < opts.frames || (sweep_pending && state.frame < opts.frames + 2000) {
        return;
    }
    state.requested = true;
    // What was on screen, for tests that check the robot as well as the picture.
    if let Some(s) = history.displayed() {
        if s.q.len() >= 7 {
            println!("shown: t = {:.3} s, base height {:.4} m", s.t, s.q[2]);
        }
    }
    commands.spawn(Screenshot::primary_window()).observe(
        move |shot: On<ScreenshotCaptured>, cost: Res<FrameCost>, mut exit: MessageWriter<AppExit>| {
            let ok = match save_atomic(&shot.image, &path) {
                Ok(()) => {
                    println!("screenshot: {}", path.display());
                    true
                }
                Err(e) => {
                    eprintln!("error: {}: {e}", path.display());
                    false
                }
            };
            report(&cost, &path);
            exit.write(if ok { AppExit::Success } else { AppExit::error() });
        },
    );
}

fn save_atomic(image: &Image, path: &Path) -> Result<(), String> {
    let img = image.clone().try_into_dynamic().map_err(|e| format!("cannot convert the frame: {e:?}"))?;
    crate::io::write_atomic_with(path, |tmp| img.to_rgb8().save(tmp)).map_err(|e| format!("cannot write: {e}"))
}

fn report(cost: &FrameCost, path: &Path) {
    let Some((median, p95, max, n)) = cost.stats(WARMUP_FRAMES) else { return };
    println!("frame cost of our systems: median {median:.3} ms, p95 {p95:.3} ms, max {max:.3} ms over {n} frames");
    let json = format!(
        "{{\n  \"frames\": {n},\n  \"our_systems_ms_median\": {median},\n  \"our_systems_ms_p95\": {p95},\n  \"our_systems_ms_max\": {max}\n}}\n"
    );
    let out = path.with_extension("frame_cost.json");
    if let Err(e) = crate::io::write_atomic(&out, json.as_bytes()) {
        eprintln!("error: {}: {e}", out.display());
    }
}
