//! Solver parameters: one struct, documented meaning, units and defaults.

/// Parameters of the AVBD step. Units are SI (m, kg, s, N).
///
/// The defaults are the values the acceptance tests in `tests/` were run with;
/// the README table lists what each scene measured with them.
#[derive(Clone, Debug, PartialEq)]
pub struct SolverConfig {
    /// Time step h in seconds (one implicit-Euler step per frame). Default 1/60.
    pub dt: f32,
    /// Fixed iteration budget per step: exactly this many primal+dual sweeps. Default 10.
    pub iterations: u32,
    /// Gravity acceleration in m/s². Default (0, −9.81, 0).
    pub gravity: glam::Vec3,
    /// α of Eq. 18: the share of a hard constraint's error at the start of the step that
    /// is *not* corrected in this step (gradual correction, no momentum spike). 0 corrects
    /// everything at once, 1 never corrects. Also scales warm-started λ (Eq. 19). Default 0.95 (paper).
    pub alpha: f32,
    /// β of Eq. 12/16 for rows whose error is a length: penalty growth k += β|C| per
    /// iteration, in N/m². β depends on units (paper: 10 in its units; demos: 1e4–1e5 in metres
    /// with ~1 kg bodies). Default 1e6.
    pub beta_linear: f32,
    /// β for rows whose error is an angle (N·m/rad²). Default 1e6.
    pub beta_angular: f32,
    /// γ of Eq. 19: warm-start decay of k and λ from the previous step. Default 0.99 (paper).
    pub gamma: f32,
    /// k_start of Eq. 10/19: the smallest penalty of a hard row, N/m (or N·m/rad). Default 1e3.
    pub k_start: f32,
    /// Load-aware penalty floor of joint rows (m, or rad for angular rows): a hard row's
    /// penalty is kept at least `|λ| / joint_error_scale` (up to the `floor_mass_ratio`
    /// cap), so an error of this size changes the row's force by 100%. Heavily loaded
    /// joints (above a 50,000:1 mass) then regain their warm-started force with
    /// sub-millimetre errors instead of waiting for the β ramp. Not in the paper; see
    /// README. Default 1e-4.
    pub joint_error_scale: f32,
    /// The same floor for contact rows (m). Larger than the joints': a unilateral contact
    /// whose multiplier overshoots separates and bounces, so contacts use a softer floor.
    /// Default 1e-3.
    pub contact_error_scale: f32,
    /// Cap of the load-aware floors, as a multiple of m/h². For a contact, m is the larger
    /// mass of the pair; for a joint, the mass (or, for angular rows, the largest principal
    /// moment) of the heaviest body in the joint's island (bodies linked by joints), which
    /// is the inertia its rows must hold: a chain carrying a 50,000:1 ball may be that stiff,
    /// a wall of equal bricks may not. A penalty far above the inertia the bodies bring
    /// makes the dual update λ ← kC + λ amplify what one Gauss–Seidel sweep leaves
    /// unresolved; with an uncapped floor a spike of λ raised k, which raised the next
    /// spike (tall pyramids of base ≥ 50, welded walls and hanging chains of equal boxes
    /// exploded). The β ramp is not capped by this. Not in the paper; see README. Default 3.
    pub floor_mass_ratio: f32,
    /// A new contact or joint row starts at `k = max(k_start, new_row_mass_ratio · m/h²)`
    /// with m the larger mass of its two bodies: a mass-scaled start. Default 0.3.
    pub new_row_mass_ratio: f32,
    /// Upper bound of any penalty k (N/m); keeps conflicting hard constraints finite. Default 1e10.
    pub k_max: f32,
    /// Upper bound of any |λ| (N). Default 1e10.
    pub lambda_max: f32,
    /// Contacts are created when shapes are closer than this (m): a speculative margin that
    /// keeps contact features and warm starts stable. Default 0.01.
    pub collision_margin: f32,
    /// Maximum angular speed (rad/s) kept at the end of a step; guards the quaternion update. Default 100.
    pub max_angular_speed: f32,
    /// Restore the linear and angular momentum of every *isolated island* (bodies linked
    /// by contacts and joints, none of them touching a static or kinematic body or the
    /// world) at the end of the step. A fixed budget stops Gauss–Seidel before the
    /// pairwise forces are equal and opposite (a 1e-3 relative momentum error per collision
    /// at 10 iterations); the smallest velocity correction (kinetic-energy norm) of each
    /// island removes it. Positions are not touched; islands that touch the ground are
    /// never changed. Not in the paper; see README. Default true.
    pub conserve_momentum: bool,
    /// Nodes of each deformable body's coarse grid (the two-level step of vertex block
    /// descent, `pipeline::coarse`): at most this many, 0 turns the coarse correction off.
    /// Default 64.
    pub coarse_nodes: u32,
    /// GPU backend: lanes of a workgroup that share one deformable vertex's block in the
    /// sweeps, each summing a stride of its elements (1, 2, 4, … 64; the CPU backend ignores
    /// it). One lane per vertex leaves most of a large GPU idle on a small mesh (a
    /// 2,500-vertex cloth has about 360 vertices per colour); several lanes per vertex, as
    /// the VBD reference code does, shorten each vertex's chain of element evaluations.
    /// With 1 the sums are those of the CPU, in its order. Default 1.
    pub gpu_vertex_lanes: u32,
    /// GPU backend: read every body's velocity back with its pose at the end of each step.
    /// Off, only the poses come back (28 bytes a body instead of 52) and the velocities stay
    /// on the device: [`crate::PhysicsWorld::body`] and the momentum sums read them on
    /// demand (blocking, once per step), edits of a pose or a force upload that field only,
    /// and a removed body's place is taken on the device. Steps whose host work needs the
    /// velocities (deformable bodies, contacts found on the CPU with the momentum
    /// projection on) read them back whatever this says. The CPU backend ignores it.
    /// Default true.
    pub gpu_velocity_readback: bool,
    /// GPU backend, for profiling: time each kernel of the deformables' vertex sweeps and
    /// contact passes with a timestamp inside its pass (where the adapter has
    /// `TIMESTAMP_QUERY_INSIDE_PASSES`), read back after each step with a blocking copy of
    /// its own ([`crate::PhysicsWorld::gpu_kernel_timings`]). Default false.
    pub gpu_kernel_timings: bool,
    /// Contact of deformable surfaces with each other, themselves and rigid bodies
    /// (`pipeline::surface_contact`). Off, deformable bodies pass through everything, which
    /// saves the contact stage where nothing can meet (a hanging flag, a soft rod on its
    /// own). Both backends run it. Default true.
    pub deformable_contact: bool,
    /// Contact gap δ of deformable surfaces (m): contact rows hold surfaces at least this
    /// far apart (the paper's surface separation; 1e-3 m in most of its scenes). Default
    /// 1e-3.
    pub contact_gap: f32,
    /// Minimum separation ξ certified by the continuous collision detection (m): the
    /// certified configuration keeps every pair of surfaces farther apart than this. It must
    /// exceed a few ulps of the coordinates (`ccd::min_sep_floor`: 4e-6 m at 10 m from the
    /// origin) and stay below δ. Default 1e-4 (δ/10).
    pub contact_min_separation: f32,
    /// Penalty of a contact row as a multiple of the largest `m/h²` of its points' masses:
    /// a deformable vertex's, or a dynamic rigid body's scaled by `new_row_mass_ratio`
    /// (the paper's and libuipc's mass-scaled stiffness). Default 1.
    pub contact_stiffness: f32,
    /// Decay Γ of an inactive contact row's weight per iteration. Default 0.9 (paper).
    pub contact_decay: f32,
    /// A contact row whose weight fell below this leaves the active set. Default 0.01
    /// (paper).
    pub contact_drop: f32,
    /// Step scale η of the additive CCD. Default 0.9.
    pub ccd_eta: f32,
    /// What a step does when a deformable's iterate leaves the motion cages its contact
    /// candidates were found in. On (the default), it finds the candidates again and
    /// advances on: the CPU backend runs the broad phase again mid-step, the GPU backend
    /// runs the frame again (a round trip to the host). Off, the island's advance stops
    /// where its cages end, so every step does the same work (on the GPU one submission
    /// and the same dispatches, rows past their room dropped until the next frame grows
    /// it), at a cost in that frame's motion, never in safety.
    pub contact_cage_rebuild: bool,
    /// How deformable surfaces keep apart: the barrier-free augmented Lagrangian (the
    /// default) or the log-barrier baseline it is compared with.
    pub contact_model: ContactModel,
    /// Barrier baseline only: friction's smoothing velocity ε_v (m/s), IPC's lagged
    /// friction `f₁(|u|/(ε_v h))`: slips slower than this are static. Default 1e-3.
    pub barrier_friction_velocity: f32,
    /// Contact generation of rigid pairs whose shapes are both spheres, capsules along their
    /// local y, boxes or half-spaces: the primitive narrow phase (the default; the same code
    /// the GPU's `narrow_phase.wgsl` ports) or parry3d's manifolds, which every other pair
    /// uses whatever this says.
    pub narrow_phase: NarrowPhase,
    /// GPU backend: where the deformable contact's broad phase runs (the CPU backend's is
    /// always its own). Default [`ContactBroadPhase::Auto`].
    pub gpu_contact_broad_phase: ContactBroadPhase,
}

/// Who makes the contact manifolds of primitive rigid pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NarrowPhase {
    /// `pipeline::collision::primitive`: one manifold of at most four points per pair, with
    /// feature ids; the contacts the GPU narrow phase computes too.
    #[default]
    Primitive,
    /// parry3d's `contact_manifolds` for every pair (the reference).
    Parry,
}

/// Where the GPU backend finds the deformable contact's candidate pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContactBroadPhase {
    /// On the device, unless the device is a CPU (lavapipe, llvmpipe), where the host's
    /// BVHs are faster: a 2,500-vertex cloth's broad phase took 174 ms a frame on lavapipe
    /// and 10 ms on the host's BVHs, on the same two cores (113c251, 2026-11-30).
    #[default]
    Auto,
    /// On the device (`gpu::contact_broad`, uniform grids): a blocking submission, and the
    /// candidates read back for the host's contact set-up.
    Device,
    /// On the host (parry3d's BVHs, as the CPU backend).
    Host,
}

/// The contact model of deformable surfaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContactModel {
    /// Penetration-free contact without barriers (Zheng, Luo, Li 2025): augmented-Lagrangian
    /// rows on distances linearised at the certified configuration, grown by CCD.
    #[default]
    AugmentedLagrangian,
    /// The incremental-potential-contact baseline in the same vertex block descent: a
    /// log-barrier energy `−κ (d − δ)² ln(d/δ)` on every candidate pair closer than δ at
    /// the iterate, each vertex step filtered by CCD, IPC's lagged smoothed friction.
    Barrier,
}

impl Default for SolverConfig {
    fn default() -> Self {
        Self {
            dt: 1.0 / 60.0,
            iterations: 10,
            gravity: glam::Vec3::new(0.0, -9.81, 0.0),
            alpha: 0.95,
            beta_linear: 1e6,
            beta_angular: 1e6,
            gamma: 0.99,
            k_start: 1e3,
            joint_error_scale: 1e-4,
            contact_error_scale: 1e-3,
            floor_mass_ratio: 3.0,
            new_row_mass_ratio: 0.3,
            k_max: 1e10,
            lambda_max: 1e10,
            collision_margin: 0.01,
            max_angular_speed: 100.0,
            conserve_momentum: true,
            coarse_nodes: 64,
            gpu_vertex_lanes: 1,
            gpu_velocity_readback: true,
            gpu_kernel_timings: false,
            deformable_contact: true,
            contact_gap: 1e-3,
            contact_min_separation: 1e-4,
            contact_stiffness: 1.0,
            contact_decay: 0.9,
            contact_drop: 0.01,
            ccd_eta: 0.9,
            contact_cage_rebuild: true,
            contact_model: ContactModel::AugmentedLagrangian,
            barrier_friction_velocity: 1e-3,
            narrow_phase: NarrowPhase::Primitive,
            gpu_contact_broad_phase: ContactBroadPhase::Auto,
        }
    }
}

impl SolverConfig {
    /// Names accepted by [`SolverConfig::set`].
    pub const FIELDS: &'static [&'static str] = &[
        "dt",
        "iterations",
        "alpha",
        "beta_linear",
        "beta_angular",
        "gamma",
        "k_start",
        "joint_error_scale",
        "contact_error_scale",
        "floor_mass_ratio",
        "new_row_mass_ratio",
        "k_max",
        "lambda_max",
        "collision_margin",
        "max_angular_speed",
        "gravity_y",
        "conserve_momentum",
        "coarse_nodes",
        "gpu_vertex_lanes",
        "gpu_velocity_readback",
        "gpu_kernel_timings",
        "deformable_contact",
        "contact_gap",
        "contact_min_separation",
        "contact_stiffness",
        "contact_decay",
        "contact_drop",
        "ccd_eta",
        "contact_cage_rebuild",
        "contact_model",
        "barrier_friction_velocity",
        "narrow_phase",
        "gpu_contact_broad_phase",
    ];

    /// Sets a field by name (for command lines and config files). The result is validated
    /// and the config is left unchanged on error.
    pub fn set(&mut self, field: &str, value: f64) -> Result<(), crate::PhysicsError> {
        let mut next = self.clone();
        next.set_unchecked(field, value)?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    fn set_unchecked(&mut self, field: &str, value: f64) -> Result<(), crate::PhysicsError> {
        let v = value as f32;
        // An on/off field: 1 or 0, nothing else.
        let flag = |field: &'static str| match value {
            0.0 => Ok(false),
            1.0 => Ok(true),
            _ => Err(crate::PhysicsError::InvalidConfig { field, value: v }),
        };
        match field {
            "dt" => self.dt = v,
            "iterations" => {
                if !(value >= 1.0 && value.fract() == 0.0 && value <= u32::MAX as f64) {
                    return Err(crate::PhysicsError::InvalidConfig {
                        field: "iterations",
                        value: v,
                    });
                }
                self.iterations = value as u32
            }
            "alpha" => self.alpha = v,
            "beta_linear" => self.beta_linear = v,
            "beta_angular" => self.beta_angular = v,
            "gamma" => self.gamma = v,
            "k_start" => self.k_start = v,
            "joint_error_scale" => self.joint_error_scale = v,
            "contact_error_scale" => self.contact_error_scale = v,
            "floor_mass_ratio" => self.floor_mass_ratio = v,
            "new_row_mass_ratio" => self.new_row_mass_ratio = v,
            "k_max" => self.k_max = v,
            "lambda_max" => self.lambda_max = v,
            "collision_margin" => self.collision_margin = v,
            "max_angular_speed" => self.max_angular_speed = v,
            "gravity_y" => self.gravity.y = v,
            "contact_gap" => self.contact_gap = v,
            "contact_min_separation" => self.contact_min_separation = v,
            "contact_stiffness" => self.contact_stiffness = v,
            "contact_decay" => self.contact_decay = v,
            "contact_drop" => self.contact_drop = v,
            "ccd_eta" => self.ccd_eta = v,
            "contact_model" => {
                self.contact_model = match value {
                    0.0 => ContactModel::AugmentedLagrangian,
                    1.0 => ContactModel::Barrier,
                    _ => {
                        return Err(crate::PhysicsError::InvalidConfig {
                            field: "contact_model",
                            value: v,
                        });
                    }
                }
            }
            "barrier_friction_velocity" => self.barrier_friction_velocity = v,
            "narrow_phase" => {
                self.narrow_phase = match value {
                    0.0 => NarrowPhase::Primitive,
                    1.0 => NarrowPhase::Parry,
                    _ => {
                        return Err(crate::PhysicsError::InvalidConfig {
                            field: "narrow_phase",
                            value: v,
                        });
                    }
                }
            }
            "gpu_contact_broad_phase" => {
                self.gpu_contact_broad_phase = match value {
                    0.0 => ContactBroadPhase::Auto,
                    1.0 => ContactBroadPhase::Device,
                    2.0 => ContactBroadPhase::Host,
                    _ => {
                        return Err(crate::PhysicsError::InvalidConfig {
                            field: "gpu_contact_broad_phase",
                            value: v,
                        });
                    }
                }
            }
            "coarse_nodes" => {
                if !(value >= 0.0 && value.fract() == 0.0 && value <= 4096.0) {
                    return Err(crate::PhysicsError::InvalidConfig {
                        field: "coarse_nodes",
                        value: v,
                    });
                }
                self.coarse_nodes = value as u32
            }
            "gpu_vertex_lanes" => {
                if !((1.0..=64.0).contains(&value) && value.fract() == 0.0) {
                    return Err(crate::PhysicsError::InvalidConfig {
                        field: "gpu_vertex_lanes",
                        value: v,
                    });
                }
                self.gpu_vertex_lanes = value as u32
            }
            "deformable_contact" => self.deformable_contact = flag("deformable_contact")?,
            "gpu_kernel_timings" => self.gpu_kernel_timings = flag("gpu_kernel_timings")?,
            "gpu_velocity_readback" => self.gpu_velocity_readback = flag("gpu_velocity_readback")?,
            "conserve_momentum" => self.conserve_momentum = flag("conserve_momentum")?,
            "contact_cage_rebuild" => self.contact_cage_rebuild = flag("contact_cage_rebuild")?,
            _ => return Err(crate::PhysicsError::UnknownConfigField(field.to_string())),
        }
        Ok(())
    }

    /// Penalty of a new hard row between bodies whose larger mass is `mass`: a fixed share
    /// of `mass/h²`, the stiffness of the inertia term, so the first iterations already move
    /// the body by a fair share of the error whatever the mass scale.
    #[inline]
    pub fn initial_penalty(&self, mass: f32) -> f32 {
        (self.new_row_mass_ratio * mass / (self.dt * self.dt))
            .max(self.k_start)
            .min(self.k_max)
    }

    /// Warm-started penalty of a hard row: Eq. 19, raised to `floor` (a [`Self::load_floor`]).
    #[inline]
    pub fn warm_penalty(&self, k_prev: f32, floor: f32) -> f32 {
        (self.gamma * k_prev)
            .max(self.k_start)
            .max(floor)
            .min(self.k_max)
    }

    /// Load-aware floor of a row's penalty: `|λ| / error_scale`, capped at
    /// `floor_mass_ratio · m/h²` (m a mass, or a moment of inertia for angular rows) and
    /// `k_max`. An infinite `error_scale` gives no floor.
    #[inline]
    pub fn load_floor(&self, lambda: f32, error_scale: f32, mass: f32) -> f32 {
        (lambda.abs() / error_scale)
            .min(self.floor_mass_ratio * mass / (self.dt * self.dt))
            .min(self.k_max)
    }

    /// Penalty after a dual update of a row whose force stayed inside its bounds (Eq. 12).
    /// The load-aware floor is applied between steps only: inside a step a multiplier that
    /// overshoots would raise its own penalty and feed the overshoot.
    #[inline]
    pub fn ramp_penalty(&self, k: f32, beta: f32, c: f32) -> f32 {
        (k + beta * c.abs()).min(self.k_max)
    }

    /// Checks every field; the error names the first one out of range.
    pub fn validate(&self) -> Result<(), crate::PhysicsError> {
        use crate::PhysicsError::InvalidConfig as E;
        let pos = |v: f32| v.is_finite() && v > 0.0;
        if !pos(self.dt) {
            return Err(E {
                field: "dt",
                value: self.dt,
            });
        }
        if self.iterations == 0 {
            return Err(E {
                field: "iterations",
                value: 0.0,
            });
        }
        if !self.gravity.is_finite() {
            return Err(E {
                field: "gravity",
                value: f32::NAN,
            });
        }
        if !(0.0..=1.0).contains(&self.alpha) {
            return Err(E {
                field: "alpha",
                value: self.alpha,
            });
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return Err(E {
                field: "gamma",
                value: self.gamma,
            });
        }
        for (field, v) in [
            ("beta_linear", self.beta_linear),
            ("beta_angular", self.beta_angular),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(E { field, value: v });
            }
        }
        for (field, v) in [
            ("k_start", self.k_start),
            ("k_max", self.k_max),
            ("joint_error_scale", self.joint_error_scale),
            ("contact_error_scale", self.contact_error_scale),
            ("floor_mass_ratio", self.floor_mass_ratio),
            ("lambda_max", self.lambda_max),
            ("max_angular_speed", self.max_angular_speed),
        ] {
            if !pos(v) {
                return Err(E { field, value: v });
            }
        }
        if !(self.new_row_mass_ratio.is_finite() && self.new_row_mass_ratio >= 0.0) {
            return Err(E {
                field: "new_row_mass_ratio",
                value: self.new_row_mass_ratio,
            });
        }
        for (field, v) in [
            ("contact_gap", self.contact_gap),
            ("contact_stiffness", self.contact_stiffness),
            ("barrier_friction_velocity", self.barrier_friction_velocity),
        ] {
            if !pos(v) {
                return Err(E { field, value: v });
            }
        }
        if !(pos(self.contact_min_separation) && self.contact_min_separation < self.contact_gap) {
            return Err(E {
                field: "contact_min_separation",
                value: self.contact_min_separation,
            });
        }
        for (field, v) in [
            ("contact_decay", self.contact_decay),
            ("contact_drop", self.contact_drop),
            ("ccd_eta", self.ccd_eta),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 1.0) {
                return Err(E { field, value: v });
            }
        }
        if !(self.collision_margin.is_finite() && self.collision_margin >= 0.0) {
            return Err(E {
                field: "collision_margin",
                value: self.collision_margin,
            });
        }
        let lanes = self.gpu_vertex_lanes;
        if !(lanes.is_power_of_two() && lanes <= 64) {
            return Err(E {
                field: "gpu_vertex_lanes",
                value: lanes as f32,
            });
        }
        Ok(())
    }
}
