//! Contact overlays on the snapshot on screen: per candidate near the terrain, the contact
//! frame (normal blue, first tangent red, second green), the friction cone `||l_t|| <= mu l_n`
//! as a translucent cone opening along the normal, the contact force `lambda / h` as an arrow
//! scaled by its magnitude, and the realized mode by colour (separated grey, sticking green,
//! sliding orange). Pulls and the mouse spring are magenta arrows from their body point.

use super::sim::{SimHistory, SimWorker};
use super::view::SceneEntity;
use super::{cost_scope, to_bevy, AppSet, CurrentScene};
use crate::contact::ContactMode;
use bevy::prelude::*;

/// Which overlays are drawn, and their scales. Written by the UI.
#[derive(Resource, Clone, Debug)]
pub struct OverlaySettings {
    pub frames: bool,
    pub cones: bool,
    pub forces: bool,
    pub modes: bool,
    pub pulls: bool,
    /// Arrow length per newton of contact force (m/N).
    pub force_scale: f64,
    /// Arrow length per newton of pull (m/N).
    pub pull_scale: f64,
    /// Height of the drawn cones (m).
    pub cone_height: f64,
    /// Candidates farther than this from the terrain are not drawn (m).
    pub show_within: f64,
    /// The orbit camera's focus follows the floating base (a walking robot stays in view).
    pub follow: bool,
}

impl Default for OverlaySettings {
    fn default() -> Self {
        Self {
            frames: true,
            cones: true,
            forces: true,
            modes: true,
            pulls: true,
            force_scale: 0.004,
            pull_scale: 0.004,
            cone_height: 0.07,
            show_within: 0.05,
            follow: false,
        }
    }
}

/// The colour of a contact mode (also used by the plots).
pub fn mode_color(mode: ContactMode) -> Color {
    match mode {
        ContactMode::Separated => Color::srgb(0.55, 0.55, 0.58),
        ContactMode::Sticking => Color::srgb(0.10, 0.75, 0.25),
        ContactMode::Sliding => Color::srgb(1.0, 0.50, 0.05),
    }
}

/// Cone entity of contact candidate `0`.
#[derive(Component)]
struct ContactCone(usize);

#[derive(Resource)]
struct ConeMaterials {
    mesh: Handle<Mesh>,
    by_mode: [Handle<StandardMaterial>; 3],
}

fn mode_index(m: ContactMode) -> usize {
    match m {
        ContactMode::Separated => 0,
        ContactMode::Sticking => 1,
        ContactMode::Sliding => 2,
    }
}

#[derive(Resource, Default)]
struct ConesBuilt(Option<u64>);

pub struct OverlayPlugin;

impl Plugin for OverlayPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<OverlaySettings>()
            .init_resource::<ConesBuilt>()
            .add_systems(Startup, init_cone_assets)
            .add_systems(Update, (spawn_cones, update_cones, draw_gizmos).chain().in_set(AppSet::Overlay));
    }
}

fn init_cone_assets(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let mat = |m: ContactMode| {
        let c = mode_color(m).to_srgba();
        StandardMaterial {
            base_color: Color::srgba(c.red, c.green, c.blue, 0.28),
            alpha_mode: AlphaMode::Blend,
            unlit: true,
            double_sided: true,
            cull_mode: None,
            ..default()
        }
    };
    let by_mode = [ContactMode::Separated, ContactMode::Sticking, ContactMode::Sliding].map(|m| materials.add(mat(m)));
    commands.insert_resource(ConeMaterials { mesh: meshes.add(Cone { radius: 1.0, height: 1.0 }), by_mode });
}

fn spawn_cones(
    mut commands: Commands,
    scene: Res<CurrentScene>,
    mut built: ResMut<ConesBuilt>,
    assets: Res<ConeMaterials>,
) {
    let _cost = cost_scope();
    if built.0 == Some(scene.generation) {
        return;
    }
    built.0 = Some(scene.generation);
    for i in 0..scene.scene.model.contact_points.len() {
        commands.spawn((
            SceneEntity,
            ContactCone(i),
            Mesh3d(assets.mesh.clone()),
            MeshMaterial3d(assets.by_mode[0].clone()),
            Transform::default(),
            Visibility::Hidden,
        ));
    }
}

fn update_cones(
    history: Res<SimHistory>,
    settings: Res<OverlaySettings>,
    assets: Res<ConeMaterials>,
    mut cones: Query<(&ContactCone, &mut Transform, &mut Visibility, &mut MeshMaterial3d<StandardMaterial>)>,
) {
    let _cost = cost_scope();
    let snap = history.displayed();
    for (cone, mut t, mut vis, mut mat) in &mut cones {
        let Some(c) = snap.and_then(|s| s.contacts.get(cone.0)) else {
            *vis = Visibility::Hidden;
            continue;
        };
        let show = settings.cones && c.phi < settings.show_within;
        let want = if show { Visibility::Visible } else { Visibility::Hidden };
        if *vis != want {
            *vis = want;
        }
        if !show {
            continue;
        }
        let h = settings.cone_height;
        let centre = c.point + c.normal * (0.5 * h);
        let new_t = Transform {
            translation: to_bevy(&centre),
            rotation: Quat::from_rotation_arc(Vec3::Y, -to_bevy(&c.normal).normalize()),
            scale: Vec3::new((c.mu * h) as f32, h as f32, (c.mu * h) as f32),
        };
        if *t != new_t {
            *t = new_t;
        }
        let m = &assets.by_mode[mode_index(c.mode)];
        if mat.0 != *m {
            mat.0 = m.clone();
        }
    }
}

fn draw_gizmos(
    mut gizmos: Gizmos,
    history: Res<SimHistory>,
    settings: Res<OverlaySettings>,
    worker: Option<Res<SimWorker>>,
) {
    let _cost = cost_scope();
    let Some(snap) = history.displayed() else { return };
    let axis = 0.06;
    for c in snap.contacts.iter().filter(|c| c.phi < settings.show_within) {
        let p = to_bevy(&c.point);
        if settings.frames {
            gizmos.line(p, to_bevy(&(c.point + c.normal * axis)), Color::srgb(0.15, 0.3, 1.0));
            gizmos.line(p, to_bevy(&(c.point + c.t1 * axis * 0.7)), Color::srgb(0.9, 0.1, 0.1));
            gizmos.line(p, to_bevy(&(c.point + c.t2 * axis * 0.7)), Color::srgb(0.1, 0.7, 0.1));
        }
        if settings.modes {
            gizmos.sphere(Isometry3d::from_translation(p), 0.012, mode_color(c.mode)).resolution(12);
        }
        if settings.forces && c.mode != ContactMode::Separated {
            let f = c.world_impulse() / snap.dt;
            if f.norm() * settings.force_scale > 1e-4 {
                gizmos.arrow(p, to_bevy(&(c.point + f * settings.force_scale)), Color::srgb(1.0, 0.85, 0.1));
            }
        }
    }
    if settings.pulls {
        for pull in &snap.pulls {
            let p = to_bevy(&pull.point);
            let tip = to_bevy(&(pull.point + pull.force * settings.pull_scale));
            gizmos.arrow(p, tip, Color::srgb(0.9, 0.1, 0.8));
        }
        if let Some(d) = worker.as_ref().and_then(|w| w.drag().copied()) {
            if let Some(body) = snap.bodies.get(d.body) {
                let p = body.act_point(&d.point);
                gizmos.line(to_bevy(&p), to_bevy(&d.target), Color::srgb(0.9, 0.1, 0.8));
                gizmos.sphere(Isometry3d::from_translation(to_bevy(&d.target)), 0.015, Color::srgb(0.9, 0.1, 0.8));
            }
        }
    }
}
