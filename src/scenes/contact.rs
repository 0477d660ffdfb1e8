//! Contact scenes of deformable bodies (penetration-free contact, `surface_contact`):
//! builders, what they measure every frame and their metrics. Besides the deformable
//! scenes' metrics, every one reports `intersections` (pairs of surface triangles that
//! share a point at a frame end, exact, summed over frames: `reference::intersect`),
//! `min_separation` (m, least distance between non-neighbour surfaces over the frames),
//! `lost_motion` (largest β of a frame), `mean_lost_motion`, `active_contacts` (largest
//! active set), `floor_stopped` (tetrahedra the volume floor stopped, whose vertices it
//! held back, summed over frames and advances) and `max_penetration` (m: rigid contacts'
//! depth, and how far any deformable vertex went below a half-space).

use std::collections::BTreeMap;

use glam::{DVec3, Quat, Vec3};
use serde_json::{Value, json};

use super::soft::{cells, positive, vertices_where};
use super::{Scene, SceneError};
use crate::{
    BodyDesc, BodyHandle, ClothMaterial, Collider, DeformableDesc, DeformableHandle, SolidMaterial,
    TetMesh, TetPattern, TriMesh,
};

/// The contact scenes.
pub const CONTACT_SCENES: &[&str] = &[
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

/// Distance within which `min_separation` is measured (m).
const SEPARATION_RADIUS: f64 = 0.01;

/// What the contact scenes measure.
#[derive(Default, Debug, Clone)]
pub(crate) struct ContactTracker {
    pub intersections: usize,
    pub min_separation: f64,
    pub lost_motion: f32,
    pub lost_motion_sum: f64,
    pub active_contacts: usize,
    pub floor_stopped: usize,
    /// Deepest a deformable vertex went below a half-space (m).
    pub soft_penetration: f32,
    /// Half-spaces: outward normal and a point.
    pub planes: Vec<(Vec3, Vec3)>,
    /// A body's vertices whose mean is followed along a direction (incline: down the
    /// slope): its start and the samples (time, distance, speed).
    pub follow: Option<(DeformableHandle, Vec3, Vec<u32>)>,
    pub follow_start: Option<Vec3>,
    pub follow_samples: Vec<(f32, f32, f32)>,
    /// Compress: the top plate, its normal into the cube and the force samples; the
    /// cube's top and bottom faces and the strain samples.
    pub plate: Option<(BodyHandle, Vec3)>,
    pub force_samples: Vec<f32>,
    pub faces: Option<(DeformableHandle, Vec<u32>, Vec<u32>)>,
    pub strain_samples: Vec<f32>,
    pub analytic: f64,
    /// Tunnelling: (ball, board: soft board's centre vertices or none, point, normal);
    /// frames at which a ball was past its board.
    pub throws: Vec<Throw>,
    pub passed: usize,
    /// Free-flight collision: momentum at the start and the largest relative error.
    pub momentum0: Option<DVec3>,
    pub momentum_error: f64,
    /// Stack: the top body and its start; the largest horizontal drift.
    pub top: Option<(DeformableHandle, Vec3)>,
    pub top_drift: f32,
    /// Cloth drape: the sphere (centre, radius) and the least clearance of a vertex.
    pub sphere: Option<(Vec3, f32)>,
    pub sphere_clearance: f32,
    /// Kinematic walls moved for a number of frames.
    pub walls: Vec<(BodyHandle, Vec3, u32)>,
}

/// A ball thrown at a board.
#[derive(Debug, Clone)]
pub(crate) struct Throw {
    pub ball: DeformableHandle,
    /// The soft board and its vertices near the centre (whose mean is the board's centre
    /// now), or none for a rigid board.
    pub board: Option<(DeformableHandle, Vec<u32>)>,
    pub point: Vec3,
    pub normal: Vec3,
}

pub(super) fn build(s: &mut Scene) -> Result<(), SceneError> {
    s.tracker.contact = ContactTracker {
        min_separation: SEPARATION_RADIUS,
        sphere_clearance: f32::INFINITY,
        ..Default::default()
    };
    match s.name {
        "soft_drop" => soft_drop(s),
        "soft_stack" => soft_stack(s),
        "squishy_balls" => squishy_balls(s),
        "cloth_drape" => cloth_drape(s),
        "cloth_pile" => cloth_pile(s),
        "soft_incline" => soft_incline(s),
        "compress" => compress(s),
        "tunnelling" => tunnelling(s),
        "mattress" => mattress(s),
        "soft_collision" => soft_collision(s),
        other => Err(SceneError::UnknownScene(other.into())),
    }
}

/// The static ground: a half-space through the origin, normal +y.
fn ground(s: &mut Scene, friction: f32) -> Result<BodyHandle, SceneError> {
    let h = s.world.add_body(
        BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y)?.with_friction(friction)),
    )?;
    s.tracker.contact.planes.push((Vec3::Y, Vec3::ZERO));
    Ok(h)
}

/// The unit ball mesh (r = 0.1 m, 386 vertices, 1,433 tets; `assets/meshes`), scaled.
fn ball(radius: f32) -> Result<TetMesh, SceneError> {
    let mut mesh = TetMesh::from_msh(include_bytes!("../../assets/meshes/ball.msh"))?;
    for v in &mut mesh.vertices {
        *v *= radius / 0.1;
    }
    Ok(mesh)
}

fn rubber(youngs: f32) -> SolidMaterial {
    SolidMaterial {
        youngs,
        poisson: 0.3,
        density: 1000.0,
        damping: 0.0,
        ..Default::default()
    }
}

fn track_soft(s: &mut Scene, h: DeformableHandle) {
    s.tracker.soft.bodies.push(h);
}

/// A soft cube (0.2 m) dropped from `height` (its bottom) onto the ground.
fn soft_drop(s: &mut Scene) -> Result<(), SceneError> {
    let height = positive(s, "height")?;
    let n = cells(s, "cells")?;
    ground(s, 0.5)?;
    let mesh = TetMesh::box_grid(Vec3::splat(0.2), [n, n, n], TetPattern::Six);
    let h = s.world.add_deformable(
        DeformableDesc::solid(mesh, rubber(positive(s, "youngs")?)).at(Vec3::new(
            0.0,
            height + 0.1,
            0.0,
        )),
    )?;
    track_soft(s, h);
    Ok(())
}

/// `count` soft cubes (0.2 m) stacked 2 cm apart above the ground, dropped.
fn soft_stack(s: &mut Scene) -> Result<(), SceneError> {
    let count = cells(s, "count")?;
    let n = cells(s, "cells")?;
    let youngs = positive(s, "youngs")?;
    ground(s, 0.5)?;
    let mut top = None;
    for i in 0..count {
        let mesh = TetMesh::box_grid(Vec3::splat(0.2), [n, n, n], TetPattern::Six);
        let at = Vec3::new(0.0, 0.12 + 0.22 * i as f32, 0.0);
        let h = s
            .world
            .add_deformable(DeformableDesc::solid(mesh, rubber(youngs)).at(at))?;
        track_soft(s, h);
        top = Some((h, at));
    }
    s.tracker.contact.top = top;
    Ok(())
}

/// `count` soft balls (r = 0.1 m) in a 0.8 m box on the ground whose four walls move in
/// by 0.2 m each over the first two seconds (kinematic), pressing them together.
fn squishy_balls(s: &mut Scene) -> Result<(), SceneError> {
    let count = cells(s, "count")?;
    let youngs = positive(s, "youngs")?;
    ground(s, 0.3)?;
    let half = 0.4f32;
    let (wall_half, t) = (Vec3::new(0.05, 0.4, half + 0.1), 0.05f32);
    let frames = 120;
    let speed = 0.2 / (frames as f32 * s.world.config.dt);
    for k in 0..4 {
        let q = Quat::from_rotation_y(k as f32 * std::f32::consts::FRAC_PI_2);
        let normal = q * Vec3::X; // the wall at +normal moves along −normal
        let at = normal * (half + t) + Vec3::Y * wall_half.y;
        let wall = s.world.add_body(
            BodyDesc::kinematic()
                .at(at)
                .rotated(q)
                .with_velocity(-normal * speed, Vec3::ZERO)
                .with_collider(Collider::cuboid(wall_half)?.with_friction(0.3)),
        )?;
        s.tracker
            .contact
            .walls
            .push((wall, -normal * speed, frames));
    }
    // Balls on a grid of 3 × 3 per layer, 0.25 m apart, layer after layer.
    for i in 0..count {
        let (layer, k) = (i / 9, i % 9);
        let (gx, gz) = ((k % 3) as f32 - 1.0, (k / 3) as f32 - 1.0);
        let jitter = 0.01 * ((i * 7 % 5) as f32 - 2.0);
        let at = Vec3::new(
            0.25 * gx + jitter,
            0.12 + 0.22 * layer as f32,
            0.25 * gz - jitter,
        );
        let h = s.world.add_deformable(
            DeformableDesc::solid(
                ball(0.1)?,
                SolidMaterial {
                    friction: 0.3,
                    dynamic_friction: 0.3,
                    ..rubber(youngs)
                },
            )
            .at(at)
            .rotated(Quat::from_rotation_y(0.7 * i as f32)),
        )?;
        track_soft(s, h);
    }
    Ok(())
}

/// A 1 m cloth (`resolution` quads per side) released flat at 1 m above a sphere
/// (r = 0.25 m, top at 0.75 m) on the ground; it drapes over the sphere and its corners
/// reach the ground. Self-contact on.
fn cloth_drape(s: &mut Scene) -> Result<(), SceneError> {
    let res = cells(s, "resolution")?;
    ground(s, 0.5)?;
    let (center, radius) = (Vec3::new(0.0, 0.5, 0.0), 0.25f32);
    s.world.add_body(
        BodyDesc::fixed()
            .at(center)
            .with_collider(Collider::ball(radius)?.with_friction(0.5)),
    )?;
    s.tracker.contact.sphere = Some((center, radius));
    let material = ClothMaterial {
        damping: 1e-3,
        ..Default::default()
    };
    let h = s.world.add_deformable(
        DeformableDesc::cloth(TriMesh::grid(1.0, 1.0, res, res), material)
            .at(Vec3::new(0.0, 1.0, 0.0)),
    )?;
    track_soft(s, h);
    Ok(())
}

/// `layers` cloths (0.8 m) dropped one above the other, each turned, onto a small box on
/// the ground: they fold over it and onto each other.
fn cloth_pile(s: &mut Scene) -> Result<(), SceneError> {
    let layers = cells(s, "layers")?;
    let res = cells(s, "resolution")?;
    ground(s, 0.5)?;
    s.world.add_body(
        BodyDesc::fixed()
            .at(Vec3::new(0.0, 0.1, 0.0))
            .with_collider(Collider::cuboid(Vec3::splat(0.1))?),
    )?;
    for i in 0..layers {
        let material = ClothMaterial {
            damping: 1e-3,
            ..Default::default()
        };
        let h = s.world.add_deformable(
            DeformableDesc::cloth(TriMesh::grid(0.8, 0.8, res, res), material)
                .at(Vec3::new(0.05 * i as f32, 0.4 + 0.1 * i as f32, 0.0))
                .rotated(Quat::from_rotation_y(0.5 * i as f32)),
        )?;
        track_soft(s, h);
    }
    Ok(())
}

/// A soft block (0.2 m) resting on a slope of `angle_deg` (a half-space), friction `mu`
/// on both sides; its centre of mass is followed down the slope.
fn soft_incline(s: &mut Scene) -> Result<(), SceneError> {
    let theta = (s.param("angle_deg") as f32).to_radians();
    let mu = s.param("mu") as f32;
    if !((0.0..1.5).contains(&theta) && mu.is_finite() && mu >= 0.0) {
        return Err(SceneError::BadParam {
            param: "angle_deg/mu".into(),
            value: s.param("angle_deg"),
            reason: "an angle in [0°, 85°] and μ ≥ 0".into(),
        });
    }
    let n = cells(s, "cells")?;
    let q = Quat::from_rotation_z(theta);
    let normal = q * Vec3::Y;
    s.world.add_body(
        BodyDesc::fixed().with_collider(Collider::halfspace(normal)?.with_friction(mu)),
    )?;
    s.tracker.contact.planes.push((normal, Vec3::ZERO));
    // Resting on the slope at the contact gap (0.1 mm more: it settles onto its rows).
    let gap = s.world.config.contact_gap + 1e-4;
    let mesh = TetMesh::box_grid(Vec3::splat(0.2), [n, n, n], TetPattern::Six);
    let material = SolidMaterial {
        friction: mu,
        dynamic_friction: mu,
        ..rubber(positive(s, "youngs")?)
    };
    let h = s.world.add_deformable(
        DeformableDesc::solid(mesh, material)
            .at(normal * (0.1 + gap))
            .rotated(q),
    )?;
    track_soft(s, h);
    // Down the slope: −x turned by θ. The slide is the contact face's (the block shears
    // a little under its weight; its centre of mass moves with it).
    let bottom: Vec<u32> = {
        let d = s.world.deformable(h)?;
        let x = d.positions();
        (0..d.vertex_count() as u32)
            .filter(|&v| normal.dot(Vec3::from(x[v as usize])) < gap + 1e-4)
            .collect()
    };
    s.tracker.contact.follow = Some((h, q * -Vec3::X, bottom));
    Ok(())
}

/// A soft cube (0.2 m) between two frictionless rigid plates, no gravity: the top plate
/// moves down by `strain` × 0.2 m over the first half second, then holds. The force on
/// it, averaged over the last second, against E·A·ε.
fn compress(s: &mut Scene) -> Result<(), SceneError> {
    let strain = positive(s, "strain")?;
    let youngs = positive(s, "youngs")?;
    let n = cells(s, "cells")?;
    s.world.config.gravity = Vec3::ZERO;
    let gap = s.world.config.contact_gap;
    let (side, plate) = (0.2f32, Vec3::new(0.2, 0.02, 0.2));
    s.world.add_body(
        BodyDesc::fixed()
            .at(Vec3::new(0.0, -plate.y, 0.0))
            .with_collider(Collider::cuboid(plate)?.with_friction(0.0)),
    )?;
    let frames = 30;
    let speed = strain * side / (frames as f32 * s.world.config.dt);
    let top = s.world.add_body(
        BodyDesc::kinematic()
            .at(Vec3::new(0.0, side + 2.0 * gap + plate.y, 0.0))
            .with_velocity(-Vec3::Y * speed, Vec3::ZERO)
            .with_collider(Collider::cuboid(plate)?.with_friction(0.0)),
    )?;
    let t = &mut s.tracker.contact;
    t.walls.push((top, -Vec3::Y * speed, frames));
    t.plate = Some((top, -Vec3::Y));
    let mesh = TetMesh::box_grid(Vec3::splat(side), [n, n, n], TetPattern::Six);
    let material = SolidMaterial {
        friction: 0.0,
        dynamic_friction: 0.0,
        ..rubber(youngs)
    };
    let top_face = vertices_where(&mesh, |p| p.y > 0.5 * side - 1e-4);
    let bottom_face = vertices_where(&mesh, |p| p.y < -0.5 * side + 1e-4);
    let at = Vec3::new(0.0, 0.5 * side + gap, 0.0);
    let h = s
        .world
        .add_deformable(DeformableDesc::solid(mesh, material).at(at))?;
    track_soft(s, h);
    // E·A·ε at the nominal strain; the metric also has it at the strain the cube reached
    // (the plate travel less what the two gaps gave).
    s.tracker.contact.analytic = youngs as f64 * (side * side) as f64 * strain as f64;
    s.tracker.contact.faces = Some((h, top_face, bottom_face));
    Ok(())
}

/// Two soft balls (r = 0.05 m) thrown at `speed` along +x, one at a thin soft board (0.6 m
/// square, 2 cm thick, E = 10 MPa, its rim pinned), one at a thin static rigid box of the
/// same size; no gravity.
fn tunnelling(s: &mut Scene) -> Result<(), SceneError> {
    let speed = positive(s, "speed")?;
    s.world.config.gravity = Vec3::ZERO;
    let (size, thick) = (0.6f32, 0.02f32);
    // The soft board in the plane x = 0.3, centred at z = −0.5.
    let board_at = Vec3::new(0.3, 1.0, -0.5);
    let mesh = TetMesh::box_grid(Vec3::new(thick, size, size), [1, 12, 12], TetPattern::Six);
    let rim = vertices_where(&mesh, |p| {
        p.y.abs() > 0.5 * size - 1e-4 || p.z.abs() > 0.5 * size - 1e-4
    });
    let centre = vertices_where(&mesh, |p| p.y.abs() < 0.051 && p.z.abs() < 0.051);
    let board = s.world.add_deformable(
        DeformableDesc::solid(mesh, rubber(1e7))
            .at(board_at)
            .pinned(rim),
    )?;
    track_soft(s, board);
    // The rigid board, centred at z = +0.5.
    let rigid_at = Vec3::new(0.3, 1.0, 0.5);
    s.world.add_body(
        BodyDesc::fixed()
            .at(rigid_at)
            .with_collider(Collider::cuboid(Vec3::new(
                0.5 * thick,
                0.5 * size,
                0.5 * size,
            ))?),
    )?;
    let mut throws = Vec::new();
    for (z, soft_board) in [(-0.5f32, Some((board, centre))), (0.5, None)] {
        let ball_h = s.world.add_deformable(
            DeformableDesc::solid(ball(0.05)?, rubber(1e6))
                .at(Vec3::new(0.0, 1.0, z))
                .with_velocity(Vec3::X * speed),
        )?;
        track_soft(s, ball_h);
        throws.push(Throw {
            ball: ball_h,
            board: soft_board,
            point: Vec3::new(0.3, 1.0, z),
            normal: -Vec3::X,
        });
    }
    s.tracker.contact.throws = throws;
    Ok(())
}

/// `count` rigid boxes (0.15 m, 5 kg) dropped onto a soft slab (1 × 0.2 × 1 m) on the
/// ground, and a soft cube dropped onto a pile of three rigid boxes beside it.
fn mattress(s: &mut Scene) -> Result<(), SceneError> {
    let count = cells(s, "count")?;
    ground(s, 0.5)?;
    let slab = TetMesh::box_grid(Vec3::new(1.0, 0.2, 1.0), [10, 2, 10], TetPattern::Six);
    let h = s
        .world
        .add_deformable(DeformableDesc::solid(slab, rubber(1e5)).at(Vec3::new(
            0.0,
            0.1 + 1e-3 + 2e-3,
            0.0,
        )))?;
    track_soft(s, h);
    for i in 0..count {
        let (x, z) = (
            0.3 * ((i % 2) as f32 - 0.5),
            0.3 * ((i / 2 % 2) as f32 - 0.5),
        );
        s.world.add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(x, 0.5 + 0.2 * (i / 4) as f32, z))
                .rotated(Quat::from_rotation_y(0.3 * i as f32))
                .with_mass(5.0)
                .with_collider(Collider::cuboid(Vec3::splat(0.075))?),
        )?;
    }
    // The rigid pile at x = 1.2 and the soft cube above it.
    for k in 0..3 {
        s.world.add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(1.2, 0.1 + 0.2 * k as f32, 0.0))
                .with_mass(5.0)
                .with_collider(Collider::cuboid(Vec3::splat(0.1))?),
        )?;
    }
    let cube = TetMesh::box_grid(Vec3::splat(0.2), [4, 4, 4], TetPattern::Six);
    let c = s
        .world
        .add_deformable(DeformableDesc::solid(cube, rubber(1e5)).at(Vec3::new(1.2, 1.0, 0.0)))?;
    track_soft(s, c);
    Ok(())
}

/// Two soft balls (r = 0.1 m) colliding in free flight, no gravity: one at rest, one at
/// `speed` off-centre; friction `mu`. Linear momentum is followed.
fn soft_collision(s: &mut Scene) -> Result<(), SceneError> {
    let speed = positive(s, "speed")?;
    let mu = s.param("mu") as f32;
    s.world.config.gravity = Vec3::ZERO;
    let material = SolidMaterial {
        friction: mu,
        dynamic_friction: mu,
        ..rubber(1e5)
    };
    let a = s.world.add_deformable(
        DeformableDesc::solid(ball(0.1)?, material)
            .at(Vec3::new(-0.3, 1.0, 0.0))
            .with_velocity(Vec3::X * speed),
    )?;
    let b = s.world.add_deformable(
        DeformableDesc::solid(ball(0.1)?, material)
            .at(Vec3::new(0.0, 1.08, 0.0))
            .rotated(Quat::from_rotation_x(0.4)),
    )?;
    track_soft(s, a);
    track_soft(s, b);
    let p0 = momentum(s);
    s.tracker.contact.momentum0 = Some(p0);
    Ok(())
}

/// Linear momentum of the scene's deformables (f64).
fn momentum(s: &Scene) -> DVec3 {
    let mut p = DVec3::ZERO;
    for &h in &s.tracker.soft.bodies {
        if let Ok(d) = s.world.deformable(h) {
            for (v, &m) in d.velocities().iter().zip(d.masses()) {
                p += Vec3::from(*v).as_dvec3() * m as f64;
            }
        }
    }
    p
}

fn center_of_mass(s: &Scene, h: DeformableHandle) -> Option<Vec3> {
    s.world.deformable(h).ok().map(|d| d.center_of_mass())
}

fn mean_of(s: &Scene, h: DeformableHandle, vertices: &[u32]) -> Option<Vec3> {
    let d = s.world.deformable(h).ok()?;
    let x = d.positions();
    let sum: Vec3 = vertices.iter().map(|&v| Vec3::from(x[v as usize])).sum();
    Some(sum / vertices.len() as f32)
}

/// Before a frame: the kinematic walls stop when their frames are done.
pub(super) fn drive(s: &mut Scene) -> Result<(), crate::PhysicsError> {
    let frame = s.frame;
    for &(h, _, frames) in &s.tracker.contact.walls {
        if frame == frames {
            s.world.set_velocity(h, Vec3::ZERO, Vec3::ZERO)?;
        }
    }
    Ok(())
}

/// After a frame: the contact measurements.
pub(super) fn track(s: &mut Scene) {
    let report = crate::reference::intersect::check(&s.world, SEPARATION_RADIUS);
    let stats = s.world.stats().surface_contact;
    let time = s.frame as f32 * s.world.config.dt;
    let follow = s
        .tracker
        .contact
        .follow
        .as_ref()
        .and_then(|(h, dir, vertices)| Some((mean_of(s, *h, vertices)?, *dir)));
    let throws: Vec<(Vec3, Vec3, Vec3)> = s
        .tracker
        .contact
        .throws
        .iter()
        .filter_map(|t| {
            let ball = center_of_mass(s, t.ball)?;
            let at = match &t.board {
                Some((b, centre)) => mean_of(s, *b, centre)?,
                None => t.point,
            };
            Some((ball, at, t.normal))
        })
        .collect();
    let plate_force = s
        .tracker
        .contact
        .plate
        .and_then(|(h, dir)| Some(s.world.surface_contact_force(h).ok()?.dot(-dir)));
    let p = s.tracker.contact.momentum0.map(|_| momentum(s));
    let strain = s
        .tracker
        .contact
        .faces
        .as_ref()
        .and_then(|(h, top, bottom)| {
            let height = mean_of(s, *h, top)?.y - mean_of(s, *h, bottom)?.y;
            Some(1.0 - height / 0.2)
        });
    let top = s
        .tracker
        .contact
        .top
        .and_then(|(h, start)| Some((center_of_mass(s, h)?, start)));
    let mut soft_penetration = 0.0f32;
    let mut clearance = f32::INFINITY;
    for &h in &s.tracker.soft.bodies {
        let Ok(d) = s.world.deformable(h) else {
            continue;
        };
        for x in d.positions() {
            let x = Vec3::from(*x);
            for &(n, at) in &s.tracker.contact.planes {
                soft_penetration = soft_penetration.max(-n.dot(x - at));
            }
            if let Some((c, r)) = s.tracker.contact.sphere {
                clearance = clearance.min((x - c).length() - r);
            }
        }
    }
    let t = &mut s.tracker.contact;
    t.intersections += report.intersections;
    t.min_separation = t.min_separation.min(report.min_separation);
    t.lost_motion = t.lost_motion.max(stats.lost_motion);
    t.lost_motion_sum += stats.lost_motion as f64;
    t.floor_stopped += stats.floor_stopped;
    t.active_contacts = t.active_contacts.max(stats.rows);
    t.soft_penetration = t.soft_penetration.max(soft_penetration);
    t.sphere_clearance = t.sphere_clearance.min(clearance);
    if let Some((com, dir)) = follow {
        let start = *t.follow_start.get_or_insert(com);
        let dist = (com - start).dot(dir);
        let speed = match t.follow_samples.last() {
            Some(&(t0, d0, _)) => (dist - d0) / (time - t0),
            None => 0.0,
        };
        t.follow_samples.push((time, dist, speed));
    }
    for (ball, at, n) in throws {
        // The ball starts on the board's +normal side; past it once its centre is behind.
        if n.dot(ball - at) < 0.0 {
            t.passed += 1;
        }
    }
    if let Some(f) = plate_force {
        t.force_samples.push(f);
    }
    if let Some(e) = strain {
        t.strain_samples.push(e);
    }
    if let (Some(p), Some(p0)) = (p, t.momentum0) {
        t.momentum_error = t
            .momentum_error
            .max((p - p0).length() / p0.length().max(1e-12));
    }
    if let Some((com, start)) = top {
        let d = com - start;
        t.top_drift = t.top_drift.max(Vec3::new(d.x, 0.0, d.z).length());
    }
}

/// The metrics of a contact scene.
pub(super) fn metrics(s: &Scene, m: &mut BTreeMap<String, Value>) {
    let t = &s.tracker.contact;
    let frames = s.frame.max(1) as f64;
    m.insert("intersections".into(), json!(t.intersections));
    m.insert("min_separation".into(), json!(t.min_separation));
    m.insert("lost_motion".into(), json!(t.lost_motion));
    m.insert("mean_lost_motion".into(), json!(t.lost_motion_sum / frames));
    m.insert("active_contacts".into(), json!(t.active_contacts));
    m.insert("floor_stopped".into(), json!(t.floor_stopped));
    m.insert(
        "inverted_elements".into(),
        json!(s.tracker.soft.inverted_elements),
    );
    // Smallest V/V₀ of a tetrahedron at a frame's end (scenes with solids only).
    let min_j = s.tracker.soft.min_volume_ratio;
    if min_j.is_finite() {
        m.insert("min_volume_ratio".into(), json!(min_j));
    }
    let rigid = m
        .get("max_penetration")
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    m.insert(
        "max_penetration".into(),
        json!(rigid.max(t.soft_penetration as f64)),
    );
    match s.name {
        "soft_incline" => {
            let g = s.world.config.gravity.length() as f64;
            let theta = s.param("angle_deg").to_radians();
            let mu = s.param("mu");
            let analytic = (g * (theta.sin() - mu * theta.cos())).max(0.0);
            let samples = &t.follow_samples;
            let dist = samples.last().map(|x| x.1).unwrap_or(0.0);
            m.insert("slide_distance".into(), json!(dist));
            m.insert(
                "acceleration".into(),
                json!(super::fit_acceleration(samples)),
            );
            m.insert("analytic_acceleration".into(), json!(analytic));
        }
        "compress" => {
            let last_second = |x: &[f32]| {
                let tail = &x[x.len().saturating_sub(60)..];
                tail.iter().map(|&f| f as f64).sum::<f64>() / tail.len().max(1) as f64
            };
            let strain = last_second(&t.strain_samples);
            m.insert("contact_force".into(), json!(last_second(&t.force_samples)));
            m.insert("strain".into(), json!(strain));
            m.insert(
                "analytic_force".into(),
                json!(t.analytic * strain / s.param("strain")),
            );
            m.insert("nominal_force".into(), json!(t.analytic));
        }
        "tunnelling" => {
            m.insert("passed".into(), json!(t.passed));
        }
        "soft_collision" => {
            m.insert("momentum_error".into(), json!(t.momentum_error));
        }
        "soft_stack" => {
            m.insert("top_drift".into(), json!(t.top_drift));
        }
        "cloth_drape" => {
            m.insert("sphere_clearance".into(), json!(t.sphere_clearance));
        }
        _ => {}
    }
}
