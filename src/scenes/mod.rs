//! The paper's experiments as named, parameterised scenes, shared by the `avbd` binary,
//! the tests and the benchmarks. Every scene reports `max_penetration` (m) and `finite`,
//! plus its own metrics (SI units), tracked over every frame it runs.

mod build;
mod contact;
mod reference;
mod soft;

use std::collections::BTreeMap;

use glam::Vec3;
use serde_json::{Value, json};

use crate::{BodyHandle, JointHandle, PhysicsError, PhysicsWorld, SolverConfig, StepReport};

pub use reference::static_spring_chain;

/// A named scene parameter with its default.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub default: f64,
    pub help: &'static str,
}

/// A scene of the catalogue.
#[derive(Clone, Copy, Debug)]
pub struct SceneSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [ParamSpec],
    /// Frames `avbd run` steps by default (at 60 Hz).
    pub default_frames: u32,
}

macro_rules! p {
    ($n:expr, $d:expr, $h:expr) => {
        ParamSpec {
            name: $n,
            default: $d,
            help: $h,
        }
    };
}

/// Every scene, with its parameters and defaults.
pub const SCENES: &[SceneSpec] = &[
    SceneSpec {
        name: "stack",
        description: "vertical stack of unit boxes on the ground",
        params: &[
            p!("boxes", 10.0, "number of boxes"),
            p!("size", 1.0, "box edge (m)"),
        ],
        default_frames: 600,
    },
    SceneSpec {
        name: "pyramid",
        description: "2D pyramid of unit boxes",
        params: &[p!("base", 20.0, "boxes in the bottom row")],
        default_frames: 600,
    },
    SceneSpec {
        name: "slope",
        description: "box on an inclined plane (Fig. 11 friction ramp)",
        params: &[
            p!("angle_deg", 26.565_051, "incline (tan θ = 0.5)"),
            p!("mu", 0.55, "friction coefficient"),
        ],
        default_frames: 120,
    },
    SceneSpec {
        name: "slide",
        description: "box launched along the ground until friction stops it (Fig. 11)",
        params: &[
            p!("v0", 10.0, "initial speed (m/s)"),
            p!("mu", 0.5, "friction coefficient"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "springs_ratio",
        description: "3 blocks, 2 springs, stiffness ratio (Fig. 2); top block fixed",
        params: &[
            p!("ratio", 10_000.0, "stiff/soft stiffness ratio"),
            p!("k_stiff", 1e6, "stiff spring (N/m)"),
        ],
        default_frames: 600,
    },
    SceneSpec {
        name: "spring_chain",
        description: "10 blocks on springs of alternating stiffness between 2 fixed blocks (Fig. 4)",
        params: &[
            p!("ratio", 10_000.0, "stiff/soft stiffness ratio"),
            p!("k_stiff", 1e6, "stiff spring (N/m)"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "pendulum",
        description: "chain of links with a heavy ball, swinging from horizontal (Fig. 7)",
        params: &[
            p!("links", 50.0, "chain links"),
            p!("mass_ratio", 50_000.0, "ball mass / link mass"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "two_heavy_balls",
        description: "two heavy balls joined by a chain, hung from the world (Fig. 9)",
        params: &[
            p!("links", 50.0, "chain links"),
            p!("mass_ratio", 50_000.0, "ball mass / link mass"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "card_tower",
        description: "tower of leaning cards held by friction, hit by a ball (Fig. 6)",
        params: &[
            p!("levels", 3.0, "storeys"),
            p!("mu", 0.8, "friction coefficient"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "breakable_wall",
        description: "brick wall welded by breakable joints, hit by three balls (Fig. 13)",
        params: &[
            p!("rows", 8.0, "brick rows"),
            p!("cols", 8.0, "bricks per row"),
            p!("fracture", 15_000.0, "breaking force (N)"),
        ],
        default_frames: 240,
    },
    SceneSpec {
        name: "hinge_limit",
        description: "bar on a hinge with ±30° limits, released horizontal",
        params: &[p!("limit_deg", 30.0, "symmetric limit (deg)")],
        default_frames: 300,
    },
    SceneSpec {
        name: "motor",
        description: "wheel driven by a revolute motor",
        params: &[
            p!("speed", 3.0, "target speed (rad/s)"),
            p!("max_torque", 500.0, "motor torque limit (N·m)"),
        ],
        default_frames: 180,
    },
    SceneSpec {
        name: "pile",
        description: "layered pile of boxes smashed by a heavy sphere (Fig. 1/3)",
        params: &[
            p!("count", 500.0, "number of boxes"),
            p!("sphere_mass", 2_000.0, "projectile mass (kg)"),
        ],
        default_frames: 240,
    },
    SceneSpec {
        name: "large_pyramid",
        description: "benchmark: 2D pyramid of unit boxes, base 100 → 5,050 boxes",
        params: &[p!("base", 100.0, "boxes in the bottom row")],
        default_frames: 600,
    },
    SceneSpec {
        name: "many_pyramids",
        description: "benchmark: count×count pyramids of unit boxes (10×10 of base 10 → 5,500 boxes)",
        params: &[
            p!("count", 10.0, "pyramids along x and along z"),
            p!("base", 10.0, "boxes in the bottom row of each pyramid"),
        ],
        default_frames: 600,
    },
    SceneSpec {
        name: "joint_grid",
        description: "benchmark: grid of balls joined by ball joints, hanging from its top edge",
        params: &[
            p!("rows", 100.0, "rows of bodies"),
            p!("cols", 100.0, "bodies per row"),
        ],
        default_frames: 600,
    },
    SceneSpec {
        name: "arch",
        description: "masonry arch of wedge blocks held by friction",
        params: &[
            p!("blocks", 15.0, "voussoirs"),
            p!("mu", 0.6, "friction coefficient"),
        ],
        default_frames: 600,
    },
    SceneSpec {
        name: "spinning_box",
        description: "anisotropic box spinning about a non-principal axis, no gravity",
        params: &[p!("spin", 5.0, "initial angular speed (rad/s)")],
        default_frames: 600,
    },
    SceneSpec {
        name: "free_collision",
        description: "two bodies colliding in free flight, no gravity",
        params: &[
            p!("speed", 2.0, "closing speed (m/s)"),
            p!("mass_ratio", 3.0, "mass of body B / body A"),
            p!("mu", 0.5, "friction coefficient"),
        ],
        default_frames: 120,
    },
    SceneSpec {
        name: "cantilever",
        description: "soft beam clamped at one end, bending under its weight (Newton reference)",
        params: &[
            p!("length", 1.0, "beam length (m)"),
            p!("height", 0.1, "square section side (m)"),
            p!("youngs", 1e8, "Young's modulus (Pa)"),
            p!("poisson", 0.3, "Poisson ratio"),
            p!("density", 1000.0, "density (kg/m³)"),
            p!(
                "cells",
                20.0,
                "cells along the beam (cubic cells, six tets each)"
            ),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "hanging_bar",
        description: "soft bar hanging from its top face, stretched by its weight",
        params: &[
            p!("length", 1.0, "bar length (m; section 10% of it)"),
            p!("youngs", 1e6, "Young's modulus (Pa)"),
            p!("poisson", 0.3, "Poisson ratio"),
            p!("density", 1000.0, "density (kg/m³)"),
            p!("cells", 10.0, "cells along the bar"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "soft_free_fall",
        description: "soft cube falling freely: centre of mass and volume",
        params: &[
            p!("youngs", 1e5, "Young's modulus (Pa)"),
            p!("cells", 4.0, "cells per side of the 0.2 m cube"),
        ],
        default_frames: 120,
    },
    SceneSpec {
        name: "twisting_beam",
        description: "soft beam whose ends are driven in opposite rotation",
        params: &[
            p!("turns", 2.0, "relative twist of the ends after 4 s (turns)"),
            p!("youngs", 1e6, "Young's modulus (Pa)"),
            p!("cells", 20.0, "cells along the 1 m beam"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "cloth_hang",
        description: "1 m square cloth pinned at two corners",
        params: &[
            p!("resolution", 20.0, "quads per side"),
            p!("youngs", 1e7, "Young's modulus of the 1 mm fabric (Pa)"),
            p!("bend", 1e-3, "bending stiffness (N·m)"),
        ],
        default_frames: 300,
    },
    SceneSpec {
        name: "soft_on_chain",
        description: "soft block on a rigid chain, and a heavy box hanging from a soft rod",
        params: &[p!("mass_ratio", 100.0, "box mass / rod mass")],
        default_frames: 300,
    },
    SceneSpec {
        name: "soft_drop",
        description: "soft cube dropped on the ground (penetration-free contact)",
        params: &[
            p!("height", 0.5, "drop height of the cube's bottom (m)"),
            p!("youngs", 1e5, "Young's modulus (Pa)"),
            p!("cells", 6.0, "cells per side of the 0.2 m cube"),
        ],
        default_frames: 180,
    },
    SceneSpec {
        name: "soft_stack",
        description: "soft cubes dropped on each other",
        params: &[
            p!("count", 3.0, "cubes"),
            p!("youngs", 1e5, "Young's modulus (Pa)"),
            p!("cells", 4.0, "cells per side of each 0.2 m cube"),
        ],
        default_frames: 240,
    },
    SceneSpec {
        name: "squishy_balls",
        description: "soft balls pressed together in a box whose walls move in (kinematic)",
        params: &[
            p!("count", 8.0, "balls (1,433 tets each; 9 per layer)"),
            p!("youngs", 1e4, "Young's modulus (Pa)"),
        ],
        default_frames: 180,
    },
    SceneSpec {
        name: "cloth_drape",
        description: "cloth falling onto a sphere, then the ground; self-contact on",
        params: &[p!(
            "resolution",
            49.0,
            "quads per side (49: 2,500 vertices)"
        )],
        default_frames: 180,
    },
    SceneSpec {
        name: "cloth_pile",
        description: "cloths dropped on each other over a box, into folds",
        params: &[
            p!("layers", 3.0, "cloths"),
            p!("resolution", 20.0, "quads per side of each 0.8 m cloth"),
        ],
        default_frames: 180,
    },
    SceneSpec {
        name: "soft_incline",
        description: "soft block on a slope: sticks or slides by friction",
        params: &[
            p!("angle_deg", 26.565_051, "incline (tan θ = 0.5)"),
            p!("mu", 0.3, "friction coefficient (block and slope)"),
            p!("youngs", 1e6, "Young's modulus (Pa)"),
            p!("cells", 4.0, "cells per side of the 0.2 m block"),
        ],
        default_frames: 120,
    },
    SceneSpec {
        name: "compress",
        description: "soft cube squeezed between frictionless rigid plates, no gravity",
        params: &[
            p!(
                "strain",
                0.01,
                "compression of the cube (fraction of its side)"
            ),
            p!("youngs", 1e5, "Young's modulus (Pa)"),
            p!("cells", 4.0, "cells per side of the 0.2 m cube"),
        ],
        default_frames: 120,
    },
    SceneSpec {
        name: "tunnelling",
        description: "small soft balls thrown at a thin soft board and a thin rigid box, no gravity",
        params: &[p!("speed", 100.0, "throw speed (m/s)")],
        default_frames: 60,
    },
    SceneSpec {
        name: "mattress",
        description: "rigid boxes dropped on a soft slab, a soft cube on a rigid box pile",
        params: &[p!("count", 4.0, "boxes dropped on the slab")],
        default_frames: 180,
    },
    SceneSpec {
        name: "soft_collision",
        description: "two soft balls colliding in free flight, no gravity: momentum",
        params: &[
            p!("speed", 2.0, "closing speed (m/s)"),
            p!("mu", 0.1, "friction coefficient"),
        ],
        default_frames: 120,
    },
];

/// Errors of the scene layer.
#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    #[error("unknown scene `{0}` (see `avbd list`)")]
    UnknownScene(String),
    #[error("scene `{scene}` has no parameter `{param}`")]
    UnknownParam { scene: String, param: String },
    #[error("parameter `{param}` = {value} is out of range: {reason}")]
    BadParam {
        param: String,
        value: f64,
        reason: String,
    },
    #[error(transparent)]
    Physics(#[from] PhysicsError),
}

/// Finds a scene's spec by name.
/// The deformable-body scenes (`soft.rs`), on either backend.
pub const DEFORMABLE_SCENES: &[&str] = &[
    "cantilever",
    "hanging_bar",
    "soft_free_fall",
    "twisting_beam",
    "cloth_hang",
    "soft_on_chain",
    "soft_drop",
    "soft_stack",
    "squishy_balls",
    "cloth_drape",
    "cloth_pile",
    "soft_incline",
    "compress",
    "tunnelling",
    "mattress",
    "soft_collision",
];

pub use contact::CONTACT_SCENES;

pub fn spec(name: &str) -> Option<&'static SceneSpec> {
    SCENES.iter().find(|s| s.name == name)
}

/// What a scene measures every frame.
#[derive(Default, Debug, Clone)]
pub(crate) struct Tracker {
    /// Sums over the frames of the step's stage times (ms), of the contact broad phase's
    /// runs and candidates, for [`Scene::profile`].
    pub profile: [f64; 14],
    /// Sums over the frames of each GPU kernel's time (`SolverConfig::gpu_kernel_timings`),
    /// for [`Scene::kernel_profile`].
    pub kernels: Vec<crate::gpu::KernelTime>,
    /// Bodies whose start positions define `max_drift`, and their start positions.
    pub drift_bodies: Vec<(BodyHandle, Vec3)>,
    /// Frame at which a projectile is launched: drift stops being tracked.
    pub drift_until_frame: Option<u32>,
    pub max_drift: f32,
    pub max_penetration: f32,
    /// Chains measured by `max_stretch_ratio`: joints and rest length.
    pub chain: Vec<JointHandle>,
    pub chain_rest: f32,
    pub max_stretch: f32,
    /// Joints whose anchor error `max_joint_error` tracks (m, max over joints and frames).
    pub error_joints: Vec<JointHandle>,
    pub max_joint_error: f32,
    /// Springs: (joint, reference length) compared by `extension_error`.
    pub springs: Vec<(JointHandle, f32, f32)>,
    /// Last second of spring lengths (ring buffer per spring), averaged by the metric so a
    /// residual oscillation about the static solution does not count as error.
    pub spring_history: Vec<std::collections::VecDeque<f32>>,
    pub hinge: Option<(JointHandle, f32)>,
    pub max_limit_violation: f32,
    /// The body whose motion `slope`/`slide`/`motor` measure, and a direction.
    pub probe: Option<(BodyHandle, Vec3, Vec3)>,
    /// Sample angular instead of linear velocity along the probe direction.
    pub probe_angular: bool,
    pub probe_samples: Vec<(f32, f32, f32)>,
    pub momentum0: Option<(Vec3, Vec3, f32)>,
    pub max_momentum_error: f32,
    pub max_angular_drift: f32,
    pub broken: usize,
    pub projectiles: Vec<(u32, BodyHandle, Vec3)>,
    pub finite: bool,
    /// What the deformable scenes measure.
    pub soft: soft::SoftTracker,
    /// What the contact scenes measure.
    pub contact: contact::ContactTracker,
}

/// A built scene: the world, its parameters and what it measures.
pub struct Scene {
    pub name: &'static str,
    pub params: BTreeMap<String, f64>,
    pub world: PhysicsWorld,
    pub frame: u32,
    pub(crate) tracker: Tracker,
}

impl Scene {
    /// Builds scene `name` with `overrides` on top of its defaults.
    pub fn build(
        name: &str,
        overrides: &[(String, f64)],
        config: SolverConfig,
    ) -> Result<Scene, SceneError> {
        Self::build_on(name, overrides, config, crate::Backend::Cpu)
    }

    /// Builds scene `name` on the given backend.
    pub fn build_on(
        name: &str,
        overrides: &[(String, f64)],
        config: SolverConfig,
        backend: crate::Backend,
    ) -> Result<Scene, SceneError> {
        let spec = spec(name).ok_or_else(|| SceneError::UnknownScene(name.to_string()))?;
        let mut params: BTreeMap<String, f64> = spec
            .params
            .iter()
            .map(|p| (p.name.to_string(), p.default))
            .collect();
        for (k, v) in overrides {
            if !params.contains_key(k) {
                return Err(SceneError::UnknownParam {
                    scene: name.into(),
                    param: k.clone(),
                });
            }
            if !v.is_finite() {
                return Err(SceneError::BadParam {
                    param: k.clone(),
                    value: *v,
                    reason: "not finite".into(),
                });
            }
            params.insert(k.clone(), *v);
        }
        let world = PhysicsWorld::with_backend(config, backend)?;
        let mut scene = Scene {
            name: spec.name,
            params,
            world,
            frame: 0,
            tracker: Tracker {
                finite: true,
                ..Default::default()
            },
        };
        if DEFORMABLE_SCENES.contains(&spec.name) {
            soft::build(&mut scene)?;
        } else {
            build::build(&mut scene)?;
        }
        scene.start_tracking()?;
        Ok(scene)
    }

    pub fn param(&self, name: &str) -> f64 {
        self.params[name]
    }

    fn start_tracking(&mut self) -> Result<(), PhysicsError> {
        let w = &self.world;
        let (p, l, m) = (w.linear_momentum()?, w.angular_momentum()?, total_mass(w));
        self.tracker.momentum0 = Some((p, l, m));
        Ok(())
    }

    /// Steps one frame and updates the metrics.
    pub fn step(&mut self) -> Result<StepReport, PhysicsError> {
        self.begin_frame()?;
        self.finish_frame()
    }

    /// Launches the projectiles whose frame has come and begins the world's step
    /// ([`PhysicsWorld::begin_step`]).
    pub fn begin_frame(&mut self) -> Result<(), PhysicsError> {
        let frame = self.frame;
        for &(f, h, v) in &self.tracker.projectiles {
            if f == frame {
                self.world.set_velocity(h, v, Vec3::ZERO)?;
            }
        }
        soft::drive(self)?;
        contact::drive(self)?;
        self.world.begin_step()
    }

    /// Finishes the world's step and updates the metrics.
    pub fn finish_frame(&mut self) -> Result<StepReport, PhysicsError> {
        let report = self.world.finish_step()?;
        self.frame += 1;
        self.track(&report)?;
        Ok(report)
    }

    /// Runs `frames` frames; returns per-frame total milliseconds.
    pub fn run(&mut self, frames: u32) -> Result<Vec<f64>, PhysicsError> {
        let mut times = Vec::with_capacity(frames as usize);
        for _ in 0..frames {
            self.step()?;
            times.push(self.world.stats().total_ms);
        }
        Ok(times)
    }

    fn track(&mut self, report: &StepReport) -> Result<(), PhysicsError> {
        if DEFORMABLE_SCENES.contains(&self.name) {
            soft::track(self);
        }
        if CONTACT_SCENES.contains(&self.name) {
            contact::track(self);
        }
        let w = &self.world;
        let t = &mut self.tracker;
        let st = w.stats();
        let sc = &st.surface_contact;
        for (sum, ms) in t.profile.iter_mut().zip([
            st.total_ms,
            st.collision_ms,
            st.vertex_sweep_ms,
            st.coarse_ms,
            sc.broad_phase_ms,
            sc.ccd_ms,
            sc.dual_ms,
            st.solver_ms
                - st.vertex_sweep_ms
                - st.coarse_ms
                - sc.broad_phase_ms
                - sc.ccd_ms
                - sc.dual_ms,
            (sc.rebuilds + usize::from(sc.candidates > 0)) as f64,
            sc.candidates as f64,
            sc.runs_again as f64,
            sc.device_broad_phases as f64,
            sc.device_candidates as f64,
            sc.cage_stops as f64,
        ]) {
            *sum += ms;
        }
        for k in w.gpu_kernel_timings().unwrap_or_default() {
            k.add_to(&mut t.kernels);
        }
        t.broken += report.broken.len();
        t.finite &= report.frozen.is_empty();
        t.max_penetration = t.max_penetration.max(w.stats().max_penetration);
        if t.drift_until_frame.is_none_or(|f| self.frame <= f) {
            for &(h, p0) in &t.drift_bodies {
                if let Ok(b) = w.body(h) {
                    t.max_drift = t.max_drift.max((b.position - p0).length());
                }
            }
        }
        if !t.chain.is_empty() {
            let gaps: f32 = t
                .chain
                .iter()
                .map(|&j| w.joint_error(j).unwrap_or(f32::NAN))
                .sum();
            t.max_stretch = t.max_stretch.max(gaps / t.chain_rest);
            t.finite &= gaps.is_finite();
        }
        for &j in &t.error_joints {
            let e = w.joint_error(j).unwrap_or(f32::NAN);
            t.max_joint_error = t.max_joint_error.max(e);
            t.finite &= e.is_finite();
        }
        if !t.springs.is_empty() {
            t.spring_history.resize(t.springs.len(), Default::default());
            for (hist, &(j, rest, _)) in t.spring_history.iter_mut().zip(&t.springs) {
                hist.push_back(w.joint_error(j).unwrap_or(f32::NAN) + rest);
                if hist.len() > 60 {
                    hist.pop_front();
                }
            }
        }
        if let Some((j, limit)) = t.hinge {
            let a = w.joint_angle(j).unwrap_or(f32::NAN);
            t.max_limit_violation = t.max_limit_violation.max(a.abs() - limit);
        }
        if let Some((h, p0, dir)) = t.probe
            && let Ok(b) = w.body(h)
        {
            let time = self.frame as f32 * w.config.dt;
            let v = if t.probe_angular {
                b.angular_velocity
            } else {
                b.linear_velocity
            };
            t.probe_samples
                .push((time, (b.position - p0).dot(dir), v.dot(dir)));
        }
        if let Some((p0, l0, m)) = t.momentum0 {
            let p = w.linear_momentum()?;
            let l = w.angular_momentum()?;
            let scale = p0.length().max(1e-12);
            let _ = m;
            t.max_momentum_error = t.max_momentum_error.max((p - p0).length() / scale);
            let lscale = l0.length().max(1e-12);
            t.max_angular_drift = t.max_angular_drift.max((l - l0).length() / lscale);
        }
        for h in w.body_handles() {
            if let Ok(b) = w.body(*h)
                && !(b.position.is_finite() && b.rotation.is_finite())
            {
                t.finite = false;
            }
        }
        Ok(())
    }

    /// Where the frames' time went, mean ms per frame: `total`, `collision` (rigid
    /// collision detection), `vertex_sweep` (deformable vertex solves, the barrier's
    /// filtered steps included), `coarse` (the two-level step), `contact_broad_phase`,
    /// `contact_ccd` (CCD and the advance of X), `contact_dual` (the rows' dual update),
    /// `rest` (rigid primal and dual, integration, colouring, warm starts); and per frame
    /// the contact broad phase's runs (`broad_phase_runs`: 1, plus one per iterate that
    /// left its cage), its candidate pairs (`candidates`) and, on the GPU backend, the
    /// steps run a second time (`runs_again`, see `SurfaceContactStats::runs_again`) and
    /// the broad phases the device ran (`device_broad_phases`) and the candidates they
    /// found (`device_candidates`, which the step takes from the device's memory); and the
    /// advances that stopped at their cages instead of running the broad phase again
    /// (`cage_stops`, `SolverConfig::contact_cage_rebuild` off).
    pub fn profile(&self) -> BTreeMap<String, f64> {
        let frames = self.frame.max(1) as f64;
        [
            "total",
            "collision",
            "vertex_sweep",
            "coarse",
            "contact_broad_phase",
            "contact_ccd",
            "contact_dual",
            "rest",
            "broad_phase_runs",
            "candidates",
            "runs_again",
            "device_broad_phases",
            "device_candidates",
            "cage_stops",
        ]
        .iter()
        .zip(self.tracker.profile)
        .map(|(k, v)| (k.to_string(), v / frames))
        .collect()
    }

    /// Per GPU kernel, its mean time per frame (ms) over the frames run, with
    /// `SolverConfig::gpu_kernel_timings` on the GPU backend (empty otherwise).
    pub fn kernel_profile(&self) -> BTreeMap<String, f64> {
        self.per_kernel(|k| k.ms)
    }

    /// Per GPU kernel, its mean dispatches per frame, as [`Self::kernel_profile`].
    pub fn kernel_dispatches(&self) -> BTreeMap<String, f64> {
        self.per_kernel(|k| k.dispatches as f64)
    }

    fn per_kernel(&self, value: fn(&crate::gpu::KernelTime) -> f64) -> BTreeMap<String, f64> {
        let frames = self.frame.max(1) as f64;
        self.tracker
            .kernels
            .iter()
            .map(|k| (k.kernel.to_string(), value(k) / frames))
            .collect()
    }

    /// The scene's metrics, named as in the README.
    pub fn metrics(&self) -> BTreeMap<String, Value> {
        let t = &self.tracker;
        let g = self.world.config.gravity.length() as f64;
        let mut m = BTreeMap::new();
        m.insert("max_penetration".into(), json!(t.max_penetration));
        m.insert("finite".into(), json!(t.finite));
        match self.name {
            "stack" | "pyramid" | "arch" | "card_tower" | "pile" | "large_pyramid"
            | "many_pyramids" => {
                m.insert("max_drift".into(), json!(t.max_drift));
            }
            "slope" => {
                let theta = self.param("angle_deg").to_radians();
                let mu = self.param("mu");
                let analytic = (g * (theta.sin() - mu * theta.cos())).max(0.0);
                let s = &t.probe_samples;
                let dist =
                    s.last().map(|x| x.1).unwrap_or(0.0) - s.first().map(|x| x.1).unwrap_or(0.0);
                m.insert("slide_distance".into(), json!(dist));
                m.insert("acceleration".into(), json!(fit_acceleration(s)));
                m.insert("analytic_acceleration".into(), json!(analytic));
            }
            "slide" => {
                let (v0, mu) = (self.param("v0"), self.param("mu"));
                let dist = t.probe_samples.last().map(|x| x.1).unwrap_or(0.0);
                m.insert("stop_distance".into(), json!(dist));
                m.insert(
                    "analytic_stop_distance".into(),
                    json!(v0 * v0 / (2.0 * mu * g)),
                );
                let v_end = t.probe_samples.last().map(|x| x.2).unwrap_or(0.0);
                m.insert("final_speed".into(), json!(v_end));
            }
            "pendulum" | "two_heavy_balls" => {
                m.insert("max_stretch_ratio".into(), json!(t.max_stretch));
            }
            "springs_ratio" | "spring_chain" => {
                m.insert("extension_error".into(), json!(self.extension_error()));
            }
            "joint_grid" => {
                m.insert("max_joint_error".into(), json!(t.max_joint_error));
            }
            "breakable_wall" => {
                m.insert("broken_joints".into(), json!(t.broken));
            }
            "hinge_limit" => {
                m.insert(
                    "max_limit_violation_deg".into(),
                    json!(t.max_limit_violation.max(0.0).to_degrees()),
                );
            }
            "motor" => {
                let target = self.param("speed");
                let w_end = t.probe_samples.last().map(|x| x.2 as f64).unwrap_or(0.0);
                m.insert("angular_velocity".into(), json!(w_end));
                m.insert(
                    "speed_error".into(),
                    json!(((w_end - target) / target).abs()),
                );
            }
            "spinning_box" | "free_collision" => {
                m.insert("momentum_error".into(), json!(t.max_momentum_error));
                m.insert("angular_momentum_drift".into(), json!(t.max_angular_drift));
            }
            name if DEFORMABLE_SCENES.contains(&name) => soft::metrics(self, &mut m),
            _ => {}
        }
        if CONTACT_SCENES.contains(&self.name) {
            contact::metrics(self, &mut m);
        }
        m
    }

    /// Largest |extension − reference extension| over the springs (lengths averaged over
    /// the last second), relative to the largest reference extension of the scene.
    fn extension_error(&self) -> f64 {
        let mut worst = 0.0f64;
        let mut scale = 0.0f64;
        for (hist, &(_, rest, reference)) in self
            .tracker
            .spring_history
            .iter()
            .zip(&self.tracker.springs)
        {
            let len = hist.iter().map(|&l| l as f64).sum::<f64>() / hist.len().max(1) as f64;
            let ext = len - rest as f64;
            let ext_ref = reference as f64 - rest as f64;
            worst = worst.max((ext - ext_ref).abs());
            scale = scale.max(ext_ref.abs());
        }
        if scale > 0.0 { worst / scale } else { f64::NAN }
    }
}

/// Least-squares slope of velocity against time over the second half of the samples.
pub(crate) fn fit_acceleration(samples: &[(f32, f32, f32)]) -> f64 {
    let s = &samples[samples.len() / 2..];
    if s.len() < 2 {
        return 0.0;
    }
    let n = s.len() as f64;
    let mt = s.iter().map(|x| x.0 as f64).sum::<f64>() / n;
    let mv = s.iter().map(|x| x.2 as f64).sum::<f64>() / n;
    let num: f64 = s
        .iter()
        .map(|x| (x.0 as f64 - mt) * (x.2 as f64 - mv))
        .sum();
    let den: f64 = s.iter().map(|x| (x.0 as f64 - mt).powi(2)).sum();
    if den > 0.0 { num / den } else { 0.0 }
}

fn total_mass(w: &PhysicsWorld) -> f32 {
    w.body_handles()
        .iter()
        .filter_map(|h| w.body(*h).ok())
        .map(|b| b.mass)
        .sum()
}
