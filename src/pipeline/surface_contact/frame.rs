//! The frame's start: the geometry (rebuilt when the bodies change), X = xᵗ, the cages
//! and candidates, the islands, and the active set carried from the last frame; and the
//! rows that join it.

use glam::Vec3A;

use super::SurfaceContact;
use super::geometry::{Geometry, Owner, Pose};
use super::rows::{NO_POINT, Pair, PairKind, Row};
use crate::config::{ContactModel, SolverConfig};
use crate::deformable::DeformableSet;
use crate::pipeline::IterateRecord;
use crate::pipeline::vbd::VertexState;
use crate::rigid::BodySet;

/// What the geometry is built from: the deformables' topology and the bodies.
pub(super) fn generation(set: &DeformableSet, bodies: &BodySet) -> (u64, usize, u64) {
    (set.generation, bodies.len(), signature(bodies))
}

fn signature(bodies: &BodySet) -> u64 {
    // FNV-1a over the handles in solver order: any added, removed or rebuilt body changes it.
    bodies
        .handles
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b.0 as u64).wrapping_mul(0x0100_0000_01b3)
        })
}

impl SurfaceContact {
    /// Everything before the first iteration.
    pub fn begin_frame(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        attachments: &crate::deformable::AttachmentSet,
        iterate: &[IterateRecord],
        vs: &mut VertexState,
    ) {
        // A deformable and a rigid body linked by an attachment do not collide with each
        // other (their surfaces touch where they are attached), as jointed bodies do not.
        self.linked.clear();
        self.linked.extend(
            attachments
                .records
                .iter()
                .filter(|r| !r.broken())
                .map(|r| (set.owner[r.vertex as usize], r.body)),
        );
        self.linked.sort_unstable();
        self.linked.dedup();
        let generation = generation(set, bodies);
        let again = self.seeded
            && self.reached.is_empty()
            && generation == self.generation
            && !self.cages.reference.is_empty();
        if generation != self.generation {
            self.generation = generation;
            self.geometry = Geometry::build(set, bodies);
            self.tree_cache.clear();
            self.rows.clear();
            self.row_of.clear();
        }
        self.start_pose.clear();
        self.start_pose
            .extend(bodies.poses.iter().map(|p| Pose { p: p.p(), q: p.q() }));
        self.certified_pose.clone_from(&self.start_pose);
        self.certified.clone_from(&set.positions);
        self.start.clone_from(&set.positions);
        self.largest_cut = 0.0;
        self.iterate_poses(bodies, iterate, &mut vs.poses);
        // The GPU backend's run again of a frame whose rows ran out of room, with every
        // iterate inside its cages (`reached` empty), starts from the same X, poses and
        // initial guess: the first run's cages, candidates and islands stand (the broad
        // phase would find them again), and only the rows are refreshed with the new ones.
        // A run again adds to the first run's statistics.
        match self.seeded {
            true => self.stats.runs_again += 1,
            false => self.stats = Default::default(),
        }
        if again {
            self.refresh_rows(cfg, set, bodies);
        } else {
            // The broad phase ran again for an iterate out of its cages.
            self.stats.rebuilds += usize::from(self.seeded);
            self.build_candidates(cfg, set, bodies, &vs.x, &vs.poses, &vs.yd);
        }
        self.reached.clear();
        // The active set carried over: the rows whose pair is still a candidate (a rebuild
        // within the frame keeps every row: their multipliers hold the contact forces).
        let rows = std::mem::take(&mut self.rows);
        self.rows = rows
            .into_iter()
            .filter(|r| self.candidates.binary_search(&r.pair).is_ok())
            .collect();
        self.reindex_rows(set, bodies.len());
        // Friction's tangent plane for the step: the carried rows', linearised at xᵗ.
        for r in &mut self.rows {
            r.lag();
        }
    }

    /// Adds a fresh row (λ = 0, γ = 1) for each of `pairs` not in the active set yet, before
    /// [`Self::begin_frame`] (the GPU backend's run again of a step: the rows its first run made).
    pub(crate) fn seed_rows(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        pairs: &[Pair],
    ) {
        for &pair in pairs {
            if !self.row_of.contains_key(&pair) {
                let row = new_row(cfg, set, bodies, self, pair);
                self.row_of.insert(pair, self.rows.len() as u32);
                self.rows.push(row);
            }
        }
    }

    /// Cages at X around the iterate, candidates, islands, and the active set restricted
    /// to the candidates (at the frame's start, and again when an iterate leaves its cage).
    pub(crate) fn build_candidates(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        x: &[Vec3A],
        poses: &[Pose],
        yd: &[Vec3A],
    ) {
        let t0 = std::time::Instant::now();
        let mut cages = std::mem::take(&mut self.cages);
        cages.build(
            cfg,
            set,
            bodies,
            &self.geometry,
            &self.certified,
            &self.certified_pose,
            x,
            poses,
            |v| set.positions[v] + yd[v],
            &self.reached,
            self.cross_cages,
        );
        self.cages = cages;
        (self.candidates, self.candidate_lower) = self.candidate_pairs(cfg, set);
        self.candidate_build = self.candidate_build.wrapping_add(1);
        self.stats.candidates = self.stats.candidates.max(self.candidates.len());
        self.build_islands(set, bodies);
        self.refresh_rows(cfg, set, bodies);
        self.stats.broad_phase_ms += t0.elapsed().as_secs_f64() * 1e3;
    }

    /// Every row's penalty and linearisation at X (and the barrier's index of the
    /// candidates), after the candidates or the rows changed.
    fn refresh_rows(&mut self, cfg: &SolverConfig, set: &DeformableSet, bodies: &BodySet) {
        let h2 = cfg.dt * cfg.dt;
        let mut rows = std::mem::take(&mut self.rows);
        for r in &mut rows {
            r.mu = row_stiffness(cfg, set, bodies, &self.geometry, &r.points, h2);
        }
        self.rows = rows;
        self.linearise_rows();
        if cfg.contact_model == ContactModel::Barrier {
            self.index_barrier(cfg, set, bodies);
        }
    }
}

/// A row's penalty: `κ` times the largest `m/h²` of its points (the inertia the row has to
/// stop in one step), as the paper's and libuipc's mass-scaled stiffness: a deformable
/// vertex's mass, and a moving rigid body's mass weighted as the rigid solver's new rows
/// weigh it (`new_row_mass_ratio`: the body's weight is shared by several rows). Without
/// the rigid side, a 5 kg box landing on a slab of 0.55 kg vertices met rows ten times too
/// soft to stop it, and its island lost the frame's motion (`tests/contact.rs`).
pub(crate) fn row_stiffness(
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    g: &Geometry,
    points: &[u32; 4],
    h2: f32,
) -> f32 {
    // The largest point's term: `κ m / h²` rounds monotonically in `m`, so this is the
    // term of the largest mass, whichever point holds it (the device takes the same
    // maximum of the points' terms, `point_stiffness`, uploaded per point).
    points
        .iter()
        .filter(|&&p| p != NO_POINT)
        .map(|&p| point_stiffness(cfg, set, bodies, g, p, h2))
        .fold(0.0f32, f32::max)
}

/// Point `p`'s share of a row's penalty: `κ m / h²` of its mass as [`row_stiffness`]
/// weighs it, at least `k_start`.
pub(crate) fn point_stiffness(
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    g: &Geometry,
    p: u32,
    h2: f32,
) -> f32 {
    let m = match g.owner_of(set, p) {
        Owner::Soft(_) => set.masses[p as usize],
        Owner::Rigid(i) if bodies.is_solved(i as usize) => {
            cfg.new_row_mass_ratio * bodies.masses[i as usize].mass
        }
        Owner::Rigid(_) => 0.0,
    };
    (cfg.contact_stiffness * m / h2).max(cfg.k_start)
}

/// A new row of `pair` (λ = 0, γ = 1).
pub(crate) fn new_row(
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    sc: &SurfaceContact,
    pair: Pair,
) -> Row {
    let points = sc.points_of(&pair);
    let h2 = cfg.dt * cfg.dt;
    Row::new(
        pair,
        points,
        row_stiffness(cfg, set, bodies, &sc.geometry, &points, h2),
        pair_friction(set, bodies, sc, &pair, &points),
    )
}

/// A pair's static and dynamic friction: the geometric means of its two sides'.
pub(crate) fn pair_friction(
    set: &DeformableSet,
    bodies: &BodySet,
    sc: &SurfaceContact,
    pair: &Pair,
    points: &[u32; 4],
) -> [f32; 2] {
    let g = &sc.geometry;
    let side = |p: u32| point_friction(set, bodies, g, p);
    let (a, b) = match pair.kind {
        PairKind::PointPlane => (
            side(points[0]),
            bodies.masses[g.planes[pair.b as usize].0 as usize].friction,
        ),
        PairKind::PointTriangle => (side(points[0]), side(points[1])),
        PairKind::EdgeEdge => (side(points[0]), side(points[2])),
    };
    [(a[0] * b[0]).sqrt(), (a[1] * b[1]).sqrt()]
}

/// Point `p`'s static and dynamic friction: its deformable's material's or its body's.
pub(crate) fn point_friction(
    set: &DeformableSet,
    bodies: &BodySet,
    g: &Geometry,
    p: u32,
) -> [f32; 2] {
    match g.owner_of(set, p) {
        Owner::Soft(b) => set.materials[b as usize].friction,
        Owner::Rigid(i) => bodies.masses[i as usize].friction,
    }
}
