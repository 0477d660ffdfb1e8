//! Flat storage of every deformable body: one array of vertices and one of each element
//! kind for the whole world (what the GPU backend uploads as is), with the ranges each
//! body owns, the vertex → element adjacency (CSR) and the vertex colouring.

use std::ops::Range;

use glam::{Vec3, Vec3A};

use super::elastic::{HingeRecord, TetRecord, TriRecord};
use super::material::MaterialRecord;
use super::{DeformableDesc, DeformableShape};
use crate::error::{DeformableHandle, PhysicsError};
use crate::graph::Coloring;

/// Element kinds in an adjacency item.
pub mod item {
    pub const TET: u32 = 0;
    pub const TRI: u32 = 1;
    pub const HINGE: u32 = 2;
    /// `(element << SHIFT) | (kind << 2) | local vertex`.
    pub const SHIFT: u32 = 4;

    #[inline]
    pub fn pack(kind: u32, element: u32, local: u32) -> u32 {
        (element << SHIFT) | (kind << 2) | local
    }
    /// `(kind, element, local vertex)`.
    #[inline]
    pub fn unpack(item: u32) -> (u32, usize, usize) {
        (
            (item >> 2) & 3,
            (item >> SHIFT) as usize,
            (item & 3) as usize,
        )
    }
}

/// Vertex flag: held at its target (pinned, or driven along a kinematic path).
pub const PINNED: u32 = 1;

/// Whether a deformable body is a tet solid or a cloth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeformableKind {
    Solid,
    Cloth,
}

/// What one body owns in the flat arrays.
#[derive(Clone, Debug)]
pub struct DeformableBody {
    pub kind: DeformableKind,
    pub vertices: Range<u32>,
    pub tets: Range<u32>,
    pub tris: Range<u32>,
    pub hinges: Range<u32>,
    pub surface_triangles: Range<u32>,
    pub surface_edges: Range<u32>,
    /// A body that became non-finite is restored to its last state and frozen.
    pub frozen: bool,
}

/// Every deformable body of a world.
#[derive(Default)]
pub struct DeformableSet {
    pub(crate) handles: Vec<DeformableHandle>,
    /// Body index by handle id (`u32::MAX` once removed).
    pub(crate) index_of: Vec<u32>,
    pub(crate) bodies: Vec<DeformableBody>,
    /// One material record per body, by body index (elements refer to it).
    pub(crate) materials: Vec<MaterialRecord>,
    // Per vertex.
    pub(crate) positions: Vec<Vec3A>,
    pub(crate) velocities: Vec<Vec3A>,
    pub(crate) prev_velocities: Vec<Vec3A>,
    /// Rest positions in the mesh's own frame (as given, before placement).
    pub(crate) rest: Vec<Vec3A>,
    pub(crate) masses: Vec<f32>,
    pub(crate) flags: Vec<u32>,
    /// Where a pinned vertex is at the end of the next step.
    pub(crate) targets: Vec<Vec3A>,
    /// Body index of each vertex.
    pub(crate) owner: Vec<u32>,
    // Elements (global vertex indices).
    pub(crate) tets: Vec<TetRecord>,
    pub(crate) tris: Vec<TriRecord>,
    pub(crate) hinges: Vec<HingeRecord>,
    // What contact sees (global vertex indices).
    pub(crate) surface_triangles: Vec<[u32; 3]>,
    pub(crate) surface_edges: Vec<[u32; 2]>,
    // Derived from the above when it changes.
    /// Vertex → element items ([`item`]), CSR.
    pub(crate) incident_offsets: Vec<u32>,
    pub(crate) incident: Vec<u32>,
    /// Vertex colouring over the element graph (pinned and frozen vertices uncoloured).
    pub(crate) colors: Coloring,
    /// Counts the rebuilds: what the solver derives from the topology (the coarse spaces)
    /// is rebuilt when it changes.
    pub(crate) generation: u64,
}

impl DeformableSet {
    pub fn len(&self) -> usize {
        self.bodies.len()
    }
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }
    pub fn vertex_count(&self) -> usize {
        self.positions.len()
    }
    pub(crate) fn index(&self, h: DeformableHandle) -> Option<usize> {
        match self.index_of.get(h.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// Whether vertex `v` is moved by the solver (not pinned, its body not frozen).
    #[inline]
    pub(crate) fn is_solved(&self, v: usize) -> bool {
        self.flags[v] & PINNED == 0 && !self.bodies[self.owner[v] as usize].frozen
    }

    /// The elements incident to vertex `v` ([`item`]s).
    #[inline]
    pub(crate) fn incident(&self, v: usize) -> &[u32] {
        &self.incident[self.incident_offsets[v] as usize..self.incident_offsets[v + 1] as usize]
    }

    /// Adds a body from a validated description; returns its handle.
    pub(crate) fn add(&mut self, desc: &DeformableDesc) -> Result<DeformableHandle, PhysicsError> {
        desc.validate()?;
        let body = self.bodies.len() as u32;
        let v0 = self.positions.len() as u32;
        let place = |p: Vec3| desc.position + desc.rotation * p;
        let (kind, mesh_vertices, material) = match &desc.shape {
            DeformableShape::Solid { mesh, material } => {
                (DeformableKind::Solid, &mesh.vertices, material.record())
            }
            DeformableShape::Cloth { mesh, material } => {
                (DeformableKind::Cloth, &mesh.vertices, material.record())
            }
        };
        let n = mesh_vertices.len();
        let mut masses = vec![0.0f32; n];
        let (t0, r0, h0) = (
            self.tets.len() as u32,
            self.tris.len() as u32,
            self.hinges.len() as u32,
        );
        let (s0, e0) = (
            self.surface_triangles.len() as u32,
            self.surface_edges.len() as u32,
        );
        let world: Vec<Vec3> = mesh_vertices.iter().map(|&p| place(p)).collect();
        let surface = match &desc.shape {
            DeformableShape::Solid { mesh, .. } => {
                for t in &mesh.tets {
                    let rec = TetRecord::new(
                        t.map(|v| v + v0),
                        t.map(|v| mesh.vertices[v as usize]),
                        body,
                    );
                    for &v in t {
                        masses[v as usize] += material.density * rec.volume / 4.0;
                    }
                    self.tets.push(rec);
                }
                mesh.surface()
            }
            DeformableShape::Cloth { mesh, .. } => {
                for t in &mesh.triangles {
                    let rec = TriRecord::new(
                        t.map(|v| v + v0),
                        t.map(|v| mesh.vertices[v as usize]),
                        body,
                    );
                    for &v in t {
                        masses[v as usize] += material.density * rec.area / 3.0;
                    }
                    self.tris.push(rec);
                }
                if material.bending > 0.0 {
                    for hinge in mesh.hinges() {
                        let x = hinge.v.map(|v| mesh.vertices[v as usize]);
                        self.hinges
                            .push(HingeRecord::new(hinge.v.map(|v| v + v0), x, body));
                    }
                }
                mesh.surface()
            }
        };
        self.surface_triangles
            .extend(surface.triangles.iter().map(|t| t.map(|v| v + v0)));
        self.surface_edges
            .extend(surface.edges.iter().map(|e| e.map(|v| v + v0)));
        let v = Vec3A::from(desc.linear_velocity);
        for (i, &p) in world.iter().enumerate() {
            self.positions.push(p.into());
            self.targets.push(p.into());
            self.velocities.push(v);
            self.prev_velocities.push(v);
            self.rest.push(mesh_vertices[i].into());
            self.masses.push(masses[i]);
            self.flags.push(0);
            self.owner.push(body);
        }
        for &p in &desc.pinned {
            self.flags[(v0 + p) as usize] |= PINNED;
        }
        self.bodies.push(DeformableBody {
            kind,
            vertices: v0..self.positions.len() as u32,
            tets: t0..self.tets.len() as u32,
            tris: r0..self.tris.len() as u32,
            hinges: h0..self.hinges.len() as u32,
            surface_triangles: s0..self.surface_triangles.len() as u32,
            surface_edges: e0..self.surface_edges.len() as u32,
            frozen: false,
        });
        self.materials.push(material);
        let handle = DeformableHandle(self.index_of.len() as u32);
        self.index_of.push(body);
        self.handles.push(handle);
        self.rebuild();
        Ok(handle)
    }

    /// Removes body `i`: its vertices, elements and surface leave the flat arrays and the
    /// bodies after it shift down. Returns the removed vertex range, so that whatever
    /// refers to vertices by index (attachments) can be re-pointed.
    pub(crate) fn remove(&mut self, h: DeformableHandle) -> Option<Range<u32>> {
        let i = self.index(h)?;
        let b = self.bodies.remove(i);
        self.materials.remove(i);
        self.handles.remove(i);
        self.index_of[h.0 as usize] = u32::MAX;
        for later in &self.handles[i..] {
            self.index_of[later.0 as usize] -= 1;
        }
        let nv = b.vertices.end - b.vertices.start;
        let shift_v = |v: u32| if v >= b.vertices.end { v - nv } else { v };
        let cut = |r: &Range<u32>| r.start as usize..r.end as usize;
        for list in [
            &mut self.positions,
            &mut self.velocities,
            &mut self.prev_velocities,
            &mut self.rest,
            &mut self.targets,
        ] {
            list.drain(cut(&b.vertices));
        }
        self.masses.drain(cut(&b.vertices));
        self.flags.drain(cut(&b.vertices));
        self.owner.drain(cut(&b.vertices));
        for o in &mut self.owner {
            if *o > i as u32 {
                *o -= 1;
            }
        }
        self.tets.drain(cut(&b.tets));
        self.tris.drain(cut(&b.tris));
        self.hinges.drain(cut(&b.hinges));
        self.surface_triangles.drain(cut(&b.surface_triangles));
        self.surface_edges.drain(cut(&b.surface_edges));
        let material = |m: u32| if m > i as u32 { m - 1 } else { m };
        for t in &mut self.tets {
            t.v = t.v.map(shift_v);
            t.material = material(t.material);
        }
        for t in &mut self.tris {
            t.v = t.v.map(shift_v);
            t.material = material(t.material);
        }
        for t in &mut self.hinges {
            t.v = t.v.map(shift_v);
            t.material = material(t.material);
        }
        for t in &mut self.surface_triangles {
            *t = t.map(shift_v);
        }
        for e in &mut self.surface_edges {
            *e = e.map(shift_v);
        }
        let lens = [
            nv,
            b.tets.end - b.tets.start,
            b.tris.end - b.tris.start,
            b.hinges.end - b.hinges.start,
            b.surface_triangles.end - b.surface_triangles.start,
            b.surface_edges.end - b.surface_edges.start,
        ];
        for later in &mut self.bodies[i..] {
            for (r, len) in [
                &mut later.vertices,
                &mut later.tets,
                &mut later.tris,
                &mut later.hinges,
                &mut later.surface_triangles,
                &mut later.surface_edges,
            ]
            .into_iter()
            .zip(lens)
            {
                *r = r.start - len..r.end - len;
            }
        }
        self.rebuild();
        Some(b.vertices)
    }

    /// Rebuilds the vertex → element adjacency and the colouring (after a change of
    /// topology, of the pinned set or of a body's frozen state).
    pub(crate) fn rebuild(&mut self) {
        self.generation += 1;
        let n = self.positions.len();
        let mut counts = vec![0u32; n + 1];
        let tets = self.tets.iter().map(|t| &t.v[..]);
        let tris = self.tris.iter().map(|t| &t.v[..]);
        let hinges = self.hinges.iter().map(|t| &t.v[..]);
        for v in tets
            .clone()
            .chain(tris.clone())
            .chain(hinges.clone())
            .flatten()
        {
            counts[*v as usize + 1] += 1;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let mut cursor = counts.clone();
        self.incident.clear();
        self.incident.resize(counts[n] as usize, 0);
        for (kind, list) in [
            (item::TET, tets.collect::<Vec<_>>()),
            (item::TRI, tris.collect()),
            (item::HINGE, hinges.collect()),
        ] {
            for (e, verts) in list.into_iter().enumerate() {
                for (local, &v) in verts.iter().enumerate() {
                    let c = &mut cursor[v as usize];
                    self.incident[*c as usize] = item::pack(kind, e as u32, local as u32);
                    *c += 1;
                }
            }
        }
        self.incident_offsets = counts;
        let mut colors = std::mem::take(&mut self.colors);
        let set = &*self;
        colors.greedy(
            n,
            |v| set.is_solved(v),
            |v| {
                set.incident(v).iter().flat_map(move |&it| {
                    let (kind, e, _) = item::unpack(it);
                    let verts: [u32; 4] = match kind {
                        item::TET => set.tets[e].v,
                        item::TRI => {
                            let t = set.tris[e].v;
                            [t[0], t[1], t[2], t[0]]
                        }
                        _ => set.hinges[e].v,
                    };
                    verts
                })
            },
        );
        self.colors = colors;
    }

    /// Positions, velocities and flags of body `i`'s vertices.
    pub(crate) fn vertex_range(&self, i: usize) -> Range<usize> {
        let r = &self.bodies[i].vertices;
        r.start as usize..r.end as usize
    }
}
