//! Collision events for gameplay, derived from the contact records of each step: a pair of
//! body entities "starts" when it first has a contact point and "ends" when it has none.
//! Contact points appear within `SolverConfig::collision_margin` (1 cm by default), so a
//! pair can start with zero force a step before it presses.
//!
//! Events go to entities that opt in with [`CollisionEvents`] (a pile of 5,000 boxes would
//! otherwise trigger thousands per step): one [`CollisionStarted`]/[`CollisionEnded`] per
//! opted-in body of the pair, observed with `commands.entity(e).observe(..)` or globally
//! with `app.add_observer(..)`. [`ContactPairs`] lists every pair in contact after the last
//! step. Rigid contacts only: deformables' surface contacts are not reported here.

use std::collections::BTreeMap;

use bevy_ecs::prelude::*;

use super::control::PhysicsControl;
use crate::ecs::{LastStepReport, Physics};

/// Opt-in marker: this body gets [`CollisionStarted`] and [`CollisionEnded`] events.
#[derive(Component, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollisionEvents;

/// `entity` began touching `other` in the last step.
#[derive(EntityEvent, Clone, Copy, Debug, PartialEq)]
pub struct CollisionStarted {
    pub entity: Entity,
    pub other: Entity,
    /// Total normal contact force of the pair in that step (N; NaN when the GPU backend's
    /// forces were not read back, see [`ContactPairs`]).
    pub force: f32,
}

/// `entity` stopped touching `other` in the last step (or `other` was despawned).
#[derive(EntityEvent, Clone, Copy, Debug, PartialEq)]
pub struct CollisionEnded {
    pub entity: Entity,
    pub other: Entity,
    /// Total normal force of the pair in the last step it was in contact (N): at rest, the
    /// weight it carried.
    pub force: f32,
}

/// Pairs of body entities in contact after the last step, with their total normal force
/// (N: the sum of the contact rows' normal multipliers). Keys are ordered (smaller entity
/// first). On the GPU backend with `StepMode::Overlapped` the forces of the step in flight
/// are not read back (that would wait for the GPU): they are NaN.
#[derive(Resource, Clone, Debug, Default, PartialEq)]
pub struct ContactPairs {
    pairs: BTreeMap<(Entity, Entity), f32>,
}

impl ContactPairs {
    /// The pair's normal force, if the two are in contact.
    pub fn force(&self, a: Entity, b: Entity) -> Option<f32> {
        self.pairs.get(&(a.min(b), a.max(b))).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = ((Entity, Entity), f32)> + '_ {
        self.pairs.iter().map(|(&k, &f)| (k, f))
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// The pairs of the contact records the core holds now.
fn current_pairs(physics: &Physics) -> BTreeMap<(Entity, Entity), f32> {
    let core = physics.core();
    let entity = |i: u32| core.handle_of_index(i).and_then(|h| physics.body_entity(h));
    let mut pairs = BTreeMap::new();
    let mut add = |a: u32, b: u32, f: f32| {
        if let (Some(ea), Some(eb)) = (entity(a), entity(b)) {
            *pairs.entry((ea.min(eb), ea.max(eb))).or_insert(0.0) += f;
        }
    };
    // Forces need the solved records: free on the CPU, a readback on the GPU (skipped while
    // a step is in flight).
    let records = (core.backend() == "cpu" || !core.step_in_flight())
        .then(|| core.contacts().ok())
        .flatten();
    match records {
        // λ_n ≤ 0 pushes the bodies apart; its magnitude is the normal force.
        Some(records) => records
            .iter()
            .for_each(|c| add(c.body_a, c.body_b, (-c.lambda[2]).max(0.0))),
        // (When the device found the contacts, this reads their pairs back, waiting for
        // the step in flight.)
        None => core
            .touching_pairs()
            .unwrap_or_default()
            .into_iter()
            .for_each(|(a, b)| add(a, b, f32::NAN)),
    }
    pairs
}

/// After a step: compares the pairs with the previous step's and triggers the events.
pub(crate) fn collision_events(
    physics: Res<Physics>,
    report: Res<LastStepReport>,
    control: Res<PhysicsControl>,
    mut pairs: ResMut<ContactPairs>,
    listeners: Query<(), With<CollisionEvents>>,
    mut commands: Commands,
) {
    if !(control.stepping() && report.stepped) {
        return;
    }
    let now = current_pairs(&physics);
    let before = std::mem::take(&mut pairs.pairs);
    for (&(a, b), &force) in &now {
        if before.contains_key(&(a, b)) {
            continue;
        }
        for (entity, other) in [(a, b), (b, a)] {
            if listeners.contains(entity) {
                commands.trigger(CollisionStarted {
                    entity,
                    other,
                    force,
                });
            }
        }
    }
    for (&(a, b), &force) in &before {
        if now.contains_key(&(a, b)) {
            continue;
        }
        for (entity, other) in [(a, b), (b, a)] {
            if listeners.contains(entity) {
                commands.trigger(CollisionEnded {
                    entity,
                    other,
                    force,
                });
            }
        }
    }
    pairs.pairs = now;
}
