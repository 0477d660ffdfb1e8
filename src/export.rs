//! Wavefront OBJ export of a world's surfaces, one file per frame: the boundary triangles
//! of every deformable body and the triangulated surface of every rigid collider, one
//! `o`/`g` group per body named by its kind and index (`solid_0`, `cloth_1`, `dynamic_3`,
//! `static_0`, `kinematic_2`), so that any mesh tool can open the sequence and an
//! independent checker can test it. Deformables are numbered in the order of
//! [`PhysicsWorld::deformable_handles`], rigid bodies by their index in
//! [`PhysicsWorld::body_handles`].
//!
//! Curved colliders are tessellated (balls and capsules with 16 × 8 subdivisions, cylinders
//! and cones with 16); a half-space, which has no boundary, is written as a 40 m square of
//! its plane centred at its body's position; rounded shapes are
//! written without their rounding; segments and polylines, which have no area, are left
//! out.

use std::io::Write;
use std::path::{Path, PathBuf};

use glam::{Quat, Vec3};
use parry3d::shape::{Shape, TypedShape};

use crate::deformable::DeformableKind;
use crate::rigid::BodyKind;
use crate::world::PhysicsWorld;

/// The file of frame `frame` in `dir`: `frame_00000.obj`, …
pub fn frame_path(dir: &Path, frame: u32) -> PathBuf {
    dir.join(format!("frame_{frame:05}.obj"))
}

/// Triangles of a shape in its own frame.
pub(crate) fn tessellate(
    shape: &dyn Shape,
    out: &mut Vec<(Vec<Vec3>, Vec<[u32; 3]>)>,
    pose: (Vec3, Quat),
) {
    let place = |(v, t): (Vec<Vec3>, Vec<[u32; 3]>)| {
        (v.into_iter().map(|p| pose.0 + pose.1 * p).collect(), t)
    };
    let mesh = match shape.as_typed_shape() {
        TypedShape::Cuboid(s) => s.to_trimesh(),
        TypedShape::Ball(s) => s.to_trimesh(16, 8),
        TypedShape::Capsule(s) => s.to_trimesh(16, 8),
        TypedShape::Cylinder(s) => s.to_trimesh(16),
        TypedShape::Cone(s) => s.to_trimesh(16),
        TypedShape::ConvexPolyhedron(s) => s.to_trimesh(),
        TypedShape::RoundCuboid(s) => s.inner_shape.to_trimesh(),
        TypedShape::RoundCylinder(s) => s.inner_shape.to_trimesh(16),
        TypedShape::RoundCone(s) => s.inner_shape.to_trimesh(16),
        TypedShape::RoundConvexPolyhedron(s) => s.inner_shape.to_trimesh(),
        TypedShape::TriMesh(s) => (s.vertices().to_vec(), s.indices().to_vec()),
        TypedShape::HeightField(s) => s.to_trimesh(),
        TypedShape::Voxels(s) => s.to_trimesh(),
        TypedShape::Triangle(s) => (vec![s.a, s.b, s.c], vec![[0, 1, 2]]),
        TypedShape::RoundTriangle(s) => (
            vec![s.inner_shape.a, s.inner_shape.b, s.inner_shape.c],
            vec![[0, 1, 2]],
        ),
        TypedShape::HalfSpace(s) => {
            let n = s.normal;
            let (t, b) = crate::math::tangent_basis(n);
            let half = 20.0;
            let v = vec![
                (-t - b) * half,
                (t - b) * half,
                (t + b) * half,
                (-t + b) * half,
            ];
            (v, vec![[0, 1, 2], [0, 2, 3]])
        }
        TypedShape::Compound(c) => {
            for (p, part) in c.shapes() {
                let (pp, pq) = (p.translation, p.rotation);
                tessellate(part.as_ref(), out, (pose.0 + pose.1 * pp, pose.1 * pq));
            }
            return;
        }
        _ => return,
    };
    out.push(place(mesh));
}

/// Writes the world's surfaces as one OBJ document.
pub fn write_obj(world: &PhysicsWorld, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "# bevy_avbd frame: {} deformable and {} rigid bodies",
        world.deformable_count(),
        world.body_count()
    )?;
    let mut next = 1usize; // OBJ indices are 1-based and global
    for (k, &h) in world.deformable_handles().iter().enumerate() {
        let Ok(d) = world.deformable(h) else { continue };
        let kind = match d.kind() {
            DeformableKind::Solid => "solid",
            DeformableKind::Cloth => "cloth",
        };
        writeln!(out, "o {kind}_{k}\ng {kind}_{k}")?;
        let triangles: Vec<[u32; 3]> = d.surface_triangles().collect();
        // Only the vertices the surface uses, in mesh order.
        let mut index = vec![u32::MAX; d.vertex_count()];
        let x = d.positions();
        let mut count = 0u32;
        for t in &triangles {
            for &v in t {
                if index[v as usize] == u32::MAX {
                    index[v as usize] = count;
                    count += 1;
                }
            }
        }
        let mut order = vec![0u32; count as usize];
        for (v, &i) in index.iter().enumerate() {
            if i != u32::MAX {
                order[i as usize] = v as u32;
            }
        }
        for &v in &order {
            let p = x[v as usize];
            writeln!(out, "v {} {} {}", p.x, p.y, p.z)?;
        }
        for t in &triangles {
            let [a, b, c] = t.map(|v| next + index[v as usize] as usize);
            writeln!(out, "f {a} {b} {c}")?;
        }
        next += count as usize;
    }
    for (i, &h) in world.body_handles().iter().enumerate() {
        let Some(shape) = world.collider_shape(h) else {
            continue;
        };
        let Ok(state) = world.body(h) else { continue };
        let kind = match state.kind {
            BodyKind::Dynamic => "dynamic",
            BodyKind::Static => "static",
            BodyKind::Kinematic => "kinematic",
        };
        let mut meshes = Vec::new();
        let offset = world.collider_offset(h).unwrap_or(Vec3::ZERO);
        tessellate(
            shape,
            &mut meshes,
            (state.position + state.rotation * offset, state.rotation),
        );
        if meshes.is_empty() {
            continue;
        }
        writeln!(out, "o {kind}_{i}\ng {kind}_{i}")?;
        for (v, t) in meshes {
            for p in &v {
                writeln!(out, "v {} {} {}", p.x, p.y, p.z)?;
            }
            for f in &t {
                writeln!(
                    out,
                    "f {} {} {}",
                    next + f[0] as usize,
                    next + f[1] as usize,
                    next + f[2] as usize
                )?;
            }
            next += v.len();
        }
    }
    Ok(())
}

/// Writes frame `frame` of `world` to `dir` ([`frame_path`]).
pub fn write_frame(world: &PhysicsWorld, dir: &Path, frame: u32) -> std::io::Result<()> {
    let file = std::fs::File::create(frame_path(dir, frame))?;
    let mut w = std::io::BufWriter::new(file);
    write_obj(world, &mut w)?;
    w.flush()
}
