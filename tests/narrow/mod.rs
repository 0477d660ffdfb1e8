//! Shared by tests/narrow_phase.rs: random sphere, capsule, box and half-space
//! configurations (deterministic), and the references they are compared with.
#![allow(dead_code)]

use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::parry3d::math::Pose;
use bevy_avbd::parry3d::query::contact;
use bevy_avbd::parry3d::shape::SharedShape;
use bevy_avbd::pipeline::collision::primitive::{PrimitivePair, PrimitiveShape, kind};
use bevy_avbd::rigid::body::PoseRecord;

pub mod reference;

pub const MARGIN: f32 = 0.01;

/// splitmix64: a deterministic generator with no test dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn f(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.f()
    }
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next() % n as u64) as u32
    }
    pub fn unit(&mut self) -> Vec3 {
        let z = self.range(-1.0, 1.0);
        let phi = self.range(0.0, std::f32::consts::TAU);
        let r = (1.0 - z * z).max(0.0).sqrt();
        Vec3::new(r * phi.cos(), r * phi.sin(), z)
    }
    /// Uniform rotation (Shoemake).
    pub fn quat(&mut self) -> Quat {
        let (u1, u2, u3) = (self.f(), self.f(), self.f());
        let (a, b) = ((1.0 - u1).sqrt(), u1.sqrt());
        let (t2, t3) = (std::f32::consts::TAU * u2, std::f32::consts::TAU * u3);
        Quat::from_xyzw(a * t2.sin(), a * t2.cos(), b * t3.sin(), b * t3.cos()).normalize()
    }
    /// One of the 24 rotations of a cube.
    pub fn cube_rotation(&mut self) -> Quat {
        let quarter = |k: u32, axis: Vec3| {
            Quat::from_axis_angle(axis, k as f32 * std::f32::consts::FRAC_PI_2)
        };
        let faces = [
            Quat::IDENTITY,
            quarter(1, Vec3::X),
            quarter(2, Vec3::X),
            quarter(3, Vec3::X),
            quarter(1, Vec3::Z),
            quarter(3, Vec3::Z),
        ];
        (faces[self.below(6) as usize] * quarter(self.below(4), Vec3::Y)).normalize()
    }
}

pub fn record(p: Vec3, q: Quat) -> PoseRecord {
    PoseRecord::new(p, q)
}

pub fn parry_pose(r: &PoseRecord) -> Pose {
    Pose::from_parts(r.p(), r.q())
}

/// A random shape of `k`: the record, the parry3d shape, and its size (smallest extent).
pub fn random_shape(k: u32, rng: &mut Rng) -> (PrimitiveShape, SharedShape, f32) {
    match k {
        kind::SPHERE => {
            let r = rng.range(0.1, 0.6);
            (PrimitiveShape::sphere(r), SharedShape::ball(r), 2.0 * r)
        }
        kind::CAPSULE => {
            let (h, r) = (rng.range(0.1, 0.6), rng.range(0.05, 0.4));
            (
                PrimitiveShape::capsule(h, r),
                SharedShape::capsule_y(h, r),
                2.0 * r,
            )
        }
        kind::BOX => {
            let he = Vec3::new(
                rng.range(0.1, 0.7),
                rng.range(0.1, 0.7),
                rng.range(0.1, 0.7),
            );
            (
                PrimitiveShape::cuboid(he),
                SharedShape::cuboid(he.x, he.y, he.z),
                2.0 * he.min_element(),
            )
        }
        _ => {
            // Half-spaces mostly with the local +y normal, so that the pose orients them.
            let n = if rng.f() < 0.5 { Vec3::Y } else { rng.unit() };
            let s = PrimitiveShape::half_space(n);
            let n = Vec3::from_array(s.dims);
            (s, SharedShape::halfspace(n), f32::INFINITY)
        }
    }
}

/// Bounding radius of a shape (0 for a half-space, which is placed by its plane).
pub fn reach(s: &PrimitiveShape) -> f32 {
    let d = Vec3::from_array(s.dims);
    match s.kind {
        kind::SPHERE => d.x,
        kind::CAPSULE => d.x + d.y,
        kind::BOX => d.length(),
        _ => 0.0,
    }
}

/// How the configurations are made: overlapping by up to 20% of the smaller shape's size,
/// exactly touching, or apart by up to the margin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gap {
    Overlap,
    Touch,
    Apart,
}

pub struct Config {
    pub pair: PrimitivePair,
    pub sa: SharedShape,
    pub sb: SharedShape,
    pub gap: Gap,
    /// Orientation of B: 0 random, 1 near a cube rotation of A's, 2 exactly one.
    pub mode: u32,
}

/// parry3d's signed distance (its `contact` query), or `None` when farther than 10 m.
pub fn signed_distance(pair: &PrimitivePair, sa: &SharedShape, sb: &SharedShape) -> Option<f32> {
    let (pa, pb) = (parry_pose(&pair.pose_a), parry_pose(&pair.pose_b));
    // Half-space second: parry3d 0.31.1's `contact_support_map_halfspace` passes `pos12`
    // where its callee wants `pos21` (wrong distances), so ask with the half-space first.
    if pair.b.kind == kind::HALF_SPACE {
        return contact(&pb, sb.as_ref(), &pa, sa.as_ref(), 10.0)
            .unwrap()
            .map(|c| c.dist);
    }
    contact(&pa, sa.as_ref(), &pb, sb.as_ref(), 10.0)
        .unwrap()
        .map(|c| c.dist)
}

/// A random configuration of kinds (ka, kb), or `None` when the line it slides B along
/// misses A (then the caller draws again).
pub fn random_config(ka: u32, kb: u32, rng: &mut Rng) -> Option<Config> {
    let (a, sa, size_a) = random_shape(ka, rng);
    let (b, sb, size_b) = random_shape(kb, rng);
    let size = size_a.min(size_b);
    let gap = match rng.below(3) {
        0 => Gap::Overlap,
        1 => Gap::Touch,
        _ => Gap::Apart,
    };
    let target = match gap {
        Gap::Overlap => -rng.range(0.0, 0.2) * size,
        Gap::Touch => 0.0,
        Gap::Apart => rng.range(0.0, MARGIN),
    };
    let pa = Vec3::new(
        rng.range(-2.0, 2.0),
        rng.range(-2.0, 2.0),
        rng.range(-2.0, 2.0),
    );
    let qa = rng.quat();
    let mode = match rng.below(10) {
        0..5 => 0,
        5..8 => 1,
        _ => 2,
    };
    let qb = match mode {
        0 => rng.quat(),
        1 => {
            let tilt = Quat::from_axis_angle(rng.unit(), rng.range(0.0, 0.05));
            (qa * rng.cube_rotation() * tilt).normalize()
        }
        _ => (qa * rng.cube_rotation()).normalize(),
    };
    // B slides along `dir` from `origin`; `s` is where along the line.
    let (origin, dir) = if kb == kind::HALF_SPACE {
        // The plane slides along its own normal, below A.
        let n = qb * Vec3::from_array(b.dims);
        (pa, -n)
    } else if ka == kind::HALF_SPACE {
        let n = qa * Vec3::from_array(a.dims);
        (pa, n)
    } else if mode == 0 {
        (pa, rng.unit())
    } else {
        // Along one of A's face normals, off centre by up to 0.8 of the reach.
        let d = qa * (rng.cube_rotation() * Vec3::Y);
        let side = (rng.unit() - d * rng.unit().dot(d)).normalize_or_zero();
        (
            pa + side * rng.range(0.0, 0.8) * reach(&a).max(reach(&b)),
            d,
        )
    };
    let mut pair = PrimitivePair {
        a,
        b,
        pose_a: record(pa, qa),
        pose_b: record(origin, qb),
    };
    let place = |pair: &mut PrimitivePair, s: f32| {
        if ka == kind::HALF_SPACE {
            // A is the plane: move A's plane away from B instead.
            pair.pose_a = record(origin, qa);
            pair.pose_b = record(origin + dir * s, qb);
        } else {
            pair.pose_b = record(origin + dir * s, qb);
        }
    };
    let far = reach(&a) + reach(&b) + 1.0;
    let (mut lo, mut hi) = (
        if kb == kind::HALF_SPACE || ka == kind::HALF_SPACE {
            -far
        } else {
            0.0
        },
        far,
    );
    place(&mut pair, lo);
    if signed_distance(&pair, &sa, &sb)? > target {
        return None;
    }
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        place(&mut pair, mid);
        match signed_distance(&pair, &sa, &sb) {
            Some(d) if d <= target => lo = mid,
            _ => hi = mid,
        }
    }
    place(&mut pair, lo);
    Some(Config {
        pair,
        sa,
        sb,
        gap,
        mode,
    })
}

pub fn name(k: u32) -> &'static str {
    ["sphere", "capsule", "box", "half-space"][k as usize]
}

/// The pairs the tests cover (A's kind ≤ B's; both orders are drawn).
pub const PAIRS: [(u32, u32); 9] = [
    (kind::SPHERE, kind::SPHERE),
    (kind::SPHERE, kind::CAPSULE),
    (kind::SPHERE, kind::BOX),
    (kind::SPHERE, kind::HALF_SPACE),
    (kind::CAPSULE, kind::CAPSULE),
    (kind::CAPSULE, kind::BOX),
    (kind::CAPSULE, kind::HALF_SPACE),
    (kind::BOX, kind::BOX),
    (kind::BOX, kind::HALF_SPACE),
];

/// `count` configurations of a pair type, alternating which shape is A.
pub fn configs(ka: u32, kb: u32, count: usize, rng: &mut Rng) -> Vec<Config> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let (a, b) = if out.len() % 2 == 1 {
            (kb, ka)
        } else {
            (ka, kb)
        };
        if let Some(c) = random_config(a, b, rng) {
            out.push(c);
        }
    }
    out
}

/// B moved by up to `step` m and turned by up to `step` rad.
pub fn nudge(c: &Config, step: f32, rng: &mut Rng) -> PrimitivePair {
    let mut pair = c.pair;
    let turn = Quat::from_axis_angle(rng.unit(), rng.range(0.0, step));
    let p = pair.pose_b.p() + rng.unit() * rng.range(0.0, step);
    pair.pose_b = record(p, (turn * pair.pose_b.q()).normalize());
    pair
}
