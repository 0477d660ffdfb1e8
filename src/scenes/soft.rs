//! Deformable-body scenes: builders, what they measure every frame, and their metrics
//! (SI units). Every one reports `finite`, `vertices`, `tets`, `triangles` and `colors`
//! (vertex colours) besides its own metrics.

use std::collections::BTreeMap;

use glam::{DVec3, Quat, Vec3};
use serde_json::{Value, json};

use super::{Scene, SceneError};
use crate::reference::NewtonProblem;
use crate::{
    AttachmentDesc, AttachmentHandle, BodyDesc, ClothMaterial, Collider, DeformableDesc,
    DeformableHandle, JointDesc, JointKind, SolidMaterial, TetMesh, TetPattern, TriMesh,
};

/// Seconds averaged by the static metrics (deflection, elongation): the last second of
/// the run, so a residual oscillation about the equilibrium does not count as error.
const STATIC_WINDOW: usize = 60;

/// What the deformable scenes measure.
#[derive(Default, Debug, Clone)]
pub(crate) struct SoftTracker {
    pub bodies: Vec<DeformableHandle>,
    /// The vertices whose mean displacement is the static metric (cantilever tip, bar or
    /// rod bottom), and its samples.
    pub probe: Option<Probe>,
    pub probe_samples: Vec<f32>,
    /// The f64 reference of the same mesh (static problem) and the probe's vertices.
    pub newton: Option<NewtonProblem>,
    /// Free fall: start centre of mass (f64) and the largest deviation from the
    /// implicit-Euler law.
    pub fall: Option<DVec3>,
    pub com_error: f64,
    /// Volume ratio farthest from 1 over the frames (free fall).
    pub volume_ratio: f32,
    pub min_volume_ratio: f32,
    pub inverted_elements: usize,
    /// Twisting beam: the driven end vertices (body, vertex, rest position, sign).
    pub drive: Vec<(DeformableHandle, u32, Vec3, f32)>,
    pub twist_rate: f32,
    pub max_strain: f32,
    pub attachments: Vec<AttachmentHandle>,
    pub max_attachment_error: f32,
    /// Heavy box on the rod: (box, weight) and the last second of the attachments'
    /// vertical force on it.
    pub carried: Option<(crate::BodyHandle, f32)>,
    pub reaction_samples: Vec<f32>,
    /// Analytic value of the static metric.
    pub analytic: f64,
}

/// A group of vertices whose mean position along `dir` is sampled every frame.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub body: DeformableHandle,
    pub vertices: Vec<u32>,
    pub dir: Vec3,
    /// The mean along `dir` in the rest shape (as placed).
    pub rest: f64,
}

impl Probe {
    fn new(
        s: &Scene,
        body: DeformableHandle,
        vertices: Vec<u32>,
        dir: Vec3,
    ) -> Result<Self, SceneError> {
        let d = s.world.deformable(body)?;
        let x = d.positions();
        let rest = vertices
            .iter()
            .map(|&v| Vec3::from(x[v as usize]).dot(dir) as f64)
            .sum::<f64>()
            / vertices.len() as f64;
        Ok(Self {
            body,
            vertices,
            dir,
            rest,
        })
    }
}

impl SoftTracker {
    fn new() -> Self {
        Self {
            volume_ratio: 1.0,
            min_volume_ratio: f32::INFINITY,
            ..Default::default()
        }
    }
}

pub(super) fn positive(s: &Scene, name: &str) -> Result<f32, SceneError> {
    let v = s.param(name);
    if v.is_nan() || v <= 0.0 || !v.is_finite() {
        return Err(SceneError::BadParam {
            param: name.into(),
            value: v,
            reason: "must be finite and > 0".into(),
        });
    }
    Ok(v as f32)
}

pub(super) fn cells(s: &Scene, name: &str) -> Result<u32, SceneError> {
    let v = s.param(name);
    if !(1.0..=512.0).contains(&v) || v.fract() != 0.0 {
        return Err(SceneError::BadParam {
            param: name.into(),
            value: v,
            reason: "an integer in [1, 512]".into(),
        });
    }
    Ok(v as u32)
}

/// Cells across a section of `width` for `along` cells over `length` (cubic-ish cells,
/// at least one).
fn across(length: f32, width: f32, along: u32) -> u32 {
    ((along as f32 * width / length).round() as u32).max(1)
}

pub(super) fn vertices_where(mesh: &TetMesh, f: impl Fn(Vec3) -> bool) -> Vec<u32> {
    mesh.vertices
        .iter()
        .enumerate()
        .filter(|(_, p)| f(**p))
        .map(|(i, _)| i as u32)
        .collect()
}

pub(super) fn build(s: &mut Scene) -> Result<(), SceneError> {
    s.tracker.soft = SoftTracker::new();
    if super::contact::CONTACT_SCENES.contains(&s.name) {
        return super::contact::build(s);
    }
    match s.name {
        "cantilever" => cantilever(s),
        "hanging_bar" => hanging_bar(s),
        "soft_free_fall" => soft_free_fall(s),
        "twisting_beam" => twisting_beam(s),
        "cloth_hang" => cloth_hang(s),
        "soft_on_chain" => soft_on_chain(s),
        other => Err(SceneError::UnknownScene(other.into())),
    }
}

/// A beam along x clamped at x = 0 (its end face pinned), under gravity.
fn cantilever(s: &mut Scene) -> Result<(), SceneError> {
    let (length, height) = (positive(s, "length")?, positive(s, "height")?);
    let material = SolidMaterial {
        youngs: positive(s, "youngs")?,
        poisson: s.param("poisson") as f32,
        density: positive(s, "density")?,
        damping: 0.0,
        ..Default::default()
    };
    let n = cells(s, "cells")?;
    let m = across(length, height, n);
    let mesh = TetMesh::box_grid(
        Vec3::new(length, height, height),
        [n, m, m],
        TetPattern::Six,
    );
    let eps = 1e-4 * length;
    let pinned = vertices_where(&mesh, |p| p.x < -0.5 * length + eps);
    let tip = vertices_where(&mesh, |p| p.x > 0.5 * length - eps);
    let place = (Vec3::new(0.5 * length, 1.0, 0.0), Quat::IDENTITY);
    let g = s.world.config.gravity;
    let newton = NewtonProblem::statics(&mesh, &material, place, &pinned, g)?;
    let desc = DeformableDesc::solid(mesh, material)
        .at(place.0)
        .pinned(pinned);
    let h = s.world.add_deformable(desc)?;
    let probe = Probe::new(s, h, tip, -Vec3::Y)?;
    let t = &mut s.tracker.soft;
    t.bodies.push(h);
    t.probe = Some(probe);
    t.newton = Some(newton);
    // Euler–Bernoulli: ρ g A L⁴ / (8 E I), A = h², I = h⁴/12.
    let (rho, l, hh, e) = (
        material.density as f64,
        length as f64,
        height as f64,
        material.youngs as f64,
    );
    t.analytic = 3.0 * rho * g.length() as f64 * l.powi(4) / (2.0 * e * hh * hh);
    Ok(())
}

/// A square bar hanging from its top face (pinned), along −y.
fn hanging_bar(s: &mut Scene) -> Result<(), SceneError> {
    let length = positive(s, "length")?;
    let width = 0.1 * length;
    let material = SolidMaterial {
        youngs: positive(s, "youngs")?,
        poisson: s.param("poisson") as f32,
        density: positive(s, "density")?,
        damping: 0.0,
        ..Default::default()
    };
    let n = cells(s, "cells")?;
    let m = across(length, width, n);
    let mesh = TetMesh::box_grid(Vec3::new(width, length, width), [m, n, m], TetPattern::Six);
    let eps = 1e-4 * length;
    let pinned = vertices_where(&mesh, |p| p.y > 0.5 * length - eps);
    let bottom = vertices_where(&mesh, |p| p.y < -0.5 * length + eps);
    let place = (Vec3::new(0.0, 0.5 * length + 1.0, 0.0), Quat::IDENTITY);
    let g = s.world.config.gravity;
    let newton = NewtonProblem::statics(&mesh, &material, place, &pinned, g)?;
    let h = s.world.add_deformable(
        DeformableDesc::solid(mesh, material)
            .at(place.0)
            .pinned(pinned),
    )?;
    let probe = Probe::new(s, h, bottom, -Vec3::Y)?;
    let t = &mut s.tracker.soft;
    t.bodies.push(h);
    t.probe = Some(probe);
    t.newton = Some(newton);
    let (rho, l, e) = (
        material.density as f64,
        length as f64,
        material.youngs as f64,
    );
    t.analytic = rho * g.length() as f64 * l * l / (2.0 * e);
    Ok(())
}

/// A soft cube falling freely (no ground): its centre of mass must follow the
/// implicit-Euler law and its volume must not change.
fn soft_free_fall(s: &mut Scene) -> Result<(), SceneError> {
    let material = SolidMaterial {
        youngs: positive(s, "youngs")?,
        poisson: 0.3,
        density: 1000.0,
        damping: 0.0,
        ..Default::default()
    };
    let n = cells(s, "cells")?;
    let mesh = TetMesh::box_grid(Vec3::splat(0.2), [n, n, n], TetPattern::Six);
    let h = s.world.add_deformable(
        DeformableDesc::solid(mesh, material)
            .at(Vec3::new(0.0, 10.0, 0.0))
            .rotated(Quat::from_rotation_z(0.3)),
    )?;
    let com = s.world.deformable(h)?.center_of_mass().as_dvec3();
    let t = &mut s.tracker.soft;
    t.bodies.push(h);
    t.fall = Some(com);
    Ok(())
}

/// A beam whose end faces are driven in opposite rotation about its axis, `turns` full
/// turns of relative twist over the run's first four seconds (then held).
fn twisting_beam(s: &mut Scene) -> Result<(), SceneError> {
    let turns = positive(s, "turns")?;
    let material = SolidMaterial {
        youngs: positive(s, "youngs")?,
        poisson: 0.4,
        density: 1000.0,
        damping: 0.0,
        ..Default::default()
    };
    let (length, height) = (1.0f32, 0.1f32);
    let n = cells(s, "cells")?;
    let m = across(length, height, n);
    let mesh = TetMesh::box_grid(
        Vec3::new(length, height, height),
        [n, m, m],
        TetPattern::Six,
    );
    let eps = 1e-4;
    let ends: Vec<(u32, Vec3, f32)> = mesh
        .vertices
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            if p.x < -0.5 * length + eps {
                Some((i as u32, *p, -1.0))
            } else if p.x > 0.5 * length - eps {
                Some((i as u32, *p, 1.0))
            } else {
                None
            }
        })
        .collect();
    let at = Vec3::new(0.0, 1.0, 0.0);
    let h = s.world.add_deformable(
        DeformableDesc::solid(mesh, material)
            .at(at)
            .pinned(ends.iter().map(|e| e.0)),
    )?;
    let t = &mut s.tracker.soft;
    t.bodies.push(h);
    t.drive = ends
        .into_iter()
        .map(|(v, p, sign)| (h, v, p + at, sign))
        .collect();
    // Each end turns half the relative twist, over 4 s.
    t.twist_rate = turns * std::f32::consts::PI / 4.0;
    Ok(())
}

/// A square cloth released flat, pinned at the two corners of one edge: it swings down
/// and hangs.
fn cloth_hang(s: &mut Scene) -> Result<(), SceneError> {
    let res = cells(s, "resolution")?;
    let material = ClothMaterial {
        youngs: positive(s, "youngs")?,
        bending: Some(s.param("bend") as f32),
        ..Default::default()
    };
    let size = 1.0;
    // Horizontal at 2 m; vertices 0 and `res` are the corners of the edge at z = −0.5.
    let mesh = TriMesh::grid(size, size, res, res);
    let corners = [0u32, res];
    let h = s.world.add_deformable(
        DeformableDesc::cloth(mesh, material)
            .at(Vec3::new(0.0, 2.0, 0.0))
            .pinned(corners),
    )?;
    s.tracker.soft.bodies.push(h);
    Ok(())
}

/// Two-way coupling: a soft block hanging from the end of a rigid chain, and a heavy rigid
/// box (`mass_ratio` × the rod's mass) hanging from a soft rod pinned at its top.
fn soft_on_chain(s: &mut Scene) -> Result<(), SceneError> {
    let ratio = positive(s, "mass_ratio")?;
    let w = &mut s.world;
    // The chain: five 0.3 m links from a world pivot at (−1, 4, 0), along −y.
    let pivot = Vec3::new(-1.0, 4.0, 0.0);
    let half = Vec3::new(0.03, 0.15, 0.03);
    let mut prev = None;
    let mut y = pivot.y;
    for _ in 0..5 {
        let link = w.add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(pivot.x, y - half.y, 0.0))
                .with_collider(Collider::cuboid(half)?.with_density(1000.0)),
        )?;
        let joint = match prev {
            None => JointDesc::new(JointKind::Ball, link, None).anchors(Vec3::Y * half.y, pivot),
            Some(p) => JointDesc::new(JointKind::Ball, p, Some(link))
                .anchors(-Vec3::Y * half.y, Vec3::Y * half.y),
        };
        w.add_joint(joint)?;
        prev = Some(link);
        y -= 2.0 * half.y;
    }
    let last = prev.expect("five links");
    // The soft block: a 0.2 m rubber cube whose top face hangs from the last link's end,
    // 1 mm below it (bodies may not start touching: `PhysicsError::IntersectingStart`).
    let glue = 1e-3;
    let block = TetMesh::box_grid(Vec3::splat(0.2), [4, 4, 4], TetPattern::Six);
    let top = vertices_where(&block, |p| p.y > 0.0999);
    let block_h = w.add_deformable(
        DeformableDesc::solid(block, SolidMaterial::default()).at(Vec3::new(
            pivot.x,
            y - 0.1 - glue,
            0.0,
        )),
    )?;
    let mut attachments = Vec::new();
    for &v in &top {
        attachments.push(w.add_attachment(AttachmentDesc::new(block_h, v, last))?);
    }
    // The rod: 1 m, 2 cm square, 1 kg (ρ = 2,500 kg/m³), E = 100 MPa, pinned at its top.
    let (length, side, rho, e) = (1.0f32, 0.02f32, 2500.0f32, 1e8f32);
    let rod = TetMesh::box_grid(Vec3::new(side, length, side), [1, 10, 1], TetPattern::Six);
    let pinned = vertices_where(&rod, |p| p.y > 0.4999);
    let bottom = vertices_where(&rod, |p| p.y < -0.4999);
    let rod_at = Vec3::new(1.0, 3.5, 0.0);
    let material = SolidMaterial {
        youngs: e,
        poisson: 0.3,
        density: rho,
        damping: 0.0,
        ..Default::default()
    };
    let rod_h = w.add_deformable(
        DeformableDesc::solid(rod, material)
            .at(rod_at)
            .pinned(pinned),
    )?;
    let rod_mass = rho * side * side * length;
    let box_mass = ratio * rod_mass;
    let box_half = Vec3::splat(0.1);
    let bx = w.add_body(
        BodyDesc::dynamic()
            .at(rod_at - Vec3::Y * (0.5 * length + box_half.y + glue))
            .with_mass(box_mass)
            .with_collider(Collider::cuboid(box_half)?),
    )?;
    for &v in &bottom {
        attachments.push(w.add_attachment(AttachmentDesc::new(rod_h, v, bx))?);
    }
    let g = w.config.gravity.length();
    let probe = Probe::new(s, rod_h, bottom, -Vec3::Y)?;
    let t = &mut s.tracker.soft;
    t.bodies.extend([block_h, rod_h]);
    t.attachments = attachments;
    t.probe = Some(probe);
    t.carried = Some((bx, box_mass * g));
    // F L/(E A) for the box, plus the rod's own weight ρ g L²/(2E).
    let (f, l, ee, a) = (
        (box_mass * g) as f64,
        length as f64,
        e as f64,
        (side * side) as f64,
    );
    t.analytic = f * l / (ee * a) + rho as f64 * g as f64 * l * l / (2.0 * ee);
    Ok(())
}

/// Before a frame: the driven vertices' targets.
pub(super) fn drive(s: &mut Scene) -> Result<(), crate::PhysicsError> {
    let t = &s.tracker.soft;
    if t.drive.is_empty() {
        return Ok(());
    }
    let time = ((s.frame + 1) as f32 * s.world.config.dt).min(4.0);
    let mut by_body: BTreeMap<DeformableHandle, Vec<(u32, Vec3)>> = BTreeMap::new();
    for &(h, v, p, sign) in &t.drive {
        let q = Quat::from_rotation_x(sign * t.twist_rate * time);
        let axis = Vec3::new(p.x, 1.0, 0.0);
        by_body
            .entry(h)
            .or_default()
            .push((v, axis + q * (p - axis)));
    }
    for (h, targets) in by_body {
        s.world.drive_vertices(h, &targets)?;
    }
    Ok(())
}

/// After a frame: the scene's measurements.
pub(super) fn track(s: &mut Scene) {
    let w = &s.world;
    let frame = s.frame as f64;
    let t = &mut s.tracker.soft;
    let mut finite = true;
    for &h in &t.bodies {
        let Ok(d) = w.deformable(h) else { continue };
        finite &= !d.frozen() && d.positions().iter().all(|p| p.is_finite());
        let (min_j, inverted) = d.min_volume_ratio();
        if d.tets().next().is_some() {
            t.min_volume_ratio = t.min_volume_ratio.min(min_j);
            t.inverted_elements += inverted;
        }
        if d.kind() == crate::deformable::DeformableKind::Cloth {
            let x = d.positions();
            let rest = d.rest_positions();
            for [a, b] in d.surface_edges() {
                let (a, b) = (a as usize, b as usize);
                let l = (x[a] - x[b]).length();
                let l0 = (rest[a] - rest[b]).length();
                t.max_strain = t.max_strain.max((l / l0 - 1.0).abs());
            }
        }
    }
    s.tracker.finite &= finite;
    if let Some(p) = &t.probe
        && let Ok(d) = w.deformable(p.body)
    {
        let x = d.positions();
        let mean: Vec3 = p
            .vertices
            .iter()
            .map(|&v| Vec3::from(x[v as usize]))
            .sum::<Vec3>()
            / p.vertices.len() as f32;
        t.probe_samples.push(mean.dot(p.dir));
    }
    if let Some(c0) = t.fall
        && let Ok(d) = w.deformable(t.bodies[0])
    {
        let x = d.positions();
        let m = d.masses();
        let total: f64 = m.iter().map(|&m| m as f64).sum();
        let com: DVec3 = x
            .iter()
            .zip(m)
            .map(|(p, &mi)| Vec3::from(*p).as_dvec3() * mi as f64)
            .sum::<DVec3>()
            / total;
        let h = w.config.dt as f64;
        let g = w.config.gravity.as_dvec3();
        // x_n = x₀ + g h² n(n+1)/2 for implicit Euler from rest.
        let expected = c0 + g * (h * h * frame * (frame + 1.0) / 2.0);
        t.com_error = t.com_error.max((com - expected).length());
        let ratio = d.volume() / rest_volume(&d);
        if (ratio - 1.0).abs() > (t.volume_ratio - 1.0).abs() {
            t.volume_ratio = ratio;
        }
    }
    for &a in &t.attachments {
        if let Ok(e) = w.attachment_error(a) {
            t.max_attachment_error = t.max_attachment_error.max(e);
        }
    }
    if let Some((bx, _)) = t.carried {
        // The attachments' force on the carried box (λ is the force on the body): its
        // vertical component is the weight the rod carries.
        let on_box: f32 = t
            .attachments
            .iter()
            .filter(|&&a| w.attachment_body(a).ok() == Some(bx))
            .filter_map(|&a| w.attachment_force(a).ok())
            .map(|f| f.y)
            .sum();
        t.reaction_samples.push(on_box);
    }
}

fn rest_volume(d: &crate::DeformableView<'_>) -> f32 {
    let rest = d.rest_positions();
    d.tets()
        .map(|t| crate::deformable::mesh::tet_volume(t.map(|v| Vec3::from(rest[v as usize]))))
        .sum()
}

/// Mean of the last [`STATIC_WINDOW`] samples.
fn settled(samples: &[f32]) -> f64 {
    let tail = &samples[samples.len().saturating_sub(STATIC_WINDOW)..];
    tail.iter().map(|&x| x as f64).sum::<f64>() / tail.len().max(1) as f64
}

/// The metrics of a deformable scene.
pub(super) fn metrics(s: &Scene, m: &mut BTreeMap<String, Value>) {
    let w = &s.world;
    let t = &s.tracker.soft;
    let (mut vertices, mut tets, mut triangles) = (0, 0, 0);
    for &h in &t.bodies {
        if let Ok(d) = w.deformable(h) {
            vertices += d.vertex_count();
            tets += d.tets().count();
            triangles += d.triangles().count();
        }
    }
    m.insert("vertices".into(), json!(vertices));
    m.insert("tets".into(), json!(tets));
    m.insert("triangles".into(), json!(triangles));
    m.insert("colors".into(), json!(w.stats().vertex_colors));
    // The probe's mean displacement along its direction, settled, and the Newton
    // solution's.
    let displacement = || -> Option<f64> {
        let p = t.probe.as_ref()?;
        Some(settled(&t.probe_samples) - p.rest)
    };
    let newton_displacement = || -> Option<f64> {
        let (probe, problem) = (t.probe.as_ref()?, t.newton.as_ref()?);
        let sol = problem.solve_static().ok()?;
        let dir = probe.dir.as_dvec3();
        let moved: f64 = probe
            .vertices
            .iter()
            .map(|&v| (sol.x[v as usize] - problem.rest[v as usize]).dot(dir))
            .sum();
        Some(moved / probe.vertices.len() as f64)
    };
    match s.name {
        "cantilever" => {
            m.insert("tip_deflection".into(), json!(displacement()));
            m.insert("analytic_tip_deflection".into(), json!(t.analytic));
            m.insert("newton_tip_deflection".into(), json!(newton_displacement()));
        }
        "hanging_bar" => {
            m.insert("elongation".into(), json!(displacement()));
            m.insert("analytic_elongation".into(), json!(t.analytic));
            m.insert("newton_elongation".into(), json!(newton_displacement()));
        }
        "soft_free_fall" => {
            m.insert("com_error".into(), json!(t.com_error));
            m.insert("volume_ratio".into(), json!(t.volume_ratio));
        }
        "twisting_beam" => {
            m.insert("inverted_elements".into(), json!(t.inverted_elements));
            m.insert("min_volume_ratio".into(), json!(t.min_volume_ratio));
        }
        "cloth_hang" => {
            m.insert("max_strain".into(), json!(t.max_strain));
        }
        "soft_on_chain" => {
            m.insert("max_attachment_error".into(), json!(t.max_attachment_error));
            // The top is pinned: how far the bottom went down is the rod's elongation.
            m.insert("rod_elongation".into(), json!(displacement()));
            m.insert("analytic_rod_elongation".into(), json!(t.analytic));
            if let Some((_, weight)) = t.carried {
                m.insert(
                    "box_reaction_ratio".into(),
                    json!(settled(&t.reaction_samples) / weight as f64),
                );
            }
        }
        _ => {}
    }
}
