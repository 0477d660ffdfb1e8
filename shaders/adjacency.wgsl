// The body → constraint adjacency (CSR) built on the device from the resident contact and
// joint records, for the colouring and the primal sweeps of the same submission.
//
// Only solved bodies get lists (no kernel reads the lists of static, kinematic or frozen
// bodies). Where the device finds the contacts, a contact item is a pair (its four record
// slots, `contact_slots_log2`): a quarter of the items to count, place and sort, and the
// readers take the pair's non-empty slots in record order. A body's items are ordered as
// the CPU orders them (contacts by index, then joints by index): `adj_fill` places them
// with atomics, in no fixed order, and `adj_sort` sorts each list, so the lists, and every
// result computed from them, are the same bits on every run.
//
// Dispatch order: adj_clear, adj_count, adj_scan_blocks, adj_scan_top, adj_scan_add,
// adj_fill, adj_sort.

// [0, n): per body, the item count, then its fill cursor; [n, n + blocks): per block of
// 256 bodies, its item total, then its exclusive prefix. (The colouring reuses the buffer
// afterwards, color_bodies in coloring.wgsl.)
@group(0) @binding(7) var<storage, read_write> cursor: array<atomic<u32>>;

const SCAN_WG: u32 = 256u;
const BROKEN: u32 = 1u;

var<workgroup> scan: array<u32, SCAN_WG>;

// The contact items: records, or pairs of four record slots.
fn contact_items() -> u32 {
    return params.n_contacts >> params.contact_slots_log2;
}

fn ends() -> u32 {
    return contact_items() + params.n_joints;
}

// The bodies of constraint end e (contact items first, then joints); a broken joint acts
// on nothing, and so does a pair with no points (its first slot is empty).
fn end_bodies(e: u32) -> vec2<u32> {
    if (e < contact_items()) {
        return contact_bodies(e << params.contact_slots_log2);
    }
    let j = joints[e - contact_items()];
    if ((j.flags & BROKEN) != 0u) {
        return vec2<u32>(WORLD, WORLD);
    }
    return vec2<u32>(j.body_a, j.body_b);
}

fn end_item(e: u32) -> u32 {
    if (e < contact_items()) {
        return e << 1u;
    }
    return ((e - contact_items()) << 1u) | 1u;
}

// Items sort as the CPU lists them: every contact (by index) before every joint.
fn sort_key(item: u32) -> u32 {
    return ((item & 1u) << 31u) | (item >> 1u);
}

// Inclusive prefix sum of `scan` over the workgroup (Hillis–Steele), after each lane
// stored its value; every lane of the workgroup calls it.
fn scan_workgroup(lane: u32) {
    workgroupBarrier();
    for (var d = 1u; d < SCAN_WG; d <<= 1u) {
        var add = 0u;
        if (lane >= d) {
            add = scan[lane - d];
        }
        workgroupBarrier();
        scan[lane] += add;
        workgroupBarrier();
    }
}

fn linear(gid: vec3<u32>, groups: vec3<u32>, size: u32) -> u32 {
    return gid.x + gid.y * groups.x * size;
}

@compute @workgroup_size(64)
fn adj_clear(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < params.n_bodies) {
        atomicStore(&cursor[gid.x], 0u);
    }
}

@compute @workgroup_size(64)
fn adj_count(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = linear(gid, groups, 64u);
    if (e >= ends()) {
        return;
    }
    let ab = end_bodies(e);
    if (is_solved(ab.x)) {
        atomicAdd(&cursor[ab.x], 1u);
    }
    if (is_solved(ab.y)) {
        atomicAdd(&cursor[ab.y], 1u);
    }
}

// Inclusive scan of the counts within each block of 256 bodies into adj_offsets[i + 1];
// the block's total goes to cursor[n + block].
@compute @workgroup_size(256)
fn adj_scan_blocks(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = wid.x * SCAN_WG + lid.x;
    let n = params.n_bodies;
    var c = 0u;
    if (i < n) {
        c = atomicLoad(&cursor[i]);
    }
    scan[lid.x] = c;
    scan_workgroup(lid.x);
    if (i < n) {
        adj_offsets[i + 1u] = scan[lid.x];
    }
    if (lid.x == SCAN_WG - 1u) {
        atomicStore(&cursor[n + wid.x], scan[lid.x]);
    }
}

// Exclusive prefix of the block totals, in one workgroup: each lane sums a run of blocks,
// the lanes' sums are scanned, then each lane writes its run's prefixes.
@compute @workgroup_size(256)
fn adj_scan_top(@builtin(local_invocation_id) lid: vec3<u32>) {
    let n = params.n_bodies;
    let blocks = (n + SCAN_WG - 1u) / SCAN_WG;
    let per = (blocks + SCAN_WG - 1u) / SCAN_WG;
    let lo = min(lid.x * per, blocks);
    let hi = min(lo + per, blocks);
    var sum = 0u;
    for (var b = lo; b < hi; b++) {
        sum += atomicLoad(&cursor[n + b]);
    }
    scan[lid.x] = sum;
    scan_workgroup(lid.x);
    var prefix = scan[lid.x] - sum;
    for (var b = lo; b < hi; b++) {
        let total = atomicLoad(&cursor[n + b]);
        atomicStore(&cursor[n + b], prefix);
        prefix += total;
    }
}

// Final offsets; each body's fill cursor starts at its list's start.
@compute @workgroup_size(256)
fn adj_scan_add(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = wid.x * SCAN_WG + lid.x;
    let n = params.n_bodies;
    if (i == 0u) {
        adj_offsets[0] = 0u;
    }
    if (i >= n) {
        return;
    }
    let end = adj_offsets[i + 1u] + atomicLoad(&cursor[n + wid.x]);
    adj_offsets[i + 1u] = end;
    atomicStore(&cursor[i], end - atomicLoad(&cursor[i]));
}

@compute @workgroup_size(64)
fn adj_fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = linear(gid, groups, 64u);
    if (e >= ends()) {
        return;
    }
    let ab = end_bodies(e);
    let item = end_item(e);
    if (is_solved(ab.x)) {
        adj_items[atomicAdd(&cursor[ab.x], 1u)] = item;
    }
    if (is_solved(ab.y)) {
        adj_items[atomicAdd(&cursor[ab.y], 1u)] = item;
    }
}

// Insertion sort of each solved body's list (tens of items; each list is touched by one
// invocation).
@compute @workgroup_size(64)
fn adj_sort(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.n_bodies || !is_solved(i)) {
        return;
    }
    let lo = adj_offsets[i];
    let hi = adj_offsets[i + 1u];
    for (var a = lo + 1u; a < hi; a++) {
        let item = adj_items[a];
        let key = sort_key(item);
        var b = a;
        while (b > lo && sort_key(adj_items[b - 1u]) > key) {
            adj_items[b] = adj_items[b - 1u];
            b -= 1u;
        }
        adj_items[b] = item;
    }
}
