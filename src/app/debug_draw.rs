//! Debug drawing with `bevy_gizmos` (feature `debug-draw`): collider wireframes at the
//! drawn (interpolated) pose, contact points with their normal forces, joints.
//!
//! Needs Bevy's `GizmoPlugin` (in `DefaultPlugins`); without it nothing is drawn. Contacts
//! and joints are drawn at the last step's poses, colliders where the bodies are drawn.

use std::collections::HashMap;
use std::sync::Arc;

use bevy_app::{App, Plugin, PostUpdate};
use bevy_color::Color;
use bevy_ecs::prelude::*;
use bevy_gizmos::config::GizmoConfigStore;
use bevy_gizmos::gizmos::Gizmos;
use bevy_transform::TransformSystems;
use bevy_transform::components::GlobalTransform;
use glam::{Quat, Vec3};
use parry3d::shape::Shape;

use crate::ecs::{ColliderShape, Joint, Physics, Position, RigidBody, Rotation};

/// Adds the debug drawing; [`DebugDraw`] says what is drawn.
#[derive(Clone, Copy, Debug, Default)]
pub struct AvbdDebugDrawPlugin;

/// What the debug drawing shows, and how.
#[derive(Resource, Clone, Copy, Debug, PartialEq)]
pub struct DebugDraw {
    pub colliders: bool,
    pub contacts: bool,
    pub joints: bool,
    /// Length of a contact's force arrow per newton (m/N); 0 draws the normal only.
    pub metres_per_newton: f32,
    pub collider_color: Color,
    pub contact_color: Color,
    pub joint_color: Color,
}

impl Default for DebugDraw {
    fn default() -> Self {
        Self {
            colliders: true,
            contacts: true,
            joints: true,
            metres_per_newton: 1e-4,
            collider_color: Color::srgb(0.2, 0.8, 0.3),
            contact_color: Color::srgb(1.0, 0.3, 0.1),
            joint_color: Color::srgb(0.3, 0.5, 1.0),
        }
    }
}

impl Plugin for AvbdDebugDrawPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DebugDraw>().add_systems(
            PostUpdate,
            draw.after(TransformSystems::Propagate)
                .run_if(resource_exists::<GizmoConfigStore>),
        );
    }
}

/// A shape's wireframe (segments in its own frame), kept while the shape is alive.
struct Wireframe {
    _shape: Arc<dyn Shape>,
    segments: Vec<[Vec3; 2]>,
}

fn wireframe(shape: &Arc<dyn Shape>) -> Wireframe {
    let mut meshes = Vec::new();
    crate::export::tessellate(shape.as_ref(), &mut meshes, (Vec3::ZERO, Quat::IDENTITY));
    let segments = meshes
        .iter()
        .flat_map(|(v, t)| {
            crate::deformable::mesh::edges_of(t)
                .into_iter()
                .map(|[a, b]| [v[a as usize], v[b as usize]])
        })
        .collect();
    Wireframe {
        _shape: shape.clone(),
        segments,
    }
}

fn draw(
    settings: Res<DebugDraw>,
    physics: Res<Physics>,
    mut gizmos: Gizmos,
    mut cache: Local<HashMap<usize, Wireframe>>,
    colliders: Query<(&ColliderShape, &GlobalTransform), With<RigidBody>>,
    joints: Query<&Joint>,
    poses: Query<(&Position, &Rotation)>,
) {
    if settings.colliders {
        for (c, g) in &colliders {
            let shape = &c.0.shape.0;
            let key = Arc::as_ptr(shape) as *const () as usize;
            let w = cache.entry(key).or_insert_with(|| wireframe(shape));
            let (_, r, t) = g.to_scale_rotation_translation();
            for [a, b] in &w.segments {
                gizmos.line(t + r * *a, t + r * *b, settings.collider_color);
            }
        }
        // Shapes only the cache still holds are gone from the world.
        cache.retain(|_, w| Arc::strong_count(&w._shape) > 1);
    }
    let core = physics.core();
    if settings.contacts {
        let pose = |i: u32| {
            let h = core.handle_of_index(i)?;
            core.body(h).ok().map(|s| (s.position, s.rotation))
        };
        // Forces need the solved records (a readback on the GPU: skipped while in flight).
        let records = (core.backend() == "cpu" || !core.step_in_flight())
            .then(|| core.contacts().ok())
            .flatten();
        // The records carry the points too; without them (a GPU step in flight), the
        // points the CPU found, if it found them, with no force.
        let points: Vec<(u32, [f32; 4], [f32; 4], f32)> = match &records {
            Some(r) => r
                .iter()
                .map(|c| (c.body_a, c.arm_a, c.normal, (-c.lambda[2]).max(0.0)))
                .collect(),
            None => core
                .contact_points()
                .iter()
                .map(|c| (c.body_a, c.arm_a, c.normal, 0.0))
                .collect(),
        };
        for (body_a, arm_a, normal, force) in points {
            let Some((p, _)) = pose(body_a) else {
                continue;
            };
            let at = p + Vec3::new(arm_a[0], arm_a[1], arm_a[2]);
            let n = Vec3::new(normal[0], normal[1], normal[2]);
            let len = (force * settings.metres_per_newton).max(0.05);
            // The normal points from A to B: B is pushed along it.
            gizmos.arrow(at, at + n * len, settings.contact_color);
        }
    }
    if settings.joints {
        for j in &joints {
            let Ok((pa, ra)) = poses.get(j.body_a) else {
                continue;
            };
            let a = pa.0 + ra.0 * j.anchor_a;
            let b = match j.body_b.map(|b| poses.get(b)) {
                Some(Ok((pb, rb))) => pb.0 + rb.0 * j.anchor_b,
                Some(Err(_)) => continue,
                None => j.anchor_b,
            };
            gizmos.line(pa.0, a, settings.joint_color);
            gizmos.line(a, b, settings.joint_color);
        }
    }
}
