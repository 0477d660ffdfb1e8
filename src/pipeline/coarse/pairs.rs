//! `Pᵀ H P` in two products. `H` is a body's operator at its vertices: a 3×3 block per
//! pair of free vertices that share an element, which an element adds once per pair of its
//! vertices. `H P` is formed vertex row by vertex row (over the nodes the vertex's
//! neighbours touch), then `Pᵀ (H P)` node row by node row, the lower triangle only.
//!
//! Summing each element's terms at the nodes directly costs the square of the nodes the
//! element touches: about 12 for a soft ball's tetrahedron spanning two cells, so 78 node
//! blocks an element against its 10 vertex blocks. The products cost the body's vertex
//! pairs times the eight nodes of a vertex: a third of the blocks for a soft ball, each a
//! scaled addition.

use std::collections::HashMap;

use glam::DMat3;
use rayon::prelude::*;

use super::dense::Blocks;
use super::space::NONE;

/// Vertices per job of `H P` (each vertex's row is its own, so the bits do not depend on
/// it).
const VERTEX_JOB: usize = 256;

/// A 3×3 block, column-major (as `DMat3::to_cols_array`).
pub(super) type Block = [f64; 9];

/// Adds `m` to slot `s` of `h` (nothing for NONE: a pair with a pinned vertex).
#[inline]
pub(super) fn add(h: &mut [Block], s: u32, m: &DMat3) {
    if s != NONE {
        for (x, y) in h[s as usize].iter_mut().zip(m.to_cols_array()) {
            *x += y;
        }
    }
}

/// The pairs `(i, j)` of an element's vertices `v` whose block `H_{v_i v_j}` is in the
/// lower triangle (`v_i ≥ v_j`, ties by position): the order an element's blocks are
/// computed and stored in.
pub(super) fn element_pairs(v: &[u32]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let k = v.len();
    (0..k).flat_map(move |i| {
        (0..k)
            .filter(move |&j| (v[i], i) >= (v[j], j))
            .map(move |j| (i, j))
    })
}

/// One block of a vertex's row of `H`: the other vertex, the slot of the pair and whether
/// the slot holds the transpose (the slots hold `H_ac` with `a ≥ c`), and where each of
/// the other vertex's eight nodes lies in the row's span.
#[derive(Clone, Copy, Debug)]
struct RowBlock {
    other: u32,
    slot: u32,
    transposed: bool,
    at: [u32; 8],
}

/// Vertices per job of the element terms: a fixed size (not a share of the threads), so
/// which job adds what, and the bits, do not depend on the thread count. A soft ball is
/// one job; an element whose vertices fall in two jobs is formed in both.
const OWNER_JOB: usize = 512;

/// One job of the element terms: the slots it owns and the elements that reach them.
#[derive(Clone, Debug)]
pub(super) struct OwnerJob {
    pub(super) slots: std::ops::Range<usize>,
    pub(super) elements: Vec<u32>,
}

/// The sparsity of a body's vertex-level operator and of its products with `P`
/// (rest-shape data, built with the coarse space).
#[derive(Clone, Debug, Default)]
pub(super) struct VertexPairs {
    /// Slots: pairs of free vertices `a ≥ c` (body-local) that share an element, and every
    /// free vertex with itself (its inertia).
    pub(super) slots: usize,
    /// The element terms' jobs: each a range of vertices, the slots they own (the pairs
    /// whose larger vertex they are) and the elements with a vertex among them.
    jobs: Vec<OwnerJob>,
    /// Per vertex, the slot of its pair with itself (NONE where pinned).
    vertex_slots: Vec<u32>,
    /// Per element, the slot of each pair [`element_pairs`] yields (NONE where a vertex
    /// is pinned); CSR.
    element_slots: Vec<u32>,
    element_offsets: Vec<u32>,
    /// Per vertex, its row of `H` (CSR, ascending other vertex).
    row_offsets: Vec<u32>,
    rows: Vec<RowBlock>,
    /// Per vertex, the nodes its row of `H P` spans up to the vertex's last node,
    /// ascending (CSR).
    span_offsets: Vec<u32>,
    spans: Vec<u32>,
    /// Per node, the vertices it weighs: (vertex, the node's slot among the vertex's
    /// eight), ascending vertex (CSR).
    node_offsets: Vec<u32>,
    node_vertices: Vec<(u32, u8)>,
}

impl VertexPairs {
    /// The pairs of `elements` (each its body-local vertices) over a space of `nodes`
    /// nodes whose vertices carry `vertex_nodes` (a pinned vertex has none).
    pub(super) fn build<'a>(
        elements: impl Iterator<Item = &'a [u32]>,
        vertex_nodes: &[[u32; 8]],
        nodes: usize,
    ) -> VertexPairs {
        let element_vertices: Vec<&[u32]> = elements.collect();
        let numbered = number_slots(&element_vertices, vertex_nodes);
        let jobs = owner_jobs(&numbered.pairs, &element_vertices, vertex_nodes.len());
        let rows = row_blocks(&numbered.pairs, vertex_nodes);
        let (node_offsets, node_vertices) = node_lists(vertex_nodes, nodes);
        VertexPairs {
            slots: numbered.pairs.len(),
            jobs,
            vertex_slots: numbered.vertex_slots,
            element_slots: numbered.element_slots,
            element_offsets: numbered.element_offsets,
            row_offsets: rows.row_offsets,
            rows: rows.rows,
            span_offsets: rows.span_offsets,
            spans: rows.spans,
            node_offsets,
            node_vertices,
        }
    }

    /// The element terms' jobs, their slot ranges consecutive from 0.
    pub(super) fn jobs(&self) -> &[OwnerJob] {
        &self.jobs
    }

    /// The slot of vertex `v` with itself (NONE where pinned).
    pub(super) fn vertex_slot(&self, v: usize) -> u32 {
        self.vertex_slots[v]
    }

    /// Element `e`'s slots, in the order of [`element_pairs`].
    pub(super) fn element_slots(&self, e: usize) -> &[u32] {
        &self.element_slots[self.element_offsets[e] as usize..self.element_offsets[e + 1] as usize]
    }

    /// Blocks an assembly computes, comparable with `NodeStencils::cost`: each element's
    /// vertex pairs, the tets' (the first `tets` elements) twice (their second-order
    /// part), and the products' scaled additions, at half a block each.
    pub(super) fn cost(&self, tets: usize) -> usize {
        let tet_pairs = self.element_slots[..self.element_offsets[tets] as usize].iter();
        let pairs = self.element_slots.iter().chain(tet_pairs);
        let elements = pairs.filter(|&&s| s != NONE).count();
        let multiply: usize = (self.rows.iter())
            .map(|rb| rb.at.iter().filter(|&&at| at != NONE).count())
            .sum();
        let restrict: usize = (0..self.node_offsets.len() - 1)
            .map(|i| {
                let weighed = &self.node_vertices
                    [self.node_offsets[i] as usize..self.node_offsets[i + 1] as usize];
                (weighed.iter())
                    .map(|&(a, _)| {
                        let span = &self.spans[self.span_offsets[a as usize] as usize
                            ..self.span_offsets[a as usize + 1] as usize];
                        span.partition_point(|&j| j as usize <= i)
                    })
                    .sum::<usize>()
            })
            .sum();
        elements + (multiply + restrict) / 2
    }

    /// `Pᵀ H P` of the slots' blocks `h`, added to the lower block triangle `out`. `y` is
    /// scratch for `H P`.
    pub(super) fn restrict(
        &self,
        h: &[Block],
        vertex_nodes: &[[u32; 8]],
        vertex_weights: &[[f64; 8]],
        y: &mut Vec<Block>,
        out: &mut Blocks,
    ) {
        y.clear();
        y.resize(self.spans.len(), [0.0; 9]);
        // H P, a vertex row at a time: row a's block with vertex c, scaled by c's weights,
        // lands at c's nodes. Jobs of consecutive vertices own consecutive spans.
        let mut jobs = Vec::new();
        let mut rest = &mut y[..];
        for a0 in (0..vertex_nodes.len()).step_by(VERTEX_JOB) {
            let a1 = (a0 + VERTEX_JOB).min(vertex_nodes.len());
            let len = (self.span_offsets[a1] - self.span_offsets[a0]) as usize;
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            jobs.push((a0..a1, head));
            rest = tail;
        }
        jobs.into_par_iter().for_each(|(vertices, y)| {
            let base = self.span_offsets[vertices.start] as usize;
            for a in vertices {
                let span =
                    self.span_offsets[a] as usize - base..self.span_offsets[a + 1] as usize - base;
                let row = &mut y[span];
                let blocks =
                    &self.rows[self.row_offsets[a] as usize..self.row_offsets[a + 1] as usize];
                for rb in blocks {
                    let h = &h[rb.slot as usize];
                    let h = match rb.transposed {
                        false => *h,
                        true => [h[0], h[3], h[6], h[1], h[4], h[7], h[2], h[5], h[8]],
                    };
                    let weights = &vertex_weights[rb.other as usize];
                    for (&at, &w) in rb.at.iter().zip(weights) {
                        if let Some(y) = row.get_mut(at as usize) {
                            for t in 0..9 {
                                y[t] += w * h[t];
                            }
                        }
                    }
                }
            }
        });
        // Pᵀ (H P), a node row at a time: each vertex the node weighs adds its row of H P
        // at the nodes up to the diagonal.
        let y = &y[..];
        out.rows_mut()
            .into_par_iter()
            .enumerate()
            .for_each(|(i, out_row)| {
                let weighed = &self.node_vertices
                    [self.node_offsets[i] as usize..self.node_offsets[i + 1] as usize];
                for &(a, k) in weighed {
                    let w = vertex_weights[a as usize][k as usize];
                    let range = self.span_offsets[a as usize] as usize
                        ..self.span_offsets[a as usize + 1] as usize;
                    for (&j, block) in self.spans[range.clone()].iter().zip(&y[range]) {
                        let Some(o) = out_row.get_mut(j as usize) else {
                            break; // past the diagonal: the span ascends
                        };
                        for t in 0..9 {
                            o[t] += w * block[t];
                        }
                    }
                }
            });
    }
}

/// The body's vertex pairs, each a slot: every free vertex with itself, and the pairs of
/// every element's free vertices, numbered in (a, c) order.
struct NumberedSlots {
    pairs: Vec<(u32, u32)>,
    vertex_slots: Vec<u32>,
    element_slots: Vec<u32>,
    element_offsets: Vec<u32>,
}

fn number_slots(element_vertices: &[&[u32]], vertex_nodes: &[[u32; 8]]) -> NumberedSlots {
    let free = |v: u32| vertex_nodes[v as usize].iter().any(|&n| n != NONE);
    let mut pairs = Vec::new();
    let mut slot_of = HashMap::new();
    let mut slot = |a: u32, c: u32, pairs: &mut Vec<(u32, u32)>| {
        *slot_of.entry((a, c)).or_insert_with(|| {
            pairs.push((a, c));
            pairs.len() as u32 - 1
        })
    };
    let vertex_slots: Vec<u32> = (0..vertex_nodes.len() as u32)
        .map(|v| match free(v) {
            true => slot(v, v, &mut pairs),
            false => NONE,
        })
        .collect();
    let mut element_slots = Vec::new();
    let mut element_offsets = vec![0];
    for &v in element_vertices {
        for (i, j) in element_pairs(v) {
            element_slots.push(match free(v[i]) && free(v[j]) {
                true => slot(v[i], v[j], &mut pairs),
                false => NONE,
            });
        }
        element_offsets.push(element_slots.len() as u32);
    }
    // Slots in the order of their pairs, (a, c) ascending: a vertex's own pairs (the
    // ones whose larger vertex it is) are consecutive, so the element terms can be
    // summed in parallel over ranges of vertices, each into its own slots.
    let mut order: Vec<u32> = (0..pairs.len() as u32).collect();
    order.sort_unstable_by_key(|&s| pairs[s as usize]);
    let mut renumber = vec![0; pairs.len()];
    for (new, &old) in order.iter().enumerate() {
        renumber[old as usize] = new as u32;
    }
    let renumbered = |s: u32| {
        if s == NONE {
            NONE
        } else {
            renumber[s as usize]
        }
    };
    NumberedSlots {
        pairs: order.iter().map(|&s| pairs[s as usize]).collect(),
        vertex_slots: vertex_slots.into_iter().map(renumbered).collect(),
        element_slots: element_slots.into_iter().map(renumbered).collect(),
        element_offsets,
    }
}

/// The element terms' jobs: per range of `OWNER_JOB` vertices, the slots they own (the
/// pairs whose larger vertex they are) and the elements that touch them.
fn owner_jobs(pairs: &[(u32, u32)], element_vertices: &[&[u32]], vertices: usize) -> Vec<OwnerJob> {
    let owned = |v: usize| pairs.partition_point(|&(a, _)| (a as usize) < v);
    let mut job_elements = vec![Vec::new(); vertices.div_ceil(OWNER_JOB)];
    for (e, v) in element_vertices.iter().enumerate() {
        let mut touched: Vec<usize> = v.iter().map(|&v| v as usize / OWNER_JOB).collect();
        touched.sort_unstable();
        touched.dedup();
        for k in touched {
            job_elements[k].push(e as u32);
        }
    }
    (job_elements.into_iter().enumerate())
        .map(|(k, elements)| {
            let range = k * OWNER_JOB..((k + 1) * OWNER_JOB).min(vertices);
            OwnerJob {
                slots: owned(range.start)..owned(range.end),
                elements,
            }
        })
        .collect()
}

/// Each vertex's row of H: its blocks (its pairs, and the transposed ones from the other
/// side) and the nodes its row of H P is read at.
struct RowBlocks {
    row_offsets: Vec<u32>,
    rows: Vec<RowBlock>,
    span_offsets: Vec<u32>,
    spans: Vec<u32>,
}

fn row_blocks(pairs: &[(u32, u32)], vertex_nodes: &[[u32; 8]]) -> RowBlocks {
    let mut row_lists = vec![Vec::new(); vertex_nodes.len()];
    for (s, &(a, c)) in pairs.iter().enumerate() {
        row_lists[a as usize].push((c, s as u32, false));
        if a != c {
            row_lists[c as usize].push((a, s as u32, true));
        }
    }
    let (mut row_offsets, mut rows) = (vec![0], Vec::new());
    let (mut span_offsets, mut spans) = (vec![0], Vec::new());
    for (a, list) in row_lists.iter_mut().enumerate() {
        list.sort_unstable();
        // Row a of H P is read at the nodes up to a's own last node only (the lower
        // triangle of Pᵀ (H P) in the rows of a's nodes): its span stops there.
        let last = vertex_nodes[a].iter().filter(|&&n| n != NONE).max();
        let start = spans.len();
        spans.extend(
            list.iter()
                .flat_map(|&(c, ..)| vertex_nodes[c as usize])
                .filter(|&n| n != NONE && Some(&n) <= last),
        );
        spans[start..].sort_unstable();
        let mut span = spans.split_off(start);
        span.dedup();
        for &(other, slot, transposed) in list.iter() {
            let at = vertex_nodes[other as usize]
                .map(|n| span.binary_search(&n).map_or(NONE, |at| at as u32));
            rows.push(RowBlock {
                other,
                slot,
                transposed,
                at,
            });
        }
        spans.extend(span);
        row_offsets.push(rows.len() as u32);
        span_offsets.push(spans.len() as u32);
    }
    RowBlocks {
        row_offsets,
        rows,
        span_offsets,
        spans,
    }
}

/// Per node, the vertices weighed at it (vertex, its slot among its 8 nodes), as offsets
/// and one list.
fn node_lists(vertex_nodes: &[[u32; 8]], nodes: usize) -> (Vec<u32>, Vec<(u32, u8)>) {
    let mut lists = vec![Vec::new(); nodes];
    for (v, ns) in vertex_nodes.iter().enumerate() {
        for (k, &n) in ns.iter().enumerate().filter(|(_, n)| **n != NONE) {
            lists[n as usize].push((v as u32, k as u8));
        }
    }
    let offsets = std::iter::once(0)
        .chain(lists.iter().scan(0, |sum, l| {
            *sum += l.len() as u32;
            Some(*sum)
        }))
        .collect();
    (offsets, lists.concat())
}
