//! Mouse pulls, as in MuJoCo's viewer: Ctrl + left-drag on a body grabs the point under the
//! cursor and pulls it with a spring towards the cursor, moving in the plane through the
//! grabbed point that faces the camera. The orbit camera is paused while egui or a drag has
//! the pointer.
//!
//! Picking casts the cursor ray against the robot's visual geometry (boxes by the slab test in
//! their own frame; spheres exactly; cylinders as their bounding boxes) in the snapshot on
//! screen.

use super::sim::{DragPull, SimCommand, SimCommands, SimHistory};
use super::view::MainCamera;
use super::{cost_scope, from_bevy, AppSet, CurrentScene};
use crate::model::Shape;
use bevy::prelude::*;
use bevy::window::PrimaryWindow;
use bevy_egui::input::EguiWantsInput;
use bevy_panorbit_camera::PanOrbitCamera;
use nalgebra::Vector3;

/// Spring settings of the mouse pull (UI-editable).
#[derive(Resource, Clone, Copy, Debug)]
pub struct DragSettings {
    /// Stiffness per kilogram of robot (N/m/kg), so one setting suits a box and a quadruped.
    pub stiffness_per_kg: f64,
    /// Damping ratio-like factor (N s/m/kg).
    pub damping_per_kg: f64,
    /// Force limit in multiples of the robot's weight.
    pub max_weight_fraction: f64,
}

impl Default for DragSettings {
    fn default() -> Self {
        Self { stiffness_per_kg: 60.0, damping_per_kg: 4.0, max_weight_fraction: 2.0 }
    }
}

/// The grab in progress.
#[derive(Resource, Default)]
struct Grab(Option<Grabbed>);

#[derive(Clone, Copy)]
struct Grabbed {
    body: usize,
    point: Vector3<f64>,
    /// Distance from the camera along its forward axis to the grab plane (Bevy units).
    depth: f32,
}

pub struct PickPlugin;

impl Plugin for PickPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DragSettings>().init_resource::<Grab>().add_systems(Update, drag.in_set(AppSet::Input));
    }
}

/// Distance along `ray` to the geometry, in its local frame (z-up world units).
fn hit_shape(shape: &Shape, o: &Vector3<f64>, d: &Vector3<f64>) -> Option<f64> {
    let half = match *shape {
        Shape::Sphere { radius } => {
            let b = o.dot(d);
            let c = o.norm_squared() - radius * radius;
            let disc = b * b - c;
            return (disc >= 0.0).then(|| -b - disc.sqrt()).filter(|t| *t > 0.0);
        }
        Shape::Box { size } => Vector3::from(size) * 0.5,
        Shape::Cylinder { radius, length } => Vector3::new(radius, radius, 0.5 * length),
    };
    let (mut t0, mut t1) = (f64::NEG_INFINITY, f64::INFINITY);
    for a in 0..3 {
        if d[a].abs() < 1e-12 {
            if o[a].abs() > half[a] {
                return None;
            }
            continue;
        }
        let (ta, tb) = ((-half[a] - o[a]) / d[a], (half[a] - o[a]) / d[a]);
        t0 = t0.max(ta.min(tb));
        t1 = t1.min(ta.max(tb));
    }
    (t0 <= t1 && t0 > 0.0).then_some(t0)
}

#[allow(clippy::too_many_arguments)]
fn drag(
    buttons: Res<ButtonInput<MouseButton>>,
    keys: Res<ButtonInput<KeyCode>>,
    window: Query<&Window, With<PrimaryWindow>>,
    mut camera: Query<(&Camera, &GlobalTransform, &mut PanOrbitCamera), With<MainCamera>>,
    egui: Option<Res<EguiWantsInput>>,
    history: Res<SimHistory>,
    scene: Res<CurrentScene>,
    settings: Res<DragSettings>,
    mut grab: ResMut<Grab>,
    mut commands: ResMut<SimCommands>,
) {
    let _cost = cost_scope();
    let Ok((cam, cam_t, mut orbit)) = camera.single_mut() else { return };
    let egui_wants = egui.is_some_and(|e| e.wants_any_pointer_input());
    let ctrl = keys.any_pressed([KeyCode::ControlLeft, KeyCode::ControlRight]);
    // Shift + drag belongs to the Control window's target (control.rs).
    let shift = keys.any_pressed([KeyCode::ShiftLeft, KeyCode::ShiftRight]);
    let enabled = !egui_wants && grab.0.is_none() && !ctrl && !shift;
    if orbit.enabled != enabled {
        orbit.enabled = enabled;
    }
    if buttons.just_released(MouseButton::Left) && grab.0.take().is_some() {
        commands.push(SimCommand::Drag(None));
        return;
    }
    let Ok(window) = window.single() else { return };
    let Some(cursor) = window.cursor_position() else { return };
    let cursor = match cam.logical_viewport_rect() {
        Some(r) => cursor - r.min,
        None => cursor,
    };
    let Ok(ray) = cam.viewport_to_world(cam_t, cursor) else { return };
    let Some(snap) = history.displayed() else { return };
    let origin = from_bevy(ray.origin);
    let dir = from_bevy(*ray.direction);
    if buttons.just_pressed(MouseButton::Left) && ctrl && !egui_wants {
        let model = &scene.scene.model;
        let mut best: Option<(f64, usize)> = None;
        for g in &model.geometries {
            let Some(body) = snap.bodies.get(g.body) else { continue };
            let pose = body.compose(&g.placement);
            let o = pose.rot.transpose() * (origin - pose.trans);
            let d = pose.rot.transpose() * dir;
            if let Some(t) = hit_shape(&g.shape, &o, &d) {
                if best.is_none_or(|(bt, _)| t < bt) {
                    best = Some((t, g.body));
                }
            }
        }
        if let Some((t, body)) = best {
            let p = origin + dir * t;
            let local = snap.bodies[body].rot.transpose() * (p - snap.bodies[body].trans);
            let depth = (super::to_bevy(&p) - cam_t.translation()).dot(*cam_t.forward());
            grab.0 = Some(Grabbed { body, point: local, depth });
        }
    }
    if let Some(g) = grab.0 {
        if !buttons.pressed(MouseButton::Left) {
            grab.0 = None;
            commands.push(SimCommand::Drag(None));
            return;
        }
        // Where the ray meets the plane at the grab's depth, facing the camera.
        let fwd = *cam_t.forward();
        let denom = ray.direction.dot(fwd);
        if denom.abs() < 1e-6 {
            return;
        }
        let s = (g.depth - (ray.origin - cam_t.translation()).dot(fwd)) / denom;
        let target = from_bevy(ray.origin + *ray.direction * s);
        let mass = scene.scene.model.total_mass().max(1e-3);
        let weight = mass * scene.scene.model.gravity.norm().max(1.0);
        commands.push(SimCommand::Drag(Some(DragPull {
            body: g.body,
            point: g.point,
            target,
            stiffness: settings.stiffness_per_kg * mass,
            damping: settings.damping_per_kg * mass,
            max_force: settings.max_weight_fraction * weight,
        })));
    }
}
