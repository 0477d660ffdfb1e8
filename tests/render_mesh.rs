//! Render meshes of deformable entities (feature `render-mesh`), headless: task pools, time,
//! transforms, Bevy's `AssetPlugin` and `MeshPlugin`, and `AvbdPlugin`, one fixed step per
//! frame on a manual clock.
#![cfg(feature = "render-mesh")]

use bevy_app::{App, TaskPoolPlugin};
use bevy_asset::{AssetPlugin, Assets};
use bevy_avbd::app::{AvbdPlugin, DeformableRenderMesh};
use bevy_avbd::ecs::{ColliderShape, Deformable, Physics, RigidBody};
use bevy_avbd::glam::Vec3;
use bevy_avbd::{Collider, DeformableDesc, SolidMaterial, TetMesh, TetPattern};
use bevy_ecs::prelude::*;
use bevy_mesh::{Indices, Mesh, Mesh3d, MeshPlugin, VertexAttributeValues};
use bevy_time::{Fixed, Time, TimePlugin, TimeUpdateStrategy};
use bevy_transform::TransformPlugin;
use bevy_transform::components::Transform;

fn app() -> App {
    let mut app = App::new();
    app.add_plugins((
        TaskPoolPlugin::default(),
        TimePlugin,
        TransformPlugin,
        AssetPlugin::default(),
        MeshPlugin,
        AvbdPlugin::default(),
    ));
    let timestep = app.world().resource::<Time<Fixed>>().timestep();
    app.insert_resource(TimeUpdateStrategy::ManualDuration(timestep));
    app.finish();
    app.cleanup();
    app.update(); // the clock starts: no time passes in the first update
    app.world_mut().spawn((
        RigidBody::Static,
        ColliderShape(Collider::halfspace(Vec3::Y).unwrap()),
        Transform::default(),
    ));
    app
}

fn run(app: &mut App, frames: usize) {
    for _ in 0..frames {
        app.update();
    }
}

/// A 0.3 m soft cube of 3×3×3 cells (64 vertices, 56 on the surface, 108 boundary
/// triangles) dropped from 0.5 m.
fn soft_cube(app: &mut App) -> Entity {
    let mesh = TetMesh::box_grid(Vec3::splat(0.3), [3, 3, 3], TetPattern::Six);
    app.world_mut()
        .spawn((
            Deformable(
                DeformableDesc::solid(mesh, SolidMaterial::default()).at(Vec3::new(0.0, 0.5, 0.0)),
            ),
            DeformableRenderMesh::default(),
        ))
        .id()
}

/// The entity's mesh: its handle, positions, normals and triangles.
struct Snapshot {
    handle: Mesh3d,
    positions: Vec<Vec3>,
    normals: Vec<Vec3>,
    triangles: Vec<[u32; 3]>,
}

fn snapshot(app: &App, e: Entity) -> Snapshot {
    let handle = app.world().get::<Mesh3d>(e).expect("a Mesh3d").clone();
    let mesh = app
        .world()
        .resource::<Assets<Mesh>>()
        .get(&handle.0)
        .expect("the mesh asset");
    let attr = |id| match mesh.attribute(id) {
        Some(VertexAttributeValues::Float32x3(v)) => v.iter().map(|&a| Vec3::from(a)).collect(),
        other => panic!("{other:?}"),
    };
    let triangles = match mesh.indices() {
        Some(Indices::U32(i)) => i.chunks_exact(3).map(|t| [t[0], t[1], t[2]]).collect(),
        other => panic!("{other:?}"),
    };
    Snapshot {
        handle,
        positions: attr(Mesh::ATTRIBUTE_POSITION),
        normals: attr(Mesh::ATTRIBUTE_NORMAL),
        triangles,
    }
}

/// The body's surface from the physics: the surface vertices (ascending), their positions,
/// and the surface triangles in deformable vertex indices.
fn physics_surface(app: &App, e: Entity) -> (Vec<u32>, Vec<Vec3>, Vec<[u32; 3]>) {
    let physics = app.world().resource::<Physics>();
    let h = physics.deformable_handle(e).expect("in the core");
    let d = physics.core().deformable(h).unwrap();
    let tris: Vec<[u32; 3]> = d.surface_triangles().collect();
    let mut verts: Vec<u32> = tris.iter().flatten().copied().collect();
    verts.sort_unstable();
    verts.dedup();
    let p = verts
        .iter()
        .map(|&v| Vec3::from(d.positions()[v as usize]))
        .collect();
    (verts, p, tris)
}

/// The mesh follows the physics: after 60 steps (the cube resting on the ground) its
/// positions are the surface vertices' solved positions exactly, its triangles are the
/// surface's, its normals are unit and outward (+y on the top face), and the handle is the
/// one made on the first frame (updated in place: one mesh asset, positions changing).
#[test]
fn soft_cube_mesh_follows_the_surface() {
    let mut app = app();
    let soft = soft_cube(&mut app);
    run(&mut app, 2);
    let first = snapshot(&app, soft);
    let (verts, p0, _) = physics_surface(&app, soft);
    assert_eq!(first.positions, p0);
    run(&mut app, 58);
    let last = snapshot(&app, soft);
    let (verts_now, p, tris) = physics_surface(&app, soft);
    assert_eq!(verts, verts_now);
    assert_eq!(
        app.world()
            .get::<DeformableRenderMesh>(soft)
            .unwrap()
            .surface_vertices(),
        &verts[..]
    );

    // Same handle, one asset, moved in place.
    assert_eq!(first.handle, last.handle);
    assert_eq!(app.world().resource::<Assets<Mesh>>().len(), 1);
    let fell = first
        .positions
        .iter()
        .zip(&last.positions)
        .map(|(a, b)| a.y - b.y);
    let fell = fell.fold(f32::INFINITY, f32::min);
    assert!(fell > 0.1, "the mesh moved down by {fell} m");

    // Positions: exactly the physics', surface vertices only.
    assert_eq!(last.positions.len(), 56);
    assert_eq!(last.positions, p);

    // Triangles: the surface's, through the mesh → deformable vertex map.
    assert_eq!(last.triangles.len(), 108);
    assert_eq!(last.triangles.len(), tris.len());
    let mapped: Vec<[u32; 3]> = last
        .triangles
        .iter()
        .map(|t| t.map(|i| verts[i as usize]))
        .collect();
    assert_eq!(mapped, tris);

    // Resting: the bottom at the 1 mm contact gap, the top 0.3 m above.
    let min_y = p.iter().map(|v| v.y).fold(f32::INFINITY, f32::min);
    let max_y = p.iter().map(|v| v.y).fold(f32::NEG_INFINITY, f32::max);
    eprintln!("rest: y from {min_y} to {max_y}");
    assert!(min_y < 0.01 && max_y > 0.25, "{min_y} {max_y}");

    // Normals: unit; outward (each triangle's winding and each vertex's normal point away
    // from the centroid); on the top face +y (smooth: the face's inner vertices to 1°,
    // its edges and corners averaged over the triangles around them, area-weighted, so a
    // corner with one top triangle and two on each side has n.y = 1/3).
    let centre = p.iter().sum::<Vec3>() / p.len() as f32;
    for (i, n) in last.normals.iter().enumerate() {
        assert!((n.length() - 1.0).abs() < 1e-5, "normal {i}: {n}");
        assert!(n.dot(p[i] - centre) > 0.0, "normal {i} points inward: {n}");
    }
    for t in &last.triangles {
        let [a, b, c] = t.map(|i| p[i as usize]);
        let face = (b - a).cross(c - a);
        assert!(
            face.dot((a + b + c) / 3.0 - centre) > 0.0,
            "triangle {t:?} wound inward"
        );
    }
    let half = 0.15;
    let mut inner = 0;
    for (i, n) in last.normals.iter().enumerate() {
        let v = p[i] - centre;
        if v.y > half * 0.9 {
            assert!(n.y > 0.3, "top vertex {i}: normal {n}");
            if v.x.abs() < half * 0.9 && v.z.abs() < half * 0.9 {
                assert!(n.y > 0.9998, "inner top vertex {i}: normal {n}");
                inner += 1;
            }
        }
    }
    assert_eq!(inner, 4);
}

/// The mesh asset removed by the user is re-created (a new handle on the entity); a
/// despawned entity is skipped without a panic and its mesh freed.
#[test]
fn removed_asset_is_recreated_and_despawn_is_quiet() {
    let mut app = app();
    let soft = soft_cube(&mut app);
    run(&mut app, 3);
    let old = snapshot(&app, soft).handle;
    app.world_mut()
        .resource_mut::<Assets<Mesh>>()
        .remove(&old.0)
        .expect("removed");
    run(&mut app, 2);
    let new = snapshot(&app, soft);
    assert_ne!(new.handle, old);
    assert_eq!(new.positions, physics_surface(&app, soft).1);
    drop((old, new)); // the test's own strong handles

    app.world_mut().despawn(soft);
    run(&mut app, 3);
    assert_eq!(app.world().resource::<Assets<Mesh>>().len(), 0);
}
