//! The Control window's 3D drawing: ghost robots (stick figures from forward kinematics of
//! planned states), foot traces and targets as gizmos, and Shift + left drag on the ground to
//! move the target.

use super::state::{offset_pose, slider_target, CitoState, ControlSettings, MpcLink, Pose, MPC_DRIVER};
use crate::app::sim::{SimCommand, SimCommands, SimHistory, SimWorker};
use crate::app::{cost_scope, from_bevy, rot_to_bevy, to_bevy, CurrentScene, ToolWindows};
use crate::model::{Data, Model, Shape};
use bevy::prelude::*;
use nalgebra::{Matrix3, Vector3};

/// A robot drawn as a stick figure at a sequence of states: per state, each body's origin and
/// each foot's contact point in the world, and the base placement.
#[derive(Clone, Debug, Default)]
pub struct Ghost {
    pub bodies: Vec<Vec<Vector3<f64>>>,
    pub feet: Vec<Vec<Vector3<f64>>>,
    pub base: Vec<Pose>,
    /// Parent body of each body, and the body of each foot.
    pub parents: Vec<Option<usize>>,
    pub foot_bodies: Vec<usize>,
    /// The trunk's box (size, placement in the base frame), if it has one.
    pub trunk: Option<([f64; 3], crate::spatial::Se3)>,
}

/// The base body's box (size, placement in the base frame), if it has one.
fn trunk_box(model: &Model) -> Option<([f64; 3], crate::spatial::Se3)> {
    model.geometries.iter().find_map(|geo| match geo.shape {
        Shape::Box { size } if geo.body == 0 => Some((size, geo.placement)),
        _ => None,
    })
}

impl Ghost {
    /// Forward kinematics of each state `x = (q, v)` (only `q` is read).
    pub fn from_states<X: AsRef<[f64]>>(model: &Model, xs: &[X]) -> Ghost {
        let mut data = Data::new(model);
        let feet: Vec<usize> =
            (0..model.contact_points.len()).filter(|&k| model.contact_points[k].name.ends_with("foot")).collect();
        let mut g = Ghost {
            parents: model.joints.iter().map(|j| j.parent).collect(),
            foot_bodies: feet.iter().map(|&k| model.contact_points[k].body).collect(),
            trunk: trunk_box(model),
            ..Default::default()
        };
        for x in xs {
            let q = &x.as_ref()[..model.nq];
            crate::dynamics::forward_kinematics(model, &mut data, q, None);
            g.bodies.push(data.o_m_i.iter().map(|m| m.trans).collect());
            g.feet.push(
                feet.iter()
                    .map(|&k| {
                        let c = &model.contact_points[k];
                        data.o_m_i[c.body].act_point(&c.position)
                    })
                    .collect(),
            );
            let b = &data.o_m_i[0];
            g.base.push((b.trans, b.rot));
        }
        g
    }

    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Draws state `i` as lines (and the trunk box).
    fn draw(&self, gizmos: &mut Gizmos, i: usize, color: Color) {
        let Some(bodies) = self.bodies.get(i) else { return };
        for (b, p) in self.parents.iter().enumerate() {
            if let Some(p) = p {
                gizmos.line(to_bevy(&bodies[*p]), to_bevy(&bodies[b]), color);
            }
        }
        for (f, &b) in self.foot_bodies.iter().enumerate() {
            let foot = self.feet[i][f];
            gizmos.line(to_bevy(&bodies[b]), to_bevy(&foot), color);
            gizmos.sphere(Isometry3d::from_translation(to_bevy(&foot)), 0.015, color).resolution(8);
        }
        if let Some((size, placement)) = &self.trunk {
            let (p, r) = &self.base[i];
            draw_box(gizmos, p, r, size, placement, color);
        }
    }

    /// Each foot's path over the states.
    fn draw_traces(&self, gizmos: &mut Gizmos, color: Color) {
        for f in 0..self.foot_bodies.len() {
            gizmos.linestrip(self.feet.iter().map(|fs| to_bevy(&fs[f])), color);
        }
        gizmos.linestrip(self.base.iter().map(|(p, _)| to_bevy(p)), color);
    }
}

/// A box of `size` at `placement` in the frame `(p, r)`, as a wire cube.
fn draw_box(
    gizmos: &mut Gizmos,
    p: &Vector3<f64>,
    r: &Matrix3<f64>,
    size: &[f64; 3],
    placement: &crate::spatial::Se3,
    color: Color,
) {
    let centre = p + r * placement.trans;
    let rot = r * placement.rot;
    // A body point b is C b = (bx, bz, -by) in the Bevy-local frame of `rot_to_bevy(rot)`, so
    // the box's extents along Bevy's local axes are (sx, sz, sy).
    let t = Transform {
        translation: to_bevy(&centre),
        rotation: rot_to_bevy(&rot),
        scale: Vec3::new(size[0] as f32, size[2] as f32, size[1] as f32),
    };
    gizmos.cube(t, color);
}

/// Shift + left drag on the ground moves the MPC target (or, without MPC, the CITO target)
/// horizontally, at the target's height.
#[derive(Resource, Default)]
pub(super) struct TargetDrag {
    active: bool,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn drag_target(
    buttons: Res<ButtonInput<MouseButton>>,
    keys: Res<ButtonInput<KeyCode>>,
    window: Query<&Window, With<bevy::window::PrimaryWindow>>,
    camera: Query<(&Camera, &GlobalTransform), With<crate::app::view::MainCamera>>,
    egui: Option<Res<bevy_egui::input::EguiWantsInput>>,
    tools: Res<ToolWindows>,
    worker: Option<Res<SimWorker>>,
    history: Res<SimHistory>,
    link: Res<MpcLink>,
    mut settings: Option<ResMut<ControlSettings>>,
    mut drag: ResMut<TargetDrag>,
    mut commands: ResMut<SimCommands>,
) {
    let _cost = cost_scope();
    let Some(settings) = settings.as_mut() else { return };
    let shift = keys.any_pressed([KeyCode::ShiftLeft, KeyCode::ShiftRight]);
    if !buttons.pressed(MouseButton::Left) || !shift || !tools.control {
        drag.active = false;
        return;
    }
    if buttons.just_pressed(MouseButton::Left) {
        drag.active = !egui.is_some_and(|e| e.wants_any_pointer_input());
    }
    if !drag.active {
        return;
    }
    let (Ok(window), Ok((cam, cam_t))) = (window.single(), camera.single()) else { return };
    let Some(cursor) = window.cursor_position() else { return };
    let cursor = match cam.logical_viewport_rect() {
        Some(r) => cursor - r.min,
        None => cursor,
    };
    let Ok(ray) = cam.viewport_to_world(cam_t, cursor) else { return };
    let (o, d) = (from_bevy(ray.origin), from_bevy(*ray.direction));
    let mpc = worker.as_ref().and_then(|w| w.driver()) == Some(MPC_DRIVER);
    let home = if mpc {
        link.snapshot().home
    } else {
        history.displayed().and_then(|s| s.bodies.first()).map(|b| (b.trans, b.rot))
    };
    let Some(home) = home else { return };
    let offset = if mpc { settings.mpc_offset } else { settings.cito.target_offset };
    let z = home.0.z + offset[2];
    if d.z.abs() < 1e-6 {
        return;
    }
    let s = (z - o.z) / d.z;
    if s <= 0.0 {
        return;
    }
    let hit = o + d * s;
    let new = [hit.x - home.0.x, hit.y - home.0.y, offset[2]];
    if mpc {
        settings.mpc_offset = new;
        let t = slider_target(settings, &home);
        commands.push(SimCommand::SetTarget(t.0, t.1));
    } else {
        settings.cito.target_offset = new;
    }
}

/// Ghosts, traces and targets.
#[allow(clippy::too_many_arguments)]
pub(super) fn draw(
    mut gizmos: Gizmos,
    time: Res<Time>,
    tools: Res<ToolWindows>,
    settings: Option<Res<ControlSettings>>,
    mut cito: ResMut<CitoState>,
    link: Res<MpcLink>,
    worker: Option<Res<SimWorker>>,
    history: Res<SimHistory>,
    scene: Res<CurrentScene>,
) {
    let _cost = cost_scope();
    let Some(settings) = settings else { return };
    if !tools.control {
        return;
    }
    let target_color = Color::srgb(0.95, 0.75, 0.1);
    let trunk = trunk_box(&scene.scene.model);
    let draw_target = |gizmos: &mut Gizmos, (p, r): &Pose| {
        let t = Transform { translation: to_bevy(p), rotation: rot_to_bevy(r), scale: Vec3::ONE };
        gizmos.axes(t, 0.15);
        if let Some((size, placement)) = &trunk {
            draw_box(gizmos, p, r, size, placement, target_color);
        } else {
            gizmos.sphere(Isometry3d::from_translation(to_bevy(p)), 0.03, target_color);
        }
    };
    let mpc = worker.as_ref().and_then(|w| w.driver()) == Some(MPC_DRIVER);
    if mpc {
        let t = link.snapshot();
        if let Some(target) = &t.target {
            draw_target(&mut gizmos, target);
        }
        if let (Some(plan), true) = (&t.plan, settings.show_ghost) {
            let c = Color::srgba(0.2, 0.6, 1.0, 0.9);
            if settings.show_traces {
                plan.draw_traces(&mut gizmos, c);
            }
            plan.draw(&mut gizmos, plan.len().saturating_sub(1), c);
        }
        return;
    }
    // CITO: the running solve's target, or the finished plan.
    if cito.busy() {
        if let Some(t) = &cito.pending_target {
            draw_target(&mut gizmos, t);
        }
        return;
    }
    if let Some(run) = &cito.result {
        draw_target(&mut gizmos, &run.target);
        if settings.show_ghost && !run.ghost.is_empty() {
            let n = run.ghost.len();
            let dt = run.report.knots.get(1).map_or(0.01, |k| k.t).max(1e-3);
            let i = if settings.animate {
                // Real time through the plan, a short pause on its last knot, repeat.
                let period = n as f64 * dt + 0.5;
                ((cito.anim % period) / dt).floor() as usize
            } else {
                settings.ghost_knot
            }
            .min(n - 1);
            let c = Color::srgba(0.2, 0.6, 1.0, 0.9);
            if settings.show_traces {
                run.ghost.draw_traces(&mut gizmos, Color::srgba(0.2, 0.6, 1.0, 0.6));
            }
            run.ghost.draw(&mut gizmos, i, c);
            // Feet in contact at this knot, by the report's schedule.
            if let Some(k) = run.report.knots.get(i) {
                for (f, p) in k.feet.iter().enumerate() {
                    if k.contact.get(f).copied().unwrap_or(false) {
                        let p = Vector3::new(p[0], p[1], p[2]);
                        gizmos.sphere(Isometry3d::from_translation(to_bevy(&p)), 0.025, Color::srgb(0.1, 0.75, 0.25));
                    }
                }
            }
        }
        cito.anim += time.delta_secs_f64();
    } else if let Some(s) = history.displayed().and_then(|s| s.bodies.first()) {
        // Before any solve: where the sliders put the target.
        let target = offset_pose(&(s.trans, s.rot), settings.cito.target_offset, settings.cito.target_rpy);
        draw_target(&mut gizmos, &target);
    }
}
