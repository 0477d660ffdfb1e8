//! Box against box: separating axes (3 + 3 face normals, 9 edge crossings), then either the
//! incident face clipped against the reference face's side planes (Sutherland–Hodgman,
//! at most 8 points, reduced to 4 by area) or one point between two edges.

use glam::Vec3;

use super::round::segment_params;
use super::{Contacts, Frame, axis, case, conj, qmul, rot, sign};

/// Edge pairs closer to parallel than this sine give no axis: their cross product is
/// nearly a face normal, and its separation would be f32 noise amplified by 1/sin.
pub(crate) const EDGE_MIN_SIN: f32 = 1e-3;
/// Face B replaces face A only when it separates more by this share of the smaller box's
/// size, and an edge axis replaces the faces only by [`EDGE_TOL`]: boxes resting face on
/// face keep a face manifold (up to four points) instead of one edge–edge point whenever
/// two nearly parallel edges separate as much as the faces, up to rounding.
const FACE_TOL: f32 = 1e-4;
pub(crate) const EDGE_TOL: f32 = 1e-3;

/// Box A, box B. A point's id names the feature of each box it comes from, `code of A |
/// code of B << 5`, with codes 0–7 for vertices (bit k set on the −x_k side, parry3d's
/// numbering), 8 + 4k + side bits for the edges along axis k, 20 + 2k (+1) for the +x_k
/// (−x_k) face: a vertex on a face, an edge crossing an edge, or a face on a vertex. The ids
/// do not depend on which box gives the reference face, so a flip between two nearly
/// parallel faces keeps them; the edge–edge point is the crossing of its two edges.
pub(super) fn box_box(ha: Vec3, fa: &Frame, hb: Vec3, fb: &Frame, margin: f32) -> Contacts {
    // B's centre and axes in A's frame.
    let t = fa.to_local(fb.p);
    let rel = qmul(conj(fa.q), fb.q);
    let r = [rot(rel, Vec3::X), rot(rel, Vec3::Y), rot(rel, Vec3::Z)];

    let mut sep_a = f32::MIN;
    let mut ia = 0;
    for i in 0..3 {
        let rb = hb.x * r[0][i].abs() + hb.y * r[1][i].abs() + hb.z * r[2][i].abs();
        let sep = t[i].abs() - ha[i] - rb;
        if sep > sep_a {
            sep_a = sep;
            ia = i;
        }
    }
    let mut sep_b = f32::MIN;
    let mut jb = 0;
    for j in 0..3 {
        let sep = t.dot(r[j]).abs() - hb[j] - ha.dot(r[j].abs());
        if sep > sep_b {
            sep_b = sep;
            jb = j;
        }
    }
    let mut sep_e = f32::MIN;
    let (mut ei, mut ej, mut e_axis) = (0, 0, Vec3::ZERO);
    for i in 0..3 {
        for j in 0..3 {
            let a = axis(i).cross(r[j]);
            let len = a.length();
            if len < EDGE_MIN_SIN {
                continue;
            }
            let a = a / len;
            let rb = hb.x * a.dot(r[0]).abs() + hb.y * a.dot(r[1]).abs() + hb.z * a.dot(r[2]).abs();
            let sep = t.dot(a).abs() - ha.dot(a.abs()) - rb;
            if sep > sep_e {
                sep_e = sep;
                (ei, ej, e_axis) = (i, j, a);
            }
        }
    }
    if sep_a > margin || sep_b > margin || sep_e > margin {
        return Contacts::none();
    }
    let scale = ha.max_element().min(hb.max_element());
    let face_b = sep_b > sep_a + FACE_TOL * scale;
    let best_face = if face_b { sep_b } else { sep_a };
    if sep_e > best_face + EDGE_TOL * scale {
        return edge_contact(ha, fa, hb, t, &r, (ei, ej, e_axis), margin);
    }
    if !face_b {
        let f = face_contact(ha, hb, t, &r, ia, margin);
        let mut out = Contacts::new(rot(fa.q, f.n), case::FACE_A);
        for k in 0..f.count {
            let id = f.ref_codes[k] | f.inc_codes[k] << 5;
            out.push(
                id,
                fa.to_world(f.on_ref[k]),
                fa.to_world(f.on_inc[k]),
                f.dist[k],
            );
        }
        out
    } else {
        // The same with B as the reference: A's centre and axes in B's frame.
        let tb = fb.to_local(fa.p);
        let rb = [0, 1, 2].map(|k| Vec3::new(r[0][k], r[1][k], r[2][k]));
        let f = face_contact(hb, ha, tb, &rb, jb, margin);
        let mut out = Contacts::new(-rot(fb.q, f.n), case::FACE_B);
        for k in 0..f.count {
            let id = f.inc_codes[k] | f.ref_codes[k] << 5;
            out.push(
                id,
                fb.to_world(f.on_inc[k]),
                fb.to_world(f.on_ref[k]),
                f.dist[k],
            );
        }
        out
    }
}

/// Points of a face contact in the reference box's frame.
struct FacePoints {
    /// Reference face normal, towards the incident box.
    n: Vec3,
    count: usize,
    /// Feature codes of each point on the reference and on the incident box.
    ref_codes: [u32; 4],
    inc_codes: [u32; 4],
    on_ref: [Vec3; 4],
    on_inc: [Vec3; 4],
    dist: [f32; 4],
}

/// Feature codes (see [`box_box`]) of a vertex, an edge along axis k and a face, from the
/// signs that name them on the box's axes.
fn vertex_code(signs: Vec3) -> u32 {
    (signs.x < 0.0) as u32 | ((signs.y < 0.0) as u32) << 1 | ((signs.z < 0.0) as u32) << 2
}

fn edge_code(k: usize, signs: Vec3) -> u32 {
    8 + 4 * k as u32 + (signs[(k + 1) % 3] < 0.0) as u32 + 2 * (signs[(k + 2) % 3] < 0.0) as u32
}

fn face_code(k: usize, s: f32) -> u32 {
    20 + 2 * k as u32 + (s < 0.0) as u32
}

/// Side plane p (0: +x_a1, 1: −x_a1, 2: +x_a2, 3: −x_a2) of the reference face on axis i:
/// its axis and side.
fn side_plane(i: usize, p: u32) -> (usize, f32) {
    let k = if p < 2 { (i + 1) % 3 } else { (i + 2) % 3 };
    (k, if p.is_multiple_of(2) { 1.0 } else { -1.0 })
}

/// Clipping code of the point where polygon edge `edge` (0–3 incident edges, 4 + p side
/// plane p) crosses side plane `plane`: 4 + 4e + p, or 20 + 4q + p for the reference
/// face's corner between planes q and p (0–3: an incident vertex).
fn cut_code(edge: u32, plane: u32) -> u32 {
    if edge < 4 {
        4 + 4 * edge + plane
    } else {
        20 + 4 * (edge - 4) + plane
    }
}

/// The incident box's face most opposed to reference face `i` (on the side of the incident
/// box's centre `t`), clipped against the reference face's four side planes; the points
/// within the margin, at most 4 (deepest, farthest from it, then largest area).
fn face_contact(
    href: Vec3,
    hinc: Vec3,
    t: Vec3,
    r: &[Vec3; 3],
    i: usize,
    margin: f32,
) -> FacePoints {
    let s = sign(t[i]);
    let n = axis(i) * s;
    let mut j = 0;
    let mut best = -1.0f32;
    for k in 0..3 {
        let d = r[k][i].abs();
        if d > best {
            best = d;
            j = k;
        }
    }
    // The incident face's outward normal is sj r[j], against n.
    let sj = -sign(r[j][i] * s);
    let (u, v) = ((j + 1) % 3, (j + 2) % 3);
    let fc = t + r[j] * (sj * hinc[j]);
    let (du, dv) = (r[u] * hinc[u], r[v] * hinc[v]);
    let mut poly = [Vec3::ZERO; 8];
    let mut vid = [0u32; 8];
    // Polygon edge from vertex k to k + 1: incident edge k, or 4 + p along side plane p.
    let mut eid = [0u32; 8];
    poly[0] = fc + du + dv;
    poly[1] = fc - du + dv;
    poly[2] = fc - du - dv;
    poly[3] = fc + du - dv;
    for k in 0..4 {
        vid[k] = k as u32;
        eid[k] = k as u32;
    }
    let mut count = 4;
    let (a1, a2) = ((i + 1) % 3, (i + 2) % 3);
    for p in 0..4u32 {
        let k = if p < 2 { a1 } else { a2 };
        let sp = if p % 2 == 0 { 1.0 } else { -1.0 };
        let (mut out, mut ovid, mut oeid) = ([Vec3::ZERO; 8], [0u32; 8], [0u32; 8]);
        let mut m = 0;
        for c in 0..count {
            let prev = if c == 0 { count - 1 } else { c - 1 };
            let dp = sp * poly[prev][k] - href[k];
            let dc = sp * poly[c][k] - href[k];
            if (dc <= 0.0) != (dp <= 0.0) && m < 8 {
                out[m] = poly[prev] + (poly[c] - poly[prev]) * (dp / (dp - dc));
                ovid[m] = cut_code(eid[prev], p);
                // Entering: the rest of edge prev→c; leaving: along the side plane.
                oeid[m] = if dc <= 0.0 { eid[prev] } else { 4 + p };
                m += 1;
            }
            if dc <= 0.0 && m < 8 {
                out[m] = poly[c];
                ovid[m] = vid[c];
                oeid[m] = eid[c];
                m += 1;
            }
        }
        poly = out;
        vid = ovid;
        eid = oeid;
        count = m;
    }
    // Points within the margin.
    let (mut pts, mut dist, mut ids) = ([Vec3::ZERO; 8], [0.0f32; 8], [0u32; 8]);
    let mut kept = 0;
    for c in 0..count {
        let d = s * poly[c][i] - href[i];
        if d <= margin {
            pts[kept] = poly[c];
            dist[kept] = d;
            ids[kept] = vid[c];
            kept += 1;
        }
    }
    let pick = reduce(&pts, &dist, n, kept);
    let mut f = FacePoints {
        n,
        count: kept.min(4),
        ref_codes: [0; 4],
        inc_codes: [0; 4],
        on_ref: [Vec3::ZERO; 4],
        on_inc: [Vec3::ZERO; 4],
        dist: [0.0; 4],
    };
    // Signs of the incident face's vertices (polygon order) on axes u and v.
    let su = [1.0f32, -1.0, -1.0, 1.0];
    let sv = [1.0f32, 1.0, -1.0, -1.0];
    for k in 0..f.count {
        let c = pick[k];
        let code = ids[c];
        let (mut rs, mut is) = (Vec3::ZERO, Vec3::ZERO);
        rs[i] = s;
        is[j] = sj;
        if code < 4 {
            // An incident vertex on the reference face.
            is[u] = su[code as usize];
            is[v] = sv[code as usize];
            f.ref_codes[k] = face_code(i, s);
            f.inc_codes[k] = vertex_code(is);
        } else if code < 20 {
            // Incident edge e (vertex e to e + 1) crossing the reference edge on plane p.
            let (e, p) = (((code - 4) / 4) as usize, (code - 4) % 4);
            let (pk, ps) = side_plane(i, p);
            rs[pk] = ps;
            let along = if e % 2 == 0 {
                is[v] = sv[e];
                u
            } else {
                is[u] = su[e];
                v
            };
            f.ref_codes[k] = edge_code(3 - i - pk, rs);
            f.inc_codes[k] = edge_code(along, is);
        } else {
            // The reference face's corner between side planes q and p, on the incident face.
            let (q, p) = ((code - 20) / 4, (code - 20) % 4);
            let (qk, qs) = side_plane(i, q);
            let (pk, ps) = side_plane(i, p);
            rs[qk] = qs;
            rs[pk] = ps;
            f.ref_codes[k] = vertex_code(rs);
            f.inc_codes[k] = face_code(j, sj);
        }
        f.on_inc[k] = pts[c];
        f.on_ref[k] = pts[c] - n * dist[c];
        f.dist[k] = dist[c];
    }
    f
}

/// Signed area (×2) of triangle a b c seen along n.
fn area(a: Vec3, b: Vec3, c: Vec3, n: Vec3) -> f32 {
    (b - a).cross(c - a).dot(n)
}

/// Which ≤ 4 of `count` points to keep: all of them if 4 or fewer (in order), else the
/// deepest, the farthest from it, the one spanning the largest triangle with those two,
/// and the one farthest outside that triangle (first wins ties).
fn reduce(p: &[Vec3; 8], d: &[f32; 8], n: Vec3, count: usize) -> [usize; 4] {
    if count <= 4 {
        return [0, 1, 2, 3];
    }
    let mut i0 = 0;
    for k in 1..count {
        if d[k] < d[i0] {
            i0 = k;
        }
    }
    let mut i1 = 0;
    let mut best = -1.0f32;
    for k in 0..count {
        let l = (p[k] - p[i0]).length_squared();
        if l > best {
            best = l;
            i1 = k;
        }
    }
    let mut i2 = 0;
    best = -1.0;
    for k in 0..count {
        let a = area(p[i0], p[i1], p[k], n).abs();
        if a > best {
            best = a;
            i2 = k;
        }
    }
    let sg = sign(area(p[i0], p[i1], p[i2], n));
    let mut i3 = 0;
    best = f32::MIN;
    for k in 0..count {
        if k == i0 || k == i1 || k == i2 {
            continue;
        }
        let inside = (sg * area(p[i0], p[i1], p[k], n))
            .min(sg * area(p[i1], p[i2], p[k], n))
            .min(sg * area(p[i2], p[i0], p[k], n));
        if -inside > best {
            best = -inside;
            i3 = k;
        }
    }
    [i0, i1, i2, i3]
}

/// One point between A's edge along axis i and B's edge along its axis j, on separating
/// axis `a` (unit, A's frame).
fn edge_contact(
    ha: Vec3,
    fa: &Frame,
    hb: Vec3,
    t: Vec3,
    r: &[Vec3; 3],
    (i, j, a): (usize, usize, Vec3),
    margin: f32,
) -> Contacts {
    let a = a * sign(t.dot(a));
    // A's edge farthest along +a, B's farthest along −a.
    let mut ca = ha * Vec3::new(sign(a.x), sign(a.y), sign(a.z));
    ca[i] = 0.0;
    let ab = Vec3::new(a.dot(r[0]), a.dot(r[1]), a.dot(r[2]));
    let mut cb = t;
    for k in 0..3 {
        if k != j {
            cb -= r[k] * (sign(ab[k]) * hb[k]);
        }
    }
    let (sa, sb) = segment_params(ca, axis(i), ha[i], cb, r[j], hb[j]);
    let pa = ca + axis(i) * sa;
    let pb = cb + r[j] * sb;
    let dist = (pb - pa).dot(a);
    if dist > margin {
        return Contacts::none();
    }
    let edge_a = edge_code(i, a);
    let edge_b = edge_code(j, -Vec3::new(sign(ab.x), sign(ab.y), sign(ab.z)));
    let mut out = Contacts::new(rot(fa.q, a), case::EDGE_EDGE);
    out.push(edge_a | edge_b << 5, fa.to_world(pa), fa.to_world(pb), dist);
    out
}
