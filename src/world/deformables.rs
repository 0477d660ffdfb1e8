//! The deformable half of the world's API: adding, removing, reading and driving deformable
//! bodies, and attaching their vertices to rigid bodies.

use glam::{Vec3, Vec3A};

use super::PhysicsWorld;
use crate::deformable::attachment::{AttachmentRecord, flags};
use crate::deformable::set::{DeformableBody, PINNED};
use crate::deformable::{AttachmentDesc, DeformableDesc, DeformableKind, DeformableSet};
use crate::error::{AttachmentHandle, BodyRef, DeformableHandle, PhysicsError};
use crate::pipeline::surface_contact::start::{Side, first_intersection};

/// Read-only view of one deformable body. Indices (triangles, tets, edges) are the body's
/// own mesh vertex indices.
#[derive(Clone, Copy)]
pub struct DeformableView<'a> {
    set: &'a DeformableSet,
    body: &'a DeformableBody,
}

impl<'a> DeformableView<'a> {
    fn range(&self) -> std::ops::Range<usize> {
        self.body.vertices.start as usize..self.body.vertices.end as usize
    }
    fn local(&self, v: u32) -> u32 {
        v - self.body.vertices.start
    }

    pub fn kind(&self) -> DeformableKind {
        self.body.kind
    }
    pub fn vertex_count(&self) -> usize {
        self.range().len()
    }
    /// Vertex positions (m), in mesh order.
    pub fn positions(&self) -> &'a [Vec3A] {
        &self.set.positions[self.range()]
    }
    /// Vertex velocities (m/s).
    pub fn velocities(&self) -> &'a [Vec3A] {
        &self.set.velocities[self.range()]
    }
    /// Lumped vertex masses (kg).
    pub fn masses(&self) -> &'a [f32] {
        &self.set.masses[self.range()]
    }
    /// Rest positions, in the mesh's own frame as it was given.
    pub fn rest_positions(&self) -> &'a [Vec3A] {
        &self.set.rest[self.range()]
    }
    /// Whether vertex `v` is pinned (held at its target).
    pub fn pinned(&self, v: u32) -> bool {
        self.set.flags[self.body.vertices.start as usize + v as usize] & PINNED != 0
    }
    /// The material as the solver uses it (shear modulus, Neo-Hookean λ', …).
    pub fn material(&self) -> crate::deformable::material::MaterialRecord {
        let i = self.set.owner[self.body.vertices.start as usize] as usize;
        self.set.materials[i]
    }
    /// Whether the body became non-finite and was frozen.
    pub fn frozen(&self) -> bool {
        self.body.frozen
    }
    /// Boundary triangles (outward) for a solid, every triangle for a cloth.
    pub fn surface_triangles(&self) -> impl Iterator<Item = [u32; 3]> + 'a {
        let start = self.body.vertices.start;
        let r = &self.body.surface_triangles;
        self.set.surface_triangles[r.start as usize..r.end as usize]
            .iter()
            .map(move |t| t.map(|v| v - start))
    }
    /// Edges of the surface triangles.
    pub fn surface_edges(&self) -> impl Iterator<Item = [u32; 2]> + 'a {
        let start = self.body.vertices.start;
        let r = &self.body.surface_edges;
        self.set.surface_edges[r.start as usize..r.end as usize]
            .iter()
            .map(move |e| e.map(|v| v - start))
    }
    /// Tetrahedra (solids; empty for a cloth).
    pub fn tets(&self) -> impl Iterator<Item = [u32; 4]> + 'a {
        let this = *self;
        let r = &self.body.tets;
        self.set.tets[r.start as usize..r.end as usize]
            .iter()
            .map(move |t| t.v.map(|v| this.local(v)))
    }
    /// Triangles (cloth; empty for a solid).
    pub fn triangles(&self) -> impl Iterator<Item = [u32; 3]> + 'a {
        let this = *self;
        let r = &self.body.tris;
        self.set.tris[r.start as usize..r.end as usize]
            .iter()
            .map(move |t| t.v.map(|v| this.local(v)))
    }
    /// Total mass (kg).
    pub fn mass(&self) -> f32 {
        self.masses().iter().sum()
    }
    /// Centre of mass (m). Summed in f64: an f32 sum of 15,625 vertices 10 m from the
    /// origin was off by 1.5 mm.
    pub fn center_of_mass(&self) -> Vec3 {
        let m = self.masses();
        let (sum, total) = self
            .positions()
            .iter()
            .zip(m)
            .fold((glam::DVec3::ZERO, 0.0f64), |(s, t), (x, &mi)| {
                (s + Vec3::from(*x).as_dvec3() * mi as f64, t + mi as f64)
            });
        (sum / total).as_vec3()
    }
    /// Current volume of a solid (m³; sum of signed tet volumes).
    pub fn volume(&self) -> f32 {
        let r = &self.body.tets;
        self.set.tets[r.start as usize..r.end as usize]
            .iter()
            .map(|t| {
                let x = t.v.map(|v| Vec3::from(self.set.positions[v as usize]));
                crate::deformable::mesh::tet_volume(x)
            })
            .sum()
    }
    /// Smallest volume ratio J = V/V₀ over the tets (1 at rest, ≤ 0 for an inverted
    /// element), and the number of tets with J ≤ 0.
    pub fn min_volume_ratio(&self) -> (f32, usize) {
        let r = &self.body.tets;
        let mut min = f32::INFINITY;
        let mut inverted = 0;
        for t in &self.set.tets[r.start as usize..r.end as usize] {
            let x = t.v.map(|v| Vec3::from(self.set.positions[v as usize]));
            let j = crate::deformable::mesh::tet_volume(x) / t.volume;
            min = min.min(j);
            inverted += (j <= 0.0) as usize;
        }
        (min, inverted)
    }
}

impl PhysicsWorld {
    /// Adds a deformable body (a tet solid or a cloth). The mesh, material, placement and
    /// pinned vertices are validated first and nothing changes on error. On the GPU
    /// backend, the log-barrier contact model is refused ([`PhysicsError::Unsupported`]), and
    /// so is a deformable beside a dynamic or kinematic half-space, on both.
    pub fn add_deformable(
        &mut self,
        desc: DeformableDesc,
    ) -> Result<DeformableHandle, PhysicsError> {
        self.idle()?;
        self.gpu_runs_deformables(&self.config)?;
        let b = &self.bodies;
        if (0..b.len())
            .any(|i| super::bodies::moving_halfspace(b.kinds[i], b.colliders[i].as_ref()))
        {
            return Err(super::bodies::moving_halfspace_error());
        }
        let h = self.deformables.add(&desc)?;
        let i = self.deformables.index(h).expect("just added");
        if let Err(e) = self.refuse_intersecting(Side::Deformable(i)) {
            self.deformables.remove(h).expect("just added");
            return Err(e);
        }
        Ok(h)
    }

    /// What the GPU backend cannot run of the deformable bodies yet, as a typed error: the
    /// log-barrier baseline. The elastic step, pins, the two-level step, the attachments
    /// and contact (among deformables, with static and moving colliders) run on the device
    /// (`gpu::soft`, `gpu::soft_contact`).
    pub(super) fn gpu_runs_deformables(
        &self,
        cfg: &crate::config::SolverConfig,
    ) -> Result<(), PhysicsError> {
        if self.gpu.is_none() || !cfg.deformable_contact {
            return Ok(());
        }
        if cfg.contact_model == crate::config::ContactModel::Barrier {
            return Err(PhysicsError::Unsupported(
                "the log-barrier contact model runs on the CPU backend only".into(),
            ));
        }
        Ok(())
    }

    /// [`PhysicsError::IntersectingStart`] if body `subject` (just added) crosses, touches
    /// or contains another surface or itself (`surface_contact::start`).
    pub(super) fn refuse_intersecting(&self, subject: Side) -> Result<(), PhysicsError> {
        let name = |s: Side| match s {
            Side::Deformable(i) => BodyRef::Deformable(self.deformables.handles[i]),
            Side::Rigid(i) => BodyRef::Rigid(self.bodies.handles[i]),
        };
        match first_intersection(&self.deformables, &self.bodies, subject) {
            Some(other) => Err(PhysicsError::IntersectingStart {
                added: name(subject),
                other: name(other),
            }),
            None => Ok(()),
        }
    }

    /// Removes a deformable body and its attachments (returned).
    pub fn remove_deformable(
        &mut self,
        h: DeformableHandle,
    ) -> Result<Vec<AttachmentHandle>, PhysicsError> {
        self.idle()?;
        if self.deformables.index(h).is_none() {
            return Err(PhysicsError::MissingDeformable(h));
        }
        let attached: Vec<AttachmentHandle> = self
            .attachments
            .handles
            .iter()
            .zip(&self.attachments.ends)
            .filter(|(_, e)| e.0 == h)
            .map(|(a, _)| *a)
            .collect();
        for a in &attached {
            self.attachments.remove(*a);
        }
        let removed = self.deformables.remove(h).expect("checked above");
        let n = removed.end - removed.start;
        for rec in &mut self.attachments.records {
            if rec.vertex >= removed.end {
                rec.vertex -= n;
            }
        }
        Ok(attached)
    }

    pub fn contains_deformable(&self, h: DeformableHandle) -> bool {
        self.deformables.index(h).is_some()
    }

    pub fn deformable_count(&self) -> usize {
        self.deformables.len()
    }

    /// Handles of all deformable bodies, in storage order.
    pub fn deformable_handles(&self) -> &[DeformableHandle] {
        &self.deformables.handles
    }

    /// Read-only view of a deformable body: positions, velocities, topology.
    pub fn deformable(&self, h: DeformableHandle) -> Result<DeformableView<'_>, PhysicsError> {
        let i = self
            .deformables
            .index(h)
            .ok_or(PhysicsError::MissingDeformable(h))?;
        Ok(DeformableView {
            set: &self.deformables,
            body: &self.deformables.bodies[i],
        })
    }

    fn vertex_of(&self, h: DeformableHandle, v: u32) -> Result<usize, PhysicsError> {
        let i = self
            .deformables
            .index(h)
            .ok_or(PhysicsError::MissingDeformable(h))?;
        let r = &self.deformables.bodies[i].vertices;
        if v >= r.end - r.start {
            return Err(PhysicsError::InvalidDeformable {
                field: "vertex",
                reason: format!(
                    "vertex {v} is out of range (the body has {} vertices)",
                    r.end - r.start
                ),
            });
        }
        Ok((r.start + v) as usize)
    }

    /// Pins (`true`) or releases (`false`) vertices of a deformable body. A pinned vertex
    /// is eliminated from the solve and held at its target (where it is now, until
    /// [`Self::drive_vertices`] moves it).
    pub fn pin_vertices(
        &mut self,
        h: DeformableHandle,
        vertices: &[u32],
        pinned: bool,
    ) -> Result<(), PhysicsError> {
        self.idle()?;
        let global = vertices
            .iter()
            .map(|&v| self.vertex_of(h, v))
            .collect::<Result<Vec<_>, _>>()?;
        let set = &mut self.deformables;
        for v in global {
            if pinned {
                set.flags[v] |= PINNED;
                set.targets[v] = set.positions[v];
            } else {
                set.flags[v] &= !PINNED;
            }
        }
        set.rebuild();
        Ok(())
    }

    /// Drives pinned vertices along a kinematic path: each listed vertex (pinned if it was
    /// not) ends the next step at its target, with velocity `(target − x)/h`, and stays
    /// there until driven again. No penalty spring is involved: the target is the vertex's
    /// position in the solve. In a step where the vertex's body is in a contact island
    /// that loses motion (an impact the fixed budget does not resolve:
    /// [`crate::SurfaceContactStats::lost_motion`] β), the vertex ends at most β of the
    /// way short and moves on from there (`deformable_edits_mid_run_match_the_cpu`).
    pub fn drive_vertices(
        &mut self,
        h: DeformableHandle,
        targets: &[(u32, Vec3)],
    ) -> Result<(), PhysicsError> {
        self.idle()?;
        let mut global = Vec::with_capacity(targets.len());
        for &(v, t) in targets {
            if !t.is_finite() {
                return Err(PhysicsError::InvalidDeformable {
                    field: "target",
                    reason: format!("target of vertex {v} is not finite"),
                });
            }
            global.push((self.vertex_of(h, v)?, t));
        }
        let set = &mut self.deformables;
        let mut newly_pinned = false;
        for (v, t) in global {
            newly_pinned |= set.flags[v] & PINNED == 0;
            set.flags[v] |= PINNED;
            set.targets[v] = t.into();
        }
        if newly_pinned {
            set.rebuild();
        }
        Ok(())
    }

    /// Sets the velocity of every vertex of a deformable body (m/s).
    pub fn set_deformable_velocity(
        &mut self,
        h: DeformableHandle,
        v: Vec3,
    ) -> Result<(), PhysicsError> {
        self.idle()?;
        if !v.is_finite() {
            return Err(PhysicsError::InvalidDeformable {
                field: "linear_velocity",
                reason: "not finite".into(),
            });
        }
        let i = self
            .deformables
            .index(h)
            .ok_or(PhysicsError::MissingDeformable(h))?;
        for k in self.deformables.vertex_range(i) {
            self.deformables.velocities[k] = v.into();
            self.deformables.prev_velocities[k] = v.into();
        }
        Ok(())
    }

    // ------------------------------------------------------------ attachments

    /// Attaches a vertex of a deformable body to a point of a rigid body with a hard
    /// constraint (two-way: the body feels the reaction).
    pub fn add_attachment(
        &mut self,
        desc: AttachmentDesc,
    ) -> Result<AttachmentHandle, PhysicsError> {
        self.idle()?;
        let v = self.vertex_of(desc.deformable, desc.vertex)?;
        let b = self
            .bodies
            .index(desc.body)
            .ok_or(PhysicsError::MissingBody(desc.body))?;
        let bad = |field, reason: String| PhysicsError::InvalidAttachment { field, reason };
        let pose = self.bodies.poses[b];
        let anchor = match desc.anchor {
            Some(a) if !a.is_finite() => return Err(bad("anchor", "not finite".into())),
            Some(a) => a,
            None => pose.q().conjugate() * (Vec3::from(self.deformables.positions[v]) - pose.p()),
        };
        let mut rec = AttachmentRecord {
            vertex: v as u32,
            body: b as u32,
            anchor: anchor.extend(0.0).to_array(),
            ..Default::default()
        };
        if let Some(f) = desc.breaking_force {
            if !(f.is_finite() && f > 0.0) {
                return Err(bad(
                    "breaking_force",
                    format!("must be finite and > 0, got {f}"),
                ));
            }
            rec.flags |= flags::BREAKABLE;
            rec.breaking_force = f;
        }
        Ok(self
            .attachments
            .push(rec, (desc.deformable, desc.vertex, desc.body)))
    }

    pub fn remove_attachment(&mut self, h: AttachmentHandle) -> Result<(), PhysicsError> {
        self.idle()?;
        if self.attachments.remove(h) {
            Ok(())
        } else {
            Err(PhysicsError::MissingAttachment(h))
        }
    }

    pub fn attachment_handles(&self) -> &[AttachmentHandle] {
        &self.attachments.handles
    }

    fn attachment_record(&self, h: AttachmentHandle) -> Result<&AttachmentRecord, PhysicsError> {
        let i = self
            .attachments
            .index(h)
            .ok_or(PhysicsError::MissingAttachment(h))?;
        Ok(&self.attachments.records[i])
    }

    /// What an attachment links: the deformable, its mesh vertex, and the rigid body.
    pub fn attachment_ends(
        &self,
        h: AttachmentHandle,
    ) -> Result<(DeformableHandle, u32, crate::BodyHandle), PhysicsError> {
        let i = self
            .attachments
            .index(h)
            .ok_or(PhysicsError::MissingAttachment(h))?;
        Ok(self.attachments.ends[i])
    }

    /// The rigid body an attachment holds.
    pub fn attachment_body(&self, h: AttachmentHandle) -> Result<crate::BodyHandle, PhysicsError> {
        let i = self
            .attachments
            .index(h)
            .ok_or(PhysicsError::MissingAttachment(h))?;
        Ok(self.attachments.ends[i].2)
    }

    /// Whether the attachment has broken (it stays in the world, inactive).
    pub fn attachment_broken(&self, h: AttachmentHandle) -> Result<bool, PhysicsError> {
        Ok(self.attachment_record(h)?.broken())
    }

    /// The force the attachment applies to its rigid body (N; the vertex feels the
    /// opposite): its multipliers at the end of the last step.
    pub fn attachment_force(&self, h: AttachmentHandle) -> Result<Vec3, PhysicsError> {
        Ok(self.attachment_record(h)?.lambda())
    }

    /// The force the deformables' surface contacts put on rigid body `h` in the last step
    /// (N): the contact rows' normal force and friction at the step's end.
    pub fn surface_contact_force(&self, h: crate::BodyHandle) -> Result<Vec3, PhysicsError> {
        let i = self.bodies.index(h).ok_or(PhysicsError::MissingBody(h))?;
        let s = &self.solver.vertices;
        Ok(match s.contact_on {
            true => s
                .contact
                .force_on_body(&self.config, &self.deformables, &self.bodies, i),
            false => Vec3::ZERO,
        })
    }

    /// Distance between the vertex and its anchor on the body now (m).
    pub fn attachment_error(&self, h: AttachmentHandle) -> Result<f32, PhysicsError> {
        let rec = self.attachment_record(h)?;
        let x = Vec3::from(self.deformables.positions[rec.vertex as usize]);
        Ok(rec.error(x, &self.bodies.poses[rec.body as usize]).length())
    }
}
