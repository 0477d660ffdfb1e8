//! The benchmark scenes built in rapier3d 0.36, body for body and joint for joint as
//! `bevy_avbd::scenes` builds them (same order, shapes, densities, masses, friction), plus
//! the engine-neutral description ([`Meta`]) the harness measures both engines with.
//!
//! Rapier runs with its defaults except: bodies never sleep (a benchmark of a settled scene
//! would otherwise time an idle engine; `--rapier-sleep` restores the default), friction
//! coefficients combine by geometric mean (as bevy_avbd does; all scenes but `pile` use one
//! coefficient everywhere, where the rule does not matter), and jointed bodies do not collide
//! (bevy_avbd filters jointed pairs; in these scenes they never touch anyway).

use std::collections::{BTreeMap, HashMap};

use bevy_avbd::glam::{Quat, Vec3};
use rapier3d::parry::shape::SharedShape;
use rapier3d::prelude::{
    BroadPhaseBvh, CCDSolver, CoefficientCombineRule, ColliderBuilder, ColliderHandle, ColliderSet,
    ImpulseJointSet, IntegrationParameters, IslandManager, MassProperties, MultibodyJointSet,
    NarrowPhase, PhysicsPipeline, RigidBodyBuilder, RigidBodyHandle, RigidBodySet, SoftBodySet,
    SphericalJointBuilder,
};

/// A ball joint as both engines see it: anchor on body `a` (body frame) and anchor on body `b`
/// (body frame), or a world point when `b` is `None`.
#[derive(Clone, Copy, Debug)]
pub struct JointMeta {
    pub a: usize,
    pub anchor_a: Vec3,
    pub b: Option<usize>,
    pub anchor_b: Vec3,
}

/// What the harness measures, engine-neutral. Body `i` is `BodyHandle(i)` in bevy_avbd and
/// `RapierScene::bodies[i]` in rapier; joint `j` likewise.
#[derive(Default)]
pub struct Meta {
    /// Collider shape of each body (collider frame = body frame in these scenes).
    pub shapes: Vec<Option<SharedShape>>,
    /// Bodies whose displacement from their start position is `max_drift`.
    pub drift: Vec<usize>,
    /// Last frame (counted from 1 after each step) at which drift is tracked.
    pub drift_until: Option<u32>,
    /// `(frame, body, velocity)`: launched (linear velocity set, angular zeroed) before the
    /// step of that frame.
    pub projectiles: Vec<(u32, usize, Vec3)>,
    pub joints: Vec<JointMeta>,
    /// Joints whose summed anchor gaps over `chain_rest` is `max_stretch_ratio`.
    pub chain: Vec<usize>,
    pub chain_rest: f32,
    /// Track `max_joint_error` over every joint.
    pub joint_error: bool,
}

/// A rapier3d world and everything its pipeline needs.
pub struct RapierScene {
    pub params: IntegrationParameters,
    pub gravity: Vec3,
    pub pipeline: PhysicsPipeline,
    pub islands: IslandManager,
    pub broad_phase: BroadPhaseBvh,
    pub narrow_phase: NarrowPhase,
    pub bodies: RigidBodySet,
    pub colliders: ColliderSet,
    pub impulse_joints: ImpulseJointSet,
    pub multibody_joints: MultibodyJointSet,
    pub soft_bodies: SoftBodySet,
    pub ccd: CCDSolver,
    /// Body handles in bevy_avbd's order.
    pub handles: Vec<RigidBodyHandle>,
    /// Body index of each collider.
    pub collider_body: HashMap<ColliderHandle, usize>,
    /// Fixed body at the origin that world-anchored joints attach to (not in `handles`).
    world_anchor: Option<RigidBodyHandle>,
    can_sleep: bool,
}

impl RapierScene {
    /// An empty world: dt = 1/60 s, `iterations` solver iterations (substeps), gravity
    /// (0, −9.81, 0), bodies sleeping only if `can_sleep`.
    pub fn new(iterations: usize, can_sleep: bool) -> Self {
        let params = IntegrationParameters {
            dt: 1.0 / 60.0,
            num_solver_iterations: iterations,
            ..IntegrationParameters::default()
        };
        Self {
            params,
            gravity: Vec3::new(0.0, -9.81, 0.0),
            pipeline: PhysicsPipeline::new(),
            islands: IslandManager::new(),
            broad_phase: BroadPhaseBvh::new(),
            narrow_phase: NarrowPhase::new(),
            bodies: RigidBodySet::new(),
            colliders: ColliderSet::new(),
            impulse_joints: ImpulseJointSet::new(),
            multibody_joints: MultibodyJointSet::new(),
            soft_bodies: SoftBodySet::new(),
            ccd: CCDSolver::new(),
            handles: Vec::new(),
            collider_body: HashMap::new(),
            world_anchor: None,
            can_sleep,
        }
    }

    /// Advances one step of `params.dt`.
    pub fn step(&mut self) {
        self.pipeline.step(
            self.gravity,
            &self.params,
            &mut self.islands,
            &mut self.broad_phase,
            &mut self.narrow_phase,
            &mut self.bodies,
            &mut self.colliders,
            &mut self.impulse_joints,
            &mut self.multibody_joints,
            &mut self.soft_bodies,
            &mut self.ccd,
            &(),
            &(),
        );
    }

    /// Pose of body `i`.
    pub fn pose(&self, i: usize) -> (Vec3, Quat) {
        let p = self.bodies[self.handles[i]].position();
        (p.translation, p.rotation)
    }

    /// Launches body `i` (linear velocity `v`, angular velocity zero).
    pub fn launch(&mut self, i: usize, v: Vec3) {
        let b = &mut self.bodies[self.handles[i]];
        b.set_linvel(v, true);
        b.set_angvel(Vec3::ZERO, true);
    }

    /// Pairs of body indices whose colliders the narrow phase holds a contact pair for.
    pub fn contact_pairs(&self, out: &mut Vec<(usize, usize)>) {
        out.clear();
        for pair in self.narrow_phase.contact_pairs() {
            if let (Some(&a), Some(&b)) = (
                self.collider_body.get(&pair.collider1),
                self.collider_body.get(&pair.collider2),
            ) {
                out.push((a.min(b), a.max(b)));
            }
        }
    }

    /// Adds a body (and its collider) in bevy_avbd's order.
    pub fn body(
        &mut self,
        meta: &mut Meta,
        dynamic: bool,
        pos: Vec3,
        collider: Option<ColliderBuilder>,
        mprops: Option<MassProperties>,
    ) -> usize {
        let mut rb = if dynamic {
            RigidBodyBuilder::dynamic()
        } else {
            RigidBodyBuilder::fixed()
        }
        .translation(pos)
        .can_sleep(self.can_sleep);
        if let Some(m) = mprops {
            rb = rb.additional_mass_properties(m);
        }
        let h = self.bodies.insert(rb);
        let i = self.handles.len();
        self.handles.push(h);
        let shape = collider.map(|c| {
            let c = c.friction_combine_rule(CoefficientCombineRule::GeometricMean);
            let shape = c.shape.clone();
            let ch = self.colliders.insert_with_parent(c, h, &mut self.bodies);
            self.collider_body.insert(ch, i);
            shape
        });
        meta.shapes.push(shape);
        i
    }

    /// Ball joint between `a` and `b` (or the world point `anchor_b`).
    pub fn ball_joint(&mut self, meta: &mut Meta, j: JointMeta) -> usize {
        let b = match j.b {
            Some(b) => self.handles[b],
            None => *self.world_anchor.get_or_insert_with(|| {
                self.bodies
                    .insert(RigidBodyBuilder::fixed().can_sleep(self.can_sleep))
            }),
        };
        let joint = SphericalJointBuilder::new()
            .local_anchor1(j.anchor_a)
            .local_anchor2(j.anchor_b)
            .contacts_enabled(false);
        self.impulse_joints
            .insert(self.handles[j.a], b, joint, true);
        meta.joints.push(j);
        meta.joints.len() - 1
    }
}

fn ground(w: &mut RapierScene, meta: &mut Meta, mu: f32) {
    let c = ColliderBuilder::new(SharedShape::halfspace(Vec3::Y)).friction(mu);
    w.body(meta, false, Vec3::ZERO, Some(c), None);
}

fn unit_box(mu: f32) -> ColliderBuilder {
    ColliderBuilder::cuboid(0.5, 0.5, 0.5)
        .density(1000.0)
        .friction(mu)
}

fn param(p: &BTreeMap<String, f64>, name: &str) -> Result<f64, String> {
    p.get(name)
        .copied()
        .ok_or_else(|| format!("missing parameter {name}"))
}

fn track_all_dynamic(w: &RapierScene, meta: &mut Meta) {
    meta.drift = (0..w.handles.len())
        .filter(|&i| w.bodies[w.handles[i]].is_dynamic())
        .collect();
}

/// Builds scene `name` (parameters as resolved by `bevy_avbd::scenes::Scene::build`) with
/// `iterations` rapier solver iterations.
pub fn build(
    name: &str,
    p: &BTreeMap<String, f64>,
    iterations: usize,
    can_sleep: bool,
) -> Result<(RapierScene, Meta), String> {
    let mut w = RapierScene::new(iterations, can_sleep);
    let mut meta = Meta::default();
    build_into(name, p, &mut w, &mut meta)?;
    // Rapier derives mass properties lazily; make them current so they can be compared.
    for (_, b) in w.bodies.iter_mut() {
        b.recompute_mass_properties_from_colliders(&w.colliders);
    }
    Ok((w, meta))
}

fn build_into(
    name: &str,
    p: &BTreeMap<String, f64>,
    w: &mut RapierScene,
    meta: &mut Meta,
) -> Result<(), String> {
    let m = meta;
    match name {
        "pyramid" | "large_pyramid" => {
            let base = param(p, "base")? as usize;
            ground(w, m, 0.5);
            pyramid(w, m, base, 0.0, 0.0);
            track_all_dynamic(w, m);
        }
        "many_pyramids" => {
            let base = param(p, "base")? as usize;
            let count = param(p, "count")? as usize;
            let (pitch_x, pitch_z) = (base as f32 + 1.0, 2.0f32);
            ground(w, m, 0.5);
            for gx in 0..count {
                for gz in 0..count {
                    let cx = (gx as f32 - (count as f32 - 1.0) / 2.0) * pitch_x;
                    let cz = (gz as f32 - (count as f32 - 1.0) / 2.0) * pitch_z;
                    pyramid(w, m, base, cx, cz);
                }
            }
            track_all_dynamic(w, m);
        }
        "joint_grid" => joint_grid(w, m, param(p, "rows")? as usize, param(p, "cols")? as usize),
        "pendulum" => pendulum(
            w,
            m,
            param(p, "links")? as usize,
            param(p, "mass_ratio")? as f32,
        ),
        "pile" => pile(
            w,
            m,
            param(p, "count")? as usize,
            param(p, "sphere_mass")? as f32,
        ),
        other => return Err(format!("scene `{other}` has no rapier3d version")),
    }
    Ok(())
}

fn pyramid(w: &mut RapierScene, m: &mut Meta, base: usize, cx: f32, cz: f32) {
    for row in 0..base {
        let n = base - row;
        for i in 0..n {
            let x = cx + i as f32 - (n as f32 - 1.0) / 2.0;
            let pos = Vec3::new(x, 0.5 + row as f32, cz);
            w.body(m, true, pos, Some(unit_box(0.5)), None);
        }
    }
}

fn joint_grid(w: &mut RapierScene, m: &mut Meta, rows: usize, cols: usize) {
    let (pitch, radius) = (1.0f32, 0.25f32);
    let top = rows as f32 * pitch + 1.0;
    let mut grid = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let pos = Vec3::new(
                (c as f32 - (cols as f32 - 1.0) / 2.0) * pitch,
                top - r as f32 * pitch,
                0.0,
            );
            let ball = ColliderBuilder::ball(radius).density(1000.0).friction(0.5);
            grid.push(w.body(m, true, pos, Some(ball), None));
        }
    }
    let half = pitch / 2.0;
    for r in 0..rows {
        for c in 0..cols {
            let b = grid[r * cols + c];
            if r == 0 {
                let p = w.pose(b).0;
                let j = JointMeta {
                    a: b,
                    anchor_a: Vec3::Y * half,
                    b: None,
                    anchor_b: p + Vec3::Y * half,
                };
                w.ball_joint(m, j);
            }
            if c + 1 < cols {
                let j = JointMeta {
                    a: b,
                    anchor_a: Vec3::X * half,
                    b: Some(grid[r * cols + c + 1]),
                    anchor_b: -Vec3::X * half,
                };
                w.ball_joint(m, j);
            }
            if r + 1 < rows {
                let j = JointMeta {
                    a: b,
                    anchor_a: -Vec3::Y * half,
                    b: Some(grid[(r + 1) * cols + c]),
                    anchor_b: Vec3::Y * half,
                };
                w.ball_joint(m, j);
            }
        }
    }
    m.joint_error = true;
}

fn pendulum(w: &mut RapierScene, m: &mut Meta, links: usize, ratio: f32) {
    let (len, m_link, radius) = (0.25f32, 1.0f32, 0.5f32);
    let half = Vec3::new(len / 2.0, 0.025, 0.025);
    let link_inertia = Vec3::new(
        m_link / 3.0 * (half.y * half.y + half.z * half.z),
        m_link / 3.0 * (half.x * half.x + half.z * half.z),
        m_link / 3.0 * (half.x * half.x + half.y * half.y),
    );
    let pivot = Vec3::new(0.0, 20.0, 0.0);
    let mut x = 0.0;
    let mut prev: Option<(usize, Vec3)> = None;
    let mut chain = Vec::new();
    for _ in 0..links {
        let mp = MassProperties::new(Vec3::ZERO, m_link, link_inertia);
        let l = w.body(m, true, pivot + Vec3::X * (x + len / 2.0), None, Some(mp));
        let j = match prev {
            Some((p, anchor)) => JointMeta {
                a: p,
                anchor_a: anchor,
                b: Some(l),
                anchor_b: Vec3::new(-len / 2.0, 0.0, 0.0),
            },
            None => JointMeta {
                a: l,
                anchor_a: Vec3::new(-len / 2.0, 0.0, 0.0),
                b: None,
                anchor_b: pivot,
            },
        };
        chain.push(w.ball_joint(m, j));
        prev = Some((l, Vec3::new(len / 2.0, 0.0, 0.0)));
        x += len;
    }
    let ball = ColliderBuilder::ball(radius)
        .density(1000.0)
        .mass(m_link * ratio);
    let b = w.body(m, true, pivot + Vec3::X * (x + radius), Some(ball), None);
    let (p, anchor) = prev.expect("at least one link");
    chain.push(w.ball_joint(
        m,
        JointMeta {
            a: p,
            anchor_a: anchor,
            b: Some(b),
            anchor_b: Vec3::new(-radius, 0.0, 0.0),
        },
    ));
    m.chain = chain;
    m.chain_rest = links as f32 * len + radius;
}

fn pile(w: &mut RapierScene, m: &mut Meta, n: usize, sphere_mass: f32) {
    let half = 0.25f32;
    ground(w, m, 0.6);
    let mut side = 1usize;
    while (1..=side).map(|k| k * k).sum::<usize>() < n {
        side += 1;
    }
    let mut placed = 0;
    'layers: for layer in 0..side {
        let mm = side - layer;
        for i in 0..mm {
            for k in 0..mm {
                if placed == n {
                    break 'layers;
                }
                let off = (mm as f32 - 1.0) / 2.0;
                let pos = Vec3::new(
                    (i as f32 - off) * 2.0 * half,
                    half * (1.0 + 2.0 * layer as f32),
                    (k as f32 - off) * 2.0 * half,
                );
                let c = ColliderBuilder::cuboid(half, half, half)
                    .density(1000.0)
                    .friction(0.6);
                w.body(m, true, pos, Some(c), None);
                placed += 1;
            }
        }
    }
    track_all_dynamic(w, m);
    let r = 1.0f32;
    let extent = side as f32 * half + r + 2.0;
    let density = sphere_mass / (4.0 / 3.0 * std::f32::consts::PI * r * r * r);
    let c = ColliderBuilder::ball(r).density(density).friction(0.5);
    let ball = w.body(m, true, Vec3::new(-extent, r + 0.5, 0.0), Some(c), None);
    m.projectiles = vec![(60, ball, Vec3::new(20.0, 1.0, 0.0))];
    m.drift_until = Some(60);
}

/// Checks that the two engines hold the same bodies: kind, pose, mass and world inertia of
/// every body, and the same joint count.
pub fn check_identical(ours: &bevy_avbd::PhysicsWorld, w: &RapierScene) -> Result<(), String> {
    use bevy_avbd::{BodyHandle, BodyKind};
    if ours.body_count() != w.handles.len() {
        return Err(format!(
            "body count: bevy_avbd {} vs rapier {}",
            ours.body_count(),
            w.handles.len()
        ));
    }
    if ours.joint_count() != w.impulse_joints.len() {
        return Err(format!(
            "joint count: bevy_avbd {} vs rapier {}",
            ours.joint_count(),
            w.impulse_joints.len()
        ));
    }
    let close = |a: f32, b: f32, scale: f32| (a - b).abs() <= 1e-4 * scale.max(1e-6);
    for (i, &h) in w.handles.iter().enumerate() {
        let o = ours.body(BodyHandle(i as u32)).map_err(|e| e.to_string())?;
        let r = &w.bodies[h];
        let dynamic = o.kind == BodyKind::Dynamic;
        if dynamic != r.is_dynamic() {
            return Err(format!("body {i}: kind differs"));
        }
        let (p, q) = w.pose(i);
        if (p - o.position).length() > 1e-5 || q.dot(o.rotation).abs() < 1.0 - 1e-6 {
            return Err(format!(
                "body {i}: pose {:?} vs {:?}",
                (o.position, o.rotation),
                (p, q)
            ));
        }
        if !dynamic {
            continue;
        }
        if !close(o.mass, r.mass(), o.mass) {
            return Err(format!("body {i}: mass {} vs {}", o.mass, r.mass()));
        }
        let io = ours
            .world_inertia(BodyHandle(i as u32))
            .map_err(|e| e.to_string())?;
        let local = r
            .mass_properties()
            .local_mprops
            .reconstruct_inertia_matrix();
        let rot = bevy_avbd::glam::Mat3::from_quat(q);
        let ir = rot * local * rot.transpose();
        let scale = io
            .to_cols_array()
            .iter()
            .fold(0.0f32, |m, v| m.max(v.abs()));
        for (a, b) in io.to_cols_array().iter().zip(ir.to_cols_array()) {
            if !close(*a, b, scale) {
                return Err(format!("body {i}: inertia {io} vs {ir}"));
            }
        }
    }
    Ok(())
}
