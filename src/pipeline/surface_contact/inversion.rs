//! The inversion filter of the advance (the paper's filter for non-invertible materials,
//! here for every solid): X never takes a tetrahedron below a hundredth of its rest volume
//! (nor, if a start state has it smaller already, below its volume at X), so a frame never
//! ends with an inverted or flattened element, whatever the iterate did on its way. Stable Neo-Hookean
//! tolerates inversion in the iterate; the certified configuration does not need to.
//!
//! The floor holds back the vertices of the elements it stops, not their islands: an
//! element crushed to the floor between two bodies would otherwise stop every body it
//! touches for as long as the iterate presses it, a whole frame's motion of a pile lost
//! (27 `squishy_balls`: 2 of 24 frames). Each vertex goes `h` of its way to the iterate,
//! `h` the least step of its tetrahedra (two passes, the second along the first's
//! targets); what the hold leaves below the floor still cuts its island's step.

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
    if d.iter().all(|d| *d == DVec3::ZERO) {
        return 1.0; // held still (the test below would stop an element at its own volume)
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

/// Passes of the hold: the vertices of an element stopped by the floor move less, which
/// can stop a neighbour; its vertices are held in the second pass.
const HOLD_PASSES: usize = 2;

/// The volume floor of one advance from `certified` towards the iterate `x`.
pub struct Floor {
    /// Where each vertex goes, `X + h (x − X)`; `None` where no vertex is held (`h = 1`).
    pub targets: Option<Vec<Vec3A>>,
    /// Per deformable body, the largest step along the targets that keeps every
    /// tetrahedron above the floor (1 unless the hold left one below).
    pub steps: Vec<f32>,
    /// Tetrahedra the floor stopped on the way to the iterate (before the hold).
    pub stopped: usize,
}

/// Each tetrahedron's largest step from `certified` towards `targets`.
fn tet_steps(set: &DeformableSet, certified: &[Vec3A], targets: &[Vec3A]) -> Vec<f32> {
    set.tets
        .par_iter()
        .with_min_len(CHUNK)
        .map(|t| {
            let at = |v: u32| glam::Vec3::from(certified[v as usize]).as_dvec3();
            let to = |v: u32| glam::Vec3::from(targets[v as usize]).as_dvec3();
            let xs = t.v.map(at);
            let ds = [0, 1, 2, 3].map(|k| to(t.v[k]) - xs[k]);
            tet_step(xs, ds, FLOOR * t.volume as f64) as f32
        })
        .collect()
}

/// The floor of the advance from `certified` towards `x`: the vertices of the
/// tetrahedra it stops held back, then each body's step along the targets.
pub fn hold(set: &DeformableSet, certified: &[Vec3A], x: &[Vec3A]) -> Floor {
    let mut steps = tet_steps(set, certified, x);
    let stopped = steps.iter().filter(|&&s| s < 1.0).count();
    let mut targets: Option<Vec<Vec3A>> = None;
    let mut h: Vec<f32> = Vec::new();
    for _ in 0..HOLD_PASSES {
        if steps.iter().all(|&s| s >= 1.0) {
            break;
        }
        if h.is_empty() {
            h = vec![1.0; set.vertex_count()];
        }
        // Each vertex's share, the least over its tetrahedra of its share times the step.
        let last = h.clone();
        for (t, &s) in set.tets.iter().zip(&steps) {
            if s < 1.0 {
                for v in t.v {
                    let v = v as usize;
                    h[v] = h[v].min(last[v] * s);
                }
            }
        }
        let held: Vec<Vec3A> = x
            .iter()
            .zip(certified)
            .zip(&h)
            .map(|((&to, &from), &h)| if h >= 1.0 { to } else { from + (to - from) * h })
            .collect();
        steps = tet_steps(set, certified, &held);
        targets = Some(held);
    }
    let mut out = vec![1.0f32; set.len()];
    for (t, s) in set.tets.iter().zip(steps) {
        let b = set.owner[t.v[0] as usize] as usize;
        out[b] = out[b].min(s);
    }
    Floor {
        targets,
        steps: out,
        stopped,
    }
}

/// Per vertex, whether the hold may keep it near `certified` this frame: the vertices of
/// the tetrahedra the floor stops on the straight way to any of `ends` (the cages' guess,
/// target and reached configurations), and of the tetrahedra sharing a vertex with those
/// (the hold's second pass moves them less too). Such a vertex may stay while its body's
/// mean moves on, which its comoving cage has to allow for (`Cages::build`).
pub fn may_hold(set: &DeformableSet, certified: &[Vec3A], ends: &[&[Vec3A]]) -> Vec<bool> {
    let n = set.vertex_count();
    let ends: Vec<&[Vec3A]> = ends.iter().copied().filter(|e| e.len() >= n).collect();
    let stopped: Vec<bool> = set
        .tets
        .par_iter()
        .with_min_len(CHUNK)
        .map(|t| {
            let at = |x: &[Vec3A], v: u32| glam::Vec3::from(x[v as usize]).as_dvec3();
            let xs = t.v.map(|v| at(certified, v));
            let six_volume = |p: [DVec3; 4]| (p[1] - p[0]).dot((p[2] - p[0]).cross(p[3] - p[0]));
            ends.iter().any(|end| {
                let ys = t.v.map(|v| at(end, v));
                // Only an element squeezed to a quarter of its volume at either end is
                // looked at closely (the cubic's least root is the costly part).
                let quarter = 6.0 * 0.25 * t.volume as f64;
                if six_volume(xs).min(six_volume(ys)) > quarter {
                    return false;
                }
                let ds = [0, 1, 2, 3].map(|k| ys[k] - xs[k]);
                tet_step(xs, ds, FLOOR * t.volume as f64) < 1.0
            })
        })
        .collect();
    let mut held = vec![false; n];
    if !stopped.contains(&true) {
        return held;
    }
    for (t, _) in set.tets.iter().zip(&stopped).filter(|(_, s)| **s) {
        t.v.iter().for_each(|&v| held[v as usize] = true);
    }
    let first = held.clone();
    for t in &set.tets {
        if t.v.iter().any(|&v| first[v as usize]) {
            t.v.iter().for_each(|&v| held[v as usize] = true);
        }
    }
    held
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

    /// Six times each tetrahedron's volume at `x` over its rest volume's.
    fn ratios(set: &DeformableSet, x: &[Vec3A]) -> Vec<f64> {
        set.tets
            .iter()
            .map(|t| {
                let p = t.v.map(|v| glam::Vec3::from(x[v as usize]).as_dvec3());
                (p[1] - p[0]).dot((p[2] - p[0]).cross(p[3] - p[0])) / (6.0 * t.volume as f64)
            })
            .collect()
    }

    /// A block of 2 × 1 × 2 cells slides 10 cm while one corner is driven through the
    /// block (an iterate that crushes the corner's tetrahedra): the floor holds the
    /// corner's vertices back and lets the rest slide all the way, where it used to stop
    /// the whole body (its step was the crushed tetrahedron's).
    #[test]
    fn a_crushed_corner_is_held_and_the_body_slides_on() {
        use crate::deformable::{DeformableDesc, SolidMaterial, TetMesh, TetPattern};
        let mut set = DeformableSet::default();
        let mesh = TetMesh::box_grid(glam::Vec3::new(2.0, 1.0, 2.0), [2, 1, 2], TetPattern::Six);
        set.add(&DeformableDesc::solid(mesh, SolidMaterial::default()))
            .unwrap();
        let certified = set.positions.clone();
        let slide = Vec3A::new(0.1, 0.0, 0.0);
        let mut x: Vec<Vec3A> = certified.iter().map(|&p| p + slide).collect();
        // The corner at the box's least x, y and z, driven 1.5 m into it.
        let lo = certified
            .iter()
            .fold(Vec3A::splat(f32::MAX), |a, &p| a.min(p));
        let corner = certified.iter().position(|&p| p == lo).unwrap();
        x[corner] += Vec3A::new(1.5, 0.9, 1.5);
        let crushed: Vec<usize> = set
            .tets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.v.contains(&(corner as u32)))
            .map(|(e, _)| e)
            .collect();
        assert!(
            ratios(&set, &x).iter().any(|&r| r < FLOOR),
            "the iterate crushes the corner"
        );
        // Before the hold, the body's step was that of its most crushed tetrahedron.
        let plain = tet_steps(&set, &certified, &x);
        let old_step = plain.iter().fold(1.0f32, |a, &s| a.min(s));
        assert!(old_step < 0.9, "step without the hold: {old_step}");

        let floor = hold(&set, &certified, &x);
        // Only the corner's tetrahedra change shape, so only they can be stopped.
        assert!(
            (1..=crushed.len()).contains(&floor.stopped),
            "{}",
            floor.stopped
        );
        let targets = floor.targets.expect("vertices held");
        // Every tetrahedron stays above the floor at its targets, and the body steps
        // (all but the rounding of the held targets, aimed 1% above the floor) all the way.
        for (e, r) in ratios(&set, &targets).into_iter().enumerate() {
            assert!(r >= FLOOR, "tet {e}: {r} of its rest volume");
        }
        assert!(floor.steps[0] > 0.999, "body step {}", floor.steps[0]);
        // The corner is held back; a vertex that shares no tetrahedron with it slides
        // all the way.
        let (d, full) = (
            targets[corner] - certified[corner],
            x[corner] - certified[corner],
        );
        // (its share: the step of its most crushed tetrahedron)
        let share = d.length() / full.length();
        assert!(
            (share - old_step).abs() < 1e-4,
            "corner went {share} of its way"
        );
        let mut far = 0;
        for v in 0..x.len() {
            if !crushed.iter().any(|&e| set.tets[e].v.contains(&(v as u32))) {
                assert_eq!(targets[v], x[v], "vertex {v} slides all the way");
                far += 1;
            }
        }
        assert!(far >= 9, "{far} vertices away from the corner");
        // Nothing to hold: no targets, every step 1.
        let free = hold(
            &set,
            &certified,
            &certified.iter().map(|&p| p + slide).collect::<Vec<_>>(),
        );
        assert!(free.targets.is_none() && free.stopped == 0 && free.steps == vec![1.0]);
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
