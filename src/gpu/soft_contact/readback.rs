//! The contact stage's readback: what a frame copies back (X, the rows, the status,
//! β), the rows made past the copy, and the host's rows rebuilt from them.

use glam::Vec3A;

use super::{ATOMICS, ContactStep, DeviceRow, NONE, ROW_ALIVE, ROW_COARSE, ROWS, RowOut, STATE};
use super::{BODY_MOVES, GpuError};
use super::{ST_ESCAPES, ST_FLOOR, STATUS_BYTES, STATUS_WORDS};
use crate::config::SolverConfig;
use crate::deformable::set::DeformableSet;
use crate::pipeline::surface_contact::SurfaceContact;
use crate::pipeline::surface_contact::frame::new_row;
use crate::pipeline::surface_contact::rows::{Pair, Row};
use crate::rigid::BodySet;

impl ContactStep {
    /// Bytes the readback takes: X, the rows it copies (`Sizes::read_rows`), the status, β.
    pub(in crate::gpu) fn readback_bytes(&self) -> u64 {
        if !self.on {
            return 0;
        }
        let s = self.sizes;
        self.status_offset() + STATUS_BYTES + 16 * s.objects as u64
    }

    /// The rows the step left (`count` of them, from the status), from this stage's
    /// readback `data` and, past the rows it copied, a read of the rest (blocking: the
    /// step is done), whose bytes are returned too.
    fn rows<'a>(
        &self,
        data: &'a [u8],
    ) -> Result<(std::borrow::Cow<'a, [RowOut]>, usize, u64), GpuError> {
        let s = self.sizes;
        let rows_at = 16 * s.soft_points as usize;
        let copied = std::mem::size_of::<RowOut>() * s.read_rows as usize;
        let rows: &[RowOut] = bytemuck::cast_slice(&data[rows_at..rows_at + copied]);
        let status: [u32; 4] =
            bytemuck::pod_read_unaligned(&data[rows_at + copied..rows_at + copied + 16]);
        let count = (status[0] as usize).min(s.row_capacity as usize);
        if count <= rows.len() {
            return Ok((std::borrow::Cow::Borrowed(&rows[..count]), count, 0));
        }
        let size = std::mem::size_of::<RowOut>() as u64;
        let (from, len) = (
            4 * self.offsets.rows_out as u64 + size * s.read_rows as u64,
            size * (count - rows.len()) as u64,
        );
        let tail: Vec<RowOut> = self.read(ATOMICS, from, len)?;
        let mut all = rows.to_vec();
        all.extend(tail);
        Ok((std::borrow::Cow::Owned(all), count, len))
    }

    /// Notes the rows a run left (`count`, from its status): the next readbacks make room
    /// for as many new rows as a run made lately, the peak decaying by a quarter a run.
    pub(in crate::gpu) fn note_rows(&mut self, count: u32) {
        let made = count.saturating_sub(self.sizes.carried_rows);
        self.made_peak = made.max(self.made_peak - self.made_peak / 4);
    }

    /// The pairs of the rows the step made (in candidate order), from this stage's
    /// readback `data`: what a run again starts with in the active set; and the bytes read
    /// past the readback.
    pub(in crate::gpu) fn new_pairs(&self, data: &[u8]) -> Result<(Vec<Pair>, u64), GpuError> {
        let (rows, _, extra) = self.rows(data)?;
        let mut pairs: Vec<(u32, Pair)> = rows
            .iter()
            .filter(|r| r.info[3] != NONE)
            .filter_map(|r| Some((r.info[2], *self.pairs.get(r.info[2] as usize)?)))
            .collect();
        pairs.sort_by_key(|p| p.0);
        Ok((pairs.into_iter().map(|p| p.1).collect(), extra))
    }

    /// `len` bytes of buffer `i` from `at` (blocking: after the step, or for tests).
    fn read<T: bytemuck::Pod>(&self, i: usize, at: u64, len: u64) -> Result<Vec<T>, GpuError> {
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("surface contact readback"),
            size: len,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.buffers[i], at, &staging, 0, len);
        self.queue.submit([encoder.finish()]);
        crate::gpu::device::read_staging(&self.device, &staging)
    }

    /// Where the status words are in this stage's readback.
    pub(in crate::gpu) fn status_offset(&self) -> u64 {
        let s = self.sizes;
        16 * s.soft_points as u64 + std::mem::size_of::<RowOut>() as u64 * s.read_rows as u64
    }

    /// Copies X, the rows it reads (`Sizes::read_rows`), the status and β into `staging`
    /// at `offset`.
    pub(in crate::gpu) fn record_readback(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        staging: &wgpu::Buffer,
        offset: u64,
    ) {
        if !self.on {
            return;
        }
        let (s, o) = (self.sizes, self.offsets);
        let mut at = offset;
        for (i, from, len) in [
            (STATE, 16 * o.certified as u64, 16 * s.soft_points as u64),
            (
                ATOMICS,
                4 * o.rows_out as u64,
                std::mem::size_of::<RowOut>() as u64 * s.read_rows as u64,
            ),
            (ATOMICS, 0, STATUS_BYTES),
            (STATE, 16 * o.beta as u64, 16 * s.objects as u64),
        ] {
            if len > 0 {
                encoder.copy_buffer_to_buffer(&self.buffers[i], from, staging, at, len);
            }
            at += len;
        }
    }

    /// Reads the frame's contact state back into `contact`: X, the rows (the live ones:
    /// those carried in first, in their order, then the new ones by advance and candidate),
    /// β, and the statistics; returns the bytes read past the readback (rows made beyond
    /// its room).
    pub(in crate::gpu) fn finish(
        &self,
        data: &[u8],
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        contact: &mut SurfaceContact,
    ) -> Result<u64, GpuError> {
        let s = self.sizes;
        let x = &data[..16 * s.soft_points as usize];
        let status_at = self.status_offset() as usize;
        let status: [u32; STATUS_WORDS] =
            bytemuck::pod_read_unaligned(&data[status_at..status_at + STATUS_BYTES as usize]);
        contact.stats.floor_stopped += status[ST_FLOOR] as usize;
        // Every advance of the kept run that left its cages stopped at them.
        contact.stats.cage_stops += status[ST_ESCAPES] as usize;
        let beta_at = status_at + STATUS_BYTES as usize;
        let beta: &[[f32; 4]] =
            bytemuck::cast_slice(&data[beta_at..beta_at + 16 * s.objects as usize]);
        let x: &[[f32; 4]] = bytemuck::cast_slice(x);
        for (c, v) in contact.certified.iter_mut().zip(x) {
            *c = Vec3A::new(v[0], v[1], v[2]);
        }
        let (rows, _, extra) = self.rows(data)?;
        let mut live: Vec<(u32, u32, usize)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.info[0] & ROW_ALIVE != 0)
            .map(|(i, r)| {
                (
                    r.info[3],
                    if r.info[3] == NONE {
                        i as u32
                    } else {
                        r.info[2]
                    },
                    i,
                )
            })
            .collect();
        // Carried rows (advance NONE) sort last by the key: put them first.
        live.sort_by_key(|&(advance, key, _)| (advance != NONE, advance, key));
        let mut out = Vec::with_capacity(live.len());
        for (_, _, i) in live {
            let r = &rows[i];
            let k = r.info[2] as usize;
            let pair = *self
                .pairs
                .get(k)
                .ok_or_else(|| GpuError::Readback(format!("a contact row names candidate {k}")))?;
            out.push(cpu_row(r, new_row(cfg, set, bodies, contact, pair)));
        }
        contact.rows = out;
        // The host's index of them (the forces on bodies read it).
        contact.reindex_rows(set, self.sizes.bodies as usize);
        for (b, v) in contact.beta.iter_mut().zip(beta) {
            *b = v[0];
        }
        Ok(extra)
    }
}

/// The host's row of `r`, from `fresh` (its pair's points, penalty and friction, as the
/// device derived them): its multipliers and its linearisation at X, which is also its
/// tangent plane until the next frame lags it again (the weights on either side of a row
/// sum to one, so a body's share of the friction force is the same).
fn cpu_row(r: &RowOut, fresh: Row) -> Row {
    let v3 = |a: [f32; 4]| glam::Vec3::new(a[0], a[1], a[2]);
    Row {
        weights: r.weights,
        normal: v3(r.normal),
        dist: r.normal[3],
        lambda: r.lambda_t[3],
        gamma: f32::from_bits(r.info[1]),
        lambda_t: v3(r.lambda_t),
        lagged_normal: v3(r.normal),
        lagged_weights: r.weights,
        in_coarse: r.info[0] & ROW_COARSE != 0,
        ..fresh
    }
}

/// A live row as the device holds it: its pair, points, penalty μ and friction.
pub(crate) type DeviceRowTerms = (Pair, [u32; 4], f32, [f32; 2]);

impl ContactStep {
    /// The live rows as the device holds them after the last frame (not as the readback
    /// takes them: their points, penalty and friction are the device's; a blocking read,
    /// a test hook).
    pub(in crate::gpu) fn rows_for_tests(&self) -> Result<Vec<DeviceRowTerms>, GpuError> {
        if !self.on {
            return Ok(Vec::new());
        }
        let status: Vec<u32> = self.read(ATOMICS, 0, 16)?;
        let count = (status[0] as usize).min(self.sizes.row_capacity as usize);
        if count == 0 {
            return Ok(Vec::new());
        }
        let rows: Vec<DeviceRow> =
            self.read(ROWS, 0, (count * std::mem::size_of::<DeviceRow>()) as u64)?;
        rows.iter()
            .filter(|r| r.info[0] & ROW_ALIVE != 0)
            .map(|r| {
                let k = r.info[2] as usize;
                let pair = *self.pairs.get(k).ok_or_else(|| {
                    GpuError::Readback(format!("a contact row names candidate {k}"))
                })?;
                Ok((pair, r.points, r.lagged_normal[3], [r.fr[1], r.fr[2]]))
            })
            .collect()
    }

    /// The row lists' offsets the last frame's start made on the device (the soft points',
    /// then the moving bodies', then their total; a blocking read), and the same offsets
    /// summed on the host from the candidates it uploaded: a test hook.
    pub(in crate::gpu) fn list_offsets_for_tests(
        &self,
        contact: &SurfaceContact,
    ) -> Result<[Vec<u32>; 2], GpuError> {
        if !self.on {
            return Ok([Vec::new(), Vec::new()]);
        }
        let (s, o) = (self.sizes, self.offsets);
        let (soft, len) = (
            s.soft_points as usize,
            (s.soft_points + s.bodies + 1) as usize,
        );
        let device = self.read(ATOMICS, 4 * o.slot_offsets as u64, 4 * len as u64)?;
        // Each candidate's room: its soft points, and each moving body among its rigid
        // points once.
        let g = &contact.geometry;
        let mut host = vec![0u32; len];
        for pair in &self.pairs {
            let mut bodies = Vec::new();
            for q in contact.points_of(pair) {
                if (q as usize) < soft {
                    host[q as usize] += 1;
                } else if q != crate::pipeline::surface_contact::rows::NO_POINT {
                    let b = g.rigid_points[(q - g.soft_points) as usize].0;
                    if self.packing.flags[b as usize] & BODY_MOVES != 0 && !bodies.contains(&b) {
                        bodies.push(b);
                        host[soft + b as usize] += 1;
                    }
                }
            }
        }
        let mut total = 0;
        for room in &mut host {
            (*room, total) = (total, total + *room);
        }
        Ok([device, host])
    }
}
