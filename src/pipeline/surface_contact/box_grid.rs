//! A uniform hash grid over boxes: which stored boxes overlap a query box, each once.
//!
//! The broad phase's search structure, built the way a GPU builds it (count, prefix sum,
//! scatter: no step depends on the order in which items are placed) so that the device can
//! run the same algorithm and find the same pairs. Each stored box is placed in every cell
//! it covers; a query visits the cells its box covers and reports a stored box only in the
//! cell that holds the lower corner of the two boxes' intersection, so a pair that shares
//! several cells is reported once. Boxes that cover too many cells (a ground's triangles)
//! are kept aside and tested against every query.
//!
//! Stored boxes carry a space: a query sees only the boxes of its own space (the broad
//! phase's comoving grid keeps each deformable in a space of its own).

use glam::Vec3A;
use rayon::prelude::*;

use super::cages::Box3;

/// Cells a stored box may cover before it is kept aside.
const MAX_CELLS: i64 = 64;
/// Cells a query may visit before it tests every stored box instead.
const MAX_QUERY_CELLS: i64 = 512;

/// One stored box placed in one cell.
#[derive(Clone, Copy, Default)]
struct Entry {
    item: u32,
    cell: [i32; 3],
}

/// The grid over a set of stored boxes.
pub struct BoxGrid {
    origin: Vec3A,
    inv_cell: f32,
    /// Buckets minus one (a power of two minus one).
    mask: u32,
    /// Per bucket: where its entries start in `entries` (one more for the end).
    starts: Vec<u32>,
    entries: Vec<Entry>,
    boxes: Vec<Box3>,
    spaces: Vec<u32>,
    /// Stored boxes that cover more than [`MAX_CELLS`] cells.
    large: Vec<u32>,
}

#[inline]
pub fn overlap((lo, hi): Box3, (l, h): Box3) -> bool {
    lo.cmple(h).all() && l.cmple(hi).all()
}

#[inline]
fn hash(c: [i32; 3], space: u32) -> u32 {
    (c[0] as u32).wrapping_mul(0x9E37_79B1)
        ^ (c[1] as u32).wrapping_mul(0x85EB_CA77)
        ^ (c[2] as u32).wrapping_mul(0xC2B2_AE3D)
        ^ space.wrapping_mul(0x27D4_EB2F)
}

impl BoxGrid {
    /// The grid over `boxes` (each in `spaces[i]`), with cells as wide as the median
    /// largest side of the boxes: most boxes then cover one to eight cells.
    pub fn build(boxes: Vec<Box3>, spaces: Vec<u32>) -> Self {
        debug_assert_eq!(boxes.len(), spaces.len());
        let mut sides: Vec<f32> = boxes
            .iter()
            .map(|&(lo, hi)| (hi - lo).max_element())
            .filter(|s| s.is_finite())
            .collect();
        let cell = match sides.len() {
            0 => 1.0,
            n => *sides.select_nth_unstable_by(n / 2, f32::total_cmp).1,
        };
        let cell = if cell.is_finite() && cell > 1e-6 {
            cell
        } else {
            1e-6
        };
        let origin = boxes
            .iter()
            .fold(Vec3A::splat(f32::INFINITY), |o, b| o.min(b.0));
        let origin = if origin.is_finite() {
            origin
        } else {
            Vec3A::ZERO
        };
        let mut grid = BoxGrid {
            origin,
            inv_cell: 1.0 / cell,
            mask: 0,
            starts: Vec::new(),
            entries: Vec::new(),
            boxes,
            spaces,
            large: Vec::new(),
        };
        // Per item: its cell range, or aside when it covers too many.
        let ranges: Vec<Option<([i32; 3], [i32; 3])>> = grid
            .boxes
            .par_iter()
            .map(|&b| {
                let (lo, hi) = grid.cell_range(b);
                (cells(lo, hi) <= MAX_CELLS).then_some((lo, hi))
            })
            .collect();
        let placed: usize = ranges
            .iter()
            .flatten()
            .map(|&(lo, hi)| cells(lo, hi) as usize)
            .sum();
        let buckets = (2 * placed).next_power_of_two().max(16);
        grid.mask = buckets as u32 - 1;
        let mut counts = vec![0u32; buckets + 1];
        for (i, r) in ranges.iter().enumerate() {
            match r {
                Some((lo, hi)) => for_cells(*lo, *hi, |c| {
                    counts[grid.bucket(c, grid.spaces[i])] += 1;
                }),
                None => grid.large.push(i as u32),
            }
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        let mut next = counts.clone();
        grid.entries = vec![Entry::default(); placed];
        for (i, r) in ranges.iter().enumerate() {
            if let Some((lo, hi)) = r {
                for_cells(*lo, *hi, |cell| {
                    let k = grid.bucket(cell, grid.spaces[i]);
                    grid.entries[next[k] as usize] = Entry {
                        item: i as u32,
                        cell,
                    };
                    next[k] += 1;
                });
            }
        }
        grid.starts = counts;
        grid
    }

    #[inline]
    fn bucket(&self, c: [i32; 3], space: u32) -> usize {
        (hash(c, space) & self.mask) as usize
    }

    #[inline]
    fn cell_of(&self, p: Vec3A) -> [i32; 3] {
        let c = ((p - self.origin) * self.inv_cell).floor();
        // Saturating: a far or non-finite corner lands on the grid's edge.
        [c.x as i32, c.y as i32, c.z as i32]
    }

    #[inline]
    fn cell_range(&self, (lo, hi): Box3) -> ([i32; 3], [i32; 3]) {
        (self.cell_of(lo), self.cell_of(hi))
    }

    /// Every stored box of `space` that overlaps `q` (closed boxes), each once, in no
    /// particular order.
    pub fn overlaps(&self, q: Box3, space: u32, mut found: impl FnMut(u32)) {
        let (lo, hi) = self.cell_range(q);
        let test = |i: u32| self.spaces[i as usize] == space && overlap(q, self.boxes[i as usize]);
        if cells(lo, hi) > MAX_QUERY_CELLS {
            (0..self.boxes.len() as u32)
                .filter(|&i| test(i))
                .for_each(&mut found);
            return;
        }
        for_cells(lo, hi, |cell| {
            let k = self.bucket(cell, space);
            for e in &self.entries[self.starts[k] as usize..self.starts[k + 1] as usize] {
                let i = e.item as usize;
                if e.cell != cell || self.spaces[i] != space || !overlap(q, self.boxes[i]) {
                    continue;
                }
                // The cell of the intersection's lower corner reports the pair.
                if self.cell_of(q.0.max(self.boxes[i].0)) == cell {
                    found(e.item);
                }
            }
        });
        self.large
            .iter()
            .copied()
            .filter(|&i| test(i))
            .for_each(found);
    }
}

/// Cells in the range `lo..=hi` (0 for an empty or inverted one).
fn cells(lo: [i32; 3], hi: [i32; 3]) -> i64 {
    (0..3)
        .map(|a| (hi[a] as i64 - lo[a] as i64 + 1).max(0))
        .product()
}

fn for_cells(lo: [i32; 3], hi: [i32; 3], mut f: impl FnMut([i32; 3])) {
    for x in lo[0]..=hi[0] {
        for y in lo[1]..=hi[1] {
            for z in lo[2]..=hi[2] {
                f([x, y, z]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (the tests need no crate for it).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f32 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    fn random_box(rng: &mut Lcg, scale: f32) -> Box3 {
        let c = Vec3A::new(rng.next(), rng.next(), rng.next()) * 4.0;
        // Mostly small boxes, some flat, some much larger than a cell.
        let big = if rng.next() < 0.02 { 40.0 } else { 1.0 };
        let h = Vec3A::new(rng.next(), rng.next() * rng.next(), rng.next()) * scale * big;
        (c - h, c + h)
    }

    #[test]
    fn a_query_finds_every_overlapping_box_of_its_space_once() {
        let mut rng = Lcg(7);
        let stored: Vec<Box3> = (0..3000).map(|_| random_box(&mut rng, 0.1)).collect();
        let spaces: Vec<u32> = (0..3000).map(|i| (i % 3) as u32).collect();
        let grid = BoxGrid::build(stored.clone(), spaces.clone());
        assert!(
            !grid.large.is_empty(),
            "the test exercises the boxes kept aside"
        );
        let mut found_pairs = 0;
        for qi in 0..600 {
            // Some queries cover more cells than a query visits (the brute-force path).
            let q = random_box(&mut rng, if qi % 50 == 0 { 3.0 } else { 0.12 });
            let space = (qi % 3) as u32;
            let mut found = Vec::new();
            grid.overlaps(q, space, |i| found.push(i));
            let n = found.len();
            found.sort_unstable();
            found.dedup();
            assert_eq!(found.len(), n, "query {qi} reported a box twice");
            let expected: Vec<u32> = (0..stored.len() as u32)
                .filter(|&i| spaces[i as usize] == space && overlap(q, stored[i as usize]))
                .collect();
            assert_eq!(found, expected, "query {qi}");
            found_pairs += n;
        }
        assert!(
            found_pairs > 5000,
            "the boxes overlap often enough: {found_pairs}"
        );
    }

    #[test]
    fn touching_boxes_overlap_and_degenerate_input_is_survived() {
        let a = (Vec3A::ZERO, Vec3A::ONE);
        let b = (Vec3A::new(1.0, 0.0, 0.0), Vec3A::new(2.0, 1.0, 1.0));
        let nan = (Vec3A::splat(f32::NAN), Vec3A::splat(f32::NAN));
        let grid = BoxGrid::build(vec![a, b, nan], vec![0, 0, 0]);
        let mut found = Vec::new();
        grid.overlaps(a, 0, |i| found.push(i));
        found.sort_unstable();
        assert_eq!(found, vec![0, 1]);
        let empty = BoxGrid::build(Vec::new(), Vec::new());
        empty.overlaps(a, 0, |_| panic!("nothing stored"));
    }
}
