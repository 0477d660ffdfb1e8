//! The device broad phase (`shaders/broad_phase.wgsl`, standalone) against a brute-force
//! reference in Rust over every pair, on random scenes of spheres, capsules and boxes of
//! mixed sizes (some large enough to be special), half-spaces, jointed pairs and bodies
//! that are not solved: the same candidate set (a pair in one set only must be within
//! 1e-5 m of the test's boundary: f32 rounding of the boxes), each pair once, sorted by
//! owner and then by the other body, and the same list on a second run.
//!
//! Without an adapter the test prints a note and passes, except under `AVBD_REQUIRE_GPU=1`.
use std::collections::BTreeSet;

use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::gpu::broad::{BroadInput, GpuBroadPhase};
use bevy_avbd::pipeline::collision::grid::{self, GridLayout, class};
use bevy_avbd::pipeline::collision::primitive::PrimitiveShape;
use bevy_avbd::pipeline::collision::{BodyShape, NOT_PRIMITIVE};
use bevy_avbd::rigid::body::PoseRecord;

/// A small deterministic generator (no test dependency for random numbers).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.next()
    }
}

struct RandomScene {
    poses: Vec<PoseRecord>,
    shapes: Vec<BodyShape>,
    flags: Vec<u32>,
    excluded: Vec<[u32; 2]>,
}

fn scene(seed: u64, n: usize) -> RandomScene {
    let mut r = Lcg(seed);
    let mut poses = Vec::new();
    let mut shapes = Vec::new();
    let mut flags = Vec::new();
    for i in 0..n {
        let shape = match i % 50 {
            0 => PrimitiveShape::half_space(Vec3::new(r.range(-0.3, 0.3), 1.0, r.range(-0.3, 0.3))),
            1 => PrimitiveShape::cuboid(Vec3::new(
                r.range(3.0, 6.0),
                r.range(0.2, 1.0),
                r.range(3.0, 6.0),
            )),
            2 => PrimitiveShape {
                dims: [0.0; 3],
                kind: NOT_PRIMITIVE,
            },
            _ => match i % 3 {
                0 => PrimitiveShape::sphere(r.range(0.1, 0.6)),
                1 => PrimitiveShape::capsule(r.range(0.2, 0.6), r.range(0.1, 0.3)),
                _ => PrimitiveShape::cuboid(Vec3::new(
                    r.range(0.2, 0.8),
                    r.range(0.2, 0.8),
                    r.range(0.2, 0.8),
                )),
            },
        };
        let axis = Vec3::new(r.range(-1.0, 1.0), r.range(-1.0, 1.0), r.range(-1.0, 1.0));
        let q = Quat::from_axis_angle(axis.normalize_or(Vec3::Y), r.range(0.0, 6.3));
        let p = Vec3::new(r.range(-8.0, 8.0), r.range(-2.0, 10.0), r.range(-8.0, 8.0));
        poses.push(PoseRecord::new(p, q));
        let offset = if i % 7 == 0 {
            Vec3::new(0.1, -0.2, 0.05)
        } else {
            Vec3::ZERO
        };
        shapes.push(BodyShape {
            shape,
            offset: offset.extend(0.0).to_array(),
        });
        flags.push((r.next() < 0.8) as u32);
    }
    let mut excluded: Vec<[u32; 2]> = (0..n / 10)
        .map(|k| [k as u32 * 3, k as u32 * 3 + 1 + (k as u32 % 5)])
        .filter(|p| (p[1] as usize) < n)
        .collect();
    excluded.sort_unstable();
    excluded.dedup();
    RandomScene {
        poses,
        shapes,
        flags,
        excluded,
    }
}

/// Every candidate pair by brute force, and the pairs within `tol` of the boundary.
fn reference(
    s: &RandomScene,
    layout: &GridLayout,
    margin: f32,
    tol: f32,
) -> (BTreeSet<[u32; 2]>, BTreeSet<[u32; 2]>) {
    use bevy_avbd::pipeline::collision::primitive::kind::HALF_SPACE;
    let n = s.poses.len();
    let bounds: Vec<_> = (0..n)
        .map(|i| grid::broad_bounds(&s.shapes[i], &s.poses[i], margin))
        .collect();
    let half = |i: usize| s.shapes[i].shape.kind == HALF_SPACE;
    let (mut pairs, mut borderline) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..n {
        for j in i + 1..n {
            if layout.classes[i] == class::NONE || layout.classes[j] == class::NONE {
                continue;
            }
            if half(i) && half(j) {
                continue;
            }
            let key = [i as u32, j as u32];
            if s.flags[i] == 0 && s.flags[j] == 0 || s.excluded.binary_search(&key).is_ok() {
                continue;
            }
            // Signed distance to the test's boundary: ≤ 0 is a candidate.
            let gap = if half(i) || half(j) {
                let (b, h) = if half(i) { (j, i) } else { (i, j) };
                let (lo, hi) = bounds[b];
                let hit = grid::near_plane(lo, hi, &s.shapes[h], &s.poses[h], margin);
                let shifted = grid::near_plane(lo, hi, &s.shapes[h], &s.poses[h], margin + tol)
                    != grid::near_plane(lo, hi, &s.shapes[h], &s.poses[h], margin - tol);
                if shifted {
                    borderline.insert(key);
                }
                if hit { -1.0 } else { 1.0 }
            } else {
                let ((la, ha), (lb, hb)) = (bounds[i], bounds[j]);
                (la - hb).max(lb - ha).max_element()
            };
            if gap.abs() < tol {
                borderline.insert(key);
            }
            if gap <= 0.0 {
                pairs.insert(key);
            }
        }
    }
    (pairs, borderline)
}

#[test]
fn device_broad_phase_matches_brute_force() {
    let gpu = match GpuBroadPhase::new() {
        Ok(g) => g,
        Err(e) => {
            assert!(
                std::env::var("AVBD_REQUIRE_GPU").map_or(true, |v| v != "1"),
                "AVBD_REQUIRE_GPU=1: {e}"
            );
            eprintln!("skipping: {e}");
            return;
        }
    };
    let margin = 0.02;
    let mut total_pairs = 0;
    for (seed, n) in [(1u64, 300usize), (2, 1000), (3, 2000)] {
        let s = scene(seed, n);
        let mut layout = GridLayout::default();
        grid::layout(&s.shapes, margin, &mut layout);
        assert!(
            layout.specials.len() >= 2 * (n / 50),
            "half-spaces and slabs are special"
        );
        let input = BroadInput {
            poses: &s.poses,
            shapes: &s.shapes,
            flags: &s.flags,
            layout: &layout,
            excluded: &s.excluded,
            margin,
        };
        let (expected, borderline) = reference(&s, &layout, margin, 1e-5);
        // Too small an output first: the total still counts every pair.
        let (_, total) = gpu.run(&input, 8).unwrap();
        assert_eq!(total as usize, {
            let (all, _) = gpu.run(&input, 1 << 20).unwrap();
            all.len()
        });
        let (pairs, total) = gpu.run(&input, total).unwrap();
        assert_eq!(pairs.len(), total as usize);
        let set: BTreeSet<[u32; 2]> = pairs.iter().copied().collect();
        assert_eq!(set.len(), pairs.len(), "seed {seed}: a pair written twice");
        for p in set.symmetric_difference(&expected) {
            assert!(
                borderline.contains(p),
                "seed {seed}: pair {p:?} on the device {} in the reference {}",
                set.contains(p),
                expected.contains(p)
            );
        }
        // Grouped by owner (each pair's grid body, else its lower index), sorted by the
        // other body within a group: check that no group's list goes backwards.
        let owner = |p: &[u32; 2]| {
            let grid_body = |b: u32| layout.classes[b as usize] == class::GRID;
            match (grid_body(p[0]), grid_body(p[1])) {
                (false, true) => p[1],
                _ => p[0],
            }
        };
        for w in pairs.windows(2) {
            let (o0, o1) = (owner(&w[0]), owner(&w[1]));
            let other = |p: &[u32; 2], o: u32| p[0] + p[1] - o;
            assert!(
                o0 < o1 || (o0 == o1 && other(&w[0], o0) < other(&w[1], o1)),
                "seed {seed}: {:?} before {:?}",
                w[0],
                w[1]
            );
        }
        assert_eq!(
            gpu.run(&input, total).unwrap().0,
            pairs,
            "the same list again"
        );
        eprintln!(
            "seed {seed}: {n} bodies, {} specials, cell {:.3} m, {} pairs ({} borderline)",
            layout.specials.len(),
            layout.cell,
            pairs.len(),
            borderline.len()
        );
        total_pairs += pairs.len();
    }
    assert!(
        total_pairs > 1000,
        "only {total_pairs} pairs: the scenes prove little"
    );
}
