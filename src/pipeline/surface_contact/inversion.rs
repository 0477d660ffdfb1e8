//! The inversion filter of the advance (the paper's filter for non-invertible materials,
//! here for every solid): X never takes a tetrahedron below a hundredth of its rest volume
//! (nor, if a start state has it smaller already, below its volume at X), so a frame never
//! ends with an inverted or flattened element, whatever the iterate did on its way. Stable Neo-Hookean
//! tolerates inversion in the iterate; the certified configuration does not need to.

use glam::{DVec3, Vec3A};
use rayon::prelude::*;

use crate::deformable::DeformableSet;

/// Smallest volume X may give a tetrahedron, as a fraction of its rest volume.
const FLOOR: f64 = 0.01;

/// The step aims this far above the floor, so that the rounding of X's f32 positions cannot
/// take the element below it (in the next advance, an element below the floor may not lose
/// volume, so a rounding below would hold the island in place).
const AIM: f64 = 1.01;

/// Tetrahedra per parallel job.
const CHUNK: usize = 256;

/// The largest step `t ∈ [0, 1]` of `X + t (x̂ − X)` that keeps the tetrahedron's volume
/// above `floor` (aimed at `AIM` times it), or above its volume at X where that is smaller: the volume is a cubic in t; its least root above 0 is bracketed from the
/// cubic's critical points and refined by bisection (f64).
fn tet_step(x: [DVec3; 4], d: [DVec3; 4], floor: f64) -> f64 {
    let e = [x[1] - x[0], x[2] - x[0], x[3] - x[0]];
    let f = [d[1] - d[0], d[2] - d[0], d[3] - d[0]];
    let det = |a: DVec3, b: DVec3, c: DVec3| a.dot(b.cross(c));
    // det(e + t f) = c0 + c1 t + c2 t² + c3 t³ (six times the volume).
    let c0 = det(e[0], e[1], e[2]);
    let c1 = det(f[0], e[1], e[2]) + det(e[0], f[1], e[2]) + det(e[0], e[1], f[2]);
    let c2 = det(e[0], f[1], f[2]) + det(f[0], e[1], f[2]) + det(f[0], f[1], e[2]);
    let c3 = det(f[0], f[1], f[2]);
    let p = |t: f64| c0 + t * (c1 + t * (c2 + t * c3));
    if c0.is_nan() || c0 <= 0.0 {
        return 1.0; // inverted at X: not this filter's to fix (the start was inverted)
    }
    // Not "half of X's volume where X is below the floor": one advance after another would
    // halve an element down to nothing.
    let floor = (6.0 * AIM * floor).min(c0);
    // Candidate points where p may first dip: the critical points in (0, 1), then 1.
    let mut stops: Vec<f64> = Vec::with_capacity(3);
    let (a, b, c) = (3.0 * c3, 2.0 * c2, c1);
    if a.abs() > 1e-300 {
        let disc = b * b - 4.0 * a * c;
        if disc >= 0.0 {
            let s = disc.sqrt();
            stops.extend([(-b - s) / (2.0 * a), (-b + s) / (2.0 * a)]);
        }
    } else if b.abs() > 1e-300 {
        stops.push(-c / b);
    }
    stops.retain(|t| *t > 0.0 && *t < 1.0);
    stops.sort_by(f64::total_cmp);
    stops.push(1.0);
    let mut lo = 0.0;
    for hi in stops {
        if p(hi) <= floor {
            // p(lo) ≥ floor ≥ p(hi): bisect for the crossing, keeping the safe side.
            let mut l = lo;
            let mut h = hi;
            for _ in 0..50 {
                let m = 0.5 * (l + h);
                if p(m) > floor { l = m } else { h = m }
            }
            return l;
        }
        lo = hi;
    }
    1.0
}

/// Per deformable body: the largest step from `certified` towards `x` that keeps every
/// tetrahedron above the floor.
pub fn steps(set: &DeformableSet, certified: &[Vec3A], x: &[Vec3A]) -> Vec<f32> {
    let per_tet: Vec<(u32, f32)> = set
        .tets
        .par_iter()
        .with_min_len(CHUNK)
        .map(|t| {
            let at = |v: u32| glam::Vec3::from(certified[v as usize]).as_dvec3();
            let to = |v: u32| glam::Vec3::from(x[v as usize]).as_dvec3();
            let xs = t.v.map(at);
            let ds = [0, 1, 2, 3].map(|k| to(t.v[k]) - xs[k]);
            let step = tet_step(xs, ds, FLOOR * t.volume as f64);
            (set.owner[t.v[0] as usize], step as f32)
        })
        .collect();
    let mut out = vec![1.0f32; set.len()];
    for (b, s) in per_tet {
        out[b as usize] = out[b as usize].min(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit() -> [DVec3; 4] {
        [DVec3::ZERO, DVec3::X, DVec3::Y, DVec3::Z]
    }

    #[test]
    fn flattening_stops_at_the_floor() {
        // The apex moves straight through the base plane: volume 1/6 (1 − 2t).
        let d = [DVec3::ZERO, DVec3::ZERO, DVec3::ZERO, -2.0 * DVec3::Z];
        let floor = 0.01 / 6.0;
        let t = tet_step(unit(), d, floor);
        let volume = (1.0 - 2.0 * t) / 6.0;
        assert!(
            volume > AIM * floor && volume < AIM * floor * 1.000_001,
            "t = {t}, volume = {volume}"
        );
    }

    /// A tetrahedron at 1.5 % of its rest volume, its apex driven through the base advance
    /// after advance: the first stops at the floor (aimed 1 % above it), the others do not
    /// move it; X in f32, as the advance keeps it.
    #[test]
    fn advance_after_advance_stays_above_the_floor() {
        let floor = 0.01 / 6.0;
        let mut apex = 0.015f32;
        for advance in 0..20 {
            let mut x = unit();
            x[3].z = apex as f64;
            let d = [DVec3::ZERO, DVec3::ZERO, DVec3::ZERO, -0.03 * DVec3::Z];
            let t = tet_step(x, d, floor) as f32;
            apex += t * -0.03;
            let volume = apex as f64 / 6.0;
            assert!(
                volume > floor && volume < AIM * floor * 1.000_01,
                "advance {advance}: t = {t}, volume = {volume}"
            );
        }
    }

    /// An element below the floor at X (a start state) may gain volume, never lose it.
    #[test]
    fn below_the_floor_no_volume_is_lost() {
        let floor = 0.01 / 6.0;
        let mut x = unit();
        x[3].z = 0.004;
        let down = [DVec3::ZERO, DVec3::ZERO, DVec3::ZERO, -0.01 * DVec3::Z];
        assert_eq!(tet_step(x, down, floor), 0.0);
        let up = down.map(|d| -d);
        assert_eq!(tet_step(x, up, floor), 1.0);
        x[3].z = -0.004; // inverted: not the filter's
        assert_eq!(tet_step(x, down, floor), 1.0);
    }

    #[test]
    fn a_dip_between_safe_ends_is_caught() {
        // A half turn about z along straight paths: the x and y edges shrink through zero
        // together, det = (1 − 2t)², safe at both ends and flat at t = ½. The floor
        // (a hundredth, det = 0.01, aimed at det = 0.0101) is first reached at
        // t = (1 − √0.0101)/2 ≈ 0.4497.
        let x = unit();
        let mut d = [DVec3::ZERO; 4];
        d[1] = -2.0 * DVec3::X;
        d[2] = -2.0 * DVec3::Y;
        let t = tet_step(x, d, 0.01 / 6.0);
        let expected = (1.0 - (AIM * 0.01f64).sqrt()) / 2.0;
        assert!((t - expected).abs() < 1e-9, "t = {t}");
        assert_eq!(tet_step(x, [DVec3::ZERO; 4], 0.01 / 6.0), 1.0);
    }

    #[test]
    fn rigid_motion_is_free() {
        let x = unit();
        let q = glam::DQuat::from_rotation_z(0.8);
        let d = x.map(|p| q * p + DVec3::new(3.0, -1.0, 2.0) - p);
        // Rotation along a straight path shrinks the volume in between (the path is not a
        // rotation), but never near the floor for 0.8 rad.
        assert_eq!(tet_step(x, d, 0.01 / 6.0), 1.0);
    }
}
