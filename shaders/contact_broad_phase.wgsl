// The deformable contact's broad phase on the device: every point–triangle and edge–edge
// pair whose boxes overlap in the cages of `pipeline::surface_contact::cages`, filtered
// as the CPU's `SurfaceContact::candidate_pairs` filters them (owners, shared points, the
// certified distance at R less the cages' reach), written sorted. ccd_core.wgsl is
// prepended (the lower bound is its `Frame::new` and `Frame::certify`, `cp` below); prefix
// sums run in scan.wgsl.
//
// The search is the rigid broad phase's (broad_phase.wgsl): a uniform grid in a hash table
// filled by a counting sort. Stored items are the triangles' and edges' boxes in four
// classes, each with its own cell size: 0 triangles and 1 edges on absolute boxes (pairs
// between objects), 2 triangles and 3 edges of deformables on comoving boxes (pairs within
// one deformable, which is a space of its own: space = class + 4 × body). A query visits the
// cells its box covers and takes an item only in the cell that holds the lower corner of
// the two boxes' intersection, so each pair is found once; items that cover more than
// MAX_CELLS cells are listed apart and tested against every query of their class. Queries
// are the surface points (then the rigid points) against the triangles, and the edges
// against the later edges. Each query's pairs are counted, the counts summed, and the
// pairs written into the query's range and sorted there: the list does not depend on the
// order the atomics take.
//
// Dispatch order: cb_boxes (the items' and queries' boxes from the points' cages),
// cb_count_cells (into the cleared cursors and counters), scan of the buckets, cb_fill
// (from cursors copied from the bucket starts), cb_count_pairs, scan of the pair counts,
// cb_write_pairs.

struct CbParams {
    n_items: u32,
    n_point_queries: u32,
    n_edges: u32,
    table_mask: u32,
    capacity: u32,
    n_linked: u32,
    soft_points: u32,
    n_soft_edges: u32,
    // Where each class starts among the items (class 4: n_items).
    class_start: vec4<u32>,
    inv_cell: vec4<f32>,
    origin: array<vec4<f32>, 4>,
    min_sep: f32,
    // (1 + 1e-5) rounded to f32 on the host, as the CPU's filter rounds it.
    reach_scale: f32,
    // Entries the entries buffer holds (a fill past it is dropped; the host reads the
    // buckets' total and runs again with room for them).
    entry_capacity: u32,
    pad1: u32,
};

struct Item {
    lo: vec4<f32>, // w: the space's bits
    hi: vec4<f32>,
};

const MAX_CELLS: i32 = 64;
const MAX_QUERY_CELLS: i32 = 512;
const RIGID: u32 = 0x80000000u;
const KIND_POINT_TRIANGLE: u32 = 0u;
const KIND_EDGE_EDGE: u32 = 1u;
// Pairs a query keeps from its count to its write (a cloth's have one or two on average).
const FOUND_SLOTS: u32 = 8u;

@group(0) @binding(0) var<uniform> cbp: CbParams;
@group(0) @binding(1) var<uniform> cp: CcdParams;
// Written by cb_boxes.
@group(0) @binding(2) var<storage, read_write> items: array<Item>;
// Per triangle: its points and its owner (a deformable's index, or RIGID | body).
@group(0) @binding(3) var<storage, read> tris: array<vec4<u32>>;
// Per edge: its points, its owner, 0.
@group(0) @binding(4) var<storage, read> edges: array<vec4<u32>>;
// Per point: its position at R and its absolute reach.
@group(0) @binding(5) var<storage, read> points: array<vec4<f32>>;
// Per deformable point: its comoving reach.
@group(0) @binding(6) var<storage, read> comoving_reach: array<f32>;
// Per point: its owner.
@group(0) @binding(7) var<storage, read> point_owner: array<u32>;
// The point queries' points.
@group(0) @binding(8) var<storage, read> query_points: array<u32>;
// Per point query: its absolute box, then its comoving box (written by cb_boxes).
@group(0) @binding(9) var<storage, read_write> query_boxes: array<Item>;
// (deformable, body) pairs joined by an attachment, ascending: they make no pairs.
@group(0) @binding(10) var<storage, read> linked: array<vec2<u32>>;
@group(0) @binding(11) var<storage, read_write> bucket_start: array<u32>;
@group(0) @binding(12) var<storage, read_write> cursor: array<atomic<u32>>;
// (item, cell x, y, z) per placed item and cell.
@group(0) @binding(13) var<storage, read_write> entries: array<vec4<u32>>;
@group(0) @binding(14) var<storage, read_write> large: array<u32>;
// 0: the large items.
@group(0) @binding(15) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(16) var<storage, read_write> pair_start: array<u32>;
// Per pair, 3 words: the kind in the top two bits over a, then b, then the lower bound's
// bits: the contact stage's candidate record (`cands` in surface_contact.wgsl), which
// the step copies from here instead of the host uploading it.
@group(0) @binding(17) var<storage, read_write> pairs: array<u32>;
// Per query: FOUND_SLOTS pairs (b, the lower bound's bits) found by the count.
@group(0) @binding(18) var<storage, read_write> found: array<vec2<u32>>;
// Per point, its cages (`pipeline::surface_contact::cages`) in 3 vec4s: the absolute box's
// corners, then a deformable point's comoving box's corners relative to its position at
// R, packed as the contact stage's `soft_cages` reads them (contact_advance.wgsl), which
// copies the deformable points' from here.
@group(0) @binding(19) var<storage, read> cages: array<vec4<f32>>;

fn class_of(i: u32) -> u32 {
    var c = 0u;
    for (var k = 1u; k < 4u; k++) {
        if i >= cbp.class_start[k] {
            c = k;
        }
    }
    return c;
}

fn cell_of(cls: u32, p: vec3<f32>) -> vec3<i32> {
    return vec3<i32>(floor((p - cbp.origin[cls].xyz) * cbp.inv_cell[cls]));
}

fn cells_in(lo: vec3<i32>, hi: vec3<i32>) -> i32 {
    // Each side at most MAX_QUERY_CELLS + 1 before the product, so it cannot overflow.
    let n = clamp(hi - lo + vec3<i32>(1), vec3<i32>(0), vec3<i32>(MAX_QUERY_CELLS + 1));
    return n.x * n.y * n.z;
}

fn hash(c: vec3<i32>, space: u32) -> u32 {
    let h = (bitcast<u32>(c.x) * 0x9E3779B1u) ^ (bitcast<u32>(c.y) * 0x85EBCA77u)
        ^ (bitcast<u32>(c.z) * 0xC2B2AE3Du) ^ (space * 0x27D4EB2Fu);
    return h & cbp.table_mask;
}

fn overlap(a: Item, b: Item) -> bool {
    return all(a.lo.xyz <= b.hi.xyz) && all(b.lo.xyz <= a.hi.xyz);
}

// Point `p`'s absolute cage, or its comoving cage placed at R.
fn cage_of(p: u32, comoving: bool) -> Item {
    let a = cages[3u * p];
    let b = cages[3u * p + 1u];
    let c = cages[3u * p + 2u];
    if comoving {
        let r = points[p].xyz;
        return Item(vec4<f32>(r + vec3<f32>(b.zw, c.x), 0.0), vec4<f32>(r + c.yzw, 0.0));
    }
    return Item(vec4<f32>(a.xyz, 0.0), vec4<f32>(a.w, b.xy, 0.0));
}

// The union of the cages of `n` points, widened by half the minimum separation, in
// `space` (the host's `Cages::absolute_box` and `comoving_box`, in the same order).
fn union_box(pts: array<u32, 3>, n: u32, comoving: bool, space: u32) -> Item {
    // (The host folds from infinities: the first point's box is what that gives.)
    let first = cage_of(pts[0], comoving);
    var lo = first.lo.xyz;
    var hi = first.hi.xyz;
    for (var k = 1u; k < n; k++) {
        let c = cage_of(pts[k], comoving);
        lo = min(lo, c.lo.xyz);
        hi = max(hi, c.hi.xyz);
    }
    let w = vec3<f32>(0.5 * cbp.min_sep);
    return Item(vec4<f32>(lo - w, bitcast<f32>(space)), vec4<f32>(hi + w, 0.0));
}

// The items' boxes (triangles and edges, absolute then comoving), then the point queries'
// (absolute, then comoving: a rigid point's is its absolute box).
@compute @workgroup_size(64)
fn cb_boxes(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if i < cbp.n_items {
        let cls = class_of(i);
        let b = i - cbp.class_start[cls];
        if cls == 0u || cls == 2u {
            let t = tris[b];
            let space = select(0u, 2u + 4u * t.w, cls == 2u);
            items[i] = union_box(array<u32, 3>(t.x, t.y, t.z), 3u, cls == 2u, space);
        } else {
            let e = edges[b];
            let space = select(1u, 3u + 4u * e.z, cls == 3u);
            items[i] = union_box(array<u32, 3>(e.x, e.y, 0u), 2u, cls == 3u, space);
        }
        return;
    }
    let q = i - cbp.n_items;
    if q >= cbp.n_point_queries {
        return;
    }
    let p = query_points[q];
    let absolute = union_box(array<u32, 3>(p, 0u, 0u), 1u, false, 0u);
    query_boxes[2u * q] = absolute;
    if p < cbp.soft_points {
        query_boxes[2u * q + 1u] = union_box(array<u32, 3>(p, 0u, 0u), 1u, true, 0u);
    } else {
        query_boxes[2u * q + 1u] = absolute;
    }
}

// The cells item `i` covers, in its class's grid and space.
struct Cells {
    lo: vec3<i32>,
    hi: vec3<i32>,
    space: u32,
};

fn cells_of(i: u32) -> Cells {
    let it = items[i];
    let cls = class_of(i);
    return Cells(cell_of(cls, it.lo.xyz), cell_of(cls, it.hi.xyz), bitcast<u32>(it.lo.w));
}

// Counts each cell's entries into the cursors; an item that covers more than MAX_CELLS
// cells is listed apart instead.
@compute @workgroup_size(64)
fn cb_count_cells(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if i >= cbp.n_items {
        return;
    }
    let c = cells_of(i);
    if cells_in(c.lo, c.hi) > MAX_CELLS {
        large[atomicAdd(&counters[0], 1u)] = i;
        return;
    }
    for (var x = c.lo.x; x <= c.hi.x; x++) {
        for (var y = c.lo.y; y <= c.hi.y; y++) {
            for (var z = c.lo.z; z <= c.hi.z; z++) {
                atomicAdd(&cursor[hash(vec3<i32>(x, y, z), c.space)], 1u);
            }
        }
    }
}

// Places each cell's entries from the cursors (the bucket starts).
@compute @workgroup_size(64)
fn cb_fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if i >= cbp.n_items {
        return;
    }
    let c = cells_of(i);
    if cells_in(c.lo, c.hi) > MAX_CELLS {
        return;
    }
    for (var x = c.lo.x; x <= c.hi.x; x++) {
        for (var y = c.lo.y; y <= c.hi.y; y++) {
            for (var z = c.lo.z; z <= c.hi.z; z++) {
                let cell = vec3<i32>(x, y, z);
                let slot = atomicAdd(&cursor[hash(cell, c.space)], 1u);
                if slot < cbp.entry_capacity {
                    entries[slot] = vec4<u32>(i, bitcast<vec3<u32>>(cell));
                }
            }
        }
    }
}

// ------------------------------------------------------------------ one query

// The query being answered, and where its pairs go (write pass) or how many it has.
var<private> q_kind: u32;
var<private> q_a: u32;
var<private> q_owner: u32;
var<private> q_ends: vec2<u32>;
var<private> q_query: u32;
var<private> q_write: bool;
var<private> q_base: u32;
var<private> q_count: u32;

fn is_linked(soft: u32, body: u32) -> bool {
    // Binary search of (soft, body) in the ascending list.
    var lo = 0u;
    var hi = cbp.n_linked;
    let key = vec2<u32>(soft, body);
    while lo < hi {
        let mid = (lo + hi) / 2u;
        let m = linked[mid];
        if m.x < key.x || (m.x == key.x && m.y < key.y) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo < cbp.n_linked && all(linked[lo] == key);
}

// `SurfaceContact::may_pair`: primitives of two objects may make a pair.
fn may_pair(a: u32, b: u32) -> bool {
    if a == b || ((a & RIGID) != 0u && (b & RIGID) != 0u) {
        return false;
    }
    if (a & RIGID) != 0u {
        return !is_linked(b, a & ~RIGID);
    }
    if (b & RIGID) != 0u {
        return !is_linked(a, b & ~RIGID);
    }
    return true;
}

fn reach_of(p: u32, comoving: bool) -> f32 {
    if comoving {
        return comoving_reach[p];
    }
    return points[p].w;
}

// Within the input domain (ccd_core.wgsl: bits of |x| below 2^24).
fn in_domain(x: array<vec3<f32>, 4>) -> bool {
    var ok = true;
    for (var k = 0u; k < 4u; k++) {
        let b = bitcast<vec3<u32>>(x[k]) & vec3<u32>(0x7fffffffu);
        ok = ok && all(b < vec3<u32>(DOMAIN_BITS));
    }
    return ok;
}

// `SurfaceContact::may_meet` of the pair (q_kind, q_a, b): the lower bound's bits, or
// 0xffffffff when the pair cannot come within ξ.
fn lower_if_kept(b: u32) -> u32 {
    var pts: array<u32, 4>;
    if q_kind == KIND_POINT_TRIANGLE {
        let t = tris[b];
        pts = array<u32, 4>(q_a, t.x, t.y, t.z);
    } else {
        let f = edges[b];
        pts = array<u32, 4>(q_ends.x, q_ends.y, f.x, f.y);
    }
    let same_body = pts[0] < cbp.soft_points && pts[3] < cbp.soft_points
        && point_owner[pts[0]] == point_owner[pts[3]];
    var first: f32;
    var second: f32;
    if q_kind == KIND_POINT_TRIANGLE {
        first = reach_of(pts[0], same_body);
        second = max(max(reach_of(pts[1], same_body), reach_of(pts[2], same_body)), reach_of(pts[3], same_body));
    } else {
        first = max(reach_of(pts[0], same_body), reach_of(pts[1], same_body));
        second = max(reach_of(pts[2], same_body), reach_of(pts[3], same_body));
    }
    var x: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        x[k] = points[pts[k]].xyz;
    }
    var lower = 0.0;
    if in_domain(x) {
        let kind = select(POINT_TRIANGLE, EDGE_EDGE, q_kind == KIND_EDGE_EDGE);
        lower = certify(frame_new(kind, x, x), kind, 0.0, 0.0).d;
    }
    let scaled = pin((first + second) * cbp.reach_scale);
    if pin(lower - scaled) <= cbp.min_sep {
        return bitcast<u32>(lower);
    }
    return 0xffffffffu;
}

// Item `i` of class `class` found by the query: its pair, if it makes one.
fn consider(cls: u32, i: u32) {
    let b = i - cbp.class_start[cls];
    switch cls {
        case 0u: {
            if !may_pair(q_owner, tris[b].w) {
                return;
            }
        }
        case 2u: {
            let t = tris[b];
            if t.x == q_a || t.y == q_a || t.z == q_a {
                return;
            }
        }
        case 1u: {
            if b <= q_a || !may_pair(q_owner, edges[b].z) {
                return;
            }
        }
        default: {
            let f = edges[b];
            if b <= q_a || f.x == q_ends.x || f.x == q_ends.y || f.y == q_ends.x || f.y == q_ends.y {
                return;
            }
        }
    }
    let lower = lower_if_kept(b);
    if lower == 0xffffffffu {
        return;
    }
    if q_write {
        if q_count < cbp.capacity - min(q_base, cbp.capacity) {
            write_pair(q_base + q_count, q_kind, q_a, b, lower);
        }
    } else if q_count < FOUND_SLOTS {
        found[q_query * FOUND_SLOTS + q_count] = vec2<u32>(b, lower);
    }
    q_count += 1u;
}

// Every item of `class` in `space` whose box overlaps `q`, each once.
fn search(cls: u32, space: u32, q: Item) {
    let lo = cell_of(cls, q.lo.xyz);
    let hi = cell_of(cls, q.hi.xyz);
    if cells_in(lo, hi) > MAX_QUERY_CELLS {
        for (var i = cbp.class_start[cls]; i < cbp.class_start[cls + 1u]; i++) {
            let it = items[i];
            if bitcast<u32>(it.lo.w) == space && overlap(q, it) {
                consider(cls, i);
            }
        }
        return;
    }
    for (var x = lo.x; x <= hi.x; x++) {
        for (var y = lo.y; y <= hi.y; y++) {
            for (var z = lo.z; z <= hi.z; z++) {
                let c = vec3<i32>(x, y, z);
                let k = hash(c, space);
                for (var e = bucket_start[k]; e < bucket_start[k + 1u]; e++) {
                    let entry = entries[e];
                    if any(bitcast<vec3<i32>>(entry.yzw) != c) {
                        continue;
                    }
                    let it = items[entry.x];
                    if bitcast<u32>(it.lo.w) != space || !overlap(q, it) {
                        continue;
                    }
                    // The cell of the intersection's lower corner reports the pair.
                    if all(cell_of(cls, max(q.lo.xyz, it.lo.xyz)) == c) {
                        consider(cls, entry.x);
                    }
                }
            }
        }
    }
    let n_large = atomicLoad(&counters[0]);
    for (var k = 0u; k < n_large; k++) {
        let i = large[k];
        let it = items[i];
        if bitcast<u32>(it.lo.w) == space && overlap(q, it) {
            consider(cls, i);
        }
    }
}

// Answers query `q`: counts its pairs, and writes them at q_base when q_write.
fn answer(q: u32) {
    q_query = q;
    q_count = 0u;
    if q < cbp.n_point_queries {
        let p = query_points[q];
        q_kind = KIND_POINT_TRIANGLE;
        q_a = p;
        q_owner = point_owner[p];
        search(0u, 0u, query_boxes[2u * q]);
        if (q_owner & RIGID) == 0u {
            search(2u, 2u + 4u * q_owner, query_boxes[2u * q + 1u]);
        }
    } else {
        let e = q - cbp.n_point_queries;
        let edge = edges[e];
        q_kind = KIND_EDGE_EDGE;
        q_a = e;
        q_owner = edge.z;
        q_ends = edge.xy;
        search(1u, 1u, items[cbp.class_start[1] + e]);
        if (q_owner & RIGID) == 0u {
            search(3u, 3u + 4u * q_owner, items[cbp.class_start[3] + e]);
        }
    }
}

@compute @workgroup_size(64)
fn cb_count_pairs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = lane_index(wid, nwg, lid);
    if q >= cbp.n_point_queries + cbp.n_edges {
        return;
    }
    q_write = false;
    answer(q);
    pair_start[q] = q_count;
}

@compute @workgroup_size(64)
fn cb_write_pairs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = lane_index(wid, nwg, lid);
    if q >= cbp.n_point_queries + cbp.n_edges {
        return;
    }
    q_write = true;
    q_base = pair_start[q];
    let n = pair_start[q + 1u] - q_base;
    if n <= FOUND_SLOTS {
        // All of them kept by the count.
        var kind = KIND_POINT_TRIANGLE;
        var a = 0u;
        if q < cbp.n_point_queries {
            a = query_points[q];
        } else {
            kind = KIND_EDGE_EDGE;
            a = q - cbp.n_point_queries;
        }
        for (var k = 0u; k < n && q_base + k < cbp.capacity; k++) {
            let f = found[q * FOUND_SLOTS + k];
            write_pair(q_base + k, kind, a, f.x, f.y);
        }
        q_count = n;
    } else {
        answer(q);
    }
    // Sorted by the other primitive (insertion sort: a query has a few pairs; their first
    // words are the same).
    let end = min(q_base + q_count, cbp.capacity);
    for (var i = q_base + 1u; i < end; i++) {
        let v = vec2<u32>(pairs[3u * i + 1u], pairs[3u * i + 2u]);
        var j = i;
        while j > q_base && pairs[3u * j - 2u] > v.x {
            pairs[3u * j + 1u] = pairs[3u * j - 2u];
            pairs[3u * j + 2u] = pairs[3u * j - 1u];
            j--;
        }
        pairs[3u * j + 1u] = v.x;
        pairs[3u * j + 2u] = v.y;
    }
}

// Pair `i`'s record (the host checks that points and edges number fewer than 2^30).
fn write_pair(i: u32, kind: u32, a: u32, b: u32, lower: u32) {
    pairs[3u * i] = (kind << 30u) | a;
    pairs[3u * i + 1u] = b;
    pairs[3u * i + 2u] = lower;
}
