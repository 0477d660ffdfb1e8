//! The deformable benchmark cases built in rapier3d 0.36's soft bodies, on the same tet
//! meshes, materials, lumped masses, pinned vertices and attachments as bevy_avbd, plus the
//! engine-neutral description ([`SoftMeta`]) the harness measures both engines with.
//!
//! Every mesh comes from bevy_avbd's own generator ([`TetMesh::box_grid`], six tets per
//! cell) with the rule its scene uses (`bevy_avbd::scenes`, or the bench-only `cube`), and
//! is placed as the scene places it. rapier3d gets, per body:
//!
//! - `SoftBodyBuilder::new(positions).cells(tets)`: the very vertices and tets (all
//!   positively oriented, so rapier swaps none);
//! - `.masses(ρV/4 lumped per tet vertex)`: rapier has no density (its default is 1 kg per
//!   particle);
//! - `.pinned_particles(..)`: the scene's Dirichlet vertices;
//! - `.cell_model(NeoHookean)`: Stable Neo-Hookean with λ' = λ + μ and no log term, the
//!   energy bevy_avbd uses (rapier floors its tangent mode-wise at the rest curvature; the
//!   forces are the exact gradient);
//! - the same E and ν, and `elastic_damping_ratio` 0 by default: bevy_avbd's solids here
//!   have no damping (rapier's default is 1, critical per cell; `--rapier-soft-damping`);
//! - `.no_surface_collider()` in the static cases: their deformables touch nothing, so
//!   neither engine's contacts take part;
//! - `.can_sleep(false)`, and in the static cases `soft_bodies.max_extra_substeps = 0`: a
//!   fixed budget (the extra substeps only come with contacts, which there are none of).
//!
//! The contact cases (`soft_drop`, `soft_stack`) keep rapier's contact
//! defaults instead: each body collides through its default surface collider (the cells'
//! boundary, `particle_radius` 0.01 m of contact skin, the builder's default; friction 0.5
//! as the scenes' rubber, combined by geometric mean as bevy_avbd does), the impact-adaptive
//! substeps stay at their default (`max_extra_substeps` 4), and the ground is a fixed body
//! with a half-space collider (friction 0.5), body 0 as in the scenes.
//!
//! Attachments are rapier's `SoftBody::attach_particle` (a two-way point-to-point
//! constraint whose anchor is the particle's position in the body frame at the time, as
//! bevy_avbd's `AttachmentDesc` without an anchor). The rigid bodies and joints are built
//! with [`RapierScene::body`] and [`RapierScene::ball_joint`] as in the rigid mirror.

use std::collections::BTreeMap;

use bevy_avbd::glam::Vec3;
use bevy_avbd::{PhysicsWorld, SolidMaterial, TetMesh, TetPattern};
use rapier3d::prelude::{
    CoefficientCombineRule, ColliderBuilder, MassProperties, SoftBodyBuilder, SoftBodyCellModel,
    SoftBodyHandle, SoftBodyMaterial, SoftBodySolver, SoftMeshMapping,
};

use crate::rapier_scenes::{JointMeta, Meta, RapierScene};

/// The deformable bench cases (scene names of `bevy_avbd::scenes`, plus `cube`).
pub const SOFT_CASES: &[&str] = &[
    "cantilever",
    "hanging_bar",
    "soft_on_chain",
    "cube",
    "soft_drop",
    "soft_stack",
];

/// Parameters of the bench-only `cube` case (it has no `bevy_avbd::scenes` entry): name,
/// default, help.
pub const CUBE_PARAMS: &[(&str, f64, &str)] = &[
    (
        "cells",
        12.0,
        "cells per side of the 1 m cube (six tets each)",
    ),
    ("youngs", 1e6, "Young's modulus (Pa)"),
    ("poisson", 0.3, "Poisson ratio"),
    ("density", 1000.0, "density (kg/m³)"),
];

/// Which rapier3d solver runs the soft bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RapierSolver {
    /// `SoftBodySolver::Fem`: one linearised implicit-Euler solve per substep (block-Jacobi
    /// PCG, capped at `cg_cap` iterations).
    Fem,
    /// `SoftBodySolver::Constraints`, rapier's default: the elements as soft constraints
    /// swept by colour with the contacts and joints.
    Constraints,
}

impl RapierSolver {
    pub fn name(self) -> &'static str {
        match self {
            RapierSolver::Fem => "fem",
            RapierSolver::Constraints => "constraints",
        }
    }
}

/// rapier3d's budget for soft bodies: substeps (`num_solver_iterations`) and, for the FEM
/// solver, the conjugate-gradient cap (`soft_bodies.fem.max_linear_iterations`); and, for
/// the contact cases, the contact skin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RapierBudget {
    pub solver: RapierSolver,
    pub substeps: usize,
    /// FEM only (rapier's default is 20; ignored by the constraint solver).
    pub cg_cap: usize,
    /// The soft bodies' `particle_radius` (m), their surface colliders' contact skin: `None`
    /// is the builder's default, 0.01 m (contact cases only).
    pub skin: Option<f32>,
}

impl RapierBudget {
    /// rapier's defaults: 4 substeps; the FEM solve capped at 20 CG iterations.
    pub fn default_for(solver: RapierSolver) -> Self {
        let p = rapier3d::prelude::IntegrationParameters::default();
        Self {
            solver,
            substeps: p.num_solver_iterations,
            cg_cap: p.soft_bodies.fem.max_linear_iterations,
            skin: None,
        }
    }

    /// `4 substeps, CG ≤ 20` (FEM) or `4 substeps`, and `, skin 1 mm` where it is set.
    pub fn label(&self) -> String {
        let sub = if self.substeps == 1 { "" } else { "s" };
        let mut l = match self.solver {
            RapierSolver::Fem => format!("{} substep{sub}, CG ≤ {}", self.substeps, self.cg_cap),
            RapierSolver::Constraints => format!("{} substep{sub}", self.substeps),
        };
        if let Some(r) = self.skin {
            l.push_str(&format!(", skin {} mm", 1e3 * r));
        }
        l
    }
}

/// A deformable body as both engines hold it.
#[derive(Clone, Debug)]
pub struct SoftBodyMeta {
    /// The mesh in its own frame, placed at `place` (no rotation), and its material.
    pub mesh: TetMesh,
    pub place: Vec3,
    pub material: SolidMaterial,
    /// World positions of the vertices as placed (`place + v`, in f32 as bevy_avbd does).
    pub positions: Vec<Vec3>,
    /// Lumped masses ρV/4 per tet vertex (kg).
    pub masses: Vec<f32>,
    pub pinned: Vec<u32>,
}

/// What the contact cases measure: the ground and the body whose drift is followed.
#[derive(Clone, Debug)]
pub struct ContactMeta {
    /// Half-spaces, `(outward normal, point)`: the ground, y = 0 (rigid body 0, fixed).
    pub planes: Vec<(Vec3, Vec3)>,
    /// Friction of the ground (and of the soft surfaces: `SolidMaterial::friction`).
    pub ground_friction: f32,
    /// The deformable whose largest horizontal drift of its centre of mass is reported (the
    /// stack's top cube).
    pub top: Option<usize>,
}

impl SoftBodyMeta {
    fn new(mesh: TetMesh, place: Vec3, material: SolidMaterial, pinned: Vec<u32>) -> Self {
        let positions: Vec<Vec3> = mesh.vertices.iter().map(|&v| place + v).collect();
        let mut masses = vec![0.0f32; mesh.vertices.len()];
        for t in &mesh.tets {
            let x = t.map(|v| mesh.vertices[v as usize]);
            let volume = bevy_avbd::deformable::mesh::tet_volume(x);
            for &v in t {
                masses[v as usize] += material.density * volume / 4.0;
            }
        }
        Self {
            mesh,
            place,
            material,
            positions,
            masses,
            pinned,
        }
    }

    /// The vertices of the mesh (its own frame) where `f` holds.
    fn vertices_where(mesh: &TetMesh, f: impl Fn(Vec3) -> bool) -> Vec<u32> {
        mesh.vertices
            .iter()
            .enumerate()
            .filter(|(_, p)| f(**p))
            .map(|(i, _)| i as u32)
            .collect()
    }
}

/// A vertex of deformable `soft` attached to rigid body `body` (index in bevy_avbd's order)
/// at `anchor` in the body frame.
#[derive(Clone, Copy, Debug)]
pub struct AttachMeta {
    pub soft: usize,
    pub vertex: u32,
    pub body: usize,
    pub anchor: Vec3,
}

/// The vertices whose mean displacement along `dir` is the case's static value.
#[derive(Clone, Debug)]
pub struct ProbeMeta {
    pub soft: usize,
    pub vertices: Vec<u32>,
    pub dir: Vec3,
    /// Mean along `dir` of the placed rest positions.
    pub rest: f64,
}

/// What the harness measures, engine-neutral. Deformable `k` is bevy_avbd's
/// `deformable_handles()[k]` and [`RapierSoftScene::softs`]`[k]`; rigid body `i` is
/// `BodyHandle(i)` and `RapierScene::handles[i]`.
pub struct SoftMeta {
    pub softs: Vec<SoftBodyMeta>,
    /// Rigid bodies and joints (shapes, joints), as the rigid mirror describes them.
    pub rigid: Meta,
    pub attachments: Vec<AttachMeta>,
    /// The static value's probe (`None`: a contact case).
    pub probe: Option<ProbeMeta>,
    /// The contact cases' ground and drift (`None`: a static case, without contacts).
    pub contact: Option<ContactMeta>,
    /// Attachments whose largest gap (vertex to anchor, m) the harness reports.
    pub gap: Vec<usize>,
    /// Rigid bodies built in the rapier mirror (mass, pose) to be added to bevy_avbd's
    /// world by [`avbd_world`] (the `cube` only has none; scenes build their own).
    rigid_bodies: Vec<RigidDesc>,
}

/// A rigid body of a deformable case: dynamic cuboid at `pos`, of `half` extents, with
/// density or mass.
#[derive(Clone, Copy, Debug)]
struct RigidDesc {
    pos: Vec3,
    half: Vec3,
    density: Option<f32>,
    mass: Option<f32>,
}

fn param(p: &BTreeMap<String, f64>, name: &str) -> Result<f64, String> {
    p.get(name)
        .copied()
        .ok_or_else(|| format!("missing parameter {name}"))
}

fn cells(p: &BTreeMap<String, f64>, name: &str) -> Result<u32, String> {
    let v = param(p, name)?;
    if !(1.0..=512.0).contains(&v) || v.fract() != 0.0 {
        return Err(format!("{name} = {v}: an integer in [1, 512]"));
    }
    Ok(v as u32)
}

fn positive(p: &BTreeMap<String, f64>, name: &str) -> Result<f64, String> {
    let v = param(p, name)?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{name} = {v}: must be > 0"));
    }
    Ok(v)
}

/// The contact scenes' rubber (`bevy_avbd::scenes`): ν 0.3, ρ 1000, no damping, friction
/// 0.5.
fn rubber(youngs: f32) -> SolidMaterial {
    SolidMaterial {
        youngs,
        poisson: 0.3,
        density: 1000.0,
        damping: 0.0,
        ..Default::default()
    }
}

fn material(p: &BTreeMap<String, f64>) -> Result<SolidMaterial, String> {
    Ok(SolidMaterial {
        youngs: param(p, "youngs")? as f32,
        poisson: param(p, "poisson")? as f32,
        density: param(p, "density")? as f32,
        damping: 0.0,
        ..Default::default()
    })
}

/// Cells across a section of `width` for `along` cells over `length` (as the scenes do).
fn across(length: f32, width: f32, along: u32) -> u32 {
    ((along as f32 * width / length).round() as u32).max(1)
}

fn probe(soft: &SoftBodyMeta, k: usize, vertices: Vec<u32>, dir: Vec3) -> ProbeMeta {
    let rest = vertices
        .iter()
        .map(|&v| soft.positions[v as usize].dot(dir) as f64)
        .sum::<f64>()
        / vertices.len() as f64;
    ProbeMeta {
        soft: k,
        vertices,
        dir,
        rest,
    }
}

/// The engine-neutral description of deformable case `name` with its parameters (resolved
/// as `bevy_avbd::scenes::Scene::build` resolves them; [`CUBE_PARAMS`] for the cube),
/// following the scene's own construction rules.
pub fn describe(name: &str, p: &BTreeMap<String, f64>) -> Result<SoftMeta, String> {
    let mut rigid = Meta::default();
    let mut rigid_bodies = Vec::new();
    let mut attachments = Vec::new();
    let mut gap = Vec::new();
    let mut contact = None;
    let (softs, probe) = match name {
        "cantilever" => {
            let (length, height) = (param(p, "length")? as f32, param(p, "height")? as f32);
            let n = cells(p, "cells")?;
            let m = across(length, height, n);
            let mesh = TetMesh::box_grid(
                Vec3::new(length, height, height),
                [n, m, m],
                TetPattern::Six,
            );
            let eps = 1e-4 * length;
            let pinned = SoftBodyMeta::vertices_where(&mesh, |v| v.x < -0.5 * length + eps);
            let tip = SoftBodyMeta::vertices_where(&mesh, |v| v.x > 0.5 * length - eps);
            let place = Vec3::new(0.5 * length, 1.0, 0.0);
            let s = SoftBodyMeta::new(mesh, place, material(p)?, pinned);
            let pr = probe(&s, 0, tip, -Vec3::Y);
            (vec![s], Some(pr))
        }
        "hanging_bar" => {
            let length = param(p, "length")? as f32;
            let width = 0.1 * length;
            let n = cells(p, "cells")?;
            let m = across(length, width, n);
            let mesh =
                TetMesh::box_grid(Vec3::new(width, length, width), [m, n, m], TetPattern::Six);
            let eps = 1e-4 * length;
            let pinned = SoftBodyMeta::vertices_where(&mesh, |v| v.y > 0.5 * length - eps);
            let bottom = SoftBodyMeta::vertices_where(&mesh, |v| v.y < -0.5 * length + eps);
            let place = Vec3::new(0.0, 0.5 * length + 1.0, 0.0);
            let s = SoftBodyMeta::new(mesh, place, material(p)?, pinned);
            let pr = probe(&s, 0, bottom, -Vec3::Y);
            (vec![s], Some(pr))
        }
        "cube" => {
            let n = cells(p, "cells")?;
            let size = 1.0f32;
            let mesh = TetMesh::box_grid(Vec3::splat(size), [n, n, n], TetPattern::Six);
            let eps = 1e-4 * size;
            let pinned = SoftBodyMeta::vertices_where(&mesh, |v| v.y > 0.5 * size - eps);
            let bottom = SoftBodyMeta::vertices_where(&mesh, |v| v.y < -0.5 * size + eps);
            let place = Vec3::new(0.0, 0.5 * size + 1.0, 0.0);
            let s = SoftBodyMeta::new(mesh, place, material(p)?, pinned);
            let pr = probe(&s, 0, bottom, -Vec3::Y);
            (vec![s], Some(pr))
        }
        "soft_on_chain" => {
            // As `bevy_avbd::scenes` builds it: five 0.3 m links (ρ = 1000) on ball joints
            // from a world pivot, a 0.2 m rubber cube (4³ cells, default material) whose
            // top face hangs from the last link; a 1 m, 2 cm square rod (10 cells along, one
            // across, E = 100 MPa, ρ = 2500) pinned at its top, carrying a box of
            // `mass_ratio` × the rod's mass by its bottom face's vertices.
            let ratio = param(p, "mass_ratio")? as f32;
            let pivot = Vec3::new(-1.0, 4.0, 0.0);
            let half = Vec3::new(0.03, 0.15, 0.03);
            let mut y = pivot.y;
            for k in 0..5 {
                rigid_bodies.push(RigidDesc {
                    pos: Vec3::new(pivot.x, y - half.y, 0.0),
                    half,
                    density: Some(1000.0),
                    mass: None,
                });
                rigid.joints.push(if k == 0 {
                    JointMeta {
                        a: 0,
                        anchor_a: Vec3::Y * half.y,
                        b: None,
                        anchor_b: pivot,
                    }
                } else {
                    JointMeta {
                        a: k - 1,
                        anchor_a: -Vec3::Y * half.y,
                        b: Some(k),
                        anchor_b: Vec3::Y * half.y,
                    }
                });
                y -= 2.0 * half.y;
            }
            let last = 4;
            let block = TetMesh::box_grid(Vec3::splat(0.2), [4, 4, 4], TetPattern::Six);
            let top = SoftBodyMeta::vertices_where(&block, |v| v.y > 0.0999);
            let block = SoftBodyMeta::new(
                block,
                // 1 mm below the link, as the scene has it (no touching start).
                Vec3::new(pivot.x, y - 0.1 - 1e-3, 0.0),
                SolidMaterial::default(),
                Vec::new(),
            );
            let (length, side, rho, e) = (1.0f32, 0.02f32, 2500.0f32, 1e8f32);
            let rod = TetMesh::box_grid(Vec3::new(side, length, side), [1, 10, 1], TetPattern::Six);
            let pinned = SoftBodyMeta::vertices_where(&rod, |v| v.y > 0.4999);
            let bottom = SoftBodyMeta::vertices_where(&rod, |v| v.y < -0.4999);
            let rod_at = Vec3::new(1.0, 3.5, 0.0);
            let material = SolidMaterial {
                youngs: e,
                poisson: 0.3,
                density: rho,
                damping: 0.0,
                ..Default::default()
            };
            let rod = SoftBodyMeta::new(rod, rod_at, material, pinned);
            let box_half = Vec3::splat(0.1);
            let box_pos = rod_at - Vec3::Y * (0.5 * length + box_half.y + 1e-3);
            rigid_bodies.push(RigidDesc {
                pos: box_pos,
                half: box_half,
                density: None,
                mass: Some(ratio * rho * side * side * length),
            });
            let bx = 5;
            let link_pos = rigid_bodies[last].pos;
            for &v in &top {
                attachments.push(AttachMeta {
                    soft: 0,
                    vertex: v,
                    body: last,
                    anchor: block.positions[v as usize] - link_pos,
                });
            }
            for &v in &bottom {
                gap.push(attachments.len());
                attachments.push(AttachMeta {
                    soft: 1,
                    vertex: v,
                    body: bx,
                    anchor: rod.positions[v as usize] - box_pos,
                });
            }
            let pr = probe(&rod, 1, bottom, -Vec3::Y);
            (vec![block, rod], Some(pr))
        }
        "soft_drop" => {
            // As `bevy_avbd::scenes` builds it: the ground (a half-space, friction 0.5), a
            // 0.2 m rubber cube (`cells`³ cells) whose bottom is at `height`.
            let height = positive(p, "height")? as f32;
            let n = cells(p, "cells")?;
            let youngs = positive(p, "youngs")? as f32;
            let mesh = TetMesh::box_grid(Vec3::splat(0.2), [n, n, n], TetPattern::Six);
            let place = Vec3::new(0.0, height + 0.1, 0.0);
            contact = Some(ContactMeta {
                planes: vec![(Vec3::Y, Vec3::ZERO)],
                ground_friction: 0.5,
                top: None,
            });
            (
                vec![SoftBodyMeta::new(mesh, place, rubber(youngs), Vec::new())],
                None,
            )
        }
        "soft_stack" => {
            // `count` 0.2 m cubes, 2 cm apart, the lowest 2 cm above the ground.
            let count = cells(p, "count")?;
            let n = cells(p, "cells")?;
            let youngs = positive(p, "youngs")? as f32;
            let softs: Vec<SoftBodyMeta> = (0..count)
                .map(|i| {
                    let mesh = TetMesh::box_grid(Vec3::splat(0.2), [n, n, n], TetPattern::Six);
                    let at = Vec3::new(0.0, 0.12 + 0.22 * i as f32, 0.0);
                    SoftBodyMeta::new(mesh, at, rubber(youngs), Vec::new())
                })
                .collect();
            contact = Some(ContactMeta {
                planes: vec![(Vec3::Y, Vec3::ZERO)],
                ground_friction: 0.5,
                top: Some(softs.len() - 1),
            });
            (softs, None)
        }
        other => return Err(format!("`{other}` is not a deformable bench case")),
    };
    // The ground is body 0 (as the scenes add it first).
    if contact.is_some() {
        rigid
            .shapes
            .push(Some(rapier3d::parry::shape::SharedShape::halfspace(
                Vec3::Y,
            )));
    }
    rigid.shapes.extend(rigid_bodies.iter().map(|r| {
        Some(rapier3d::parry::shape::SharedShape::cuboid(
            r.half.x, r.half.y, r.half.z,
        ))
    }));
    Ok(SoftMeta {
        softs,
        rigid,
        attachments,
        probe,
        contact,
        gap,
        rigid_bodies,
    })
}

/// bevy_avbd's world for a case without a `bevy_avbd::scenes` entry (the `cube`): its
/// deformables as described, placed and pinned (it has no rigid body).
pub fn avbd_world(
    meta: &SoftMeta,
    config: bevy_avbd::SolverConfig,
) -> Result<PhysicsWorld, String> {
    if !meta.rigid_bodies.is_empty() || !meta.attachments.is_empty() {
        return Err("only cases without rigid bodies are built here".into());
    }
    let mut w = PhysicsWorld::new(config).map_err(|e| e.to_string())?;
    for s in &meta.softs {
        w.add_deformable(
            bevy_avbd::DeformableDesc::solid(s.mesh.clone(), s.material)
                .at(s.place)
                .pinned(s.pinned.iter().copied()),
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(w)
}

/// A rapier3d world holding a deformable case.
pub struct RapierSoftScene {
    pub w: RapierScene,
    pub softs: Vec<SoftBodyHandle>,
}

/// Builds the case `meta` describes in rapier3d with `budget`; `damping` is the soft
/// bodies' `elastic_damping_ratio`.
pub fn build(meta: &SoftMeta, budget: RapierBudget, damping: f32) -> RapierSoftScene {
    let mut w = RapierScene::new(budget.substeps, false);
    if meta.contact.is_none() {
        w.params.soft_bodies.max_extra_substeps = 0;
    }
    w.params.soft_bodies.fem.max_linear_iterations = budget.cg_cap;
    let mut rigid = Meta::default();
    if let Some(c) = &meta.contact {
        let ground = ColliderBuilder::new(rapier3d::parry::shape::SharedShape::halfspace(Vec3::Y))
            .friction(c.ground_friction);
        w.body(
            &mut rigid,
            false,
            Vec3::ZERO,
            Some(ground),
            None::<MassProperties>,
        );
    }
    for r in &meta.rigid_bodies {
        let c = ColliderBuilder::cuboid(r.half.x, r.half.y, r.half.z);
        let c = match (r.density, r.mass) {
            (_, Some(m)) => c.mass(m),
            (Some(d), None) => c.density(d),
            (None, None) => c,
        };
        w.body(&mut rigid, true, r.pos, Some(c), None::<MassProperties>);
    }
    for j in &meta.rigid.joints {
        w.ball_joint(&mut rigid, *j);
    }
    for b in w.bodies.iter_mut() {
        b.1.recompute_mass_properties_from_colliders(&w.colliders);
    }
    let mut softs = Vec::new();
    for s in &meta.softs {
        let m = &s.material;
        let builder = SoftBodyBuilder::new(s.positions.clone())
            .cells(s.mesh.tets.clone())
            .masses(s.masses.clone())
            .pinned_particles(s.pinned.iter().copied())
            .cell_model(SoftBodyCellModel::NeoHookean)
            .material(SoftBodyMaterial {
                young_modulus: m.youngs,
                poisson_ratio: m.poisson,
                elastic_damping_ratio: damping,
                ..SoftBodyMaterial::default()
            })
            .solver(match budget.solver {
                RapierSolver::Fem => SoftBodySolver::Fem,
                RapierSolver::Constraints => SoftBodySolver::Constraints,
            })
            .can_sleep(false);
        let builder = match budget.skin {
            Some(r) => builder.particle_radius(r),
            None => builder,
        };
        let builder = if meta.contact.is_some() {
            // rapier's default template (its shape is the surface's own), friction as ours.
            builder.surface_collider(
                ColliderBuilder::ball(0.05)
                    .density(0.0)
                    .friction(m.friction)
                    .friction_combine_rule(CoefficientCombineRule::GeometricMean),
            )
        } else {
            builder.no_surface_collider()
        };
        softs.push(
            w.soft_bodies
                .insert(builder, &mut w.bodies, &mut w.colliders),
        );
    }
    for a in &meta.attachments {
        let body = w.handles[a.body];
        w.soft_bodies[softs[a.soft]].attach_particle(a.vertex as usize, body, &w.bodies);
    }
    RapierSoftScene { w, softs }
}

impl RapierSoftScene {
    /// Position of vertex `v` of deformable `k`.
    pub fn vertex(&self, k: usize, v: u32) -> Vec3 {
        self.w.soft_bodies[self.softs[k]].particle_position(v as usize)
    }

    /// Positions of every vertex of deformable `k`.
    pub fn positions(&self, k: usize, out: &mut Vec<Vec3>) {
        out.clear();
        out.extend(self.w.soft_bodies[self.softs[k]].particle_positions());
    }

    /// Whether every particle and body pose is finite.
    pub fn finite(&self) -> bool {
        self.softs.iter().all(|&h| {
            self.w.soft_bodies[h]
                .particle_positions()
                .all(|p| p.is_finite())
        }) && (0..self.w.handles.len()).all(|i| {
            let (p, q) = self.w.pose(i);
            p.is_finite() && q.is_finite()
        })
    }
}

/// Checks that bevy_avbd's world holds the deformables `meta` describes (vertex for vertex:
/// positions, tets, lumped masses, pinned set), the same number of attachments, and the
/// same rigid bodies as the rapier mirror (`rapier_scenes::check_identical`); and that the
/// rapier soft bodies hold the same particles, masses, pins and cells.
pub fn check_identical(
    ours: &PhysicsWorld,
    meta: &SoftMeta,
    rapier: &RapierSoftScene,
) -> Result<(), String> {
    let handles = ours.deformable_handles();
    if handles.len() != meta.softs.len() {
        return Err(format!(
            "deformable count: bevy_avbd {} vs described {}",
            handles.len(),
            meta.softs.len()
        ));
    }
    if ours.attachment_handles().len() != meta.attachments.len() {
        return Err(format!(
            "attachment count: bevy_avbd {} vs described {}",
            ours.attachment_handles().len(),
            meta.attachments.len()
        ));
    }
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1e-9);
    for (k, (s, &h)) in meta.softs.iter().zip(handles).enumerate() {
        let d = ours.deformable(h).map_err(|e| e.to_string())?;
        let tets: Vec<[u32; 4]> = d.tets().collect();
        if tets != s.mesh.tets {
            return Err(format!("deformable {k}: tets differ"));
        }
        for (v, (x, &m)) in d.positions().iter().zip(d.masses()).enumerate() {
            if Vec3::from(*x) != s.positions[v] {
                return Err(format!(
                    "deformable {k} vertex {v}: position {x:?} vs {:?}",
                    s.positions[v]
                ));
            }
            if !close(m, s.masses[v]) {
                return Err(format!(
                    "deformable {k} vertex {v}: mass {m} vs {}",
                    s.masses[v]
                ));
            }
            if d.pinned(v as u32) != s.pinned.contains(&(v as u32)) {
                return Err(format!("deformable {k} vertex {v}: pinned differs"));
            }
        }
        let sb = &rapier.w.soft_bodies[rapier.softs[k]];
        if sb.particles().len() != s.positions.len() || sb.cells().len() != s.mesh.tets.len() {
            return Err(format!(
                "deformable {k}: rapier particle or cell count differs"
            ));
        }
        for (v, p) in sb.particles().iter().enumerate() {
            let pinned = s.pinned.contains(&(v as u32));
            if p.position() != s.positions[v] || !close(p.mass(), s.masses[v]) {
                return Err(format!(
                    "deformable {k} particle {v}: rapier position or mass"
                ));
            }
            if p.is_pinned() != pinned {
                return Err(format!("deformable {k} particle {v}: rapier pin differs"));
            }
        }
        for (c, t) in sb.cells().iter().zip(&s.mesh.tets) {
            if c.vertices != *t {
                return Err(format!(
                    "deformable {k}: rapier reordered cell {t:?} to {:?}",
                    c.vertices
                ));
            }
        }
        if sb.particle_attachments().len()
            != meta.attachments.iter().filter(|a| a.soft == k).count()
        {
            return Err(format!("deformable {k}: rapier attachment count differs"));
        }
        // The same boundary triangles (as sets of vertices): the surfaces the contact cases
        // collide through and are checked on.
        let canon = |mut t: [u32; 3]| {
            t.sort_unstable();
            t
        };
        let mut ours_surface: Vec<[u32; 3]> = d.surface_triangles().map(canon).collect();
        let mut theirs: Vec<[u32; 3]> = sb.boundary().iter().map(|&t| canon(t)).collect();
        ours_surface.sort_unstable();
        theirs.sort_unstable();
        if ours_surface != theirs {
            return Err(format!("deformable {k}: rapier's boundary differs"));
        }
        if meta.contact.is_some() {
            let mesh = sb
                .collision_mesh()
                .filter(|m| m.collision_enabled())
                .ok_or_else(|| format!("deformable {k}: rapier has no surface collider"))?;
            let SoftMeshMapping::Direct { particles } = mesh.binding() else {
                return Err(format!("deformable {k}: rapier's surface is skinned"));
            };
            let mut tris: Vec<[u32; 3]> = mesh
                .indices()
                .iter()
                .map(|t| canon(t.map(|v| particles[v as usize])))
                .collect();
            tris.sort_unstable();
            if tris != theirs {
                return Err(format!(
                    "deformable {k}: rapier collides through another surface"
                ));
            }
        }
    }
    crate::rapier_scenes::check_identical(ours, &rapier.w)
}
