//! The CPU's half of the device broad phase (`shaders/broad_phase.wgsl`): which bodies go
//! into the uniform grid and how large its cells are, and the boxes the kernel computes,
//! in Rust, as the reference its tests compare with.
//!
//! Grid bodies are the bounded colliders no larger than a cell; the cell is as large as
//! the largest of them (so each spans at most 2 × 2 × 2 cells), and colliders more than
//! [`LARGE_SHARE`] times the median size are special instead, like half-spaces: listed apart
//! and tested against every body, so that one large body does not make every cell large.

use glam::Vec3;

use super::device::{BodyShape, NOT_PRIMITIVE};
use super::primitive::{kind, rot};
use crate::rigid::body::PoseRecord;

/// A collider larger than this many times the median is special, not in the grid.
pub const LARGE_SHARE: f32 = 4.0;

/// `classes` values (`CLASS_*` in broad_phase.wgsl).
pub mod class {
    pub const NONE: u32 = 0;
    pub const GRID: u32 = 1;
    pub const SPECIAL: u32 = 2;
}

/// The grid's layout for a set of colliders.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GridLayout {
    /// Per body: [`class`].
    pub classes: Vec<u32>,
    /// The special bodies, ascending.
    pub specials: Vec<u32>,
    /// Cell edge (m).
    pub cell: f32,
}

/// The largest extent of a collider's box with the margin (twice its bounding radius plus
/// twice the margin): an upper bound of every side of the box [`broad_bounds`] gives, in
/// any orientation.
fn size(s: &BodyShape, margin: f32) -> f32 {
    let d = s.shape.dims;
    let radius = match s.shape.kind {
        kind::SPHERE => d[0],
        kind::CAPSULE => d[0] + d[1],
        _ => Vec3::from_array(d).length(),
    };
    2.0 * radius + 2.0 * margin
}

/// Classes and cell size for the colliders `shapes` (`NOT_PRIMITIVE`: no class).
pub fn layout(shapes: &[BodyShape], margin: f32, out: &mut GridLayout) {
    use rayon::prelude::*;
    let bounded = |s: &BodyShape| s.shape.kind != NOT_PRIMITIVE && s.shape.kind != kind::HALF_SPACE;
    // In parallel where the result cannot depend on the order: the median's value, each
    // body's class, the largest grid body (a max).
    let mut sizes: Vec<f32> = shapes
        .par_iter()
        .with_min_len(4096)
        .filter(|s| bounded(s))
        .map(|s| size(s, margin))
        .collect();
    let large = if sizes.is_empty() {
        f32::INFINITY
    } else {
        let mid = sizes.len() / 2;
        LARGE_SHARE * *sizes.select_nth_unstable_by(mid, f32::total_cmp).1
    };
    let class_of = |s: &BodyShape| match s.shape.kind {
        NOT_PRIMITIVE => class::NONE,
        kind::HALF_SPACE => class::SPECIAL,
        _ if size(s, margin) > large => class::SPECIAL,
        _ => class::GRID,
    };
    shapes
        .par_iter()
        .with_min_len(4096)
        .map(class_of)
        .collect_into_vec(&mut out.classes);
    let cell = shapes
        .par_iter()
        .with_min_len(4096)
        .zip(&out.classes)
        .filter(|(_, c)| **c == class::GRID)
        .map(|(s, _)| size(s, margin))
        .reduce(|| 0.0f32, f32::max);
    out.specials.clear();
    out.specials
        .extend((0..shapes.len() as u32).filter(|&i| out.classes[i as usize] == class::SPECIAL));
    // A little over the largest grid body, so that f32 rounding of its box on the device
    // cannot make it span a third cell.
    out.cell = (cell * 1.001).max(1e-3);
}

/// The box of a bounded collider at body pose `pose`, loosened by `margin` (`collider_bounds`
/// in broad_phase.wgsl, the same operations).
pub fn broad_bounds(s: &BodyShape, pose: &PoseRecord, margin: f32) -> (Vec3, Vec3) {
    let q = glam::Vec4::from_array(pose.rotation);
    let c = pose.p() + rot(q, Vec3::from_slice(&s.offset[..3]));
    let d = Vec3::from_array(s.shape.dims);
    let e = match s.shape.kind {
        kind::SPHERE => Vec3::splat(d.x),
        kind::CAPSULE => rot(q, Vec3::new(0.0, d.x, 0.0)).abs() + Vec3::splat(d.y),
        _ => {
            rot(q, Vec3::new(d.x, 0.0, 0.0)).abs()
                + rot(q, Vec3::new(0.0, d.y, 0.0)).abs()
                + rot(q, Vec3::new(0.0, 0.0, d.z)).abs()
        }
    };
    let m = Vec3::splat(margin);
    (c - e - m, c + e + m)
}

/// Whether the box `(lo, hi)` comes within `margin` of the half-space collider `h` at body
/// pose `pose` (`near_plane` in broad_phase.wgsl).
pub fn near_plane(lo: Vec3, hi: Vec3, h: &BodyShape, pose: &PoseRecord, margin: f32) -> bool {
    let q = glam::Vec4::from_array(pose.rotation);
    let n = rot(q, Vec3::from_array(h.shape.dims));
    let origin = pose.p() + rot(q, Vec3::from_slice(&h.offset[..3]));
    let (centre, half) = (0.5 * (lo + hi), 0.5 * (hi - lo));
    n.dot(centre - origin) - half.dot(n.abs()) < margin
}
