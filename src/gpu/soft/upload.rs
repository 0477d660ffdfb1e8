//! The host's side of a deformable step: what goes up to the device before it. The
//! topology (elements, materials, incidence, colouring, coarse spaces) when it changes;
//! every step the vertices' state, the coarse factors, the attachments and the colours'
//! ranges, then the contact stage's set-up (`soft_contact::upload`).

use super::*;

impl SoftStep {
    /// Writes `bytes` into buffer `i`, growing it first (power of two) if needed.
    fn put(&mut self, i: usize, bytes: &[u8]) {
        let need = (bytes.len() as u64).max(16).next_multiple_of(4);
        if need > self.buffers[i].size() {
            self.buffers[i] = resident(&self.device, need.next_power_of_two().max(256));
        }
        if !bytes.is_empty() {
            self.queue.write_buffer(&self.buffers[i], 0, bytes);
            self.upload_bytes += bytes.len() as u64;
        }
    }

    /// Writes `bytes` into buffer `i` as [`Self::put`] does, unless the buffer holds them
    /// already: lists the host rebuilds every step that seldom change.
    fn put_if_changed(&mut self, i: usize, bytes: &[u8]) {
        let need = (bytes.len() as u64).max(16).next_multiple_of(4);
        if need <= self.buffers[i].size() && self.written[i] == bytes {
            return;
        }
        self.put(i, bytes);
        self.written[i].clear();
        self.written[i].extend_from_slice(bytes);
    }

    /// Uploads what changes only with the topology: elements, materials, the incidence
    /// lists, the colouring and the coarse spaces (per vertex, and each node's vertices).
    fn upload_topology(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        vs: &VertexState,
    ) -> Result<(), GpuError> {
        self.put(
            INCIDENT_OFFSETS,
            bytemuck::cast_slice(&set.incident_offsets),
        );
        self.put(INCIDENT, bytemuck::cast_slice(&set.incident));
        self.put(TETS, bytemuck::cast_slice(&set.tets));
        self.put(TRIS, bytemuck::cast_slice(&set.tris));
        self.put(HINGES, bytemuck::cast_slice(&set.hinges));
        self.put(MATERIALS, bytemuck::cast_slice(&set.materials));
        let colors = &set.colors;
        self.colors = (0..colors.count())
            .map(|c| (colors.offsets[c], colors.group(c).len() as u32))
            .collect();
        // The members by colour, then each vertex's colour (`x_in_sweep` in vbd.wgsl).
        let n = set.vertex_count();
        let mut list = colors.members.clone();
        self.color_of = list.len() as u32;
        list.resize(list.len() + n, NONE);
        for (c, &(start, count)) in self.colors.iter().enumerate() {
            for &v in &colors.members[start as usize..(start + count) as usize] {
                list[self.color_of as usize + v as usize] = c as u32;
            }
        }
        self.put(COLOR_LIST, bytemuck::cast_slice(&list));
        let mut per_vertex = vec![
            CoarseVertex {
                nodes: [NONE; 8],
                weights: [0.0; 8]
            };
            n
        ];
        let mut node_lists: Vec<Vec<NodeItem>> = Vec::new();
        self.coarse_bodies = 0;
        for b in 0..set.len() {
            let Some(space) = coarse_space(cfg, vs, b) else {
                continue;
            };
            if 3 * space.nodes > MAX_COARSE_UNKNOWNS {
                return Err(GpuError::Step(format!(
                    "a coarse space of {} nodes: the device solves at most {} (coarse_nodes)",
                    space.nodes,
                    MAX_COARSE_UNKNOWNS / 3
                )));
            }
            self.coarse_bodies += 1;
            let start = node_lists.len();
            node_lists.resize_with(start + space.nodes, Vec::new);
            for (local, v) in set.vertex_range(b).enumerate() {
                for k in 0..8 {
                    let node = space.vertex_nodes[local][k];
                    if node == NONE {
                        continue;
                    }
                    let weight = space.vertex_weights[local][k] as f32;
                    per_vertex[v].nodes[k] = (start + node as usize) as u32;
                    per_vertex[v].weights[k] = weight;
                    node_lists[start + node as usize].push(NodeItem {
                        vertex: v as u32,
                        weight,
                    });
                }
            }
        }
        let mut offsets = Vec::with_capacity(node_lists.len() + 1);
        offsets.push(0u32);
        let mut items = Vec::new();
        for list in &node_lists {
            items.extend_from_slice(list);
            offsets.push(items.len() as u32);
        }
        self.put(COARSE_VERTICES, bytemuck::cast_slice(&per_vertex));
        self.put(NODE_OFFSETS, bytemuck::cast_slice(&offsets));
        self.put(NODE_ITEMS, bytemuck::cast_slice(&items));
        // The node steps, then per body the line search's slots (start slope, scale).
        self.search_at = 3 * node_lists.len() as u32;
        let mut delta = vec![0.0f32; 3 * node_lists.len()];
        delta.extend((0..set.len()).flat_map(|_| [-1.0, 0.0]));
        self.put(DELTA, bytemuck::cast_slice(&delta));
        Ok(())
    }

    /// Uploads the step's state: the vertices' start positions, masses, inertial targets,
    /// flags and initial guess (`vs`, prepared by the host), the coarse factors, the
    /// attachments (warm-started) and their lists; the topology when it changed.
    pub(in crate::gpu) fn upload(
        &mut self,
        cfg: &SolverConfig,
        input: DeformableStep,
        vs: &VertexState,
        rigid: &crate::rigid::BodySet,
        from_broad_phase: Option<super::super::contact_broad::RunRecords>,
    ) -> Result<(), GpuError> {
        let DeformableStep { set, attachments } = input;
        if self.pending.is_some() {
            return Err(GpuError::Step(
                "a deformable step is already in flight".into(),
            ));
        }
        let n = set.vertex_count();
        self.use_vertex_lanes(cfg.gpu_vertex_lanes);
        let key = (set.generation, cfg.coarse_nodes, cfg.dt.to_bits());
        if self.key != Some(key) {
            self.upload_topology(cfg, set, vs)?;
            self.key = Some(key);
        }
        let verts: Vec<SoftVertex> = (0..n)
            .map(|v| {
                let (p, yd) = (set.positions[v], vs.yd[v]);
                // 1.0: solved (a float, not integer bits: a device may flush the subnormal
                // floats small integers are).
                let solved = set.is_solved(v) as u32 as f32;
                SoftVertex {
                    p: [p.x, p.y, p.z, set.masses[v]],
                    yd: [yd.x, yd.y, yd.z, solved],
                }
            })
            .collect();
        self.put(VERTS, bytemuck::cast_slice(&verts));
        let disp: Vec<[f32; 4]> = vs.d.iter().map(|d| d.extend(0.0).to_array()).collect();
        self.put(DISP, bytemuck::cast_slice(&disp));
        // Written whole by the residual kernel before it is read: sized, not uploaded.
        if (16 * n as u64).max(16) > self.buffers[RESIDUAL].size() {
            self.buffers[RESIDUAL] = resident(&self.device, (16 * n as u64).next_power_of_two());
        }
        let forces = 64 * (set.tets.len() + set.tris.len() + set.hinges.len()) as u64;
        if forces > self.buffers[ELEMENT_FORCES].size() {
            self.buffers[ELEMENT_FORCES] = resident(&self.device, forces.next_power_of_two());
        }
        let (bodies, factor) = factors(cfg, set, vs);
        self.put(COARSE_BODIES, bytemuck::cast_slice(&bodies));
        self.put(FACTOR, bytemuck::cast_slice(&factor));
        self.put(ATTACHMENTS, bytemuck::cast_slice(&attachments.records));
        // The attachments' lists change only when one is added, removed or broken.
        let (by_vertex, by_body) = (&attachments.by_vertex, &attachments.by_body);
        self.put_if_changed(ATT_VERTEX_OFFSETS, bytemuck::cast_slice(&by_vertex.0));
        self.put_if_changed(ATT_VERTEX_ITEMS, bytemuck::cast_slice(&by_vertex.1));
        self.put_if_changed(ATT_BODY_OFFSETS, bytemuck::cast_slice(&by_body.0));
        self.put_if_changed(ATT_BODY_ITEMS, bytemuck::cast_slice(&by_body.1));
        let slots = (self.colors.len() as u64).max(1) * SLOT;
        if self.ranges.size() < slots {
            self.ranges = storage_buffer(
                &self.device,
                "vbd colour ranges",
                slots.next_power_of_two(),
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            );
            self.range_group = range_group(&self.device, &self.range_layout, &self.ranges);
        }
        let mut ranges = vec![0u8; slots as usize];
        for (c, &(start, count)) in self.colors.iter().enumerate() {
            let at = c * SLOT as usize;
            ranges[at..at + 16].copy_from_slice(bytemuck::cast_slice(&[start, count, c as u32, 0]));
        }
        self.queue.write_buffer(&self.ranges, 0, &ranges);
        self.n_vertices = n as u32;
        self.n_elements = [set.tets.len(), set.tris.len(), set.hinges.len()].map(|n| n as u32);
        self.n_attachments = attachments.records.len() as u32;
        self.iterations = cfg.iterations;
        self.coarse_on = self.coarse_bodies > 0 && cfg.coarse_nodes > 0;
        // As the CPU: while the contact stage has rows, which the step may make during the
        // frame, so the passes are recorded whenever contact is on and each body's solve
        // checks for rows (the device's count holds rows dropped during the frame too).
        self.line_search = self.coarse_on && vs.contact_on;
        let params = SoftParams {
            n_vertices: n as u32,
            n_bodies: self.coarse_bodies,
            inv_h: 1.0 / cfg.dt,
            n_attachments: self.n_attachments,
            alpha: cfg.alpha,
            lambda_max: cfg.lambda_max,
            beta_linear: cfg.beta_linear,
            k_max: cfg.k_max,
            line_search: self.line_search as u32,
            search_at: self.search_at,
            color_of: self.color_of,
            n_tets: self.n_elements[0],
            n_tris: self.n_elements[1],
            n_hinges: self.n_elements[2],
            pad: [0; 2],
        };
        self.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
        self.upload_bytes += (ranges.len() + std::mem::size_of::<SoftParams>()) as u64;
        if vs.contact_on {
            self.contact.upload(
                cfg,
                set,
                rigid,
                &vs.contact,
                &self.adapter,
                from_broad_phase,
            )?;
            self.upload_bytes += self.contact.upload_bytes;
        } else {
            self.contact.off();
        }
        let bytes = self.readback_bytes();
        if self.staging.size() < bytes {
            self.staging = readback_buffer(&self.device, bytes.next_power_of_two());
        }
        Ok(())
    }
}

/// Body `b`'s coarse space when the two-level step is on (the spaces of an earlier
/// budget may linger while it is off).
fn coarse_space<'a>(
    cfg: &SolverConfig,
    vs: &'a VertexState,
    b: usize,
) -> Option<&'a crate::pipeline::coarse::CoarseSpace> {
    if cfg.coarse_nodes == 0 {
        return None;
    }
    vs.coarse.space(b)
}

/// Each coarse body's record and the frame's factors (lower triangles, row by row, in
/// f32), in the order the topology upload numbered the bodies.
fn factors(
    cfg: &SolverConfig,
    set: &DeformableSet,
    vs: &VertexState,
) -> (Vec<CoarseBody>, Vec<f32>) {
    let mut bodies = Vec::new();
    let mut factor = Vec::new();
    let mut node_start = 0u32;
    for b in 0..set.len() {
        let Some(space) = coarse_space(cfg, vs, b) else {
            continue;
        };
        let n = 3 * space.nodes;
        let factor_start = factor.len() as u32;
        let ok = match vs.coarse.factor(b) {
            Some(l) => {
                for i in 0..n {
                    factor.extend(l[i * n..i * n + i + 1].iter().map(|&x| x as f32));
                }
                invert_diagonal_blocks(l, n, &mut factor[factor_start as usize..]);
                true
            }
            None => false,
        };
        bodies.push(CoarseBody {
            node_start,
            unknowns: n as u32,
            factor_start,
            ok: ok as u32,
            body: b as u32,
            size: space.size,
            vertex_start: set.vertex_range(b).start as u32,
            vertex_end: set.vertex_range(b).end as u32,
        });
        node_start += space.nodes as u32;
    }
    (bodies, factor)
}

/// Unknowns per diagonal block of the device's substitutions (`BLOCK` in coarse.wgsl).
const SOLVE_BLOCK: usize = 32;

/// Each `SOLVE_BLOCK` diagonal block of the Cholesky factor `l` (n × n, row-major, f64)
/// inverted in f64 into its place in `packed` (the lower triangle row by row, f32): the
/// inverse of a lower triangle is one, and with it the device solves a block by one product
/// instead of a substitution step per unknown (coarse.wgsl `forward_substitution`).
fn invert_diagonal_blocks(l: &[f64], n: usize, packed: &mut [f32]) {
    let mut inv = [0.0f64; SOLVE_BLOCK * SOLVE_BLOCK];
    for s in (0..n).step_by(SOLVE_BLOCK) {
        let b = SOLVE_BLOCK.min(n - s);
        let at = |r: usize, c: usize| l[(s + r) * n + s + c];
        // Column by column: X[j][j] = 1 / L[j][j], X[i][j] = −Σ_{j≤k<i} L[i][k] X[k][j] / L[i][i].
        for j in 0..b {
            inv[j * SOLVE_BLOCK + j] = 1.0 / at(j, j);
            for i in j + 1..b {
                let sum: f64 = (j..i).map(|k| at(i, k) * inv[k * SOLVE_BLOCK + j]).sum();
                inv[i * SOLVE_BLOCK + j] = -sum / at(i, i);
            }
        }
        for r in 0..b {
            let row = (s + r) * (s + r + 1) / 2 + s;
            for c in 0..=r {
                packed[row + c] = inv[r * SOLVE_BLOCK + c] as f32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block times its uploaded inverse is the identity, and the entries outside the
    /// diagonal blocks are the factor's.
    #[test]
    fn diagonal_blocks_are_uploaded_inverted() {
        let n = 70; // two whole blocks and a part
        let mut l = vec![0.0f64; n * n];
        for i in 0..n {
            for j in 0..=i {
                l[i * n + j] = if i == j {
                    2.0 + (i % 5) as f64
                } else {
                    ((i * 7 + j * 3) % 11) as f64 / 11.0 - 0.5
                };
            }
        }
        let mut packed: Vec<f32> = (0..n)
            .flat_map(|i| {
                l[i * n..i * n + i + 1]
                    .iter()
                    .map(|&x| x as f32)
                    .collect::<Vec<_>>()
            })
            .collect();
        invert_diagonal_blocks(&l, n, &mut packed);
        let tri = |i: usize| i * (i + 1) / 2;
        for s in (0..n).step_by(SOLVE_BLOCK) {
            let b = SOLVE_BLOCK.min(n - s);
            for i in 0..b {
                for j in 0..b {
                    let product: f64 = (0..b)
                        .filter(|&k| k <= i && j <= k)
                        .map(|k| l[(s + i) * n + s + k] * packed[tri(s + k) + s + j] as f64)
                        .sum();
                    let expected = if i == j { 1.0 } else { 0.0 };
                    assert!(
                        (product - expected).abs() < 1e-5,
                        "block {s}: ({i}, {j}) = {product}"
                    );
                }
            }
        }
        for i in 0..n {
            for j in 0..i {
                if i / SOLVE_BLOCK != j / SOLVE_BLOCK {
                    assert_eq!(packed[tri(i) + j], l[i * n + j] as f32);
                }
            }
        }
    }
}
