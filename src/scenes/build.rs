//! Scene builders. Y is up, the ground is the plane y = 0, units are SI.

use glam::{Quat, Vec3};

use super::{Scene, SceneError};
use crate::{
    BodyDesc, BodyHandle, Collider, JointDesc, JointHandle, JointKind, Motor, PhysicsError,
    PhysicsWorld,
};

pub(super) fn build(s: &mut Scene) -> Result<(), SceneError> {
    match s.name {
        "stack" => stack(s),
        "pyramid" | "large_pyramid" => pyramid(s),
        "many_pyramids" => many_pyramids(s),
        "joint_grid" => joint_grid(s),
        "slope" => slope(s),
        "slide" => slide(s),
        "springs_ratio" => springs_ratio(s),
        "spring_chain" => spring_chain(s),
        "pendulum" => pendulum(s, false),
        "two_heavy_balls" => pendulum(s, true),
        "card_tower" => card_tower(s),
        "breakable_wall" => breakable_wall(s),
        "hinge_limit" => hinge_limit(s),
        "motor" => motor(s),
        "pile" => pile(s),
        "arch" => arch(s),
        "spinning_box" => spinning_box(s),
        "free_collision" => free_collision(s),
        other => Err(SceneError::UnknownScene(other.into())),
    }
}

fn count(s: &Scene, name: &str, min: f64, max: f64) -> Result<usize, SceneError> {
    let v = s.param(name);
    if v < min || v > max || v.fract() != 0.0 {
        return Err(SceneError::BadParam {
            param: name.into(),
            value: v,
            reason: format!("an integer in [{min}, {max}]"),
        });
    }
    Ok(v as usize)
}

fn positive(s: &Scene, name: &str) -> Result<f32, SceneError> {
    let v = s.param(name);
    if v.is_nan() || v <= 0.0 {
        return Err(SceneError::BadParam {
            param: name.into(),
            value: v,
            reason: "must be > 0".into(),
        });
    }
    Ok(v as f32)
}

fn ground(w: &mut PhysicsWorld, mu: f32) -> Result<BodyHandle, PhysicsError> {
    w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y)?.with_friction(mu)))
}

fn cuboid(
    w: &mut PhysicsWorld,
    pos: Vec3,
    rot: Quat,
    half: Vec3,
    mu: f32,
) -> Result<BodyHandle, PhysicsError> {
    w.add_body(
        BodyDesc::dynamic()
            .at(pos)
            .rotated(rot)
            .with_collider(Collider::cuboid(half)?.with_friction(mu)),
    )
}

/// Tracks the drift of every dynamic body added so far.
fn track_drift(s: &mut Scene) {
    let w = &s.world;
    s.tracker.drift_bodies = w
        .body_handles()
        .iter()
        .filter_map(|&h| {
            w.body(h)
                .ok()
                .filter(|b| b.kind == crate::BodyKind::Dynamic)
                .map(|b| (h, b.position))
        })
        .collect();
}

fn stack(s: &mut Scene) -> Result<(), SceneError> {
    let n = count(s, "boxes", 1.0, 1000.0)?;
    let size = positive(s, "size")?;
    ground(&mut s.world, 0.5)?;
    for i in 0..n {
        let y = size * (0.5 + i as f32);
        cuboid(
            &mut s.world,
            Vec3::new(0.0, y, 0.0),
            Quat::IDENTITY,
            Vec3::splat(size / 2.0),
            0.5,
        )?;
    }
    track_drift(s);
    Ok(())
}

fn pyramid(s: &mut Scene) -> Result<(), SceneError> {
    let base = count(s, "base", 1.0, 1000.0)?;
    ground(&mut s.world, 0.5)?;
    pyramid_at(&mut s.world, 0.0, 0.0, base)?;
    track_drift(s);
    Ok(())
}

/// A 2D pyramid of unit boxes (μ = 0.5) in the x–y plane, `base` boxes in the bottom row,
/// centred on x = `cx` at depth z = `cz`, resting on y = 0.
fn pyramid_at(w: &mut PhysicsWorld, cx: f32, cz: f32, base: usize) -> Result<(), SceneError> {
    for row in 0..base {
        let n = base - row;
        for i in 0..n {
            let x = cx + i as f32 - (n as f32 - 1.0) / 2.0;
            cuboid(
                w,
                Vec3::new(x, 0.5 + row as f32, cz),
                Quat::IDENTITY,
                Vec3::splat(0.5),
                0.5,
            )?;
        }
    }
    Ok(())
}

/// `count × count` pyramids like [`pyramid`], in the x–z plane, 1 m apart along x (between
/// the bottom rows) and 1 m apart along z (boxes are 1 m deep, rows 2 m apart): they never
/// touch unless one collapses.
fn many_pyramids(s: &mut Scene) -> Result<(), SceneError> {
    let base = count(s, "base", 1.0, 1000.0)?;
    let count = count(s, "count", 1.0, 100.0)?;
    let (pitch_x, pitch_z) = (base as f32 + 1.0, 2.0f32);
    ground(&mut s.world, 0.5)?;
    for gx in 0..count {
        for gz in 0..count {
            let cx = (gx as f32 - (count as f32 - 1.0) / 2.0) * pitch_x;
            let cz = (gz as f32 - (count as f32 - 1.0) / 2.0) * pitch_z;
            pyramid_at(&mut s.world, cx, cz, base)?;
        }
    }
    track_drift(s);
    Ok(())
}

/// Ball of radius 0.25 m (1000 kg/m³) at every node of a `rows × cols` grid of 1 m pitch in
/// the x–y plane; each is joined by a ball joint to its right and lower neighbours (anchors
/// half-way between the centres), and the top row is pinned to the world 0.5 m above its
/// centres. The balls never touch (0.5 m gaps), so this is a pure joint benchmark:
/// `max_joint_error` is the largest anchor gap of any joint in any frame.
fn joint_grid(s: &mut Scene) -> Result<(), SceneError> {
    let rows = count(s, "rows", 1.0, 1000.0)?;
    let cols = count(s, "cols", 1.0, 1000.0)?;
    let (pitch, radius) = (1.0f32, 0.25f32);
    let top = rows as f32 * pitch + 1.0;
    let w = &mut s.world;
    let ball = Collider::ball(radius)?;
    let mut grid = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let pos = Vec3::new(
                (c as f32 - (cols as f32 - 1.0) / 2.0) * pitch,
                top - r as f32 * pitch,
                0.0,
            );
            grid.push(w.add_body(BodyDesc::dynamic().at(pos).with_collider(ball.clone()))?);
        }
    }
    let half = pitch / 2.0;
    let mut joints = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            let b = grid[r * cols + c];
            if r == 0 {
                let p = w.body(b)?.position;
                joints.push(
                    w.add_joint(
                        JointDesc::new(JointKind::Ball, b, None)
                            .anchors(Vec3::Y * half, p + Vec3::Y * half),
                    )?,
                );
            }
            if c + 1 < cols {
                joints.push(
                    w.add_joint(
                        JointDesc::new(JointKind::Ball, b, Some(grid[r * cols + c + 1]))
                            .anchors(Vec3::X * half, -Vec3::X * half),
                    )?,
                );
            }
            if r + 1 < rows {
                joints.push(
                    w.add_joint(
                        JointDesc::new(JointKind::Ball, b, Some(grid[(r + 1) * cols + c]))
                            .anchors(-Vec3::Y * half, Vec3::Y * half),
                    )?,
                );
            }
        }
    }
    s.tracker.error_joints = joints;
    Ok(())
}

fn slope(s: &mut Scene) -> Result<(), SceneError> {
    let theta = (s.param("angle_deg") as f32).to_radians();
    let mu = s.param("mu") as f32;
    if !(0.0..1.5).contains(&theta) || mu < 0.0 {
        return Err(SceneError::BadParam {
            param: "angle_deg".into(),
            value: s.param("angle_deg"),
            reason: "in [0, 86)".into(),
        });
    }
    let rot = Quat::from_rotation_z(-theta);
    let normal = rot * Vec3::Y;
    let down = rot * Vec3::X; // points down the incline
    let w = &mut s.world;
    w.add_body(
        BodyDesc::fixed()
            .rotated(rot)
            .with_collider(Collider::cuboid(Vec3::new(20.0, 0.5, 2.0))?.with_friction(mu)),
    )?;
    let start = -down * 8.0 + normal * 1.0;
    let b = cuboid(w, start, rot, Vec3::splat(0.5), mu)?;
    s.tracker.probe = Some((b, start, down));
    Ok(())
}

fn slide(s: &mut Scene) -> Result<(), SceneError> {
    let v0 = positive(s, "v0")?;
    let mu = positive(s, "mu")?;
    let w = &mut s.world;
    ground(w, mu)?;
    let start = Vec3::new(0.0, 0.5, 0.0);
    let b = w.add_body(
        BodyDesc::dynamic()
            .at(start)
            .with_velocity(Vec3::X * v0, Vec3::ZERO)
            .with_collider(Collider::cuboid(Vec3::splat(0.5))?.with_friction(mu)),
    )?;
    s.tracker.probe = Some((b, start, Vec3::X));
    Ok(())
}

fn block(w: &mut PhysicsWorld, pos: Vec3, fixed: bool) -> Result<BodyHandle, PhysicsError> {
    let c = Collider::cuboid(Vec3::splat(0.15))?;
    let d = if fixed {
        BodyDesc::fixed()
    } else {
        BodyDesc::dynamic().with_mass(1.0)
    };
    w.add_body(d.at(pos).with_collider(c))
}

fn spring(
    w: &mut PhysicsWorld,
    a: BodyHandle,
    b: BodyHandle,
    rest: f32,
    k: f32,
) -> Result<JointHandle, PhysicsError> {
    w.add_joint(JointDesc::new(
        JointKind::Spring {
            rest_length: rest,
            stiffness: k,
        },
        a,
        Some(b),
    ))
}

fn stiffnesses(s: &Scene) -> Result<(f32, f32), SceneError> {
    let ratio = positive(s, "ratio")?;
    let k = positive(s, "k_stiff")?;
    Ok((k, k / ratio))
}

fn springs_ratio(s: &mut Scene) -> Result<(), SceneError> {
    let (k_stiff, k_soft) = stiffnesses(s)?;
    let g = s.world.config.gravity.length();
    let top = Vec3::new(0.0, 10.0, 0.0);
    let w = &mut s.world;
    let b0 = block(w, top, true)?;
    let b1 = block(w, top - Vec3::Y, false)?;
    let b2 = block(w, top - 2.0 * Vec3::Y, false)?;
    // Static extensions: the stiff spring carries both blocks, the soft one the lower.
    let j1 = spring(w, b0, b1, 1.0, k_stiff)?;
    let j2 = spring(w, b1, b2, 1.0, k_soft)?;
    s.tracker.springs = vec![
        (j1, 1.0, 1.0 + 2.0 * g / k_stiff),
        (j2, 1.0, 1.0 + g / k_soft),
    ];
    Ok(())
}

fn spring_chain(s: &mut Scene) -> Result<(), SceneError> {
    let (k_stiff, k_soft) = stiffnesses(s)?;
    let g = s.world.config.gravity.length() as f64;
    let n = 10;
    let rest = 0.9f32;
    let y = 5.0f32;
    let ks: Vec<f32> = (0..=n)
        .map(|i| if i % 2 == 0 { k_stiff } else { k_soft })
        .collect();
    // The f64 static equilibrium; the blocks start there, so the metric measures how far
    // the fixed iteration budget lets the chain drift from it (VBD sags, Fig. 4d/e).
    let reference = super::static_spring_chain(
        [[0.0, y as f64], [(n + 1) as f64, y as f64]],
        &vec![1.0; n],
        &ks.iter()
            .map(|&k| (k as f64, rest as f64))
            .collect::<Vec<_>>(),
        g,
    );
    let mut pts = vec![[0.0, y as f64]];
    pts.extend(reference);
    pts.push([(n + 1) as f64, y as f64]);
    let w = &mut s.world;
    let mut bodies = Vec::new();
    for (i, p) in pts.iter().enumerate() {
        let fixed = i == 0 || i == n + 1;
        bodies.push(block(w, Vec3::new(p[0] as f32, p[1] as f32, 0.0), fixed)?);
    }
    for i in 0..=n {
        let j = spring(w, bodies[i], bodies[i + 1], rest, ks[i])?;
        let (a, b) = (pts[i], pts[i + 1]);
        let len = ((b[0] - a[0]).powi(2) + (b[1] - a[1]).powi(2)).sqrt();
        s.tracker.springs.push((j, rest, len as f32));
    }
    Ok(())
}

fn pendulum(s: &mut Scene, two_balls: bool) -> Result<(), SceneError> {
    let links = count(s, "links", 1.0, 10_000.0)?;
    let ratio = positive(s, "mass_ratio")?;
    let (len, m_link, radius) = (0.25f32, 1.0f32, 0.5f32);
    let half = Vec3::new(len / 2.0, 0.025, 0.025);
    let link_inertia = Vec3::new(
        m_link / 3.0 * (half.y * half.y + half.z * half.z),
        m_link / 3.0 * (half.x * half.x + half.z * half.z),
        m_link / 3.0 * (half.x * half.x + half.y * half.y),
    );
    let pivot = Vec3::new(0.0, 20.0, 0.0);
    let w = &mut s.world;
    let ball = |w: &mut PhysicsWorld, x: f32| {
        let m = m_link * ratio;
        w.add_body(
            BodyDesc::dynamic()
                .at(pivot + Vec3::X * x)
                .with_mass(m)
                .with_collider(Collider::ball(radius)?),
        )
    };
    let mut x = 0.0;
    let mut prev: Option<(BodyHandle, Vec3)> = None; // body and its right anchor
    if two_balls {
        let b = ball(w, radius)?;
        w.add_joint(
            JointDesc::new(JointKind::Ball, b, None).anchors(Vec3::new(-radius, 0.0, 0.0), pivot),
        )?;
        prev = Some((b, Vec3::X * radius));
        x = 2.0 * radius;
    }
    let mut chain = Vec::new();
    for _ in 0..links {
        let l = w.add_body(
            BodyDesc::dynamic()
                .at(pivot + Vec3::X * (x + len / 2.0))
                .with_mass(m_link)
                .with_inertia(link_inertia),
        )?;
        let j = match prev {
            Some((p, anchor)) => w.add_joint(
                JointDesc::new(JointKind::Ball, p, Some(l))
                    .anchors(anchor, Vec3::new(-len / 2.0, 0.0, 0.0)),
            )?,
            None => w.add_joint(
                JointDesc::new(JointKind::Ball, l, None)
                    .anchors(Vec3::new(-len / 2.0, 0.0, 0.0), pivot),
            )?,
        };
        if prev.is_some() || !two_balls {
            chain.push(j);
        }
        prev = Some((l, Vec3::new(len / 2.0, 0.0, 0.0)));
        x += len;
    }
    let b = ball(w, x + radius)?;
    let (p, anchor) = prev.unwrap();
    chain.push(w.add_joint(
        JointDesc::new(JointKind::Ball, p, Some(b)).anchors(anchor, Vec3::new(-radius, 0.0, 0.0)),
    )?);
    s.tracker.chain = chain;
    s.tracker.chain_rest = links as f32 * len + if two_balls { 0.0 } else { radius };
    Ok(())
}

fn card_tower(s: &mut Scene) -> Result<(), SceneError> {
    let levels = count(s, "levels", 1.0, 20.0)?;
    let mu = s.param("mu") as f32;
    let (hh, ht, hd) = (0.25f32, 0.005f32, 0.18f32); // card half height, thickness, depth
    let phi = 15f32.to_radians();
    let foot = hh * phi.sin(); // horizontal half-span of one leaning card
    let apex = 2.0 * hh * phi.cos() + ht;
    let spacing = 4.0 * foot + 4.0 * ht;
    let w = &mut s.world;
    ground(w, mu)?;
    let card = Collider::cuboid(Vec3::new(ht, hh, hd))?
        .with_friction(mu)
        .with_density(500.0);
    let flat = Collider::cuboid(Vec3::new(spacing / 2.0, ht, hd))?
        .with_friction(mu)
        .with_density(500.0);
    let mut base_y = 0.0f32;
    for level in 0..levels {
        let frames = levels - level;
        for f in 0..frames {
            let cx = (f as f32 - (frames as f32 - 1.0) / 2.0) * spacing;
            for side in [-1.0f32, 1.0] {
                let pos = Vec3::new(cx + side * (foot + ht), base_y + hh * phi.cos() + ht, 0.0);
                let rot = Quat::from_rotation_z(side * phi);
                w.add_body(
                    BodyDesc::dynamic()
                        .at(pos)
                        .rotated(rot)
                        .with_collider(card.clone()),
                )?;
            }
        }
        base_y += apex;
        for f in 0..frames.saturating_sub(1) {
            let cx = (f as f32 + 0.5 - (frames as f32 - 1.0) / 2.0) * spacing;
            w.add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(cx, base_y + ht, 0.0))
                    .with_collider(flat.clone()),
            )?;
        }
        base_y += 2.0 * ht;
    }
    let ball = w.add_body(
        BodyDesc::dynamic()
            .at(Vec3::new(0.0, 0.2, 3.0))
            .with_mass(5.0)
            .with_collider(Collider::ball(0.1)?),
    )?;
    track_drift(s);
    s.tracker.drift_bodies.retain(|(h, _)| *h != ball);
    s.tracker.projectiles = vec![(120, ball, Vec3::new(0.0, 1.0, -10.0))];
    s.tracker.drift_until_frame = Some(120);
    Ok(())
}

fn breakable_wall(s: &mut Scene) -> Result<(), SceneError> {
    let rows = count(s, "rows", 1.0, 200.0)?;
    let cols = count(s, "cols", 1.0, 200.0)?;
    let fracture = positive(s, "fracture")?;
    let half = Vec3::new(0.25, 0.125, 0.125);
    let w = &mut s.world;
    ground(w, 0.6)?;
    let mut grid = vec![vec![BodyHandle(0); cols]; rows];
    for (r, row) in grid.iter_mut().enumerate() {
        for (c, cell) in row.iter_mut().enumerate() {
            let pos = Vec3::new(
                (c as f32 - (cols as f32 - 1.0) / 2.0) * 2.0 * half.x,
                half.y * (1.0 + 2.0 * r as f32),
                0.0,
            );
            *cell = cuboid(w, pos, Quat::IDENTITY, half, 0.6)?;
        }
    }
    let weld = |w: &mut PhysicsWorld, a: BodyHandle, b: BodyHandle, off: Vec3| {
        w.add_joint(
            JointDesc::new(JointKind::Fixed, a, Some(b))
                .anchors(off, -off)
                .breakable(fracture),
        )
    };
    for r in 0..rows {
        for c in 0..cols {
            if c + 1 < cols {
                weld(w, grid[r][c], grid[r][c + 1], Vec3::X * half.x)?;
            }
            if r + 1 < rows {
                weld(w, grid[r][c], grid[r + 1][c], Vec3::Y * half.y)?;
            }
        }
    }
    let height = 2.0 * half.y * rows as f32;
    let width = 2.0 * half.x * cols as f32;
    for (i, fx) in [-0.3f32, 0.0, 0.3].into_iter().enumerate() {
        let pos = Vec3::new(fx * width, height * (0.3 + 0.2 * i as f32), 4.0);
        let b = w.add_body(
            BodyDesc::dynamic()
                .at(pos)
                .with_collider(Collider::ball(0.3)?.with_density(1500.0)),
        )?;
        s.tracker
            .projectiles
            .push((20 + 15 * i as u32, b, Vec3::new(0.0, 2.0, -10.0)));
    }
    Ok(())
}

fn hinge_limit(s: &mut Scene) -> Result<(), SceneError> {
    let limit = (s.param("limit_deg") as f32).to_radians();
    if !(0.0..3.1).contains(&limit) {
        return Err(SceneError::BadParam {
            param: "limit_deg".into(),
            value: s.param("limit_deg"),
            reason: "in [0, 177]".into(),
        });
    }
    let w = &mut s.world;
    let pivot = Vec3::new(0.0, 5.0, 0.0);
    let bar = w.add_body(
        BodyDesc::dynamic()
            .at(pivot + Vec3::X)
            .with_collider(Collider::cuboid(Vec3::new(1.0, 0.1, 0.1))?),
    )?;
    let j = w.add_joint(
        JointDesc::new(
            JointKind::Revolute {
                axis: Vec3::Z,
                limits: Some((-limit, limit)),
                motor: None,
            },
            bar,
            None,
        )
        .anchors(Vec3::new(-1.0, 0.0, 0.0), pivot),
    )?;
    s.tracker.hinge = Some((j, limit));
    Ok(())
}

fn motor(s: &mut Scene) -> Result<(), SceneError> {
    let speed = s.param("speed") as f32;
    let torque = positive(s, "max_torque")?;
    let w = &mut s.world;
    let center = Vec3::new(0.0, 2.0, 0.0);
    let rot = Quat::from_rotation_x(std::f32::consts::FRAC_PI_2); // cylinder axis y → z
    let wheel = w.add_body(
        BodyDesc::dynamic()
            .at(center)
            .rotated(rot)
            .with_collider(Collider::cylinder(0.1, 0.5)?),
    )?;
    w.add_joint(
        JointDesc::new(
            JointKind::Revolute {
                axis: rot.conjugate() * Vec3::Z,
                limits: None,
                motor: Some(Motor {
                    target_velocity: speed,
                    max_torque: torque,
                }),
            },
            wheel,
            None,
        )
        .anchors(Vec3::ZERO, center),
    )?;
    // The motor turns B relative to A; with the wheel as A, the wheel turns at −speed.
    s.tracker.probe = Some((wheel, center, -Vec3::Z));
    s.tracker.probe_angular = true;
    Ok(())
}

fn pile(s: &mut Scene) -> Result<(), SceneError> {
    let n = count(s, "count", 1.0, 2_000_000.0)?;
    let sphere_mass = positive(s, "sphere_mass")?;
    let half = 0.25f32;
    let w = &mut s.world;
    ground(w, 0.6)?;
    // Stepped pyramid of columns: layer L is (side − L)² boxes.
    let mut side = 1usize;
    while (1..=side).map(|k| k * k).sum::<usize>() < n {
        side += 1;
    }
    let mut placed = 0;
    'layers: for layer in 0..side {
        let m = side - layer;
        for i in 0..m {
            for k in 0..m {
                if placed == n {
                    break 'layers;
                }
                let off = (m as f32 - 1.0) / 2.0;
                let pos = Vec3::new(
                    (i as f32 - off) * 2.0 * half,
                    half * (1.0 + 2.0 * layer as f32),
                    (k as f32 - off) * 2.0 * half,
                );
                cuboid(w, pos, Quat::IDENTITY, Vec3::splat(half), 0.6)?;
                placed += 1;
            }
        }
    }
    track_drift(s);
    let r = 1.0f32;
    let extent = side as f32 * half + r + 2.0;
    let density = sphere_mass / (4.0 / 3.0 * std::f32::consts::PI * r * r * r);
    let ball = s.world.add_body(
        BodyDesc::dynamic()
            .at(Vec3::new(-extent, r + 0.5, 0.0))
            .with_collider(Collider::ball(r)?.with_density(density)),
    )?;
    s.tracker.drift_bodies.retain(|(h, _)| *h != ball);
    s.tracker.projectiles = vec![(60, ball, Vec3::new(20.0, 1.0, 0.0))];
    s.tracker.drift_until_frame = Some(60);
    Ok(())
}

fn arch(s: &mut Scene) -> Result<(), SceneError> {
    let n = count(s, "blocks", 3.0, 200.0)?;
    let mu = s.param("mu") as f32;
    let (r_in, thick, depth) = (3.0f32, 0.6f32, 0.5f32);
    let w = &mut s.world;
    ground(w, mu)?;
    for i in 0..n {
        // Joints 1 mm wide: exactly coincident faces give the convex-convex query a
        // degenerate normal.
        let gap = 0.0005 / r_in;
        let (a0, a1) = (
            std::f32::consts::PI * i as f32 / n as f32,
            std::f32::consts::PI * (i + 1) as f32 / n as f32,
        );
        let (a0, a1) = (
            if i == 0 { a0 } else { a0 + gap },
            if i + 1 == n { a1 } else { a1 - gap },
        );
        let mut pts = Vec::new();
        for a in [a0, a1] {
            for r in [r_in, r_in + thick] {
                for z in [-depth, depth] {
                    pts.push(Vec3::new(r * a.cos(), r * a.sin(), z));
                }
            }
        }
        let center = pts.iter().copied().sum::<Vec3>() / pts.len() as f32;
        let local: Vec<Vec3> = pts.iter().map(|p| *p - center).collect();
        let c = Collider::convex_hull(&local)?.with_friction(mu);
        let com = c.mass_properties().local_com;
        w.add_body(BodyDesc::dynamic().at(center + com).with_collider(c))?;
    }
    track_drift(s);
    Ok(())
}

fn spinning_box(s: &mut Scene) -> Result<(), SceneError> {
    let spin = positive(s, "spin")?;
    s.world.config.gravity = Vec3::ZERO;
    let omega = Vec3::new(1.0, 0.4, 0.2).normalize() * spin;
    s.world.add_body(
        BodyDesc::dynamic()
            .with_velocity(Vec3::ZERO, omega)
            .with_collider(Collider::cuboid(Vec3::new(0.5, 0.25, 0.1))?),
    )?;
    Ok(())
}

fn free_collision(s: &mut Scene) -> Result<(), SceneError> {
    let speed = positive(s, "speed")?;
    let ratio = positive(s, "mass_ratio")?;
    let mu = s.param("mu") as f32;
    s.world.config.gravity = Vec3::ZERO;
    let w = &mut s.world;
    w.add_body(
        BodyDesc::dynamic()
            .at(Vec3::new(-1.5, 0.2, 0.0))
            .with_velocity(Vec3::X * speed, Vec3::ZERO)
            .with_collider(Collider::cuboid(Vec3::new(0.4, 0.3, 0.3))?.with_friction(mu)),
    )?;
    w.add_body(
        BodyDesc::dynamic()
            .at(Vec3::new(0.5, 0.0, 0.0))
            .rotated(Quat::from_rotation_y(0.4))
            .with_collider(
                Collider::ball(0.5)?
                    .with_density(1000.0 * ratio)
                    .with_friction(mu),
            ),
    )?;
    Ok(())
}
