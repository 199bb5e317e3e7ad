//! The app as a person sees it: opens the quadruped scene in a real window under Xvfb (Mesa's
//! software Vulkan), renders with every overlay on, saves a screenshot and exits; the test
//! checks the exit status and that the picture is not blank (pixel statistics).
//!
//! Needs `xvfb-run` (Debian: xvfb, mesa-vulkan-drivers, libvulkan1; `.ci/run` installs them)
//! unless a display is already set.
#![cfg(feature = "viewer")]

use std::path::Path;
use std::process::Command;

/// `contactlab view ARGS --screenshot OUT`.
fn run_view(args: &[&str], out: &Path) -> std::process::Output {
    let out = out.to_str().expect("a UTF-8 path");
    let mut all = args.to_vec();
    all.extend(["--screenshot", out]);
    run_view_plain(&all)
}

/// Mean and standard deviation of the luminance, and the number of distinct colours on a
/// coarse grid.
fn pixel_stats(path: &Path) -> (f64, f64, usize, (u32, u32)) {
    let bytes = std::fs::read(path).expect("screenshot exists");
    let decoder = png_decoder(&bytes);
    let (w, h, rgb) = decoder;
    let n = (w * h) as f64;
    let lum: Vec<f64> =
        rgb.chunks(3).map(|p| 0.2126 * p[0] as f64 + 0.7152 * p[1] as f64 + 0.0722 * p[2] as f64).collect();
    let mean = lum.iter().sum::<f64>() / n;
    let sd = (lum.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n).sqrt();
    let mut colours = std::collections::HashSet::new();
    for p in rgb.chunks(3) {
        colours.insert((p[0] / 16, p[1] / 16, p[2] / 16));
    }
    (mean, sd, colours.len(), (w, h))
}

/// Decodes the PNG the app wrote, as 8-bit RGB.
fn png_decoder(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let img = image::load_from_memory(bytes).expect("a valid PNG").to_rgb8();
    (img.width(), img.height(), img.into_raw())
}

#[test]
fn quadruped_scene_renders_with_overlays_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("overview.png");
    let o = run_view(&["scenes/quadruped_stand.ron", "--frames", "12"], &out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "the app failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", o.status);
    assert!(out.exists(), "no screenshot\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let (mean, sd, colours, (w, h)) = pixel_stats(&out);
    assert!(w >= 640 && h >= 480, "screenshot is {w} x {h}");
    // A blank (or black) frame has one colour and no contrast; the scene, the robot, the
    // overlays and the panels give many.
    assert!(mean > 20.0 && mean < 250.0, "mean luminance {mean}");
    assert!(sd > 15.0, "luminance deviation {sd}: looks blank");
    assert!(colours > 40, "only {colours} distinct colours: looks blank");
    assert!(stdout.contains("frame cost of our systems"), "no frame-cost report:\n{stdout}");
    assert!(out.with_extension("frame_cost.json").exists());
}

/// `contactlab view ARGS` under Xvfb (unless a display is set).
fn run_view_plain(args: &[&str]) -> std::process::Output {
    let exe = env!("CARGO_BIN_EXE_contactlab");
    let mut cmd = if std::env::var_os("DISPLAY").is_some() {
        Command::new(exe)
    } else {
        let mut c = Command::new("xvfb-run");
        c.args(["-a", "-s", "-screen 0 1280x800x24", exe]);
        c
    };
    cmd.arg("view").args(args);
    cmd.output().unwrap_or_else(|e| {
        panic!("cannot start the app ({e}); install xvfb, mesa-vulkan-drivers and libvulkan1 (see .ci/run)")
    })
}

#[test]
fn go1_opens_from_its_urdf_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("go1.png");
    let o = run_view(
        &["../shared/fixtures/rbd/urdf/go1.urdf", "--frames", "60", "--width", "800", "--height", "600"],
        &out,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "the app failed on go1.urdf: {stderr}");
    // It stands: after the frames rendered (seconds of simulated time), the trunk is up.
    let line = stdout.lines().find(|l| l.starts_with("shown:")).expect("the shown state");
    let t: f64 = line.split("t = ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let z: f64 = line.split("base height ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(t > 0.5 && z > 0.25, "go1 at t = {t} s has its trunk at {z} m: {line}");
    let (_, sd, colours, _) = pixel_stats(&out);
    assert!(sd > 10.0 && colours > 20, "blank picture: sd {sd}, {colours} colours");
}

/// A 2 s replay exported at 10 fps is a playable MP4 of 20 frames (ffprobe counts them), or,
/// without ffmpeg, 20 PNG frames.
#[test]
fn a_replay_exports_a_video_of_the_right_length() {
    use contactlab::app::record::Recording;
    let dir = tempfile::tempdir().unwrap();
    let scene = contactlab::scene::Scene::load(Path::new("scenes/quadruped_push_over.ron")).unwrap();
    let mut rec = Recording::start(&scene).unwrap();
    rec.steps = (2.0 / scene.settings.dt).round() as u64;
    let clrec = dir.path().join("run.clrec");
    rec.save(&clrec).unwrap();
    let video = dir.path().join("run.mp4");
    let o = run_view_plain(&[
        "--replay",
        clrec.to_str().unwrap(),
        "--video",
        video.to_str().unwrap(),
        "--fps",
        "10",
        "--width",
        "640",
        "--height",
        "480",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "export failed: {stderr}\n{stdout}");
    assert!(stdout.contains("(20 frames at 10 fps)"), "{stdout}");
    let ffprobe = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=nb_read_frames,duration",
        ])
        .args(["-of", "default=noprint_wrappers=1"])
        .arg(&video)
        .output();
    match ffprobe {
        Ok(p) if p.status.success() => {
            let s = String::from_utf8_lossy(&p.stdout);
            assert!(s.contains("nb_read_frames=20"), "ffprobe: {s}");
            assert!(s.contains("duration=2.0"), "ffprobe: {s}");
        }
        _ => {
            let frames = std::fs::read_dir(dir.path().join("run_frames")).expect("PNG frames").count();
            assert_eq!(frames, 20);
        }
    }
}
