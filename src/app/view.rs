//! The 3D scene: camera, lights, terrain (ground, boxes, heightfields) and the robot's visual
//! geometry, posed every frame from the snapshot on screen. Entities are rebuilt when a new
//! scene is loaded ([`CurrentScene::generation`]).

use super::sim::SimHistory;
use super::{cost_scope, rot_to_bevy, se3_to_transform, to_bevy, AppSet, CurrentScene, ViewerOptions};
use crate::contact::Terrain;
use crate::model::{Model, Shape};
use crate::spatial::Se3;
use bevy::asset::RenderAssetUsages;
use bevy::mesh::{Indices, PrimitiveTopology};
use bevy::prelude::*;
use bevy_panorbit_camera::PanOrbitCamera;
use nalgebra::{Matrix3, Vector3};

/// Marks entities that belong to the loaded scene (despawned on reload).
#[derive(Component)]
pub struct SceneEntity;

/// A visual of body `body`, at `placement` (`bodyMgeometry`).
#[derive(Component)]
pub struct LinkVisual {
    pub body: usize,
    pub placement: Se3,
}

/// The main 3D camera.
#[derive(Component)]
pub struct MainCamera;

/// Generation of the scene whose entities exist.
#[derive(Resource, Default)]
struct Built(Option<u64>);

pub struct ViewPlugin;

impl Plugin for ViewPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Built>()
            .insert_resource(ClearColor(Color::srgb(0.62, 0.70, 0.78)))
            .insert_resource(GlobalAmbientLight { brightness: 350.0, ..default() })
            .add_systems(Startup, spawn_camera_and_light)
            .add_systems(Update, (rebuild_scene, pose_links, follow_base).chain().in_set(AppSet::Writeback));
    }
}

fn spawn_camera_and_light(mut commands: Commands, scene: Res<CurrentScene>, opts: Res<ViewerOptions>) {
    let focus = scene.scene.q0.fixed_rows::<3>(0).into_owned();
    let focus = if scene.scene.model.has_free_flyer() { to_bevy(&focus) } else { Vec3::new(0.0, 0.4, 0.0) };
    let mut cam = commands.spawn((
        MainCamera,
        Camera3d::default(),
        Transform::from_translation(focus + Vec3::new(1.1, 0.55, 1.3)).looking_at(focus, Vec3::Y),
        PanOrbitCamera { focus, radius: Some(1.25), yaw: Some(0.75), pitch: Some(0.32), ..default() },
    ));
    if opts.screenshot.is_some() {
        // Software rendering: multisampling costs more than it shows.
        cam.insert(Msaa::Off);
    }
    commands.spawn((
        DirectionalLight { illuminance: 9000.0, shadow_maps_enabled: false, ..default() },
        Transform::from_xyz(3.0, 8.0, 4.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
}

/// Mesh of a visual shape in Bevy's local axes (see [`super::to_bevy`]: body x, y, z are
/// Bevy x, -z, y; cylinders along body z are along Bevy's y, as Bevy's own).
fn shape_mesh(shape: &Shape) -> Mesh {
    match *shape {
        Shape::Box { size } => Cuboid::new(size[0] as f32, size[2] as f32, size[1] as f32).into(),
        Shape::Sphere { radius } => Sphere::new(radius as f32).mesh().uv(24, 16),
        Shape::Cylinder { radius, length } => Cylinder::new(radius as f32, length as f32).into(),
    }
}

fn rebuild_scene(
    mut commands: Commands,
    scene: Res<CurrentScene>,
    mut built: ResMut<Built>,
    old: Query<Entity, With<SceneEntity>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut camera: Query<&mut PanOrbitCamera, With<MainCamera>>,
) {
    let _cost = cost_scope();
    if built.0 == Some(scene.generation) {
        return;
    }
    for e in &old {
        commands.entity(e).despawn();
    }
    built.0 = Some(scene.generation);
    spawn_terrain(&mut commands, &scene.scene.terrain, &mut meshes, &mut materials);
    spawn_robot(&mut commands, &scene.scene.model, &mut meshes, &mut materials);
    if scene.generation > 0 {
        if let Ok(mut cam) = camera.single_mut() {
            let p = scene.scene.q0.fixed_rows::<3>(0).into_owned();
            cam.target_focus = if scene.scene.model.has_free_flyer() { to_bevy(&p) } else { Vec3::new(0.0, 0.4, 0.0) };
        }
    }
}

/// With `follow` on, the camera's focus tracks the floating base on screen (the orbit camera
/// eases towards it); its height stays, so the view does not bob with the gait.
fn follow_base(
    settings: Res<super::overlay::OverlaySettings>,
    history: Res<super::sim::SimHistory>,
    scene: Res<CurrentScene>,
    mut camera: Query<&mut PanOrbitCamera, With<MainCamera>>,
) {
    let _cost = cost_scope();
    if !settings.follow || !scene.scene.model.has_free_flyer() {
        return;
    }
    let (Some(s), Ok(mut cam)) = (history.displayed(), camera.single_mut()) else { return };
    let p = to_bevy(&nalgebra::Vector3::new(s.q[0], s.q[1], s.q[2]));
    let target = Vec3::new(p.x, cam.target_focus.y, p.z);
    if cam.target_focus.distance(target) > 1e-4 {
        cam.target_focus = target;
    }
}

fn spawn_robot(
    commands: &mut Commands,
    model: &Model,
    meshes: &mut Assets<Mesh>,
    materials: &mut Assets<StandardMaterial>,
) {
    for g in &model.geometries {
        let [r, gc, b, a] = g.rgba;
        commands.spawn((
            SceneEntity,
            LinkVisual { body: g.body, placement: g.placement },
            Mesh3d(meshes.add(shape_mesh(&g.shape))),
            MeshMaterial3d(materials.add(StandardMaterial {
                base_color: Color::srgba(r, gc, b, a),
                perceptual_roughness: 0.6,
                metallic: 0.1,
                ..default()
            })),
            Transform::default(),
        ));
    }
    // Point feet and corners without a visual of their own still show as small spheres.
    for cp in model.contact_points.iter().filter(|c| c.radius > 0.0) {
        let covered = model.geometries.iter().any(|g| {
            g.body == cp.body
                && matches!(g.shape, Shape::Sphere { .. })
                && (g.placement.trans - cp.position).norm() < 1e-6
        });
        if !covered {
            commands.spawn((
                SceneEntity,
                LinkVisual { body: cp.body, placement: Se3::from_translation(cp.position) },
                Mesh3d(meshes.add(Sphere::new(cp.radius as f32).mesh().uv(16, 12))),
                MeshMaterial3d(materials.add(Color::srgb(0.15, 0.15, 0.17))),
                Transform::default(),
            ));
        }
    }
}

fn spawn_terrain(
    commands: &mut Commands,
    terrain: &Terrain,
    meshes: &mut Assets<Mesh>,
    materials: &mut Assets<StandardMaterial>,
) {
    let g = &terrain.ground;
    let rot = nalgebra::Rotation3::from_axis_angle(&Vector3::y_axis(), g.slope).into_inner();
    let pose = Se3 { rot, trans: Vector3::new(0.0, 0.0, g.height) };
    commands.spawn((
        SceneEntity,
        Mesh3d(meshes.add(checker_mesh(60.0, 0.5))),
        MeshMaterial3d(materials.add(StandardMaterial {
            base_color: Color::WHITE,
            perceptual_roughness: 0.9,
            ..default()
        })),
        se3_to_transform(&pose),
    ));
    let box_material = materials.add(StandardMaterial {
        base_color: Color::srgb(0.55, 0.47, 0.38),
        perceptual_roughness: 0.8,
        ..default()
    });
    for b in &terrain.boxes {
        let rot = nalgebra::Rotation3::from_axis_angle(&Vector3::z_axis(), b.yaw).into_inner();
        commands.spawn((
            SceneEntity,
            Mesh3d(meshes.add(shape_mesh(&Shape::Box { size: b.size }))),
            MeshMaterial3d(box_material.clone()),
            Transform { translation: to_bevy(&Vector3::from(b.center)), rotation: rot_to_bevy(&rot), scale: Vec3::ONE },
        ));
    }
    for h in &terrain.heightfields {
        commands.spawn((
            SceneEntity,
            Mesh3d(meshes.add(heightfield_mesh(h))),
            MeshMaterial3d(materials.add(StandardMaterial {
                base_color: Color::srgb(0.50, 0.58, 0.45),
                perceptual_roughness: 0.85,
                double_sided: true,
                cull_mode: None,
                ..default()
            })),
            Transform::default(),
        ));
    }
}

/// A square of side `size` (m) in the plane's local xy, tiled with `tile` squares of two
/// shades, so that motion over the ground is visible.
fn checker_mesh(size: f64, tile: f64) -> Mesh {
    let n = (size / tile).round() as i32;
    let half = n / 2;
    let (mut pos, mut nrm, mut col, mut idx) = (vec![], vec![], vec![], vec![]);
    for i in -half..half {
        for j in -half..half {
            let shade = if (i + j).rem_euclid(2) == 0 { [0.78, 0.79, 0.78, 1.0] } else { [0.50, 0.53, 0.52, 1.0] };
            let base = pos.len() as u32;
            for (di, dj) in [(0, 0), (1, 0), (1, 1), (0, 1)] {
                let p = Vector3::new((i + di) as f64 * tile, (j + dj) as f64 * tile, 0.0);
                pos.push(to_bevy(&p).to_array());
                nrm.push([0.0, 1.0, 0.0]);
                col.push(shade);
            }
            // Counter-clockwise seen from above (+z world, +y Bevy): Bevy's front faces.
            idx.extend_from_slice(&[base, base + 1, base + 2, base, base + 2, base + 3]);
        }
    }
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, pos)
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, nrm)
        .with_inserted_attribute(Mesh::ATTRIBUTE_COLOR, col)
        .with_inserted_indices(Indices::U32(idx))
}

fn heightfield_mesh(h: &crate::contact::terrain::Heightfield) -> Mesh {
    let (ny, nx) = (h.heights.len(), h.heights[0].len());
    let at = |i: usize, j: usize| {
        Vector3::new(h.origin[0] + i as f64 * h.spacing, h.origin[1] + j as f64 * h.spacing, h.heights[j][i])
    };
    let mut pos = Vec::with_capacity(nx * ny);
    let mut nrm = Vec::with_capacity(nx * ny);
    for j in 0..ny {
        for i in 0..nx {
            pos.push(to_bevy(&at(i, j)).to_array());
            let dx = at((i + 1).min(nx - 1), j) - at(i.saturating_sub(1), j);
            let dy = at(i, (j + 1).min(ny - 1)) - at(i, j.saturating_sub(1));
            nrm.push(to_bevy(&dx.cross(&dy).normalize()).to_array());
        }
    }
    let mut idx = Vec::new();
    for j in 0..ny - 1 {
        for i in 0..nx - 1 {
            let a = (j * nx + i) as u32;
            let (b, c, d) = (a + 1, a + nx as u32 + 1, a + nx as u32);
            idx.extend_from_slice(&[a, b, c, a, c, d]);
        }
    }
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, pos)
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, nrm)
        .with_inserted_indices(Indices::U32(idx))
}

fn pose_links(history: Res<SimHistory>, mut links: Query<(&LinkVisual, &mut Transform)>) {
    let _cost = cost_scope();
    let Some(snap) = history.displayed() else { return };
    for (l, mut t) in &mut links {
        if let Some(body) = snap.bodies.get(l.body) {
            *t = se3_to_transform(&body.compose(&l.placement));
        }
    }
}

/// Rotation taking the world z axis to `n` (for cones and frames).
pub fn z_to(n: &Vector3<f64>) -> Matrix3<f64> {
    let z = Vector3::z();
    let axis = z.cross(n);
    let s = axis.norm();
    let c = z.dot(n);
    if s < 1e-12 {
        return if c > 0.0 { Matrix3::identity() } else { Matrix3::from_diagonal(&Vector3::new(1.0, -1.0, -1.0)) };
    }
    nalgebra::Rotation3::from_axis_angle(&nalgebra::Unit::new_normalize(axis), s.atan2(c)).into_inner()
}
