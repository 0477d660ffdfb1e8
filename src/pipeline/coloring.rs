//! Constraint graph and body colouring (AVBD Sec. 4 "Parallelization").
//!
//! The adjacency lists every constraint touching a body in compressed (CSR) form, so the
//! primal stage reads a body's rows without searching. Dynamic bodies are coloured greedily
//! over the graph of all constraints (contacts and joints); static, kinematic and frozen
//! bodies never take a colour. Bodies of one colour share no constraint, so they can be
//! solved in parallel.

use rayon::prelude::*;

use super::SolverData;
use crate::rigid::{BodySet, JointSet};

/// Tag in the low bit of an adjacency item.
pub const ITEM_JOINT: u32 = 1;

/// Body → constraint adjacency in CSR form. Item = `(constraint index << 1) | is_joint`.
#[derive(Default, Clone, Debug)]
pub struct Adjacency {
    pub offsets: Vec<u32>,
    pub items: Vec<u32>,
    /// The body on the other side of each item (`WORLD` for world joints): the colouring
    /// reads this instead of the constraint records (96 bytes a contact).
    pub other: Vec<u32>,
    /// Scratch: `(body_a, body_b, item)` of every constraint, gathered once so the count
    /// and fill passes read 12 bytes per constraint instead of a whole record twice.
    ends: Vec<(u32, u32, u32)>,
}

impl Adjacency {
    #[inline]
    pub fn of(&self, body: usize) -> &[u32] {
        &self.items[self.offsets[body] as usize..self.offsets[body + 1] as usize]
    }
    /// The bodies on the other side of `body`'s items, in the same order.
    #[inline]
    pub fn others(&self, body: usize) -> &[u32] {
        &self.other[self.offsets[body] as usize..self.offsets[body + 1] as usize]
    }
    /// `(body_a, body_b, item)` of every constraint of the step, in constraint order.
    #[inline]
    pub fn ends(&self) -> &[(u32, u32, u32)] {
        &self.ends
    }
}

/// Bodies grouped by colour: the greedy colouring of the constraint graph.
pub type Colors = crate::graph::Coloring;

/// Builds the adjacency of this step's constraints and colours the dynamic bodies.
pub fn build(bodies: &BodySet, joints: &JointSet, s: &mut SolverData) {
    let SolverData {
        points,
        adjacency: adj,
        colors,
        adjacency_cursor,
        ..
    } = s;
    build_adjacency(bodies.len(), points, joints, adj, adjacency_cursor);
    color_greedy(bodies, adj, colors);
}

/// Builds the body → constraint adjacency (CSR) of this step's contacts and unbroken
/// joints ([`gather_ends`], then a count and a fill); `cursor` is a reused scratch buffer.
/// The CPU backend colours over it greedily ([`build`]); the GPU backend builds the same
/// lists on the device (`shaders/adjacency.wgsl`) and only gathers the ends.
pub fn build_adjacency(
    n: usize,
    contacts: &[crate::rigid::contact::ContactPoint],
    joints: &JointSet,
    adj: &mut Adjacency,
    cursor: &mut Vec<u32>,
) {
    gather_ends(contacts, joints, adj);
    let ends = std::mem::take(&mut adj.ends);
    // Every range reads all ends, so below 4 threads one range (a serial pass) is faster.
    let threads = rayon::current_num_threads();
    let ranges = if threads < 4 { 1 } else { threads };
    fill_csr(n, &ends, ranges, adj, cursor);
    adj.ends = ends;
}

/// Gathers `(body_a, body_b, item)` of every contact and unbroken joint into
/// [`Adjacency::ends`], in constraint order (contacts, then joints).
pub fn gather_ends(
    contacts: &[crate::rigid::contact::ContactPoint],
    joints: &JointSet,
    adj: &mut Adjacency,
) {
    contacts
        .par_iter()
        .with_min_len(4096)
        .enumerate()
        .map(|(ci, c)| (c.body_a, c.body_b, (ci as u32) << 1))
        .collect_into_vec(&mut adj.ends);
    adj.ends.extend(
        joints
            .records
            .iter()
            .enumerate()
            .filter(|(_, j)| !j.broken())
            .map(|(ji, j)| (j.body_a, j.body_b, ((ji as u32) << 1) | ITEM_JOINT)),
    );
}

/// Count and fill of the CSR lists in parallel over `ranges` ranges of bodies: each range
/// scans every end and keeps those of its own bodies, so it writes a disjoint slice of the
/// lists, in the same order as one serial pass (constraint order per body).
fn fill_csr(
    n: usize,
    ends: &[(u32, u32, u32)],
    ranges: usize,
    adj: &mut Adjacency,
    cursor: &mut Vec<u32>,
) {
    let range_len = n.div_ceil(ranges.clamp(1, n.max(1))).max(1);
    adj.offsets.clear();
    adj.offsets.resize(n + 1, 0);
    adj.offsets[1..]
        .par_chunks_mut(range_len)
        .enumerate()
        .for_each(|(r, counts)| {
            let lo = (r * range_len) as u32;
            for &(a, b, _) in ends {
                for body in [a, b] {
                    // WORLD wraps to a large index and falls outside every range.
                    if let Some(c) = counts.get_mut(body.wrapping_sub(lo) as usize) {
                        *c += 1;
                    }
                }
            }
        });
    for i in 0..n {
        adj.offsets[i + 1] += adj.offsets[i];
    }
    let total = adj.offsets[n] as usize;
    adj.items.clear();
    adj.items.resize(total, 0);
    adj.other.clear();
    adj.other.resize(total, 0);
    cursor.clear();
    cursor.extend_from_slice(&adj.offsets[..n]);
    // Each range's slice of the lists and of the cursors.
    let mut jobs = Vec::with_capacity(n.div_ceil(range_len));
    let (mut items, mut other, mut cursors) =
        (&mut adj.items[..], &mut adj.other[..], &mut cursor[..]);
    let mut start = 0usize;
    for r in 0..n.div_ceil(range_len) {
        let (lo, hi) = (r * range_len, ((r + 1) * range_len).min(n));
        let end = adj.offsets[hi] as usize;
        let (i, i_rest) = std::mem::take(&mut items).split_at_mut(end - start);
        let (o, o_rest) = std::mem::take(&mut other).split_at_mut(end - start);
        let (c, c_rest) = std::mem::take(&mut cursors).split_at_mut(hi - lo);
        (items, other, cursors) = (i_rest, o_rest, c_rest);
        jobs.push((lo as u32, start as u32, i, o, c));
        start = end;
    }
    jobs.into_par_iter()
        .for_each(|(lo, base, items, other, cursors)| {
            for &(a, b, item) in ends {
                for (body, across) in [(a, b), (b, a)] {
                    if let Some(c) = cursors.get_mut(body.wrapping_sub(lo) as usize) {
                        let at = (*c - base) as usize;
                        items[at] = item;
                        other[at] = across;
                        *c += 1;
                    }
                }
            }
        });
}

fn color_greedy(bodies: &BodySet, adj: &Adjacency, colors: &mut Colors) {
    colors.greedy(
        bodies.len(),
        |i| bodies.is_solved(i),
        |i| adj.others(i).iter().copied(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rigid::joint::WORLD;

    /// The parallel fill gives the lists of one serial pass, for any number of ranges:
    /// constraint order per body, world ends skipped, a body with no constraint empty.
    #[test]
    fn csr_is_the_same_for_any_range_count() {
        let n = 37usize;
        // A fixed pseudo-random constraint list with world ends and unused bodies.
        let mut x = 12345u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let ends: Vec<(u32, u32, u32)> = (0..500u32)
            .map(|i| {
                let a = next() % 30;
                let b = if i % 7 == 0 {
                    WORLD
                } else {
                    (a + 1 + next() % 29) % 30
                };
                (a, b, i << 1)
            })
            .collect();
        let mut serial: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
        for &(a, b, item) in &ends {
            for (body, other) in [(a, b), (b, a)] {
                if body != WORLD {
                    serial[body as usize].push((item, other));
                }
            }
        }
        for ranges in [1, 2, 3, 7, 16, 64] {
            let (mut adj, mut cursor) = (Adjacency::default(), Vec::new());
            fill_csr(n, &ends, ranges, &mut adj, &mut cursor);
            for (body, want) in serial.iter().enumerate() {
                let got: Vec<(u32, u32)> = adj
                    .of(body)
                    .iter()
                    .copied()
                    .zip(adj.others(body).iter().copied())
                    .collect();
                assert_eq!(&got, want, "{ranges} ranges, body {body}");
            }
        }
    }
}
