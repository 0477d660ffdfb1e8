//! Exact intersection predicates of surfaces: segment–triangle, triangle–triangle and
//! point-in-tetrahedron, from the signs of orientation determinants evaluated exactly with
//! Shewchuk's adaptive predicates (the `robust` crate) on f64 coordinates (f32 positions
//! widen to f64 exactly, so the answers are exact for the positions the engine holds).
//! Touching counts as intersecting. Used to refuse start states that intersect
//! (`pipeline::surface_contact::start`) and by the `intersections` metric
//! (`reference::intersect`).

use glam::DVec3;
use robust::{Coord3D, orient3d};

#[inline]
fn c(p: DVec3) -> Coord3D<f64> {
    Coord3D {
        x: p.x,
        y: p.y,
        z: p.z,
    }
}

/// Sign of the orientation of `d` against the plane `abc` (exact).
#[inline]
fn orient(a: DVec3, b: DVec3, cc: DVec3, d: DVec3) -> i32 {
    let o = orient3d(c(a), c(b), c(cc), c(d));
    (o > 0.0) as i32 - (o < 0.0) as i32
}

/// Exact 2-D orientation in the plane that drops axis `drop`.
#[inline]
fn orient2(a: DVec3, b: DVec3, cc: DVec3, drop: usize) -> i32 {
    let (i, j) = [(1, 2), (2, 0), (0, 1)][drop];
    let p = |v: DVec3| robust::Coord { x: v[i], y: v[j] };
    let o = robust::orient2d(p(a), p(b), p(cc));
    (o > 0.0) as i32 - (o < 0.0) as i32
}

/// Whether segments `pq` and `ab`, coplanar, share a point (2-D, exact).
fn segments_2d(p: DVec3, q: DVec3, a: DVec3, b: DVec3, drop: usize) -> bool {
    let (d1, d2) = (orient2(a, b, p, drop), orient2(a, b, q, drop));
    let (d3, d4) = (orient2(p, q, a, drop), orient2(p, q, b, drop));
    if d1 * d2 < 0 && d3 * d4 < 0 {
        return true;
    }
    let on = |a: DVec3, b: DVec3, x: DVec3, d: i32| {
        let (i, j) = [(1, 2), (2, 0), (0, 1)][drop];
        d == 0
            && x[i] >= a[i].min(b[i])
            && x[i] <= a[i].max(b[i])
            && x[j] >= a[j].min(b[j])
            && x[j] <= a[j].max(b[j])
    };
    on(a, b, p, d1) || on(a, b, q, d2) || on(p, q, a, d3) || on(p, q, b, d4)
}

/// Whether segment `pq` and triangle `abc` share a point (closed sets, exact).
pub fn segment_triangle(p: DVec3, q: DVec3, a: DVec3, b: DVec3, cc: DVec3) -> bool {
    let (sp, sq) = (orient(a, b, cc, p), orient(a, b, cc, q));
    if sp * sq > 0 {
        return false;
    }
    if sp == 0 && sq == 0 {
        // Coplanar: in the plane that drops the normal's largest axis.
        let n = (b - a).cross(cc - a).abs();
        let drop = if n.x >= n.y && n.x >= n.z {
            0
        } else if n.y >= n.z {
            1
        } else {
            2
        };
        let inside = |x: DVec3| {
            let s = [
                orient2(a, b, x, drop),
                orient2(b, cc, x, drop),
                orient2(cc, a, x, drop),
            ];
            s.iter().all(|&v| v >= 0) || s.iter().all(|&v| v <= 0)
        };
        return inside(p)
            || inside(q)
            || segments_2d(p, q, a, b, drop)
            || segments_2d(p, q, b, cc, drop)
            || segments_2d(p, q, cc, a, drop);
    }
    // The segment meets the plane: does the line through it pass through the triangle?
    let s = [orient(p, q, a, b), orient(p, q, b, cc), orient(p, q, cc, a)];
    s.iter().all(|&v| v >= 0) || s.iter().all(|&v| v <= 0)
}

/// Whether two triangles share a point (exact). Meant for triangles without a common
/// vertex (neighbours of one mesh always touch).
pub fn triangles(t: [DVec3; 3], u: [DVec3; 3]) -> bool {
    (0..3).any(|k| segment_triangle(t[k], t[(k + 1) % 3], u[0], u[1], u[2]))
        || (0..3).any(|k| segment_triangle(u[k], u[(k + 1) % 3], t[0], t[1], t[2]))
}

/// Whether `p` lies in the closed tetrahedron `t` (exact).
pub fn point_in_tet(p: DVec3, t: [DVec3; 4]) -> bool {
    // On the same side of each face as the opposite vertex (or on the face).
    let faces = [(0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 3, 1), (1, 2, 3, 0)];
    faces.iter().all(|&(a, b, c, d)| {
        let s = orient(t[a], t[b], t[c], t[d]);
        s * orient(t[a], t[b], t[c], p) >= 0
    })
}
