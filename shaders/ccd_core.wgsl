// The additive CCD with a minimum separation (`accd_points`), shared by the standalone
// kernels (ccd.wgsl, prepended with this file) and the deformables' contact advance in the
// step (surface_contact.wgsl). The including module declares `cp: CcdParams` (a uniform, or
// a private copy of one: `pin` needs its `zero` to be unknown to the compiler).
//
// `ccd` is a line-by-line port of src/ccd/accd.rs (`Frame::new`, `Frame::certify`, `add_down`,
// `accd`) and of the closest-point difference `diff` of src/ccd/distance.rs (same function
// names, same order of operations), so read the Rust for the why of each step. What differs is
// what WGSL's floating-point rules (WGSL spec, "Differences from IEEE-754", "Floating Point
// Accuracy", "Reassociation and Fusion") require; each difference is marked `WGSL:` where it
// is made. The margins come from the host (`CcdParams`): `gpu::ccd::CcdMargins::WGSL`, for
// which the argument below holds, or the CPU's own margins (`CcdMargins::CPU`). A device that
// happens to compute like the CPU (IEEE round to nearest, nothing fused or reassociated:
// lavapipe on x86) returns, with either, the bits of the Rust run with the same margins
// (`ccd::*_accd_with_margins`), as a check of the port.
//
// # Why the kernel is conservative under WGSL's rules
//
// The Rust argument (src/ccd/mod.rs, "Why it is conservative in f32") assumes IEEE f32:
// round to nearest (error ≤ u = 2⁻²⁴ relative), a correctly rounded `/` and `sqrt`, operations
// in program order. WGSL guarantees less, and every gap is closed here rather than hoped away:
//
// 1. `+ − ×` are "correctly rounded", which WGSL defines as *either* neighbour of the exact
//    result ("No rounding mode is specified"): the error is below 1 ulp, ε = 2u, twice IEEE's.
// 2. `x / y` is only 2.5 ulp (5u), and only for |y| in [2⁻¹²⁶, 2¹²⁶]: outside that range its
//    accuracy is undefined. Every division here has a divisor checked to be at least 2⁻¹²⁶
//    (and at most 2¹²⁶ by the input domain below); `sqrt` is "inherited from
//    1.0 / inverseSqrt(x)": 2 ulp then 2.5 ulp, 9u.
// 3. "An implementation may reassociate operations" and "may fuse operations" (a*b + c into
//    an FMA) if no less accurate. Fusion only removes roundings, inside every bound below.
//    Reassociation can move a rounding onto a large intermediate: `(x₁ − c₁) − (x₀ − c₀)`
//    rewritten as `(x₁ − x₀) − (c₁ − c₀)` rounds relative to the world coordinates instead of
//    the pair's extent, and `(t + dt) − t` rewritten as `dt` defeats `add_down`'s exact
//    overshoot test. So the values the argument is about are passed through `pin` (an
//    integer XOR with the uniform `cp.zero`, which is 0 at run time but unknown to the
//    compiler): a pinned value is computed once and no expression can be rewritten across it.
//    Pinned: the centroids, the centroid-relative start and end positions `y0`, `y1`, the
//    displacements `u`, the positions `z` at t, each support gap, and both operands of the
//    sum in `add_down`. What is left unpinned is sums and products of a few terms whose every
//    order is inside the bounds (dot products, the slack and rate sums).
// 4. Subnormal inputs and outputs of any operation may be flushed to zero: absolute losses
//    below 2⁻¹²⁶ per operation, covered by the absolute floors (below).
// 5. "Implementations may assume that overflow, infinities, and NaNs are not present": a
//    NaN or an overflow gives an indeterminate value, and `!(x > y)` can no longer be relied
//    on to catch a NaN. So no NaN or infinity may arise: the query's coordinates are read as
//    bits and must satisfy |x| < 2²⁴ (WGSL: inputs outside this domain, or not finite, give
//    t = 0, as a non-finite input does on the CPU, whose domain is |x| < 1e18), ξ is
//    sanitised from its bits, and the closest-point direction — the only quantity that may be
//    inaccurate by design, since any direction gives a valid support-gap bound — is checked
//    on its bits to be finite and below 2⁴⁰ per component before anything certified uses it.
//    With |x| < 2²⁴, centroid-relative coordinates are below 2²⁵, displacements below 2²⁶,
//    and no square, product or quotient in the certification overflows.
// 6. The sign of a zero may be ignored: the reported toi is written with its sign bit cleared,
//    so that its bits order like the number (`earliest`).
//
// With ε = 2u, R the largest centroid-relative coordinate and V the largest displacement
// coordinate (as in the Rust), the Rust's four bounds become:
//
// * Positions: each coordinate of a computed z is within 2ε(R + V) of the exact relative
//   trajectory (the pinned centroid is a common translation; y0, y1, u, u·t and the sum round
//   once each), so a distance is off by at most 2·√3·2ε(R + V) = 13.9u(R + V).
// * Gap: D = z_i − z_j (1 rounding), n·D (3 products, 2 sums, any order: 3ε), so n·D is off by
//   at most 4ε|n||D| ≤ 27.8u(R + V)|n|; 1/sqrt(n·n) is off by a relative 3ε/2 (n·n) + 9u
//   (sqrt) + 5u (division) = 17u, and the product by 2u more: 19u relative. With the
//   positions: 19u|g| + 41.6u(R + V), and 4u(|g| + slack) for the two subtractions of the
//   margins. The margins used (CcdMargins::WGSL) are a relative 64u = 2⁻¹⁸ (needed: 23u) and
//   an absolute 64u(R + V) = 2⁻¹⁸(R + V) (needed: 41.6u(R + V)); the Rust's are 16u and 32u.
// * Rate: the exact displacements differ from the computed ones by √3ε(2R + V) per point,
//   6.9u(2R + V) for the two terms of L; the computed L (dot products 3u after the root,
//   sqrt 9u, the sum 2u) is low by at most 14u relative and the four-term sum of the rate
//   by 6u. Used: a relative 64u (needed 20u) and 16u(2R + V) = 2⁻²⁰(2R + V) (needed 6.9u).
// * Direction step: the closing rate along n̂ of a point pair is off by at most
//   13.9uR + 34.6uV plus 19u relative; `closing` adds 64u relative and 64u(R + V).
// * Steps: (d − ξ)/rate·(1 − REL) rounds 3 times (2u + 5u + 2u = 9u), under the 64u
//   margin, which also keeps the certified inequality strict. In `add_down`, with t and dt
//   pinned, s − t is exact when t ≤ s ≤ 2t and t ≥ 2⁻¹⁰⁰ (Sterbenz: its exact value is a float,
//   and a correctly rounded result is exact when it is representable, in either rounding
//   direction; it is a multiple of ulp(t) ≥ 2⁻¹²³, not subnormal, so not flushed), so an
//   overshoot is detected exactly and the float below taken (below the exact sum: s is a
//   neighbour of it); when s > 2t the overshoot is below ulp(s) ≤ 4u·dt, inside the margin.
//   WGSL: for 0 < t < 2⁻¹⁰⁰ the float below the sum is taken unconditionally.
// * Floors: a flushed subnormal loses below 2⁻¹²⁶ per operation; a support gap has at most
//   8 such losses divided by |n| ≥ 1e-15 (MIN_DIR_SQ = 1e-30), 6e-23, under the slack floor
//   1e-21 (the Rust's is 1e-22 against 3.5e-23); squared speeds below 3·2⁻¹²⁶ hide at most
//   3.8e-19 under the rate floor 1e-18 (as in the Rust).
//
// Termination does not depend on any of this: every loop is bounded (the iteration cap, the
// fixed candidate and pair counts). Mesa's llvmpipe/lavapipe stops a loop silently after
// 65,535 iterations of one invocation: the default cap (256 steps of at most a few dozen
// loop iterations each) stays far below it.

// A lane's index in a dispatch of 64-wide workgroups on a 2-D grid (rows of `nwg.x`
// workgroups past the per-dimension limit of 65,535); the kernels of the modules that
// include this file share it, as the rigid modules share common.wgsl's `grid_index`.
fn lane_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * 64u + lid;
}

struct CcdParams {
    count: u32,
    max_iters: u32,
    eta: f32, // sanitised on the host exactly as `accd` does (NaN → 1, clamped to [1e-6, 1])
    zero: u32, // always 0: the operand of `pin`
    rel: f32,
    slack_per_extent: f32,
    rate_slack_per_extent: f32,
    slack_floor: f32,
    rate_floor: f32,
    point_count: u32, // `earliest`: length of `earliest_bits`
    pad0: u32,
    pad1: u32,
};

// gpu::ccd::CcdQuery: the four points at t = 0, then at t = 1, as f32 bits (read as bits so
// that the domain check sees them before any floating-point operation does).
struct CcdOut {
    toi: f32, // 1.0 when no hit
    hit: u32,
    stop: u32,
    iterations: u32,
};

const POINT_TRIANGLE: u32 = 0u;
const EDGE_EDGE: u32 = 1u;

// AccdStop.
const STOP_CLEAR: u32 = 0u;
const STOP_START_INSIDE: u32 = 1u;
const STOP_GAP: u32 = 2u;
const STOP_STALLED: u32 = 3u;
const STOP_ITERATION_CAP: u32 = 4u;

const DEGENERATE_FACE: f32 = 1e-12f;
const PARALLEL: f32 = 1e-12f;
const MIN_DIR_SQ: f32 = 1e-30f;
const F32_MAX: f32 = 0x1.fffffep+127f;
// WGSL: the smallest normal f32; divisors are kept at or above it (the range of x / y's
// accuracy bound).
const MIN_NORMAL: f32 = 0x1p-126f;
// WGSL: |x| < 2^24 for every input coordinate (bits of |x| below those of 2^24).
const DOMAIN_BITS: u32 = 0x4b800000u;
// WGSL: |n_k| < 2^40 for the direction's components.
const DIRECTION_BITS: u32 = 0x53800000u;
// WGSL: the largest ξ used (a larger one gives t = 0 anyway: distances here are below 2^27).
const MAX_MIN_SEP: f32 = 0x1p64f;
// WGSL: below this t, `add_down` takes the float below the sum unconditionally.
const TINY_T: f32 = 0x1p-100f;
// The float bits of 1.0: the no-hit time, above every hit's key in `earliest`.
const ONE_BITS: u32 = 0x3f800000u;

// ------------------------------------------------------------------ helpers

// An optimisation barrier: the same value, from an integer operation the compiler cannot
// see through, so no reassociation or fusion crosses it (see 3 above).
fn pin(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ cp.zero);
}

fn pin3(v: vec3<f32>) -> vec3<f32> {
    return bitcast<vec3<f32>>(bitcast<vec3<u32>>(v) ^ vec3<u32>(cp.zero));
}

// glam's order: (x·x') + (y·y') + (z·z').
fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 {
    let p = pin3(a * b);
    return p.x + p.y + p.z;
}

// glam's order.
fn cross3(a: vec3<f32>, b: vec3<f32>) -> vec3<f32> {
    let p = pin3(vec3<f32>(a.y * b.z, a.z * b.x, a.x * b.y));
    let q = pin3(vec3<f32>(b.y * a.z, b.z * a.x, b.x * a.y));
    return p - q;
}

fn max_element(v: vec3<f32>) -> f32 {
    return max(v.x, max(v.y, v.z));
}

// ------------------------------------------------------------------ distance.rs (diff only)

fn reject(w: vec3<f32>, e: vec3<f32>, ee: f32) -> vec3<f32> {
    return w - pin3(e * (dot3(w, e) / ee));
}

fn reject_plane(w: vec3<f32>, d1: vec3<f32>, d2: vec3<f32>) -> vec3<f32> {
    let d1d1 = dot3(d1, d1);
    let w1 = reject(w, d1, d1d1);
    let f = reject(d2, d1, d1d1);
    let ff = dot3(f, f);
    var w2 = w1;
    // WGSL: `ff > 0` in the Rust; the divisor must be normal.
    if (ff >= MIN_NORMAL) {
        w2 = reject(w1, f, ff);
    }
    return reject(w2, d1, d1d1);
}

// `point_segment(p, a, b).2`: p minus its closest point on [a, b].
fn point_segment(p: vec3<f32>, a: vec3<f32>, b: vec3<f32>) -> vec3<f32> {
    let e = b - a;
    let ap = p - a;
    let ee = dot3(e, e);
    // WGSL: `!(ee > 0)` in the Rust; the divisor must be normal.
    if (!(ee >= MIN_NORMAL)) {
        return ap;
    }
    let s = dot3(ap, e) / ee;
    if (!(s > 0.0)) {
        return ap;
    } else if (s >= 1.0) {
        return p - b;
    }
    return reject(ap - pin3(e * s), e, ee);
}

// `point_triangle_closest(p, a, b, c).diff`.
fn point_triangle_diff(p: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> vec3<f32> {
    let ab = b - a;
    let ac = c - a;
    let bc = c - b;
    let n = cross3(ab, ac);
    let nn = dot3(n, n);
    let l2 = max(max(dot3(ab, ab), dot3(ac, ac)), dot3(bc, bc));
    // WGSL: `nn >= MIN_NORMAL` added (the divisor of beta and gamma).
    if (nn > DEGENERATE_FACE * l2 * l2 && nn >= MIN_NORMAL) {
        let pa = a - p;
        let pb = b - p;
        let pc = c - p;
        let wa = dot3(cross3(pb, pc), n);
        let wb = dot3(cross3(pc, pa), n);
        let wc = dot3(cross3(pa, pb), n);
        if (wa >= 0.0 && wb >= 0.0 && wc >= 0.0) {
            let beta = wb / nn;
            let gamma = wc / nn;
            return reject_plane(-pa - pin3(ab * beta) - pin3(ac * gamma), ab, ac);
        }
    }
    // The nearest of the three edges (first one on ties).
    let e0 = point_segment(p, a, b);
    let e1 = point_segment(p, b, c);
    let e2 = point_segment(p, c, a);
    var best = e0;
    var best_d2 = dot3(e0, e0);
    let d1 = dot3(e1, e1);
    if (d1 < best_d2) {
        best = e1;
        best_d2 = d1;
    }
    let d2 = dot3(e2, e2);
    if (d2 < best_d2) {
        best = e2;
    }
    return best;
}

// `edge_edge_closest(ea0, ea1, eb0, eb1).diff`.
fn edge_edge_diff(ea0: vec3<f32>, ea1: vec3<f32>, eb0: vec3<f32>, eb1: vec3<f32>) -> vec3<f32> {
    let da = ea1 - ea0;
    let db = eb1 - eb0;
    let n = cross3(da, db);
    let nn = dot3(n, n);
    // WGSL: `nn >= MIN_NORMAL` added (the divisor of s and t).
    if (nn > PARALLEL * dot3(da, da) * dot3(db, db) && nn >= MIN_NORMAL) {
        let q = eb0 - ea0;
        let s = dot3(cross3(q, db), n) / nn;
        let t = dot3(cross3(q, da), n) / nn;
        if (s > 0.0 && s < 1.0 && t > 0.0 && t < 1.0) {
            return reject_plane(pin3(da * s) - pin3(db * t) - q, da, db);
        }
    }
    // The nearest endpoint–segment pair; candidates 2 and 3 measure from B to A.
    let c0 = point_segment(ea0, eb0, eb1);
    let c1 = point_segment(ea1, eb0, eb1);
    let c2 = point_segment(eb0, ea0, ea1);
    let c3 = point_segment(eb1, ea0, ea1);
    var best = c0;
    var flip = false;
    var best_d2 = dot3(c0, c0);
    let d1 = dot3(c1, c1);
    if (d1 < best_d2) {
        best = c1;
        best_d2 = d1;
    }
    let d2 = dot3(c2, c2);
    if (d2 < best_d2) {
        best = c2;
        best_d2 = d2;
        flip = true;
    }
    let d3 = dot3(c3, c3);
    if (d3 < best_d2) {
        best = c3;
        flip = true;
    }
    if (flip) {
        return -best;
    }
    return best;
}

// ------------------------------------------------------------------ accd.rs

struct Frame {
    y0: array<vec3<f32>, 4>,
    u: array<vec3<f32>, 4>,
    slack: f32,
    rate: f32,
};

// `Pair::rate`.
fn pair_rate(kind: u32, u: array<vec3<f32>, 4>) -> f32 {
    if (kind == EDGE_EDGE) {
        let a = max(dot3(u[0], u[0]), dot3(u[1], u[1]));
        let b = max(dot3(u[2], u[2]), dot3(u[3], u[3]));
        return sqrt(a) + sqrt(b);
    }
    let tri = max(max(dot3(u[1], u[1]), dot3(u[2], u[2])), dot3(u[3], u[3]));
    return sqrt(dot3(u[0], u[0])) + sqrt(tri);
}

fn max_abs(v: array<vec3<f32>, 4>) -> f32 {
    var m = 0.0;
    m = max(m, max_element(abs(v[0])));
    m = max(m, max_element(abs(v[1])));
    m = max(m, max_element(abs(v[2])));
    m = max(m, max_element(abs(v[3])));
    return m;
}

// `Frame::new`. WGSL: the Rust's finiteness checks (centroids, rate, r² + v²) are replaced
// by the input domain checked in `accd` (|x| < 2^24), under which none of them can fail.
fn frame_new(kind: u32, x0: array<vec3<f32>, 4>, x1: array<vec3<f32>, 4>) -> Frame {
    let c0 = pin3((x0[0] + x0[1] + x0[2] + x0[3]) * 0.25);
    let c1 = pin3((x1[0] + x1[1] + x1[2] + x1[3]) * 0.25);
    var y0: array<vec3<f32>, 4>;
    var y1: array<vec3<f32>, 4>;
    var u: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        y0[k] = pin3(x0[k] - c0);
        y1[k] = pin3(x1[k] - c1);
    }
    for (var k = 0u; k < 4u; k++) {
        u[k] = pin3(y1[k] - y0[k]);
    }
    let r = max(max_abs(y0), max_abs(y1));
    let v = max_abs(u);
    let slack = pin(cp.slack_per_extent * (r + v)) + cp.slack_floor;
    let l = pair_rate(kind, u);
    let rate = l + pin(l * cp.rel) + pin(cp.rate_slack_per_extent * (v + 2.0 * r)) + cp.rate_floor;
    return Frame(y0, u, slack, rate);
}

// The certified lower bound `d` and the direction step of `Frame::certify`.
struct Cert {
    d: f32,
    step: f32,
};

// One point pair (i, j) of `Frame::certify`'s loop.
fn certify_pair(
    c: Cert,
    n: vec3<f32>,
    inv: f32,
    zi: vec3<f32>,
    zj: vec3<f32>,
    ui: vec3<f32>,
    uj: vec3<f32>,
    slack: f32,
    min_sep: f32,
) -> Cert {
    let g0 = dot3(n, zi - zj) * inv;
    let g = pin(g0 - pin(abs(g0) * cp.rel) - slack);
    let s = dot3(n, ui - uj) * inv;
    let closing = -s + pin(abs(s) * cp.rel) + slack;
    let d = min(c.d, g);
    let room = g - min_sep;
    var step = c.step;
    if (room > 0.0) {
        if (closing * step < room) {
            // The step stands.
        } else if (closing >= MIN_NORMAL) {
            step = min(step, room / closing);
        } else {
            // WGSL: a subnormal divisor (room ≤ 2^-125 here) certifies nothing.
            step = 0.0;
        }
    } else {
        step = 0.0;
    }
    return Cert(d, step);
}

// Bits of |x| below DIRECTION_BITS for every component: finite and below 2^40.
fn direction_ok(n: vec3<f32>) -> bool {
    let b = bitcast<vec3<u32>>(n) & vec3<u32>(0x7fffffffu);
    return all(b < vec3<u32>(DIRECTION_BITS));
}

// `Frame::certify`.
fn certify(f: Frame, kind: u32, t: f32, min_sep: f32) -> Cert {
    let z0 = pin3(f.y0[0] + pin3(f.u[0] * t));
    let z1 = pin3(f.y0[1] + pin3(f.u[1] * t));
    let z2 = pin3(f.y0[2] + pin3(f.u[2] * t));
    let z3 = pin3(f.y0[3] + pin3(f.u[3] * t));
    var n: vec3<f32>;
    if (kind == EDGE_EDGE) {
        n = edge_edge_diff(z0, z1, z2, z3);
    } else {
        n = point_triangle_diff(z0, z1, z2, z3);
    }
    // WGSL: not in the Rust (see 5 above).
    if (!direction_ok(n)) {
        return Cert(-f.slack, 0.0);
    }
    let nn = dot3(n, n);
    if (!(nn >= MIN_DIR_SQ)) {
        return Cert(-f.slack, 0.0);
    }
    let inv = 1.0 / sqrt(nn);
    var c = Cert(F32_MAX, 2.0);
    if (kind == EDGE_EDGE) {
        c = certify_pair(c, n, inv, z0, z2, f.u[0], f.u[2], f.slack, min_sep);
        c = certify_pair(c, n, inv, z0, z3, f.u[0], f.u[3], f.slack, min_sep);
        c = certify_pair(c, n, inv, z1, z2, f.u[1], f.u[2], f.slack, min_sep);
        c = certify_pair(c, n, inv, z1, z3, f.u[1], f.u[3], f.slack, min_sep);
    } else {
        c = certify_pair(c, n, inv, z0, z1, f.u[0], f.u[1], f.slack, min_sep);
        c = certify_pair(c, n, inv, z0, z2, f.u[0], f.u[2], f.slack, min_sep);
        c = certify_pair(c, n, inv, z0, z3, f.u[0], f.u[3], f.slack, min_sep);
    }
    return Cert(c.d, c.step * (1.0 - cp.rel));
}

fn float_below(s: f32) -> f32 {
    if (s > 0.0) {
        return bitcast<f32>(bitcast<u32>(s) - 1u);
    }
    return s;
}

// `add_down`: t + dt rounded so that it never exceeds the exact sum (t, dt ≥ 0).
fn add_down(t: f32, dt_in: f32) -> f32 {
    let dt = pin(dt_in);
    let s = pin(t + dt);
    // WGSL: below 2^-100, s − t may be subnormal (and flushed): no exact test.
    if (t > 0.0 && t < TINY_T) {
        return float_below(s);
    }
    if (s - t > dt) {
        return float_below(s);
    }
    return s;
}

fn out(toi: f32, hit: bool, stop: u32, iterations: u32) -> CcdOut {
    // WGSL: the sign of a zero may be ignored; a toi is never negative, so clear the bit.
    let bits = bitcast<u32>(toi) & 0x7fffffffu;
    return CcdOut(bitcast<f32>(bits), select(0u, 1u, hit), stop, iterations);
}

// `accd` of the points x0 (t = 0) and x1 (t = 1) of one pair (the coordinates as bits)
// with the minimum separation ξ (bits).
fn accd_points(kind: u32, x: array<u32, 24>, sep_bits: u32) -> CcdOut {
    // WGSL: the input domain (see 5 above), on the bits.
    var ok = kind == POINT_TRIANGLE || kind == EDGE_EDGE;
    for (var k = 0u; k < 24u; k++) {
        if ((x[k] & 0x7fffffffu) >= DOMAIN_BITS) {
            ok = false;
        }
    }
    // `if min_sep > 0 { min_sep } else { 0 }` on the bits: positive, not NaN (an infinite or
    // huge ξ becomes 2^64, which no start clears, as an infinite one does not on the CPU).
    var min_sep = 0.0;
    if (sep_bits > 0u && sep_bits <= 0x7f800000u) {
        min_sep = min(bitcast<f32>(sep_bits), MAX_MIN_SEP);
    }
    let eta = cp.eta;
    if (!ok) {
        return out(0.0, true, STOP_START_INSIDE, 0u);
    }
    var x0: array<vec3<f32>, 4>;
    var x1: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        x0[k] = bitcast<vec3<f32>>(vec3<u32>(x[3u * k], x[3u * k + 1u], x[3u * k + 2u]));
        x1[k] = bitcast<vec3<f32>>(vec3<u32>(x[12u + 3u * k], x[13u + 3u * k], x[14u + 3u * k]));
    }
    let frame = frame_new(kind, x0, x1);
    let c0 = certify(frame, kind, 0.0, min_sep);
    let d0 = c0.d;
    if (!(d0 > min_sep)) {
        return out(0.0, true, STOP_START_INSIDE, 0u);
    }
    let stop_gap = (1.0 - eta) * (d0 - min_sep);
    var t = 0.0;
    var d = d0;
    var dir_step = c0.step;
    for (var k = 0u; k < cp.max_iters; k++) {
        let room = max((d - min_sep) / frame.rate * (1.0 - cp.rel), dir_step);
        if (add_down(t, room) >= 1.0) {
            return out(1.0, false, STOP_CLEAR, k);
        }
        let next = add_down(t, room * eta);
        if (!(next > t)) {
            return out(t, true, STOP_STALLED, k);
        }
        t = next;
        let c = certify(frame, kind, t, min_sep);
        d = c.d;
        dir_step = c.step;
        if (!(d > min_sep && d - min_sep >= stop_gap)) {
            return out(t, true, STOP_GAP, k + 1u);
        }
    }
    return out(t, true, STOP_ITERATION_CAP, cp.max_iters);
}

