//! What the kernels read: the contact state's geometry and cages as flat arrays, and the
//! grid's classes, cell sizes and origins.

use bytemuck::{Pod, Zeroable};
use glam::Vec3A;
use rayon::prelude::*;

use super::RIGID;
use crate::config::SolverConfig;
use crate::pipeline::surface_contact::SurfaceContact;
use crate::pipeline::surface_contact::cages::Box3;
use crate::pipeline::surface_contact::geometry::Owner;

/// `CbParams` in contact_broad_phase.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct CbParams {
    pub(super) n_items: u32,
    pub(super) n_point_queries: u32,
    pub(super) n_edges: u32,
    pub(super) table_mask: u32,
    pub(super) capacity: u32,
    pub(super) n_linked: u32,
    pub(super) soft_points: u32,
    pub(super) n_soft_edges: u32,
    pub(super) class_start: [u32; 4],
    pub(super) inv_cell: [f32; 4],
    pub(super) origin: [[f32; 4]; 4],
    pub(super) min_sep: f32,
    pub(super) reach_scale: f32,
    pub(super) entry_capacity: u32,
    pub(super) pad: u32,
}

/// A box as the shader reads it (`Item`): the space's bits in the lower corner's w.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct Item {
    pub(super) lo: [f32; 4],
    pub(super) hi: [f32; 4],
}

impl Item {
    fn new((lo, hi): Box3, space: u32) -> Self {
        Self {
            lo: [lo.x, lo.y, lo.z, f32::from_bits(space)],
            hi: [hi.x, hi.y, hi.z, 0.0],
        }
    }
}

fn owner_code(o: Owner) -> u32 {
    match o {
        Owner::Soft(b) => b,
        Owner::Rigid(r) => RIGID | r,
    }
}

/// The flat arrays the kernels read, from the contact state's geometry and cages.
pub(super) struct Input {
    pub(super) params: CbParams,
    pub(super) items: Vec<Item>,
    pub(super) tris: Vec<[u32; 4]>,
    pub(super) edges: Vec<[u32; 4]>,
    pub(super) points: Vec<[f32; 4]>,
    pub(super) comoving_reach: Vec<f32>,
    pub(super) point_owner: Vec<u32>,
    pub(super) query_points: Vec<u32>,
    /// Per point in three: its absolute cage's corners, then (a deformable point's) its
    /// comoving cage's relative to its position at R, packed as the contact stage's
    /// `cage_soft` region (`cages` in the shader, which makes the items' and queries'
    /// boxes from them).
    pub(super) cages: Vec<[f32; 4]>,
    pub(super) linked: Vec<[u32; 2]>,
    /// The grid entries the items make (cb_count_cells's count, made here the same way).
    pub(super) placed: u32,
}

/// Cells a stored item may cover before it is listed apart (`MAX_CELLS` in the shader).
const MAX_CELLS: i64 = 64;

/// The grid entries of `boxes` with cells of `1 / inv` from `origin`: the cells each
/// covers, none for one that covers more than [`MAX_CELLS`] (cb_count_cells's test).
fn entries(boxes: &[Item], origin: Vec3A, inv: f32) -> u32 {
    let cell = |p: [f32; 4]| ((Vec3A::new(p[0], p[1], p[2]) - origin) * inv).floor();
    boxes
        .par_iter()
        .map(|b| {
            let (lo, hi) = (cell(b.lo), cell(b.hi));
            let n: i64 = (0..3)
                .map(|k| (hi[k] as i64 - lo[k] as i64 + 1).max(0))
                .product();
            if n > MAX_CELLS { 0 } else { n as u32 }
        })
        .sum()
}

/// The median largest side of `boxes` (1 when there are none): the cell size of a class.
fn cell_size(boxes: &[Item]) -> f32 {
    let mut sides: Vec<f32> = boxes
        .iter()
        .map(|b| (0..3).map(|k| b.hi[k] - b.lo[k]).fold(0.0f32, f32::max))
        .filter(|s| s.is_finite())
        .collect();
    let n = sides.len();
    if n == 0 {
        return 1.0;
    }
    let side = *sides.select_nth_unstable_by(n / 2, f32::total_cmp).1;
    if side > 1e-6 { side } else { 1e-6 }
}

impl Input {
    pub(super) fn new(contact: &SurfaceContact, cfg: &SolverConfig, set_owner: &[u32]) -> Self {
        let g = &contact.geometry;
        let cages = &contact.cages;
        let w = Vec3A::splat(0.5 * cfg.contact_min_separation);
        let widened = |(lo, hi): Box3| (lo - w, hi + w);
        let soft = |o: &Owner| matches!(o, Owner::Soft(_));
        // Deformables' primitives come first in the geometry's lists.
        let soft_triangles = g.triangles.partition_point(|(_, o)| soft(o));
        let soft_edges = g.edges.partition_point(|(_, o)| soft(o));
        let body = |o: &Owner| match o {
            Owner::Soft(b) => *b,
            Owner::Rigid(_) => 0,
        };
        let mut classes: [Vec<Item>; 4] = Default::default();
        classes[0] = g
            .triangles
            .par_iter()
            .map(|(t, _)| Item::new(widened(cages.absolute_box(t)), 0))
            .collect();
        classes[1] = g
            .edges
            .par_iter()
            .map(|(e, _)| Item::new(widened(cages.absolute_box(e)), 1))
            .collect();
        classes[2] = g.triangles[..soft_triangles]
            .par_iter()
            .map(|(t, o)| Item::new(widened(cages.comoving_box(t)), 2 + 4 * body(o)))
            .collect();
        classes[3] = g.edges[..soft_edges]
            .par_iter()
            .map(|(e, o)| Item::new(widened(cages.comoving_box(e)), 3 + 4 * body(o)))
            .collect();
        let mut class_start = [0u32; 4];
        let mut inv_cell = [0f32; 4];
        let mut origin = [[0f32; 4]; 4];
        let mut items = Vec::new();
        let mut placed = 0;
        for (c, boxes) in classes.iter().enumerate() {
            class_start[c] = items.len() as u32;
            inv_cell[c] = 1.0 / cell_size(boxes);
            let lo = boxes.iter().fold(Vec3A::splat(f32::INFINITY), |o, b| {
                o.min(Vec3A::new(b.lo[0], b.lo[1], b.lo[2]))
            });
            let lo = if lo.is_finite() { lo } else { Vec3A::ZERO };
            origin[c] = [lo.x, lo.y, lo.z, 0.0];
            placed += entries(boxes, lo, inv_cell[c]);
            items.extend_from_slice(boxes);
        }
        let n_points = g.point_count();
        let point_owner: Vec<u32> = (0..n_points as u32)
            .map(|p| {
                owner_code(if p < g.soft_points {
                    Owner::Soft(set_owner[p as usize])
                } else {
                    Owner::Rigid(g.rigid_points[(p - g.soft_points) as usize].0)
                })
            })
            .collect();
        let query_points: Vec<u32> = g
            .surface_points
            .iter()
            .copied()
            .chain(g.soft_points..n_points as u32)
            .collect();
        let point_cages = (0..n_points)
            .into_par_iter()
            .flat_map_iter(|p| {
                let comoving = match p < g.soft_points as usize {
                    true => cages.comoving[p],
                    false => (Vec3A::ZERO, Vec3A::ZERO),
                };
                pack_cages(cages.absolute[p], comoving)
            })
            .collect();
        let points = (0..n_points as u32)
            .into_par_iter()
            .map(|p| {
                let r = cages.at(p);
                [r.x, r.y, r.z, cages.reach(p, false)]
            })
            .collect();
        let mut comoving_reach: Vec<f32> = (0..g.soft_points)
            .into_par_iter()
            .map(|p| cages.reach(p, true))
            .collect();
        // Storage bindings may not be empty.
        comoving_reach.push(0.0);
        let table = (4 * items.len() as u32).max(1024).next_power_of_two();
        let params = CbParams {
            n_items: items.len() as u32,
            n_point_queries: query_points.len() as u32,
            n_edges: g.edges.len() as u32,
            table_mask: table - 1,
            capacity: 0,
            n_linked: contact.linked.len() as u32,
            soft_points: g.soft_points,
            n_soft_edges: soft_edges as u32,
            class_start,
            inv_cell,
            origin,
            min_sep: cfg.contact_min_separation,
            reach_scale: 1.0f32 + 1e-5f32,
            entry_capacity: 0,
            pad: 0,
        };
        Self {
            params,
            items,
            tris: g
                .triangles
                .iter()
                .map(|&(t, o)| [t[0], t[1], t[2], owner_code(o)])
                .collect(),
            edges: g
                .edges
                .iter()
                .map(|&(e, o)| [e[0], e[1], owner_code(o), 0])
                .collect(),
            points,
            comoving_reach,
            point_owner,
            query_points,
            cages: point_cages,
            linked: contact.linked.iter().map(|&(s, r)| [s, r]).collect(),
            placed,
        }
    }
}

/// A point's absolute cage and comoving cage (relative to R) in three vec4s, as the contact
/// stage's `soft_cages` reads them (contact_advance.wgsl).
pub(in crate::gpu) fn pack_cages((al, ah): Box3, (cl, ch): Box3) -> [[f32; 4]; 3] {
    [
        [al.x, al.y, al.z, ah.x],
        [ah.y, ah.z, cl.x, cl.y],
        [cl.z, ch.x, ch.y, ch.z],
    ]
}
