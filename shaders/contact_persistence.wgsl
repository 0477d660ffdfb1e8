// A primitive pair's manifold from step to step: the port of
// src/pipeline/collision/primitive/persistence.rs (same names, constants and order of
// operations; read the Rust for the why). narrow_phase.wgsl (`collide`) and common.wgsl
// are prepended. `update_contact` carries the pair's old manifold while it is coherent,
// else finds the points again and ties each to the old point it continues.

// PrimitiveContact.
struct PairContact {
    manifold: Manifold,
    prev: vec4<u32>,
    normal_a: vec4<f32>,
    normal_b: vec4<f32>,
};

const NO_OLD: u32 = 0xffffffffu;
const COHERENT_COS: f32 = 0.9998477;
const COHERENT_SLIDE_SQ: f32 = 1e-6;
const CONTINUE_SHARE: f32 = 0.1;
const CONTINUE_COS: f32 = 0.95;

// PrimitiveShape::size.
fn shape_size(s: Shape) -> f32 {
    switch s.kind {
        case 0u: { return s.dims.x; }
        case 1u: { return s.dims.y; }
        case 2u: { return min(min(s.dims.x, s.dims.y), s.dims.z); }
        default: { return 3.4028235e38; }
    }
}

struct Carried {
    ok: bool,
    state: PairContact,
};

fn carried(old: PairContact, pose_a: Pose, pose_b: Pose) -> Carried {
    var out = Carried(false, old);
    let m = old.manifold;
    if m.count == 0u {
        return out;
    }
    let n = qrot(pose_a.q, old.normal_a.xyz);
    let nb = qrot(pose_b.q, old.normal_b.xyz);
    if -dot(n, nb) < COHERENT_COS {
        return out;
    }
    for (var i = 0u; i < m.count; i++) {
        let wa = pose_a.p.xyz + qrot(pose_a.q, m.points[i].local_a.xyz);
        let wb = pose_b.p.xyz + qrot(pose_b.q, m.points[i].local_b.xyz);
        let dist = dot(wb - wa, n);
        if dist * m.points[i].local_a.w < 0.0 {
            return out;
        }
        let slide = wb - n * dist - wa;
        if dot(slide, slide) > COHERENT_SLIDE_SQ {
            return out;
        }
        out.state.manifold.points[i].local_a.w = dist;
    }
    out.state.manifold.normal = vec4<f32>(n, 0.0);
    out.ok = true;
    return out;
}

fn continue_points(next: ptr<function, PairContact>, old: PairContact, tol: f32) {
    let m = (*next).manifold;
    let om = old.manifold;
    var claimed = vec4<bool>(false);
    var matched = vec4<bool>(false);
    for (var i = 0u; i < m.count; i++) {
        for (var j = 0u; j < om.count; j++) {
            if !claimed[j] && om.ids[j] == m.ids[i] {
                (*next).prev[i] = old.prev[j];
                claimed[j] = true;
                matched[i] = true;
                break;
            }
        }
    }
    if om.count == 0u || dot(m.normal.xyz, om.normal.xyz) < CONTINUE_COS {
        return;
    }
    for (var i = 0u; i < m.count; i++) {
        if matched[i] {
            continue;
        }
        let p = m.points[i].local_a.xyz;
        var best = NO_OLD;
        var best_d2 = tol * tol;
        for (var j = 0u; j < om.count; j++) {
            if claimed[j] {
                continue;
            }
            let d = om.points[j].local_a.xyz - p;
            let d2 = dot(d, d);
            if d2 <= best_d2 && (best == NO_OLD || d2 < best_d2) {
                best = j;
                best_d2 = d2;
            }
        }
        if best != NO_OLD {
            (*next).prev[i] = old.prev[best];
            claimed[best] = true;
        }
    }
}

// PrimitiveContact::update (`has_old` false: a new pair, `old` is not read).
fn update_contact(pair: Pair, margin: f32, has_old: bool, old: PairContact) -> PairContact {
    if has_old {
        let c = carried(old, pair.pose_a, pair.pose_b);
        if c.ok {
            return c.state;
        }
    }
    return found_contact(pair, margin, has_old, old);
}

// The part of `update_contact` after a carry failed: the points found again and tied to
// the old ones they continue.
fn found_contact(pair: Pair, margin: f32, has_old: bool, old: PairContact) -> PairContact {
    let m = collide(pair.a, pair.pose_a, pair.b, pair.pose_b, margin);
    let n = m.normal.xyz;
    var next = PairContact(
        m,
        vec4<u32>(NEW_POINT),
        vec4<f32>(qrot(qconj(pair.pose_a.q), n), 0.0),
        vec4<f32>(qrot(qconj(pair.pose_b.q), -n), 0.0),
    );
    if has_old {
        continue_points(&next, old, CONTINUE_SHARE * min(shape_size(pair.a), shape_size(pair.b)));
    }
    return next;
}
