//! Removals the physics systems must not miss.
//!
//! `RemovedComponents` keeps a removal for two `World::clear_trackers` calls (two
//! `App::update`s). A schedule that does not run every frame (the physics in `FixedPostUpdate`
//! at 60 Hz under a 144 Hz frame rate runs one frame in two or three) would then miss
//! despawns, and the core would keep simulating bodies nobody sees. [`observe_removals`]
//! installs observers that log every removal in a resource kept until the physics systems
//! read it, however long that takes.

use std::marker::PhantomData;

use bevy_ecs::lifecycle::{Remove, RemovedComponents};
use bevy_ecs::prelude::*;
use bevy_ecs::system::SystemParam;

use super::{
    ColliderShape, Deformable, ExternalForce, Inertia, Joint, Mass, RigidBody, VertexAttachment,
};

/// Entities whose `T` was removed since the physics systems last looked.
#[derive(Resource)]
struct RemovalLog<T> {
    entities: Vec<Entity>,
    _component: PhantomData<fn() -> T>,
}

impl<T> Default for RemovalLog<T> {
    fn default() -> Self {
        Self {
            entities: Vec::new(),
            _component: PhantomData,
        }
    }
}

/// Entities whose `T` was removed: from the observer's log when [`observe_removals`] was
/// called, else from `RemovedComponents` (then `World::clear_trackers` must run once per
/// run of the physics schedule).
#[derive(SystemParam)]
pub(super) struct Removed<'w, 's, T: Component> {
    messages: RemovedComponents<'w, 's, T>,
    log: Option<ResMut<'w, RemovalLog<T>>>,
}

impl<T: Component> Removed<'_, '_, T> {
    pub(super) fn read(&mut self) -> Vec<Entity> {
        match &mut self.log {
            Some(log) => {
                self.messages.clear();
                std::mem::take(&mut log.entities)
            }
            None => self.messages.read().collect(),
        }
    }
}

fn log_removals<T: Component>(world: &mut World) {
    if world.contains_resource::<RemovalLog<T>>() {
        return;
    }
    world.init_resource::<RemovalLog<T>>();
    world.add_observer(|event: On<Remove<T>>, mut log: ResMut<RemovalLog<T>>| {
        log.entities.push(event.entity);
    });
}

/// Makes the physics systems see every removal of a physics component (despawns included)
/// however rarely their schedule runs, without `World::clear_trackers` bookkeeping. Call it
/// once on the world (the Bevy plugin does); calling it again does nothing.
pub fn observe_removals(world: &mut World) {
    log_removals::<RigidBody>(world);
    log_removals::<Joint>(world);
    log_removals::<ExternalForce>(world);
    log_removals::<ColliderShape>(world);
    log_removals::<Mass>(world);
    log_removals::<Inertia>(world);
    log_removals::<Deformable>(world);
    log_removals::<VertexAttachment>(world);
}
