//! A frame's geometry as the renderer draws it: every body's surface (from
//! [`crate::export::surfaces`], the same triangles the OBJ export writes) as triangles with
//! normals and a per-body colour, the half-spaces as planes, and the bounding box.

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

/// Dynamic rigid bodies, by body index: eight muted hues at least 25° apart, so that
/// neighbours (consecutive indices in every scene) never share a colour.
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
const SOFT: [[u8; 3]; 4] = [
    [255, 120, 40], // tangerine
    [40, 190, 230], // sky
    [240, 60, 120], // raspberry
    [120, 220, 60], // lime
];
const STATIC: [u8; 3] = [150, 150, 156];
const KINEMATIC: [u8; 3] = [110, 125, 150];

/// The colour (sRGB) of a surface in the pictures.
pub fn color_of(owner: &SurfaceOwner) -> [u8; 3] {
    match *owner {
        SurfaceOwner::Body { kind, index, .. } => match kind {
            BodyKind::Static => STATIC,
            BodyKind::Kinematic => KINEMATIC,
            BodyKind::Dynamic => RIGID[index % RIGID.len()],
        },
        SurfaceOwner::Deformable { kind, index, .. } => match kind {
            DeformableKind::Solid => SOFT[index % SOFT.len()],
            // Cloths take the palette from its other end: a cloth over a solid differs.
            DeformableKind::Cloth => SOFT[SOFT.len() - 1 - index % SOFT.len()],
        },
    }
}

/// The geometry of one frame.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The bodies' triangles, three vertices each.
    pub(crate) vertices: Vec<Vertex>,
    /// Half-spaces: (a point, outward normal).
    pub planes: Vec<(Vec3, Vec3)>,
    /// Bounding box of every bounded surface, `None` when there is none.
    pub bounds: Option<(Vec3, Vec3)>,
    /// Every drawn surface with its colour (sRGB).
    pub colors: Vec<(SurfaceOwner, [u8; 3])>,
}

impl Snapshot {
    /// Takes the world's surfaces as they are now.
    pub fn of_world(world: &PhysicsWorld) -> Self {
        let mut snap = Snapshot::default();
        for s in crate::export::surfaces(world) {
            if let Some(plane) = s.plane {
                snap.planes.push(plane);
                continue;
            }
            let color = color_of(&s.owner);
            snap.colors.push((s.owner, color));
            for &p in &s.vertices {
                let (lo, hi) = snap.bounds.get_or_insert((p, p));
                *lo = lo.min(p);
                *hi = hi.max(p);
            }
            push_surface(&mut snap.vertices, &s, color);
        }
        snap
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
