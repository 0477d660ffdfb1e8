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
use crate::{BodyHandle, DeformableHandle};

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

/// What a [`BodySurface`] belongs to: a deformable or a rigid body, with its number in the
/// order of [`PhysicsWorld::deformable_handles`] or [`PhysicsWorld::body_handles`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SurfaceOwner {
    Deformable {
        index: usize,
        handle: DeformableHandle,
        kind: DeformableKind,
    },
    Body {
        index: usize,
        handle: BodyHandle,
        kind: BodyKind,
    },
}

impl SurfaceOwner {
    /// The OBJ group name: `solid_0`, `cloth_1`, `dynamic_3`, `static_0`, `kinematic_2`.
    pub fn name(&self) -> String {
        match *self {
            SurfaceOwner::Deformable { index, kind, .. } => match kind {
                DeformableKind::Solid => format!("solid_{index}"),
                DeformableKind::Cloth => format!("cloth_{index}"),
            },
            SurfaceOwner::Body { index, kind, .. } => match kind {
                BodyKind::Dynamic => format!("dynamic_{index}"),
                BodyKind::Static => format!("static_{index}"),
                BodyKind::Kinematic => format!("kinematic_{index}"),
            },
        }
    }
}

/// One body's surface in world space: what the OBJ export writes and the renderer draws.
#[derive(Clone, Debug)]
pub struct BodySurface {
    pub owner: SurfaceOwner,
    pub vertices: Vec<Vec3>,
    pub triangles: Vec<[u32; 3]>,
    /// `Some((point, outward normal))` when the collider is a half-space: the triangles are
    /// then only a 40 m square of an unbounded plane (a renderer sizes its own).
    pub plane: Option<(Vec3, Vec3)>,
}

/// The surfaces of every deformable body (boundary triangles, only the vertices they use,
/// in mesh order), then of every rigid collider (the parts of a compound in one list).
/// Bodies without a surface (no collider, segments) are left out.
pub fn surfaces(world: &PhysicsWorld) -> Vec<BodySurface> {
    let mut out = Vec::new();
    for (index, &handle) in world.deformable_handles().iter().enumerate() {
        let Ok(d) = world.deformable(handle) else {
            continue;
        };
        let mut triangles: Vec<[u32; 3]> = d.surface_triangles().collect();
        // Only the vertices the surface uses, in mesh order.
        let mut local = vec![u32::MAX; d.vertex_count()];
        let mut count = 0u32;
        for t in &triangles {
            for &v in t {
                if local[v as usize] == u32::MAX {
                    local[v as usize] = count;
                    count += 1;
                }
            }
        }
        let mut vertices = vec![Vec3::ZERO; count as usize];
        for (v, &i) in local.iter().enumerate() {
            if i != u32::MAX {
                vertices[i as usize] = d.positions()[v].into();
            }
        }
        for t in &mut triangles {
            *t = t.map(|v| local[v as usize]);
        }
        let kind = d.kind();
        out.push(BodySurface {
            owner: SurfaceOwner::Deformable {
                index,
                handle,
                kind,
            },
            vertices,
            triangles,
            plane: None,
        });
    }
    for (index, &handle) in world.body_handles().iter().enumerate() {
        let Some(shape) = world.collider_shape(handle) else {
            continue;
        };
        let Ok(state) = world.body(handle) else {
            continue;
        };
        let offset = world.collider_offset(handle).unwrap_or(Vec3::ZERO);
        let pose = (state.position + state.rotation * offset, state.rotation);
        let mut meshes = Vec::new();
        tessellate(shape, &mut meshes, pose);
        if meshes.is_empty() {
            continue;
        }
        let plane = shape.as_halfspace().map(|h| (pose.0, pose.1 * h.normal));
        let (mut vertices, mut triangles) = (Vec::new(), Vec::new());
        for (v, t) in meshes {
            let base = vertices.len() as u32;
            triangles.extend(t.iter().map(|f| f.map(|i| base + i)));
            vertices.extend(v);
        }
        out.push(BodySurface {
            owner: SurfaceOwner::Body {
                index,
                handle,
                kind: state.kind,
            },
            vertices,
            triangles,
            plane,
        });
    }
    out
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
    for s in surfaces(world) {
        let name = s.owner.name();
        writeln!(out, "o {name}\ng {name}")?;
        for p in &s.vertices {
            writeln!(out, "v {} {} {}", p.x, p.y, p.z)?;
        }
        for f in &s.triangles {
            let [a, b, c] = f.map(|i| next + i as usize);
            writeln!(out, "f {a} {b} {c}")?;
        }
        next += s.vertices.len();
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
