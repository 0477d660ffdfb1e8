// The standalone CCD kernels (gpu::ccd::GpuCcd): one invocation per query (entry `ccd`),
// and the earliest time of impact per point over the queries (entry `earliest`). Prepended
// with ccd_core.wgsl, which holds the port and the argument for its rounding.

struct Query {
    x: array<u32, 24>,
    kind: u32,
    min_sep: u32, // f32 bits
};

// gpu::ccd::CcdResult.
@group(0) @binding(0) var<uniform> cp: CcdParams;
@group(0) @binding(1) var<storage, read> queries: array<Query>;
@group(0) @binding(2) var<storage, read_write> results: array<CcdOut>;
@group(0) @binding(3) var<storage, read> point_ids: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> earliest_bits: array<atomic<u32>>;

// `accd` of query i.
fn accd(i: u32) -> CcdOut {
    var x: array<u32, 24>;
    for (var k = 0u; k < 24u; k++) {
        x[k] = queries[i].x[k];
    }
    return accd_points(queries[i].kind, x, queries[i].min_sep);
}

// ------------------------------------------------------------------ entry points

// One query per invocation; a 2D grid of 64-wide workgroups (x up to 65,535).
@compute @workgroup_size(64)
fn ccd(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = lane_index(wid, nwg, lid);
    if (i >= cp.count) {
        return;
    }
    results[i] = accd(i);
}

// The earliest time of impact of every point over the queries that hit: `atomicMin` on the
// bits of the toi, which order like the numbers for non-negative floats (the sign bit is
// clear, and exponent then mantissa compare as one unsigned integer). `earliest_bits` starts
// at the bits of 1.0 (no hit, above every hit's toi, which is below 1); a point index of
// 0xffffffff or beyond `point_count` is skipped.
@compute @workgroup_size(64)
fn earliest(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = lane_index(wid, nwg, lid);
    if (i >= cp.count) {
        return;
    }
    let r = results[i];
    if (r.hit == 0u) {
        return;
    }
    let key = min(bitcast<u32>(r.toi) & 0x7fffffffu, ONE_BITS);
    let ids = point_ids[i];
    for (var k = 0u; k < 4u; k++) {
        if (ids[k] < cp.point_count) {
            atomicMin(&earliest_bits[ids[k]], key);
        }
    }
}
