//! `PhysicsWorld`: the plain-Rust core. Owns bodies, joints and the solver state, and runs
//! the frame pipeline top to bottom in [`PhysicsWorld::step`].

use std::time::Instant;

use glam::{Quat, Vec3};

use crate::config::SolverConfig;
use crate::deformable::{AttachmentSet, DeformableSet};
use crate::error::{BodyHandle, PhysicsError};
use crate::pipeline::{
    SolverData, attachments, collision, coloring, dual, integration, vbd, warm_start,
};
use crate::report::{StepReport, StepStats};
use crate::rigid::body::{BodyKind, VelocityRecord};
use crate::rigid::{BodySet, JointSet};

mod bodies;
mod deformables;
mod gpu_info;
mod joints;

pub use deformables::DeformableView;
pub use joints::JointAnchors;

/// A physics world stepped by AVBD with a fixed iteration budget.
#[derive(Default)]
pub struct PhysicsWorld {
    pub config: SolverConfig,
    /// The GPU solver when the world runs on the GPU backend.
    pub(crate) gpu: Option<Box<crate::gpu::GpuSolver>>,
    pub(crate) bodies: BodySet,
    pub(crate) joints: JointSet,
    pub(crate) deformables: DeformableSet,
    pub(crate) attachments: AttachmentSet,
    pub(crate) collision: collision::CollisionState,
    pub(crate) solver: SolverData,
    pub(crate) stats: StepStats,
    /// The step begun by [`Self::begin_step`] and not yet finished.
    in_flight: Option<StepInFlight>,
}

/// What [`PhysicsWorld::finish_step`] needs of the step [`PhysicsWorld::begin_step`]
/// started.
struct StepInFlight {
    /// The configuration the step began with (`config` is a public field).
    config: SolverConfig,
    report: StepReport,
    collision_ms: f64,
    /// Time spent in `begin_step`.
    host_ms: f64,
}

/// Read-only view of one body's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BodyState {
    pub kind: BodyKind,
    pub position: Vec3,
    pub rotation: Quat,
    pub linear_velocity: Vec3,
    pub angular_velocity: Vec3,
    pub mass: f32,
    pub frozen: bool,
}

impl PhysicsWorld {
    /// A world on the CPU backend.
    pub fn new(config: SolverConfig) -> Result<Self, PhysicsError> {
        config.validate()?;
        Ok(Self {
            config,
            ..Default::default()
        })
    }

    /// A world on the chosen backend. `Backend::Auto` takes the GPU when an adapter is
    /// found and falls back to the CPU otherwise (logged to stderr); `Backend::Gpu` fails
    /// with [`PhysicsError::Gpu`] when no usable adapter is found.
    pub fn with_backend(
        config: SolverConfig,
        backend: crate::gpu::Backend,
    ) -> Result<Self, PhysicsError> {
        use crate::gpu::{Backend, GpuSolver};
        let mut world = Self::new(config)?;
        world.gpu = match backend {
            Backend::Cpu => None,
            Backend::Gpu => Some(Box::new(
                GpuSolver::new().map_err(|e| PhysicsError::Gpu(e.to_string()))?,
            )),
            Backend::Auto => match GpuSolver::new() {
                Ok(gpu) => {
                    eprintln!("bevy_avbd: GPU backend on {}", gpu.adapter_name());
                    Some(Box::new(gpu))
                }
                Err(e) => {
                    eprintln!("bevy_avbd: CPU backend ({e})");
                    None
                }
            },
        };
        Ok(world)
    }

    /// `"cpu"` or `"gpu"`.
    pub fn backend(&self) -> &'static str {
        if self.gpu.is_some() { "gpu" } else { "cpu" }
    }

    // ---------------------------------------------------------------- stepping

    /// Statistics of the last step.
    pub fn stats(&self) -> &StepStats {
        &self.stats
    }

    /// The contact records of the last step as the solver left them (solver indices of the
    /// bodies, world-space basis and lever arms, λ and k of the tangent, bitangent and
    /// normal rows; λ is the force of each row). On the GPU backend they live on the
    /// device and this reads them back (blocking; not part of the per-step path).
    pub fn contacts(
        &self,
    ) -> Result<std::borrow::Cow<'_, [crate::rigid::contact::ContactRecord]>, PhysicsError> {
        match &self.gpu {
            Some(gpu) => gpu
                .contacts()
                .map(std::borrow::Cow::Owned)
                .map_err(|e| PhysicsError::Gpu(e.to_string())),
            None => Ok(std::borrow::Cow::Borrowed(&self.solver.contacts)),
        }
    }

    /// The contact points the CPU's collision detection found in the last step: bodies,
    /// normal, lever arms and the point's index in the step before. Empty on the GPU
    /// backend when the device finds the contacts (every collider a sphere, capsule, box
    /// or half-space): [`Self::contacts`] reads their records, [`Self::touching_pairs`]
    /// lists the pairs.
    pub fn contact_points(&self) -> &[crate::rigid::contact::ContactPoint] {
        &self.solver.points
    }

    /// Solver indices `(a, b)` of the body pairs with at least one contact point in the
    /// last step, wherever the narrow phase ran. When the device found the contacts, their
    /// list stays there and this reads it back (blocking, and waiting for a step in
    /// flight; not part of the per-step path).
    pub fn touching_pairs(&self) -> Result<Vec<(u32, u32)>, PhysicsError> {
        match &self.gpu {
            Some(gpu) if self.collision.device.active() => {
                let (pairs, counts) = gpu
                    .pair_list()
                    .map_err(|e| PhysicsError::Gpu(e.to_string()))?;
                Ok(pairs
                    .iter()
                    .zip(counts)
                    .filter(|(_, c)| *c > 0)
                    .map(|(p, _)| (p.a, p.b))
                    .collect())
            }
            _ => Ok(self.collision.touching().collect()),
        }
    }

    /// Handle of the body with solver index `i` (as stored in contact and joint records).
    pub fn handle_of_index(&self, i: u32) -> Option<BodyHandle> {
        self.bodies.handles.get(i as usize).copied()
    }

    /// Number of contact points in the last step.
    pub fn contact_count(&self) -> usize {
        self.collision.points
    }

    /// Advances the world by one implicit-Euler step of `config.dt`, spending exactly
    /// `config.iterations` AVBD iterations: [`Self::begin_step`] then
    /// [`Self::finish_step`].
    pub fn step(&mut self) -> Result<StepReport, PhysicsError> {
        self.begin_step()?;
        self.finish_step()
    }

    /// Starts a step: collision detection, the joints' warm start, and the solve on the
    /// chosen backend. On the GPU backend the solve is submitted to the device and this
    /// returns without waiting for it, so the caller's own work (game logic, rendering)
    /// overlaps the GPU's, and the world reads as it was before the step until
    /// [`Self::finish_step`]; on the CPU backend the solve runs here and its poses are
    /// already in place (the momentum projection and fracture wait for `finish_step`).
    /// Either way, edits and another step are refused until then
    /// ([`PhysicsError::StepInFlight`]).
    pub fn begin_step(&mut self) -> Result<(), PhysicsError> {
        self.idle()?;
        self.config.validate()?;
        if !self.deformables.is_empty() {
            self.gpu_runs_deformables(&self.config)?;
        }
        let cfg = &self.config;
        let t0 = Instant::now();

        // 1. collision detection at xᵗ: contact points, each with its index in the last
        //    step; on the GPU backend, when every collider is a primitive, only the
        //    candidate pairs (the device finds their points in the step's submission)
        let on_device = self.gpu.is_some()
            && self.deformables.is_empty()
            && collision::detect_pairs(cfg, &self.bodies, &self.joints, &mut self.collision);
        if on_device {
            self.solver.points.clear();
        } else {
            collision::detect(
                cfg,
                &self.bodies,
                &self.joints,
                &mut self.collision,
                &mut self.solver.points,
            );
        }
        let collision_ms = t0.elapsed().as_secs_f64() * 1e3;

        // 2. joints: start error C*(xᵗ), warm start of k and λ (on the GPU backend, by
        //    the device from the row states it keeps, with each joint's island's heaviest
        //    body from here)
        match self.gpu {
            Some(_) => self.solver.joint_islands.update(&self.bodies, &self.joints),
            None => dual::warm_start_joints(
                cfg,
                &self.bodies,
                &mut self.joints,
                &mut self.solver.joint_islands,
            ),
        }
        //    attachments of deformable vertices to bodies: the same, and their lists
        attachments::warm_start(cfg, &self.bodies, &self.deformables, &mut self.attachments);

        // 3. the step on the chosen backend: contacts warm-started from the last step,
        //    inertial targets and initial guess of bodies and vertices, body→constraint
        //    adjacency and colouring (the vertices' colouring is static), the fixed
        //    iteration budget (each iteration: body colours, vertex colours, dual update),
        //    velocities and poses (bodies that became non-finite are frozen)
        let mut report = StepReport::default();
        if let Some(gpu) = self.gpu.as_mut() {
            // A step whose host part needs the velocities reads them back with the poses:
            // the CPU's copy must be current as it begins.
            let deformables = !self.deformables.is_empty();
            if !crate::gpu::GpuSolver::keeps_velocities(cfg, on_device, deformables) {
                gpu.pull_velocities(&mut self.bodies)
                    .map_err(|e| PhysicsError::Gpu(e.to_string()))?;
            }
        }
        let s = &mut self.solver;
        if cfg.conserve_momentum && !on_device {
            // From the start state, before the backend overwrites it (where the device
            // finds the islands, it records them itself: `shaders/momentum.wgsl`).
            s.islands.record_targets(cfg, &self.bodies);
        }
        if let Some(gpu) = self.gpu.as_mut() {
            // The vertices' targets, initial guess and coarse factors on the host; their
            // iterations on the device, coupled to the bodies' (`gpu::soft`).
            let soft = match self.deformables.is_empty() {
                true => None,
                false => {
                    // The contact set-up builds the moving bodies' cages around their
                    // initial guess: the host computes it as the device's `begin_bodies`
                    // does (the device keeps its own).
                    integration::begin_step(cfg, &self.bodies, s);
                    vbd::begin_step(cfg, &self.deformables, &mut s.vertices);
                    // A frame's first run builds its contact set-up afresh, its broad
                    // phase on the device.
                    s.vertices.contact.device_broad_phase = gpu.contact_broad_phase(cfg);
                    s.vertices.contact.seeded = false;
                    s.vertices.contact.cross_cages = false;
                    vbd::begin_contact_and_coarse(
                        cfg,
                        &self.deformables,
                        &self.attachments,
                        &self.bodies,
                        &s.iterate,
                        &mut s.vertices,
                    );
                    Some(crate::gpu::DeformableStep {
                        set: &self.deformables,
                        attachments: &self.attachments,
                    })
                }
            };
            // On the device, in one submission; read back by `finish_step`.
            gpu.submit(
                cfg,
                &self.bodies,
                &self.joints,
                s,
                &self.collision.device,
                soft,
            )
            .map_err(|e| PhysicsError::Gpu(e.to_string()))?;
            // The device holds what the CPU wrote; from here on it keeps the state.
            self.bodies.edits.clear_state();
        } else {
            warm_start::contacts(cfg, &self.bodies, s);
            integration::begin_step(cfg, &self.bodies, s);
            vbd::begin_step(cfg, &self.deformables, &mut s.vertices);
            if !self.deformables.is_empty() {
                vbd::begin_contact_and_coarse(
                    cfg,
                    &self.deformables,
                    &self.attachments,
                    &self.bodies,
                    &s.iterate,
                    &mut s.vertices,
                );
            }
            coloring::build(&self.bodies, &self.joints, s);
            crate::pipeline::iterate(
                cfg,
                &self.bodies,
                &mut self.joints,
                &self.deformables,
                &mut self.attachments,
                s,
            );
            vbd::end_contact(
                cfg,
                &self.deformables,
                &self.bodies,
                &mut s.iterate,
                &mut s.vertices,
            );
            integration::end_step(cfg, &mut self.bodies, s, &mut report);
            vbd::end_step(
                cfg,
                &mut self.deformables,
                &self.attachments,
                &s.vertices,
                &mut report,
            );
            // (Recorded for the GPU backend only: nothing reads it here.)
            self.bodies.edits.clear_state();
        }
        self.in_flight = Some(StepInFlight {
            config: cfg.clone(),
            report,
            collision_ms,
            host_ms: t0.elapsed().as_secs_f64() * 1e3,
        });
        Ok(())
    }

    /// Finishes the step started by [`Self::begin_step`]: waits for the GPU's results (if
    /// on the GPU backend), then restores the momentum of isolated islands, breaks
    /// overloaded joints and keeps what the contacts carry to the next step.
    pub fn finish_step(&mut self) -> Result<StepReport, PhysicsError> {
        let Some(flight) = self.in_flight.take() else {
            return Err(PhysicsError::NoStepInFlight);
        };
        let StepInFlight {
            config: cfg,
            mut report,
            collision_ms,
            host_ms,
        } = flight;
        let t0 = Instant::now();
        let s = &mut self.solver;
        if let Some(gpu) = self.gpu.as_mut() {
            let pairs = &mut self.collision.device;
            let soft = (!self.deformables.is_empty())
                .then_some((&self.deformables, &mut self.attachments));
            gpu.finish(
                &cfg,
                &mut self.bodies,
                &mut self.joints,
                s,
                pairs,
                &mut report,
                soft,
            )
            .map_err(|e| PhysicsError::Gpu(e.to_string()))?;
            if pairs.active() {
                self.collision.device_finished();
            }
            if !self.deformables.is_empty() {
                // X, the certified configuration, is the step's result.
                vbd::end_contact(
                    &cfg,
                    &self.deformables,
                    &self.bodies,
                    &mut s.iterate,
                    &mut s.vertices,
                );
                vbd::end_step(
                    &cfg,
                    &mut self.deformables,
                    &self.attachments,
                    &s.vertices,
                    &mut report,
                );
            }
        }
        // 4. momentum of isolated islands: on the CPU over a union–find of the step's
        //    constraints, or on the device (`shaders/momentum.wgsl`, already in the
        //    velocities read back) when it found the contacts and so the islands
        let on_device = self.gpu.is_some() && self.collision.device.active();
        if cfg.conserve_momentum && !on_device {
            let soft_contact: &[bool] = match s.vertices.contact_on {
                true => &s.vertices.contact.coupled,
                false => &[],
            };
            s.islands.project(
                &mut self.bodies,
                &s.adjacency,
                &self.attachments,
                soft_contact,
                cfg.max_angular_speed,
            );
        }

        // 5. fracture of overloaded joints (the GPU backend's device tested them at the
        //    step's end, and `GpuSolver::finish` marked those it broke) and attachments;
        //    what the contacts carry to the next step (the GPU backend keeps it on the
        //    device)
        if self.gpu.is_none() {
            dual::fracture(&self.bodies, &mut self.joints, &mut report);
        }
        attachments::fracture(&mut self.attachments, &mut report);
        if self.gpu.is_none() {
            warm_start::store(&mut self.solver);
        }

        // Time spent in `begin_step` and here, not the caller's work in between.
        let total_ms = host_ms + t0.elapsed().as_secs_f64() * 1e3;
        self.stats = StepStats {
            collision_ms,
            solver_ms: total_ms - collision_ms,
            total_ms,
            contacts: self.collision.points,
            manifolds: self.collision.touching_pairs(),
            colors: match &self.gpu {
                Some(gpu) => gpu.colors_used(),
                None => self.solver.colors.count(),
            },
            max_penetration: self.collision.max_penetration,
            vertex_colors: self.deformables.colors.count(),
            vertex_sweep_ms: self.solver.vertices.sweep_ms,
            coarse_ms: self.solver.vertices.coarse_ms,
            surface_contact: match self.solver.vertices.contact_on && !self.deformables.is_empty() {
                true => self.solver.vertices.contact.stats(),
                false => Default::default(),
            },
        };
        if !report.broken.is_empty() {
            self.collision.joints_changed();
        }
        Ok(report)
    }

    /// Whether a step was begun and not yet finished.
    pub fn step_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Edits are refused while a step is in flight: its results would overwrite them.
    fn idle(&self) -> Result<(), PhysicsError> {
        match self.in_flight {
            Some(_) => Err(PhysicsError::StepInFlight),
            None => Ok(()),
        }
    }

    /// Body `i`'s velocity: the CPU's copy, or where the GPU backend keeps the velocities
    /// on the device (`SolverConfig::gpu_velocity_readback` off), the device's (the first
    /// read after a step brings them all back, blocking), unless the CPU wrote it since.
    pub(crate) fn velocity_of(&self, i: usize) -> Result<VelocityRecord, PhysicsError> {
        let device = match &self.gpu {
            Some(gpu)
                if gpu.velocities_newer()
                    && !self.bodies.edits.velocities.contains(&(i as u32)) =>
            {
                gpu.velocity(i)
                    .map_err(|e| PhysicsError::Gpu(e.to_string()))?
            }
            _ => None,
        };
        Ok(device.unwrap_or(self.bodies.velocities[i]))
    }

    /// Total linear momentum of the dynamic bodies (kg·m/s).
    pub fn linear_momentum(&self) -> Result<Vec3, PhysicsError> {
        let b = &self.bodies;
        let mut p = Vec3::ZERO;
        for i in (0..b.len()).filter(|&i| b.is_solved(i)) {
            p += self.velocity_of(i)?.v() * b.masses[i].mass;
        }
        Ok(p)
    }

    /// Total angular momentum of the dynamic bodies about the origin (kg·m²/s).
    pub fn angular_momentum(&self) -> Result<Vec3, PhysicsError> {
        let b = &self.bodies;
        let mut l = Vec3::ZERO;
        for i in (0..b.len()).filter(|&i| b.is_solved(i)) {
            let (m, v) = (&b.masses[i], self.velocity_of(i)?);
            l += m.world_inertia(b.poses[i].q()) * v.w() + b.poses[i].p().cross(v.v() * m.mass);
        }
        Ok(l)
    }
}
