//! Drawing a scene: rigid colliders as meshes at their body's pose, deformable surfaces as
//! meshes whose vertices are rewritten after every step, half-spaces as ground planes,
//! joints as gizmo lines. Colours are the library's offscreen renderer's
//! (`bevy_avbd::render::Snapshot`), so a demo and `avbd render` look alike.

use std::collections::HashMap;

use bevy_avbd::parry3d::shape::{Shape, TypedShape};
use bevy_avbd::render::Snapshot;
use bevy_avbd::{BodyHandle, BodyKind, DeformableHandle, PhysicsWorld};
use bevy_internal::asset::RenderAssetUsages;
use bevy_internal::camera::visibility::NoFrustumCulling;
use bevy_internal::mesh::PrimitiveTopology;
use bevy_internal::prelude::*;

use crate::scene::{Demo, SceneEntity, SceneSet};

pub struct DrawPlugin;

impl Plugin for DrawPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DrawOptions>().add_systems(
            Update,
            (sync_bodies, sync_deformables, draw_joints).in_set(SceneSet::Draw),
        );
    }
}

/// What is drawn besides the bodies.
#[derive(Resource)]
pub struct DrawOptions {
    /// Joints and vertex attachments as lines (key J).
    pub joints: bool,
}

impl Default for DrawOptions {
    fn default() -> Self {
        Self { joints: true }
    }
}

/// A rigid body's mesh: its entity's `Transform` is the body's pose (centre of mass and
/// rotation; the collider offset is baked into the mesh).
#[derive(Component)]
pub struct BodyVisual(pub BodyHandle);

/// A deformable body's mesh (at the identity transform): positions and normals are
/// rewritten from the world's vertices.
#[derive(Component)]
pub struct DeformableVisual {
    pub handle: DeformableHandle,
    pub triangles: Vec<[u32; 3]>,
    /// The triangles around each vertex: `around[start[v]..start[v + 1]]`.
    start: Vec<u32>,
    around: Vec<u32>,
}

impl DeformableVisual {
    fn new(handle: DeformableHandle, triangles: Vec<[u32; 3]>, vertices: usize) -> Self {
        let mut start = vec![0u32; vertices + 1];
        for t in &triangles {
            for &v in t {
                start[v as usize + 1] += 1;
            }
        }
        for v in 0..vertices {
            start[v + 1] += start[v];
        }
        let mut fill = start.clone();
        let mut around = vec![0u32; start[vertices] as usize];
        for (i, t) in triangles.iter().enumerate() {
            for &v in t {
                around[fill[v as usize] as usize] = i as u32;
                fill[v as usize] += 1;
            }
        }
        Self {
            handle,
            triangles,
            start,
            around,
        }
    }

    /// Writes the surface into `mesh`, three vertices per triangle, each corner's normal
    /// averaged over the triangles around its vertex within 40° of its own triangle's (as
    /// the library's renderer: curved surfaces look smooth, a block's edges stay sharp).
    fn write(&self, mesh: &mut Mesh, positions: &[Vec3]) {
        let normals: Vec<Vec3> = self
            .triangles
            .iter()
            .map(|t| {
                let [a, b, c] = t.map(|i| positions[i as usize]);
                (b - a).cross(c - a)
            })
            .collect();
        let units: Vec<Vec3> = normals.iter().map(|n| n.normalize_or_zero()).collect();
        let cos_max = 40f32.to_radians().cos();
        let mut corner_positions = Vec::with_capacity(self.triangles.len() * 3);
        let mut corner_normals = Vec::with_capacity(self.triangles.len() * 3);
        for (i, t) in self.triangles.iter().enumerate() {
            for &v in t {
                let range = self.start[v as usize] as usize..self.start[v as usize + 1] as usize;
                let n: Vec3 = self.around[range]
                    .iter()
                    .filter(|&&s| units[s as usize].dot(units[i]) >= cos_max)
                    .map(|&s| normals[s as usize])
                    .sum();
                corner_positions.push(positions[v as usize].to_array());
                corner_normals.push(n.try_normalize().unwrap_or(Vec3::Y).to_array());
            }
        }
        mesh.insert_attribute(Mesh::ATTRIBUTE_POSITION, corner_positions);
        mesh.insert_attribute(Mesh::ATTRIBUTE_NORMAL, corner_normals);
    }
}

/// Marks the entities that the check mode hides for its background screenshot.
#[derive(Component)]
pub struct Body;

fn srgb(c: [u8; 3]) -> Color {
    Color::srgb_u8(c[0], c[1], c[2])
}

/// The box for the camera to frame: the library renderer's bounds of the bodies (and
/// joints) as they are now, down to the ground where there is one (a dropped body lands
/// in view).
pub fn frame_box(snap: &Snapshot) -> (Vec3, Vec3) {
    let (mut lo, mut hi) = snap.bounds.unwrap_or((Vec3::splat(-0.5), Vec3::splat(0.5)));
    let body_box = (lo, hi);
    for &(point, normal) in &snap.planes {
        let n = normal.normalize();
        for i in 0..8 {
            let c = Vec3::new(
                if i & 1 == 0 {
                    body_box.0.x
                } else {
                    body_box.1.x
                },
                if i & 2 == 0 {
                    body_box.0.y
                } else {
                    body_box.1.y
                },
                if i & 4 == 0 {
                    body_box.0.z
                } else {
                    body_box.1.z
                },
            );
            let p = project_on_plane(c, point, n);
            lo = lo.min(p);
            hi = hi.max(p);
        }
    }
    (lo, hi)
}

/// Spawns the meshes of scene `name`'s bodies, ground planes and deformables; returns the
/// box for the camera to frame ([`frame_box`]).
pub fn spawn_world(
    commands: &mut Commands,
    meshes: &mut Assets<Mesh>,
    materials: &mut Assets<StandardMaterial>,
    world: &PhysicsWorld,
) -> (Vec3, Vec3) {
    let snap = Snapshot::of_world(world);
    let (lo, hi) = frame_box(&snap);
    let mut colors: HashMap<u64, [u8; 3]> = HashMap::new();
    for (owner, c) in &snap.colors {
        match *owner {
            bevy_avbd::export::SurfaceOwner::Body { handle, .. } => {
                colors.insert(handle.0 as u64, *c);
            }
            bevy_avbd::export::SurfaceOwner::Deformable { handle, .. } => {
                colors.insert((1 << 32) | handle.0 as u64, *c);
            }
        }
    }

    let mut material_of: HashMap<[u8; 3], Handle<StandardMaterial>> = HashMap::new();
    let mut rigid_material = |c: [u8; 3], materials: &mut Assets<StandardMaterial>| {
        material_of
            .entry(c)
            .or_insert_with(|| {
                materials.add(StandardMaterial {
                    base_color: srgb(c),
                    perceptual_roughness: 0.6,
                    ..default()
                })
            })
            .clone()
    };

    // Ground: the half-spaces, as large planes; a scene without one (a pendulum, a
    // clamped beam) gets a darker reference floor at y = 0 or below everything, which
    // the physics does not know about.
    let size = ((hi - lo).max_element() * 4.0).max(40.0);
    let centre = (lo + hi) * 0.5;
    let mut planes: Vec<(Vec3, Vec3, Color)> = snap
        .planes
        .iter()
        .map(|&(p, n)| (p, n.normalize(), Color::srgb(0.56, 0.55, 0.52)))
        .collect();
    if planes.is_empty() {
        let y = lo.y.min(0.0) - 0.05 * (hi - lo).max_element();
        planes.push((
            Vec3::new(0.0, y, 0.0),
            Vec3::Y,
            Color::srgb(0.40, 0.42, 0.45),
        ));
    }
    for (point, n, color) in planes {
        let material = materials.add(StandardMaterial {
            base_color: color,
            perceptual_roughness: 0.95,
            ..default()
        });
        let mesh = meshes.add(Plane3d::new(n, Vec2::splat(size)).mesh());
        commands.spawn((
            SceneEntity,
            Mesh3d(mesh),
            MeshMaterial3d(material),
            // Centred under the scene, on the plane.
            Transform::from_translation(project_on_plane(centre, point, n)),
        ));
    }

    // Rigid bodies: one mesh per distinct collider (the pile's 500 boxes share one).
    let mut mesh_of: HashMap<String, Handle<Mesh>> = HashMap::new();
    for &h in world.body_handles() {
        let (Some(shape), Ok(state)) = (world.collider_shape(h), world.body(h)) else {
            continue;
        };
        if matches!(shape.as_typed_shape(), TypedShape::HalfSpace(_)) {
            continue;
        }
        let offset = world.collider_offset(h).unwrap_or(Vec3::ZERO);
        let key = shape_key(shape, offset).unwrap_or_else(|| format!("body {}", h.0));
        let mesh = match mesh_of.get(&key) {
            Some(m) => m.clone(),
            None => {
                let Some(mesh) = collider_mesh(shape, offset) else {
                    continue;
                };
                let m = meshes.add(mesh);
                mesh_of.insert(key, m.clone());
                m
            }
        };
        let color = colors
            .get(&(h.0 as u64))
            .copied()
            .unwrap_or(match state.kind {
                BodyKind::Static => [150, 150, 156],
                _ => [230, 120, 60],
            });
        commands.spawn((
            SceneEntity,
            Body,
            BodyVisual(h),
            Mesh3d(mesh),
            MeshMaterial3d(rigid_material(color, materials)),
            Transform::from_translation(state.position).with_rotation(state.rotation),
        ));
    }

    // Deformables: three vertices per surface triangle (normals split at sharp edges).
    for &h in world.deformable_handles() {
        let Ok(d) = world.deformable(h) else {
            continue;
        };
        let triangles: Vec<[u32; 3]> = d.surface_triangles().collect();
        let positions: Vec<Vec3> = d.positions().iter().map(|&p| Vec3::from(p)).collect();
        let visual = DeformableVisual::new(h, triangles, positions.len());
        let mut mesh = Mesh::new(
            PrimitiveTopology::TriangleList,
            RenderAssetUsages::default(),
        );
        visual.write(&mut mesh, &positions);
        let color = colors
            .get(&((1 << 32) | h.0 as u64))
            .copied()
            .unwrap_or([60, 180, 200]);
        let material = materials.add(StandardMaterial {
            base_color: srgb(color),
            perceptual_roughness: 0.7,
            // Cloths are seen from both sides (the back face lit with its flipped normal).
            double_sided: true,
            cull_mode: None,
            ..default()
        });
        commands.spawn((
            SceneEntity,
            Body,
            visual,
            Mesh3d(meshes.add(mesh)),
            MeshMaterial3d(material),
            Transform::IDENTITY,
            // The mesh moves: its bounding box at spawn would cull it wrongly later.
            NoFrustumCulling,
        ));
    }
    (lo, hi)
}

/// `p` moved along `n` onto the plane through `point`.
fn project_on_plane(p: Vec3, point: Vec3, n: Vec3) -> Vec3 {
    p - n * (p - point).dot(n)
}

/// A key under which bodies can share a mesh: the primitive shapes by their dimensions
/// and offset; `None` for the others (one mesh each).
fn shape_key(shape: &dyn Shape, offset: Vec3) -> Option<String> {
    let dims = match shape.as_typed_shape() {
        TypedShape::Cuboid(s) => format!("cuboid {:?}", s.half_extents),
        TypedShape::Ball(s) => format!("ball {}", s.radius),
        TypedShape::Capsule(s) => {
            format!("capsule {:?} {:?} {}", s.segment.a, s.segment.b, s.radius)
        }
        TypedShape::Cylinder(s) => format!("cylinder {} {}", s.half_height, s.radius),
        TypedShape::Cone(s) => format!("cone {} {}", s.half_height, s.radius),
        _ => return None,
    };
    Some(format!("{dims} at {offset:?}"))
}

/// A collider's mesh in its body's frame (the body's origin is its centre of mass; the
/// collider sits at `offset`). Balls, capsules, cylinders and boxes are Bevy's primitives;
/// other shapes are parry's triangulation with flat normals.
fn collider_mesh(shape: &dyn Shape, offset: Vec3) -> Option<Mesh> {
    let mesh = match shape.as_typed_shape() {
        TypedShape::Cuboid(s) => Cuboid::from_size(s.half_extents * 2.0).mesh().build(),
        TypedShape::Ball(s) => Sphere::new(s.radius).mesh().uv(24, 16),
        TypedShape::Capsule(s) => {
            let (a, b) = (s.segment.a, s.segment.b);
            let axis = b - a;
            let length = axis.length();
            let rotation = if length > 1e-6 {
                Quat::from_rotation_arc(Vec3::Y, axis / length)
            } else {
                Quat::IDENTITY
            };
            Capsule3d::new(s.radius, length)
                .mesh()
                .build()
                .rotated_by(rotation)
                .translated_by((a + b) * 0.5)
        }
        TypedShape::Cylinder(s) => Cylinder::new(s.radius, 2.0 * s.half_height)
            .mesh()
            .resolution(24)
            .build(),
        _ => {
            let mut parts = Vec::new();
            triangulate(shape, Vec3::ZERO, Quat::IDENTITY, &mut parts);
            if parts.is_empty() {
                return None;
            }
            let mut positions = Vec::new();
            for (v, t) in &parts {
                for tri in t {
                    positions.extend(tri.iter().map(|&i| v[i as usize].to_array()));
                }
            }
            let mut mesh = Mesh::new(
                PrimitiveTopology::TriangleList,
                RenderAssetUsages::default(),
            );
            mesh.insert_attribute(Mesh::ATTRIBUTE_POSITION, positions);
            mesh.compute_flat_normals();
            mesh
        }
    };
    Some(mesh.translated_by(offset))
}

type Triangles = (Vec<Vec3>, Vec<[u32; 3]>);

/// parry's triangulation of a shape placed at `(p, q)`, compounds part by part.
fn triangulate(shape: &dyn Shape, p: Vec3, q: Quat, out: &mut Vec<Triangles>) {
    let (v, t) = match shape.as_typed_shape() {
        TypedShape::Cuboid(s) => s.to_trimesh(),
        TypedShape::Ball(s) => s.to_trimesh(24, 12),
        TypedShape::Capsule(s) => s.to_trimesh(24, 12),
        TypedShape::Cylinder(s) => s.to_trimesh(24),
        TypedShape::Cone(s) => s.to_trimesh(24),
        TypedShape::ConvexPolyhedron(s) => s.to_trimesh(),
        TypedShape::RoundCuboid(s) => s.inner_shape.to_trimesh(),
        TypedShape::RoundConvexPolyhedron(s) => s.inner_shape.to_trimesh(),
        TypedShape::TriMesh(s) => (s.vertices().to_vec(), s.indices().to_vec()),
        TypedShape::Compound(c) => {
            for (pose, part) in c.shapes() {
                triangulate(
                    part.as_ref(),
                    p + q * pose.translation,
                    q * pose.rotation,
                    out,
                );
            }
            return;
        }
        _ => return,
    };
    out.push((v.into_iter().map(|x| p + q * x).collect(), t));
}

fn sync_bodies(demo: Res<Demo>, mut bodies: Query<(&BodyVisual, &mut Transform)>) {
    let Some(scene) = demo.scene.as_ref() else {
        return;
    };
    if !demo.stepped {
        return;
    }
    for (b, mut t) in &mut bodies {
        match scene.world.body(b.0) {
            Ok(s) => {
                t.translation = s.position;
                t.rotation = s.rotation;
            }
            // A body the scene removed: out of sight.
            Err(_) => t.scale = Vec3::ZERO,
        }
    }
}

fn sync_deformables(
    demo: Res<Demo>,
    soft: Query<(&DeformableVisual, &Mesh3d)>,
    mut meshes: ResMut<Assets<Mesh>>,
) {
    let Some(scene) = demo.scene.as_ref() else {
        return;
    };
    if !demo.stepped {
        return;
    }
    for (d, mesh) in &soft {
        let (Ok(view), Some(mut mesh)) =
            (scene.world.deformable(d.handle), meshes.get_mut(&mesh.0))
        else {
            continue;
        };
        let positions: Vec<Vec3> = view.positions().iter().map(|&p| Vec3::from(p)).collect();
        d.write(&mut mesh, &positions);
    }
}

fn draw_joints(demo: Res<Demo>, options: Res<DrawOptions>, mut gizmos: Gizmos) {
    let Some(scene) = demo.scene.as_ref() else {
        return;
    };
    if !options.joints {
        return;
    }
    let w = &scene.world;
    let color = Color::srgb(0.12, 0.13, 0.16);
    let stretched = Color::srgb(0.95, 0.2, 0.1);
    for &h in w.joint_handles() {
        let (Ok(false), Ok(j)) = (w.joint_broken(h), w.joint_anchors(h)) else {
            continue;
        };
        gizmos.line(j.centre_a, j.on_a, color);
        // The anchors' gap: the joint's error, red.
        gizmos.line(j.on_a, j.on_b, stretched);
        if let Some(c) = j.centre_b {
            gizmos.line(j.on_b, c, color);
        }
    }
    for &h in w.attachment_handles() {
        let (Ok(false), Ok((d, v, b))) = (w.attachment_broken(h), w.attachment_ends(h)) else {
            continue;
        };
        let (Ok(view), Ok(body)) = (w.deformable(d), w.body(b)) else {
            continue;
        };
        if let Some(&p) = view.positions().get(v as usize) {
            gizmos.line(Vec3::from(p), body.position, color);
        }
    }
}
