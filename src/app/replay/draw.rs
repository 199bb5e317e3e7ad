//! The ContactNets window's 3D drawing: the real toss and the model's rollout as cube
//! wireframes side by side (or overlaid), their centre paths, the learned vertices' errors and
//! the board under them; and aiming the orbit camera at them.

use super::state::{ReplayPlayback, ReplayState, ReplayView};
use crate::app::{cost_scope, to_bevy, ToolWindows};
use crate::learn::contactnets::model::{Method, Pose};
use bevy::prelude::*;
use nalgebra::Vector3;

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

pub(super) fn draw(
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
pub(super) fn focus_camera(
    mut state: ResMut<ReplayState>,
    view: Res<ReplayView>,
    mut camera: Query<&mut bevy_panorbit_camera::PanOrbitCamera, With<crate::app::view::MainCamera>>,
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
