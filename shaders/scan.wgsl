// An exclusive prefix sum in place over `len` counts from data[first]: data[first + i]
// becomes the sum of the counts before i and data[first + len] the total (the broad
// phase's bucket and pair offsets; the deformable contact rows' list offsets, a region of
// a larger buffer). Three dispatches: scan_blocks (one workgroup per 256 counts), scan_top
// (one workgroup), scan_add (one workgroup per 256 counts).

struct ScanParams {
    len: u32,
    first: u32,
    pad1: u32,
    pad2: u32,
};

@group(0) @binding(0) var<uniform> sp: ScanParams;
@group(0) @binding(1) var<storage, read_write> data: array<u32>;
// Per block of 256: its total, then its exclusive prefix.
@group(0) @binding(2) var<storage, read_write> block_sums: array<u32>;

const SCAN_WG: u32 = 256u;

var<workgroup> scan: array<u32, SCAN_WG>;

// Inclusive prefix sum of `scan` over the workgroup (Hillis–Steele).
fn scan_workgroup(lane: u32) {
    workgroupBarrier();
    for (var d = 1u; d < SCAN_WG; d <<= 1u) {
        var add = 0u;
        if lane >= d {
            add = scan[lane - d];
        }
        workgroupBarrier();
        scan[lane] += add;
        workgroupBarrier();
    }
}

@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = wid.x * SCAN_WG + lid.x;
    var c = 0u;
    if i < sp.len {
        c = data[sp.first + i];
    }
    scan[lid.x] = c;
    scan_workgroup(lid.x);
    if i < sp.len {
        data[sp.first + i] = scan[lid.x] - c;
    }
    if lid.x == SCAN_WG - 1u {
        block_sums[wid.x] = scan[lid.x];
    }
}

@compute @workgroup_size(256)
fn scan_top(@builtin(local_invocation_id) lid: vec3<u32>) {
    let blocks = (sp.len + SCAN_WG - 1u) / SCAN_WG;
    let per = (blocks + SCAN_WG - 1u) / SCAN_WG;
    let lo = min(lid.x * per, blocks);
    let hi = min(lo + per, blocks);
    var sum = 0u;
    for (var b = lo; b < hi; b++) {
        sum += block_sums[b];
    }
    scan[lid.x] = sum;
    scan_workgroup(lid.x);
    var prefix = scan[lid.x] - sum;
    for (var b = lo; b < hi; b++) {
        let total = block_sums[b];
        block_sums[b] = prefix;
        prefix += total;
    }
    if lid.x == SCAN_WG - 1u {
        data[sp.first + sp.len] = scan[lid.x];
    }
}

@compute @workgroup_size(256)
fn scan_add(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = wid.x * SCAN_WG + lid.x;
    if i < sp.len {
        data[sp.first + i] += block_sums[wid.x];
    }
}
