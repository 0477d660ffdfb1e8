//! Render meshes of deformable entities (feature `render-mesh`): see
//! [`DeformableRenderMesh`].

use bevy_asset::{AssetEventSystems, Assets, RenderAssetUsages};
use bevy_ecs::prelude::*;
use bevy_mesh::{
    Indices, Mesh, Mesh3d, MeshVertexAttribute, PrimitiveTopology, VertexAttributeValues,
};
use glam::Vec3;

use crate::DeformableHandle;
use crate::ecs::{Deformable, DeformablePositions, Physics, PhysicsDeformableHandle};

/// A mesh's `Float32x3` vertex attribute.
type Attribute = Vec<[f32; 3]>;

/// On a [`Deformable`] entity: the plugin gives the entity a `Mesh3d` of the deformable's
/// surface and keeps its positions and normals up to date (feature `render-mesh`).
///
/// The mesh holds the surface's vertices only (a solid's boundary triangles, every triangle
/// of a cloth), with positions and smooth (area-weighted) normals, `TriangleList` with
/// `u32` indices, wound counter-clockwise seen from outside. Positions are in world space:
/// keep the entity's `Transform` at the identity and the entity unparented (a deformable
/// is placed by [`crate::DeformableDesc::at`], not by a `Transform`).
///
/// Each frame in `PostUpdate` ([`PhysicsSet::Interpolate`](crate::ecs::PhysicsSet), before
/// asset events and transform propagation) the mesh of every deformable whose
/// [`DeformablePositions`] changed (one write per physics step) is rewritten in place in
/// `Assets<Mesh>`: same handle, same buffers, no new asset. Deformables are not
/// interpolated; the mesh shows the last step.
///
/// - The entity despawned: nothing to do (the `Mesh3d`'s handle goes with it, and the
///   asset with the last handle).
/// - A deformable with no surface triangles, or not (yet) accepted by the core: no mesh.
/// - The asset removed from `Assets<Mesh>`, or the `Mesh3d` removed: a new mesh is made and
///   a new `Mesh3d` inserted at the next update.
/// - The deformable re-created (its `Deformable` changed): the mesh is rebuilt in place
///   (same handle) for the new surface.
/// - Without `Assets<Mesh>` (Bevy's `MeshPlugin`, in `DefaultPlugins`, or
///   `app.init_asset::<Mesh>()`) the system does not run.
///
/// ```ignore
/// commands.spawn((
///     Deformable(DeformableDesc::solid(mesh, SolidMaterial::default()).at(Vec3::Y)),
///     DeformableRenderMesh::default(),
///     MeshMaterial3d(materials.add(Color::srgb(0.8, 0.3, 0.2))),
/// ));
/// ```
#[derive(Component, Clone, Debug, Default)]
#[require(DeformablePositions)]
pub struct DeformableRenderMesh {
    /// The core body the surface below was taken from.
    built_for: Option<DeformableHandle>,
    /// Mesh vertex `i` is the deformable's vertex `surface_vertices[i]` (ascending).
    surface_vertices: Vec<u32>,
    /// Surface triangles in mesh vertex indices.
    triangles: Vec<[u32; 3]>,
}

impl DeformableRenderMesh {
    /// The deformable vertex index of each mesh vertex (empty until the body is in the
    /// core, and for a body without surface).
    pub fn surface_vertices(&self) -> &[u32] {
        &self.surface_vertices
    }

    /// Surface triangle count of the mesh.
    pub fn triangle_count(&self) -> usize {
        self.triangles.len()
    }

    /// Takes the surface of body `h` (mesh vertex indices).
    fn rebuild(&mut self, physics: &Physics, h: DeformableHandle) {
        self.built_for = Some(h);
        self.surface_vertices.clear();
        self.triangles.clear();
        let Ok(view) = physics.core().deformable(h) else {
            return;
        };
        let tris: Vec<[u32; 3]> = view.surface_triangles().collect();
        self.surface_vertices = tris.iter().flatten().copied().collect();
        self.surface_vertices.sort_unstable();
        self.surface_vertices.dedup();
        let mut to_mesh = vec![u32::MAX; view.vertex_count()];
        for (i, &v) in self.surface_vertices.iter().enumerate() {
            to_mesh[v as usize] = i as u32;
        }
        self.triangles = tris
            .iter()
            .map(|t| t.map(|v| to_mesh[v as usize]))
            .collect();
    }

    /// The mesh's positions and smooth normals from the deformable's vertex positions;
    /// `None` if `positions` does not cover the surface (not written back yet).
    fn vertices(&self, positions: &[Vec3]) -> Option<(Attribute, Attribute)> {
        if self
            .surface_vertices
            .last()
            .is_none_or(|&v| v as usize >= positions.len())
        {
            return None;
        }
        let p: Vec<Vec3> = self
            .surface_vertices
            .iter()
            .map(|&v| positions[v as usize])
            .collect();
        let mut n = vec![Vec3::ZERO; p.len()];
        for t in &self.triangles {
            let [a, b, c] = t.map(|v| v as usize);
            // Area-weighted: the cross product's length is twice the area.
            let face = (p[b] - p[a]).cross(p[c] - p[a]);
            n[a] += face;
            n[b] += face;
            n[c] += face;
        }
        Some((
            p.iter().map(|v| v.to_array()).collect(),
            n.iter()
                .map(|v| v.normalize_or(Vec3::Y).to_array())
                .collect(),
        ))
    }

    fn mesh(&self, positions: Vec<[f32; 3]>, normals: Vec<[f32; 3]>) -> Mesh {
        Mesh::new(
            PrimitiveTopology::TriangleList,
            RenderAssetUsages::default(),
        )
        .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
        .with_inserted_indices(Indices::U32(self.triangles.concat()))
    }
}

/// Overwrites a `Float32x3` attribute of the same length in place; `false` if the mesh has
/// no such attribute (or it was extracted to the render world).
fn overwrite(mesh: &mut Mesh, id: MeshVertexAttribute, v: &[[f32; 3]]) -> bool {
    match mesh.try_attribute_mut(id) {
        Ok(VertexAttributeValues::Float32x3(old)) if old.len() == v.len() => {
            old.copy_from_slice(v);
            true
        }
        _ => false,
    }
}

type SoftMeshes<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        &'static mut DeformableRenderMesh,
        Ref<'static, DeformablePositions>,
        Ref<'static, PhysicsDeformableHandle>,
        Option<&'static Mesh3d>,
    ),
    With<Deformable>,
>;

/// Builds, and rewrites in place, the render meshes of [`DeformableRenderMesh`] entities.
pub(super) fn update_render_meshes(
    physics: Res<Physics>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut commands: Commands,
    mut soft: SoftMeshes,
) {
    for (e, mut rm, positions, handle, mesh3d) in &mut soft {
        let rebuilt = handle.is_changed() || rm.built_for != Some(handle.0);
        if rebuilt {
            rm.rebuild(&physics, handle.0);
        }
        let existing = mesh3d.map(|m| m.0.id()).filter(|&id| meshes.contains(id));
        if existing.is_some() && !rebuilt && !positions.is_changed() {
            continue;
        }
        let Some((p, n)) = rm.vertices(&positions.0) else {
            continue;
        };
        if let Some(id) = existing {
            let Some(mut mesh) = meshes.get_mut(id) else {
                continue;
            };
            let in_place = !rebuilt
                && overwrite(&mut mesh, Mesh::ATTRIBUTE_POSITION, &p)
                && overwrite(&mut mesh, Mesh::ATTRIBUTE_NORMAL, &n);
            if !in_place {
                *mesh = rm.mesh(p, n);
            }
        } else {
            let h = meshes.add(rm.mesh(p, n));
            commands.entity(e).try_insert(Mesh3d(h));
        }
    }
}

/// Adds [`update_render_meshes`] to `PostUpdate`.
pub(super) fn register(app: &mut bevy_app::App) {
    use super::PhysicsSet;
    use bevy_transform::TransformSystems;
    app.add_systems(
        bevy_app::PostUpdate,
        update_render_meshes
            .in_set(PhysicsSet::Interpolate)
            .after(super::interpolation::interpolate_transforms)
            .before(AssetEventSystems)
            .before(TransformSystems::Propagate)
            .run_if(resource_exists::<Assets<Mesh>>),
    );
}
