//! Collision detection on the device, for the GPU backend when every collider is a
//! primitive: the broad phase (`shaders/broad_phase.wgsl`), the narrow phase, the
//! persistence of each pair's manifold and the contact records run in the step's
//! submission (`shaders/contact_narrow.wgsl`). What goes up is each body's collider, its
//! class in the broad phase's grid and the jointed pairs, all by difference (nothing while
//! they stay the same); what comes back is a status block: pairs, touching pairs, points,
//! the deepest penetration, the islands anchored nowhere (the device's connected
//! components, whose momentum it restores itself). The pair list and the islands stay on
//! the device (read on demand).

use bytemuck::{Pod, Zeroable};
use glam::Vec3;

use super::CollisionState;
use super::grid::{self, GridLayout};
use super::primitive::PrimitiveShape;
use crate::config::SolverConfig;
use crate::error::BodyHandle;
use crate::rigid::{BodySet, JointSet};

/// [`PrimitiveShape::kind`] of a body whose collider the device does not handle, or that
/// has none (such a body is in no device pair).
pub const NOT_PRIMITIVE: u32 = 255;

/// A body's collider as the device narrow phase reads it (`BodyShape` in
/// contact_narrow.wgsl): the primitive and its offset from the body's origin, in the body
/// frame (w: 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct BodyShape {
    pub shape: PrimitiveShape,
    pub offset: [f32; 4],
}

/// One candidate pair of a step (`StepPair` in contact_narrow.wgsl): the bodies' solver
/// indices and the pair's index in the last step's list (`u32::MAX` for a new pair).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct StepPair {
    pub a: u32,
    pub b: u32,
    pub old: u32,
    pub pad: u32,
}

/// The device collision detection's input and what comes back of it.
#[derive(Default)]
pub struct DevicePairs {
    /// Whether the current step's contacts are found on the device.
    pub(super) active: bool,
    /// Keep the collision detection on the CPU (tests compare the two paths).
    pub host_only: bool,
    pub shapes: Vec<BodyShape>,
    /// The grid's classes, special bodies and cell size.
    pub layout: GridLayout,
    /// Jointed pairs `[lower, higher]` by solver index, ascending: never candidates.
    pub excluded: Vec<[u32; 2]>,
    /// Whether the device's last pair list is over the same bodies and classes (the last
    /// step's contacts were found on the device and no body was added, removed or changed
    /// its class since): then each pair continues its manifold.
    pub has_old: bool,
    /// The bodies and classes of the last step's list.
    last_handles: Vec<BodyHandle>,
    last_classes: Vec<u32>,
    /// The bodies' layout generation (`BodyEdits::layout`) and margin that `shapes` and
    /// `layout` were made for, whether every collider was a primitive then, and the bodies
    /// in the grid: a step with the same key makes none of it again.
    made_for: Option<(u64, u32)>,
    /// The joints' edits and fractures and the bodies' layout that `excluded` was made
    /// for (`JointSet::edit_key`): a step with the same key does not make it again.
    excluded_for: Option<[u64; 3]>,
    all_primitive: bool,
    in_grid: u32,
    /// After the step: the pairs the broad phase found, and of them those with points (the
    /// list stays on the device: `GpuSolver::pair_list` reads it on demand).
    pub candidates: u32,
    pub touching: u32,
    /// After the step: the deepest penetration (m, ≥ 0) and the number of points.
    pub max_penetration: f32,
    pub points: u32,
    /// After the step: the islands anchored nowhere (by no constraint to a body that is
    /// not solved), whose momentum the device's projection restored.
    pub isolated: u32,
}

impl DevicePairs {
    /// Whether the current step's contacts are found on the device.
    pub fn active(&self) -> bool {
        self.active
    }
    /// Bodies in the broad phase's grid.
    pub fn grid_bodies(&self) -> u32 {
        self.in_grid
    }
}

/// Fills `shapes` with every body's collider; false when a collider of a body that can
/// collide is not a primitive (the CPU's collision detection then runs).
fn collect_shapes(bodies: &BodySet, shapes: &mut Vec<BodyShape>) -> bool {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    let all = AtomicBool::new(true);
    // Body by body, in parallel (a flag, not an order, is all they share).
    (0..bodies.len())
        .into_par_iter()
        .with_min_len(1024)
        .map(|i| {
            let collider = bodies.colliders[i].as_ref().filter(|_| !bodies.frozen[i]);
            let shape = match collider {
                None => PrimitiveShape {
                    dims: [0.0; 3],
                    kind: NOT_PRIMITIVE,
                },
                Some(c) => PrimitiveShape::from_parry(c.shape.as_ref()).unwrap_or_else(|| {
                    all.store(false, Ordering::Relaxed);
                    PrimitiveShape {
                        dims: [0.0; 3],
                        kind: NOT_PRIMITIVE,
                    }
                }),
            };
            let offset: Vec3 = bodies.shape_offsets[i];
            BodyShape {
                shape,
                offset: offset.extend(0.0).to_array(),
            }
        })
        .collect_into_vec(shapes);
    all.into_inner()
}

/// Prepares a step whose collision detection runs on the device (broad phase,
/// `shaders/broad_phase.wgsl`, then narrow phase): the colliders, the grid's layout and
/// the jointed pairs in `state.device`. Returns false, and does nothing, when the config
/// asks for parry3d or a collider is not a primitive: [`super::detect`] runs then.
pub fn detect_pairs(
    cfg: &SolverConfig,
    bodies: &BodySet,
    joints: &JointSet,
    state: &mut CollisionState,
) -> bool {
    use crate::config::NarrowPhase;
    if cfg.narrow_phase != NarrowPhase::Primitive || state.device.host_only {
        return false;
    }
    let device = &mut state.device;
    // The colliders and the grid's layout change only with the bodies' layout (added,
    // removed, frozen, thawed) or the margin: a steady scene makes them once.
    let key = (bodies.edits.layout, cfg.collision_margin.to_bits());
    let remade = device.made_for != Some(key);
    if remade {
        device.made_for = Some(key);
        device.all_primitive = collect_shapes(bodies, &mut device.shapes);
        if device.all_primitive {
            grid::layout(&device.shapes, cfg.collision_margin, &mut device.layout);
            device.in_grid = device
                .layout
                .classes
                .iter()
                .filter(|&&c| c == grid::class::GRID)
                .count() as u32;
        }
    }
    if !device.all_primitive {
        return false;
    }
    let was_active = device.active;
    device.active = true;
    // Broken joints no longer keep their bodies from colliding. The list changes only
    // with the joints (added, removed, broken) and the bodies' indices (their layout).
    let excluded_key = joints.edit_key(bodies);
    if device.excluded_for != Some(excluded_key) {
        device.excluded_for = Some(excluded_key);
        device.excluded.clear();
        device.excluded.extend(
            joints
                .bodies
                .iter()
                .zip(&joints.records)
                .filter(|(_, rec)| !rec.broken())
                .filter_map(|(&(a, b), _)| {
                    let (a, b) = (
                        bodies.index_of[a.0 as usize],
                        bodies.index_of[b?.0 as usize],
                    );
                    Some([a.min(b), a.max(b)])
                }),
        );
        device.excluded.sort_unstable();
        device.excluded.dedup();
    }
    // (Unless remade, the bodies and classes are those of the last step that made them.)
    device.has_old = was_active
        && (!remade
            || (device.last_handles == bodies.handles
                && device.last_classes == device.layout.classes));
    if remade {
        device.last_handles.clone_from(&bodies.handles);
        device.last_classes.clone_from(&device.layout.classes);
    }
    true
}

impl CollisionState {
    /// After a step whose collision detection ran on the device: the deepest penetration
    /// and the number of points, from what came back.
    pub fn device_finished(&mut self) {
        self.max_penetration = self.device.max_penetration;
        self.points = self.device.points as usize;
    }
}
