//! A frame's geometry as the renderer draws it: every body's surface (from
//! [`crate::export::surfaces`], the same triangles the OBJ export writes) as triangles with
//! normals and a per-body colour, the half-spaces as planes, and the bounding box.

use std::collections::HashMap;

use glam::Vec3;

use crate::deformable::DeformableKind;
use crate::export::{BodySurface, SurfaceOwner};
use crate::rigid::BodyKind;
use crate::{BodyHandle, DeformableHandle, PhysicsWorld};

/// One vertex of the draw list (28 bytes). `color` is sRGB; an alpha of 0 marks a
/// half-space, which the shader paints as a checker board instead.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Vertex {
    pub pos: [f32; 3],
    pub normal: [f32; 3],
    pub color: [u8; 4],
}

/// Dynamic rigid bodies: eight muted hues at least 25° apart (a test tells them apart by
/// hue).
const RIGID: [[u8; 3]; 8] = [
    [214, 96, 77],   // brick red
    [232, 163, 64],  // orange
    [150, 190, 80],  // olive green
    [76, 168, 120],  // green
    [70, 170, 190],  // teal
    [84, 120, 200],  // blue
    [150, 105, 195], // violet
    [205, 100, 160], // pink
];
/// Deformable bodies: brighter and more saturated than the rigid ones.
const SOFT: [[u8; 3]; 6] = [
    [255, 120, 40],  // tangerine
    [40, 190, 230],  // sky
    [240, 60, 120],  // raspberry
    [120, 220, 60],  // lime
    [255, 205, 40],  // sun
    [170, 100, 255], // lavender
];
const STATIC: [u8; 3] = [150, 150, 156];
/// Joints, drawn as thin rods from each body's centre to its anchor and between the
/// anchors (chains of bodies without colliders are seen through them).
const JOINT: [u8; 3] = [70, 74, 84];
const KINEMATIC: [u8; 3] = [110, 125, 150];

/// The default colour (sRGB) of a surface: by kind, and for dynamic bodies and deformables
/// by a hash of their index ([`Palette`] then keeps touching bodies apart).
pub fn color_of(owner: &SurfaceOwner) -> [u8; 3] {
    match *owner {
        SurfaceOwner::Body { kind, index, .. } => match kind {
            BodyKind::Static => STATIC,
            BodyKind::Kinematic => KINEMATIC,
            BodyKind::Dynamic => RIGID[preferred(index)],
        },
        SurfaceOwner::Deformable { kind, index, .. } => match kind {
            DeformableKind::Solid => SOFT[index % SOFT.len()],
            // Cloths take the palette from its other end: a cloth over a solid differs.
            DeformableKind::Cloth => SOFT[SOFT.len() - 1 - index % SOFT.len()],
        },
    }
}

/// A dynamic body's first choice of colour: a hash of its index, so that rows and grids
/// of bodies (numbered in order) do not come out in stripes.
fn preferred(index: usize) -> usize {
    ((index as u32).wrapping_mul(2_654_435_761) >> 29) as usize % RIGID.len()
}

fn key(owner: &SurfaceOwner) -> u64 {
    match *owner {
        SurfaceOwner::Body { handle, .. } => handle.0 as u64,
        SurfaceOwner::Deformable { handle, .. } => (1 << 32) | handle.0 as u64,
    }
}

/// The colours of a picture's bodies, kept from frame to frame of an animation (a body
/// keeps its colour while it moves).
#[derive(Clone, Debug, Default)]
pub struct Palette(HashMap<u64, [u8; 3]>);

impl Palette {
    /// Colours for `surfaces`: dynamic bodies whose boxes touch (within 2% of their size)
    /// get different colours where the palette allows, each starting from its hashed
    /// first choice (a greedy colouring of the touching graph).
    fn of_surfaces(surfaces: &[BodySurface]) -> Self {
        let mut colors = HashMap::new();
        let mut boxes: Vec<(Vec3, Vec3, usize)> = Vec::new();
        for (k, s) in surfaces.iter().enumerate() {
            colors.insert(key(&s.owner), color_of(&s.owner));
            if let SurfaceOwner::Body {
                kind: BodyKind::Dynamic,
                ..
            } = s.owner
                && let Some(&first) = s.vertices.first()
            {
                let (lo, hi) = s
                    .vertices
                    .iter()
                    .fold((first, first), |(lo, hi), &p| (lo.min(p), hi.max(p)));
                let pad = (hi - lo).max_element() * 0.02 + 1e-3;
                boxes.push((lo - pad, hi + pad, k));
            }
        }
        // Sweep along x for touching pairs.
        let mut order: Vec<usize> = (0..boxes.len()).collect();
        order.sort_by(|&a, &b| boxes[a].0.x.total_cmp(&boxes[b].0.x));
        let mut near = vec![Vec::new(); boxes.len()];
        for (n, &a) in order.iter().enumerate() {
            for &b in &order[n + 1..] {
                if boxes[b].0.x > boxes[a].1.x {
                    break;
                }
                if boxes[a].0.cmple(boxes[b].1).all() && boxes[b].0.cmple(boxes[a].1).all() {
                    near[a].push(b);
                    near[b].push(a);
                }
            }
        }
        let mut chosen: Vec<Option<usize>> = vec![None; boxes.len()];
        for a in 0..boxes.len() {
            let SurfaceOwner::Body { index, .. } = surfaces[boxes[a].2].owner else {
                continue;
            };
            let first = preferred(index);
            let c = (0..RIGID.len())
                .map(|k| (first + k) % RIGID.len())
                .find(|&c| near[a].iter().all(|&b| chosen[b] != Some(c)))
                .unwrap_or(first);
            chosen[a] = Some(c);
            colors.insert(key(&surfaces[boxes[a].2].owner), RIGID[c]);
        }
        Palette(colors)
    }
}

/// The geometry of one frame.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The bodies' triangles, three vertices each.
    pub(crate) vertices: Vec<Vertex>,
    /// Half-spaces: (a point, outward normal).
    pub planes: Vec<(Vec3, Vec3)>,
    /// Joint rods: their ends (the renderer gives them a thickness).
    pub segments: Vec<(Vec3, Vec3)>,
    /// Bounding box of every bounded surface, `None` when there is none.
    pub bounds: Option<(Vec3, Vec3)>,
    /// Every drawn surface with its colour (sRGB).
    pub colors: Vec<(SurfaceOwner, [u8; 3])>,
}

impl Snapshot {
    /// Takes the world's surfaces as they are now, coloured by a [`Palette`] of their own.
    pub fn of_world(world: &PhysicsWorld) -> Self {
        Self::with_palette(world, None)
    }

    /// Takes the world's surfaces, coloured by `palette` where it has a colour for a body
    /// (an earlier frame's [`Snapshot::palette`]), else by a palette of their own.
    pub fn with_palette(world: &PhysicsWorld, palette: Option<&Palette>) -> Self {
        let surfaces = crate::export::surfaces(world);
        let own = Palette::of_surfaces(&surfaces);
        let mut snap = Snapshot::default();
        for s in surfaces {
            if let Some(plane) = s.plane {
                snap.planes.push(plane);
                continue;
            }
            let k = key(&s.owner);
            let color = palette
                .and_then(|p| p.0.get(&k))
                .or_else(|| own.0.get(&k))
                .copied()
                .unwrap_or_else(|| color_of(&s.owner));
            snap.colors.push((s.owner, color));
            for &p in &s.vertices {
                let (lo, hi) = snap.bounds.get_or_insert((p, p));
                *lo = lo.min(p);
                *hi = hi.max(p);
            }
            push_surface(&mut snap.vertices, &s, color);
        }
        for &h in world.joint_handles() {
            let (Ok(false), Ok(j)) = (world.joint_broken(h), world.joint_anchors(h)) else {
                continue;
            };
            let mut ends = vec![j.centre_a, j.on_a, j.on_b];
            ends.extend(j.centre_b);
            for w in ends.windows(2) {
                if (w[1] - w[0]).length() > 1e-6 {
                    snap.segments.push((w[0], w[1]));
                    for p in [w[0], w[1]] {
                        let (lo, hi) = snap.bounds.get_or_insert((p, p));
                        *lo = lo.min(p);
                        *hi = hi.max(p);
                    }
                }
            }
        }
        snap
    }

    /// The colours of this frame's bodies, for the next frames of an animation.
    pub fn palette(&self) -> Palette {
        Palette(self.colors.iter().map(|(o, c)| (key(o), *c)).collect())
    }

    /// The colour a rigid body is drawn with.
    pub fn body_color(&self, h: BodyHandle) -> Option<[u8; 3]> {
        self.colors.iter().find_map(|(o, c)| match o {
            SurfaceOwner::Body { handle, .. } if *handle == h => Some(*c),
            _ => None,
        })
    }

    /// The colour a deformable body is drawn with.
    pub fn deformable_color(&self, h: DeformableHandle) -> Option<[u8; 3]> {
        self.colors.iter().find_map(|(o, c)| match o {
            SurfaceOwner::Deformable { handle, .. } if *handle == h => Some(*c),
            _ => None,
        })
    }

    /// Triangles of the bodies (half-spaces not counted).
    pub fn triangle_count(&self) -> usize {
        self.vertices.len() / 3
    }
}

/// Normals are averaged over the triangles around a vertex that lie within this angle of
/// the triangle's own: curved shapes and deformables look smooth, box edges stay sharp.
const CREASE_COS: f32 = 0.766; // cos 40°

/// Appends a surface's triangles with crease-angle normals.
fn push_surface(out: &mut Vec<Vertex>, s: &BodySurface, color: [u8; 3]) {
    let v = &s.vertices;
    // Area-weighted face normals (zero for degenerate triangles, which are skipped).
    let face: Vec<Vec3> = s
        .triangles
        .iter()
        .map(|t| (v[t[1] as usize] - v[t[0] as usize]).cross(v[t[2] as usize] - v[t[0] as usize]))
        .collect();
    // Triangles around each vertex (CSR).
    let mut start = vec![0u32; v.len() + 1];
    for t in &s.triangles {
        for &i in t {
            start[i as usize + 1] += 1;
        }
    }
    for i in 0..v.len() {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut around = vec![0u32; start[v.len()] as usize];
    for (k, t) in s.triangles.iter().enumerate() {
        for &i in t {
            around[fill[i as usize] as usize] = k as u32;
            fill[i as usize] += 1;
        }
    }
    let color = [color[0], color[1], color[2], 255];
    for (k, t) in s.triangles.iter().enumerate() {
        let own = face[k].normalize_or_zero();
        if own == Vec3::ZERO {
            continue;
        }
        for &i in t {
            let mut n = Vec3::ZERO;
            for &j in &around[start[i as usize] as usize..start[i as usize + 1] as usize] {
                let f = face[j as usize];
                if f.normalize_or_zero().dot(own) >= CREASE_COS {
                    n += f;
                }
            }
            out.push(Vertex {
                pos: v[i as usize].to_array(),
                normal: n.normalize_or(own).to_array(),
                color,
            });
        }
    }
}

/// A half-space drawn as a square of half-side `half` in its plane, centred where `centre`
/// projects onto it.
pub(crate) fn plane_quad(point: Vec3, normal: Vec3, centre: Vec3, half: f32) -> [Vertex; 6] {
    let n = normal.normalize();
    let (t, b) = crate::math::tangent_basis(n);
    let c = centre - n * (centre - point).dot(n);
    let corner = |s: f32, r: f32| Vertex {
        pos: (c + (t * s + b * r) * half).to_array(),
        normal: n.to_array(),
        color: [0; 4],
    };
    let (a, b2, c2, d) = (
        corner(-1.0, -1.0),
        corner(1.0, -1.0),
        corner(1.0, 1.0),
        corner(-1.0, 1.0),
    );
    [a, b2, c2, a, c2, d]
}

/// A joint rod: a hexagonal prism of `radius` from `a` to `b` (smooth normals, no caps).
pub(crate) fn rod(a: Vec3, b: Vec3, radius: f32, out: &mut Vec<Vertex>) {
    let axis = (b - a).normalize();
    let (t, u) = crate::math::tangent_basis(axis);
    let color = [JOINT[0], JOINT[1], JOINT[2], 255];
    let ring = |k: usize| {
        let th = k as f32 * std::f32::consts::TAU / 6.0;
        t * th.cos() + u * th.sin()
    };
    for k in 0..6 {
        let (n0, n1) = (ring(k), ring(k + 1));
        let v = |p: Vec3, n: Vec3| Vertex {
            pos: (p + n * radius).to_array(),
            normal: n.to_array(),
            color,
        };
        out.extend([v(a, n0), v(b, n0), v(b, n1), v(a, n0), v(b, n1), v(a, n1)]);
    }
}
