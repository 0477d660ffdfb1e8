//! Collision detection split between the CPU and the device, for the GPU backend when every
//! collider is a primitive: the broad phase stays here ([`super::find_pairs`]); the
//! narrow phase, the persistence of each pair's manifold and the contact records run in
//! the step's submission (`shaders/contact_narrow.wgsl`). What goes up is the pair list
//! (16 bytes a pair, by difference: nothing while the pairs stay the same) and each
//! body's collider (by difference); what comes back is a byte per pair (its point count,
//! for the islands and the statistics) and the deepest penetration.

use bytemuck::{Pod, Zeroable};
use glam::Vec3;

use super::primitive::PrimitiveShape;
use super::{CollisionState, find_pairs};
use crate::config::SolverConfig;
use crate::rigid::{BodySet, JointSet};

/// A pair's index in the last step's list when it was not in it (`NO_OLD` in WGSL).
pub const NO_OLD: u32 = u32::MAX;

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
/// indices and the pair's index in the last step's list ([`NO_OLD`] for a new pair).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct StepPair {
    pub a: u32,
    pub b: u32,
    pub old: u32,
    pub pad: u32,
}

/// The device narrow phase's input and what comes back of it.
#[derive(Default)]
pub struct DevicePairs {
    /// Whether the last step's contacts were found on the device (then each pair's
    /// `slot` is its index in that step's list, where the device keeps its manifold).
    pub(super) active: bool,
    /// Keep the narrow phase on the CPU (tests compare the two paths).
    pub host_only: bool,
    pub shapes: Vec<BodyShape>,
    pub pairs: Vec<StepPair>,
    /// After the step: each pair's point count (0 to 4), one byte per pair, rounded up to
    /// whole words.
    pub counts: Vec<u8>,
    /// After the step: the deepest penetration (m, ≥ 0) and the number of points.
    pub max_penetration: f32,
    pub points: u32,
}

impl DevicePairs {
    /// Whether the current step's contacts are found on the device.
    pub fn active(&self) -> bool {
        self.active
    }
}

/// Fills `shapes` with every body's collider; false when a collider of a body that can
/// collide is not a primitive (the CPU's narrow phase then runs).
fn collect_shapes(bodies: &BodySet, shapes: &mut Vec<BodyShape>) -> bool {
    shapes.clear();
    let mut all = true;
    shapes.extend((0..bodies.len()).map(|i| {
        let collider = bodies.colliders[i].as_ref().filter(|_| !bodies.frozen[i]);
        let shape = match collider {
            None => PrimitiveShape {
                dims: [0.0; 3],
                kind: NOT_PRIMITIVE,
            },
            Some(c) => PrimitiveShape::from_parry(c.shape.as_ref()).unwrap_or_else(|| {
                all = false;
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
    }));
    all
}

/// The broad phase of a step whose narrow phase runs on the device: fills `state.device`
/// with the colliders and the candidate pairs. Returns false, and does nothing, when the
/// config asks for parry3d or a collider is not a primitive: [`super::detect`] runs then.
pub fn detect_pairs(
    cfg: &SolverConfig,
    bodies: &BodySet,
    joints: &JointSet,
    state: &mut CollisionState,
) -> bool {
    use crate::config::NarrowPhase;
    if cfg.narrow_phase != NarrowPhase::Primitive
        || state.device.host_only
        || !collect_shapes(bodies, &mut state.device.shapes)
    {
        return false;
    }
    if !state.device.active {
        state.forget_persistence();
        state.device.active = true;
    }
    find_pairs(cfg, bodies, joints, state);
    let device = &mut state.device;
    device.pairs.clear();
    device
        .pairs
        .extend(state.pairs.iter_mut().enumerate().map(|(i, p)| {
            let old = std::mem::replace(&mut p.slot, i as u32);
            StepPair {
                a: p.a,
                b: p.b,
                old,
                pad: 0,
            }
        }));
    // Until the step is read back, each pair keeps the points it had in the last one
    // (what a caller overlapping the step reads).
    let last = &device.counts;
    state.pair_records.clear();
    state
        .pair_records
        .extend(device.pairs.iter().enumerate().map(|(i, p)| {
            let count = last.get(p.old as usize).copied().unwrap_or(0) as u32;
            (4 * i as u32, 4 * i as u32 + count)
        }));
    true
}

impl CollisionState {
    /// After a step whose narrow phase ran on the device: the points of each pair (records
    /// `4i..4i + count`), the deepest penetration and the total, from what came back.
    pub fn device_finished(&mut self) {
        let d = &self.device;
        self.pair_records.clear();
        self.pair_records
            .extend((0..self.pairs.len() as u32).map(|i| {
                let count = d.counts.get(i as usize).copied().unwrap_or(0) as u32;
                (4 * i, 4 * i + count)
            }));
        self.max_penetration = d.max_penetration;
        self.points = d.points as usize;
    }
}
