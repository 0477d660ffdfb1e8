//! Deformable bodies and vertex attachments as entities.
//!
//! - A **deformable** is an entity with a [`Deformable`] (mesh, material, placement and
//!   pinned vertices). Its vertex positions are written back every frame into
//!   [`DeformablePositions`] (mesh order), which a renderer reads to move its mesh.
//!   Changing the `Deformable` re-creates the body from its description (at rest);
//!   despawning it (or removing the component) removes the body and its attachments.
//! - An **attachment** is an entity with a [`VertexAttachment`] that names a deformable
//!   entity, a vertex and a rigid-body entity: a hard, two-way link. It waits (with an
//!   [`InvalidAttachment`]) until both ends exist, like a joint, and is re-created when
//!   either end is re-created.

use std::collections::HashSet;

use bevy_ecs::prelude::*;
use glam::Vec3;

use super::{EcsPhysicsError, LastStepReport, Physics, PhysicsErrorRecord};
use crate::{AttachmentDesc, AttachmentHandle, DeformableDesc, DeformableHandle, PhysicsError};

/// A deformable body: its description, as given to [`crate::PhysicsWorld::add_deformable`].
#[derive(Component, Clone, Debug)]
#[require(DeformablePositions)]
pub struct Deformable(pub DeformableDesc);

/// A deformable's vertex positions (m, mesh order), written back every frame.
#[derive(Component, Clone, Debug, Default, PartialEq)]
pub struct DeformablePositions(pub Vec<Vec3>);

/// Handle of the entity's deformable body in the core world (a read-only mirror, inserted
/// and removed by the sync systems).
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysicsDeformableHandle(pub DeformableHandle);

/// On a [`Deformable`] entity the core rejected: why (a bad mesh or material names its
/// element or field). Retried every frame; removed once the body is accepted.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct InvalidDeformable(pub PhysicsError);

/// A vertex of a deformable entity held to a point of a rigid-body entity.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct VertexAttachment {
    pub deformable: Entity,
    /// Mesh vertex index.
    pub vertex: u32,
    pub body: Entity,
    /// The point in the body frame (relative to its centre of mass); `None` takes the
    /// vertex's position when the attachment is created.
    pub anchor: Option<Vec3>,
    /// Breaks above this force (N).
    pub breaking_force: Option<f32>,
}

/// Handle of the entity's attachment in the core world (a read-only mirror).
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysicsAttachmentHandle(pub AttachmentHandle);

/// On a [`VertexAttachment`] entity that is not in the core: why (an end is missing or the
/// core rejected it). Retried every frame.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct InvalidAttachment(pub EcsPhysicsError);

/// Marker on a [`VertexAttachment`] entity whose attachment broke; it stays broken until
/// the component is changed.
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AttachmentBroken;

/// The deformable and attachment halves of [`Physics`].
#[derive(Default)]
pub(super) struct DeformableMaps {
    pub deformables: std::collections::HashMap<Entity, DeformableHandle>,
    pub deformable_entities: std::collections::HashMap<DeformableHandle, Entity>,
    pub attachments: std::collections::HashMap<Entity, (AttachmentHandle, VertexAttachment)>,
    pub attachment_entities: std::collections::HashMap<AttachmentHandle, Entity>,
    pub pending_deformables: HashSet<Entity>,
    pub pending_attachments: HashSet<Entity>,
}

impl Physics {
    /// The core handle of an entity's deformable body.
    pub fn deformable_handle(&self, entity: Entity) -> Option<DeformableHandle> {
        self.soft.deformables.get(&entity).copied()
    }

    /// The core handle of an entity's attachment.
    pub fn attachment_handle(&self, entity: Entity) -> Option<AttachmentHandle> {
        self.soft.attachments.get(&entity).map(|a| a.0)
    }

    /// Forgets attachments whose core attachment is gone (its body or deformable was
    /// removed): their entities wait again.
    fn drop_stale_attachments(&mut self, commands: &mut Commands) {
        let stale: Vec<Entity> = self
            .soft
            .attachments
            .iter()
            .filter(|(_, (h, _))| self.world.attachment_broken(*h).is_err())
            .map(|(&e, _)| e)
            .collect();
        for e in stale {
            if let Some((h, _)) = self.soft.attachments.remove(&e) {
                self.soft.attachment_entities.remove(&h);
            }
            self.soft.pending_attachments.insert(e);
            commands.entity(e).try_remove::<PhysicsAttachmentHandle>();
        }
    }
}

/// Removes the bodies of despawned deformables and the attachments of despawned attachment
/// entities.
pub(super) fn sync_deformable_removals(
    mut physics: ResMut<Physics>,
    mut commands: Commands,
    mut removed: super::Removed<Deformable>,
    mut removed_attachments: super::Removed<VertexAttachment>,
    has_deformable: Query<(), With<Deformable>>,
    has_attachment: Query<(), With<VertexAttachment>>,
) {
    for e in removed_attachments.read() {
        if has_attachment.contains(e) {
            continue;
        }
        physics.soft.pending_attachments.remove(&e);
        if let Some((h, _)) = physics.soft.attachments.remove(&e) {
            physics.soft.attachment_entities.remove(&h);
            let _ = physics.world.remove_attachment(h);
            commands.entity(e).try_remove::<PhysicsAttachmentHandle>();
        }
    }
    for e in removed.read() {
        if has_deformable.contains(e) {
            continue;
        }
        physics.soft.pending_deformables.remove(&e);
        if let Some(h) = physics.soft.deformables.remove(&e) {
            physics.soft.deformable_entities.remove(&h);
            let _ = physics.world.remove_deformable(h);
            commands
                .entity(e)
                .try_remove::<(PhysicsDeformableHandle, InvalidDeformable)>();
        }
    }
    physics.drop_stale_attachments(&mut commands);
}

/// Creates new and pending deformables; re-creates changed ones.
pub(super) fn sync_deformables(
    mut physics: ResMut<Physics>,
    mut report: ResMut<LastStepReport>,
    mut commands: Commands,
    changed: Query<Entity, Changed<Deformable>>,
    data: Query<(&Deformable, Option<&InvalidDeformable>)>,
) {
    let physics = &mut *physics;
    let mut candidates: Vec<Entity> = physics.soft.pending_deformables.drain().collect();
    for e in &changed {
        if let Some(h) = physics.soft.deformables.remove(&e) {
            physics.soft.deformable_entities.remove(&h);
            let _ = physics.world.remove_deformable(h);
            commands.entity(e).try_remove::<PhysicsDeformableHandle>();
        }
        candidates.push(e);
    }
    candidates.sort_unstable();
    candidates.dedup();
    for e in candidates {
        let Ok((d, invalid)) = data.get(e) else {
            continue;
        };
        match physics.world.add_deformable(d.0.clone()) {
            Ok(h) => {
                physics.soft.deformables.insert(e, h);
                physics.soft.deformable_entities.insert(h, e);
                let mut ec = commands.entity(e);
                ec.try_insert(PhysicsDeformableHandle(h));
                if invalid.is_some() {
                    ec.try_remove::<InvalidDeformable>();
                }
            }
            Err(err) => {
                physics.soft.pending_deformables.insert(e);
                if invalid.map(|i| &i.0) != Some(&err) {
                    report.errors.push(PhysicsErrorRecord {
                        entity: Some(e),
                        error: err.clone().into(),
                    });
                    commands.entity(e).try_insert(InvalidDeformable(err));
                }
            }
        }
    }
    physics.drop_stale_attachments(&mut commands);
}

/// Creates new and pending attachments; re-creates changed ones.
pub(super) fn sync_attachments(
    mut physics: ResMut<Physics>,
    mut report: ResMut<LastStepReport>,
    mut commands: Commands,
    changed: Query<Entity, Changed<VertexAttachment>>,
    data: Query<(
        &VertexAttachment,
        Option<&InvalidAttachment>,
        Has<AttachmentBroken>,
    )>,
) {
    let physics = &mut *physics;
    let mut candidates: Vec<(Entity, bool)> = physics
        .soft
        .pending_attachments
        .drain()
        .map(|e| (e, false))
        .collect();
    for e in &changed {
        let Ok((a, ..)) = data.get(e) else { continue };
        if let Some((h, old)) = physics.soft.attachments.get(&e) {
            if old == a {
                continue; // touched, not changed
            }
            let h = *h;
            physics.soft.attachments.remove(&e);
            physics.soft.attachment_entities.remove(&h);
            let _ = physics.world.remove_attachment(h);
        }
        candidates.push((e, true));
    }
    candidates.sort_unstable_by_key(|&(e, edited)| (e, std::cmp::Reverse(edited)));
    candidates.dedup_by_key(|(e, _)| *e);
    for (e, edited) in candidates {
        if physics.soft.attachments.contains_key(&e) {
            continue;
        }
        let Ok((a, invalid, broken)) = data.get(e) else {
            continue;
        };
        if broken && !edited {
            continue;
        }
        let result = (|| {
            let deformable = physics.soft.deformables.get(&a.deformable).copied().ok_or(
                EcsPhysicsError::MissingBodyEntity {
                    field: "deformable",
                    entity: a.deformable,
                },
            )?;
            let body = physics
                .body_handle(a.body)
                .ok_or(EcsPhysicsError::MissingBodyEntity {
                    field: "body",
                    entity: a.body,
                })?;
            let desc = AttachmentDesc {
                deformable,
                vertex: a.vertex,
                body,
                anchor: a.anchor,
                breaking_force: a.breaking_force,
            };
            Ok::<_, EcsPhysicsError>(physics.world.add_attachment(desc)?)
        })();
        match result {
            Ok(h) => {
                physics.soft.attachments.insert(e, (h, a.clone()));
                physics.soft.attachment_entities.insert(h, e);
                let mut ec = commands.entity(e);
                ec.try_insert(PhysicsAttachmentHandle(h));
                if invalid.is_some() {
                    ec.try_remove::<InvalidAttachment>();
                }
                if broken {
                    ec.try_remove::<AttachmentBroken>();
                }
            }
            Err(err) => {
                physics.soft.pending_attachments.insert(e);
                if invalid.map(|i| &i.0) != Some(&err) {
                    report.errors.push(PhysicsErrorRecord {
                        entity: Some(e),
                        error: err.clone(),
                    });
                    commands.entity(e).try_insert(InvalidAttachment(err));
                }
            }
        }
    }
}

/// Writes every deformable's vertex positions into its [`DeformablePositions`].
pub(super) fn write_deformables(
    physics: &Physics,
    positions: &mut Query<&mut DeformablePositions>,
) {
    for (&e, &h) in &physics.soft.deformables {
        let (Ok(d), Ok(mut p)) = (physics.world.deformable(h), positions.get_mut(e)) else {
            continue;
        };
        let p = &mut p.0;
        p.clear();
        p.extend(d.positions().iter().map(|&x| Vec3::from(x)));
    }
}
