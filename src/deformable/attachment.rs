//! Attachments: a vertex of a deformable body held to a point of a rigid body by three
//! hard AVBD rows (augmented Lagrangian with penalty k and multiplier λ per axis), so the
//! rigid body feels the reaction through its 6×6 block and a heavy body can hang from a
//! light soft one, as the rigid joints allow at 50,000:1.

use bytemuck::{Pod, Zeroable};
use glam::Vec3;

use crate::error::{AttachmentHandle, BodyHandle, DeformableHandle};
use crate::rigid::body::PoseRecord;

/// Everything needed to attach a vertex to a rigid body.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttachmentDesc {
    pub deformable: DeformableHandle,
    /// Mesh vertex index.
    pub vertex: u32,
    pub body: BodyHandle,
    /// The point of the body the vertex is held to, in the body frame (relative to its
    /// centre of mass). `None` takes the vertex's current position.
    pub anchor: Option<Vec3>,
    /// The attachment breaks when its force exceeds this (N).
    pub breaking_force: Option<f32>,
}

impl AttachmentDesc {
    pub fn new(deformable: DeformableHandle, vertex: u32, body: BodyHandle) -> Self {
        Self {
            deformable,
            vertex,
            body,
            anchor: None,
            breaking_force: None,
        }
    }

    pub fn at_anchor(mut self, anchor: Vec3) -> Self {
        self.anchor = Some(anchor);
        self
    }

    pub fn breakable(mut self, force: f32) -> Self {
        self.breaking_force = Some(force);
        self
    }
}

/// `AttachmentRecord::flags` bits.
pub mod flags {
    pub const BROKEN: u32 = 1;
    pub const BREAKABLE: u32 = 2;
}

/// One attachment as the solver sees it (shared by the CPU and GPU backends): three rows
/// `C = x_v − (p_b + R_b a)`, world axes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct AttachmentRecord {
    /// Global vertex index.
    pub vertex: u32,
    /// Solver index of the rigid body.
    pub body: u32,
    pub flags: u32,
    pub breaking_force: f32,
    /// Anchor in the body frame (xyz).
    pub anchor: [f32; 4],
    /// Penalty of each row (N/m); 0 before the first step.
    pub k: [f32; 4],
    /// Force of each row (N): the vertex is pulled by −λ, the body by +λ.
    pub lambda: [f32; 4],
    /// Error at the start of the step (Eq. 18's regularisation).
    pub c0: [f32; 4],
}

#[inline]
fn v3(a: [f32; 4]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

impl AttachmentRecord {
    pub fn broken(&self) -> bool {
        self.flags & flags::BROKEN != 0
    }

    /// The anchor's lever arm `R a` and its world position for the body at `pose`.
    #[inline]
    pub fn arm(&self, pose: &PoseRecord) -> (Vec3, Vec3) {
        let arm = pose.q() * v3(self.anchor);
        (arm, pose.p() + arm)
    }

    /// The rows' error at vertex position `x` and body pose `pose`.
    #[inline]
    pub fn error(&self, x: Vec3, pose: &PoseRecord) -> Vec3 {
        x - self.arm(pose).1
    }

    /// The rows' forces `k C̃ + λ` (no bounds: equality rows) for error `c`, with Eq. 18's
    /// regularised error `C̃ = C − α C₀`.
    #[inline]
    pub fn force(&self, c: Vec3, alpha: f32) -> Vec3 {
        let reg = c - alpha * v3(self.c0);
        v3(self.k) * reg + v3(self.lambda)
    }

    pub fn k(&self) -> Vec3 {
        v3(self.k)
    }

    pub fn lambda(&self) -> Vec3 {
        v3(self.lambda)
    }
}

/// Every attachment of a world, with the per-vertex and per-body lists the solve reads.
#[derive(Default)]
pub struct AttachmentSet {
    pub(crate) handles: Vec<AttachmentHandle>,
    pub(crate) index_of: Vec<u32>,
    pub(crate) records: Vec<AttachmentRecord>,
    /// What the user named: the deformable and its mesh vertex, and the body.
    pub(crate) ends: Vec<(DeformableHandle, u32, BodyHandle)>,
    /// Attachments by global vertex and by body solver index (CSR, unbroken only), rebuilt
    /// at the start of every step.
    pub(crate) by_vertex: (Vec<u32>, Vec<u32>),
    pub(crate) by_body: (Vec<u32>, Vec<u32>),
}

/// A CSR list of `n` rows from `(row, item)` pairs in item order.
fn csr(n: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone, out: &mut (Vec<u32>, Vec<u32>)) {
    let (offsets, items) = out;
    offsets.clear();
    offsets.resize(n + 1, 0);
    for (row, _) in pairs.clone() {
        offsets[row as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    items.clear();
    items.resize(offsets[n] as usize, 0);
    let mut cursor: Vec<u32> = offsets[..n].to_vec();
    for (row, item) in pairs {
        items[cursor[row as usize] as usize] = item;
        cursor[row as usize] += 1;
    }
}

impl AttachmentSet {
    pub fn len(&self) -> usize {
        self.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    pub(crate) fn index(&self, h: AttachmentHandle) -> Option<usize> {
        match self.index_of.get(h.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    pub(crate) fn push(
        &mut self,
        rec: AttachmentRecord,
        ends: (DeformableHandle, u32, BodyHandle),
    ) -> AttachmentHandle {
        let h = AttachmentHandle(self.index_of.len() as u32);
        self.index_of.push(self.records.len() as u32);
        self.handles.push(h);
        self.records.push(rec);
        self.ends.push(ends);
        h
    }

    pub(crate) fn remove(&mut self, h: AttachmentHandle) -> bool {
        let Some(i) = self.index(h) else {
            return false;
        };
        let last = self.records.len() - 1;
        self.handles.swap_remove(i);
        self.records.swap_remove(i);
        self.ends.swap_remove(i);
        self.index_of[h.0 as usize] = u32::MAX;
        if i != last {
            self.index_of[self.handles[i].0 as usize] = i as u32;
        }
        true
    }

    /// Rebuilds the per-vertex and per-body lists of unbroken attachments.
    pub(crate) fn build_lists(&mut self, vertices: usize, bodies: usize) {
        let live = self.records.iter().enumerate().filter(|(_, r)| !r.broken());
        csr(
            vertices,
            live.clone().map(|(i, r)| (r.vertex, i as u32)),
            &mut self.by_vertex,
        );
        csr(
            bodies,
            live.map(|(i, r)| (r.body, i as u32)),
            &mut self.by_body,
        );
    }

    #[inline]
    pub(crate) fn of_vertex(&self, v: usize) -> &[u32] {
        let (o, items) = &self.by_vertex;
        if o.len() <= v + 1 {
            return &[];
        }
        &items[o[v] as usize..o[v + 1] as usize]
    }

    #[inline]
    pub(crate) fn of_body(&self, b: usize) -> &[u32] {
        let (o, items) = &self.by_body;
        if o.len() <= b + 1 {
            return &[];
        }
        &items[o[b] as usize..o[b + 1] as usize]
    }
}
