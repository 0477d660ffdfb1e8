//! One stage of [`PhysicsWorld::step`] at a time, for the micro-benchmarks in
//! `benches/kernels.rs`: each function runs exactly the code `step` runs for that stage, on
//! the world's current state, so a kernel can be timed in isolation. Not part of the API.

use crate::pipeline::{collision, coloring, dual, integration, primal, warm_start};
use crate::world::PhysicsWorld;

/// Collision detection at the current poses (broad phase, manifolds, contact points) and
/// the contacts' warm start (records).
pub fn collision(world: &mut PhysicsWorld) {
    collision::detect(
        &world.config,
        &world.bodies,
        &world.joints,
        &mut world.collision,
        &mut world.solver.points,
    );
    warm_start::contacts(&world.config, &world.bodies, &mut world.solver);
}

/// Inertial targets, initial guess and joint warm start: after [`collision`], the state
/// the iterations start from.
pub fn begin(world: &mut PhysicsWorld) {
    integration::begin_step(&world.config, &world.bodies, &mut world.solver);
    dual::warm_start_joints(
        &world.config,
        &world.bodies,
        &mut world.joints,
        &mut world.solver.joint_islands,
    );
}

/// Body→constraint adjacency (CSR) and greedy colouring of this step's constraints.
pub fn coloring(world: &mut PhysicsWorld) {
    coloring::build(&world.bodies, &world.joints, &mut world.solver);
}

/// Everything `step` does before its first iteration: [`collision`], [`begin`], [`coloring`].
pub fn prepare(world: &mut PhysicsWorld) {
    collision(world);
    begin(world);
    coloring(world);
}

/// One primal sweep over all colours (every dynamic body's 6×6 block solve), after [`prepare`].
pub fn primal_sweep(world: &mut PhysicsWorld) {
    primal::sweep(
        &world.config,
        &world.bodies,
        &world.joints,
        &world.attachments,
        &mut world.solver,
    );
}

/// One dual update of every contact and joint, after [`prepare`].
pub fn dual_update(world: &mut PhysicsWorld) {
    dual::update(
        &world.config,
        &world.bodies,
        &mut world.joints,
        &mut world.solver,
        dual::Pass::Inner,
    );
}

/// The deformable bodies' coarse operators at the current initial guess: assembly (the
/// elements' terms, attachments, contact rows) and factorisation (`CoarseLevel::prepare`,
/// as `step` runs it before a step's first iteration).
pub fn coarse_operators(world: &mut PhysicsWorld) {
    let s = &mut world.solver.vertices;
    let contact = s.contact_on.then_some((&s.contact, &s.poses[..]));
    s.coarse.prepare(
        &world.config,
        &world.deformables,
        &world.attachments,
        contact,
        &s.x,
        false,
    );
}
