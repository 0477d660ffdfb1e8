// The islands of the momentum projection on the device (momentum.wgsl; when the CPU finds
// the contacts, pipeline::integration::IslandMomentum makes its own): connected components
// of the solved bodies over this step's touching pairs and unbroken joints, by union–find
// with atomics. A union hooks the larger root under the smaller with a compare-exchange and
// tries again if another union moved it first, so every component ends with its lowest
// body as root, whatever order the unions ran in: the labels are the same on every run.
// A body is anchored when a constraint ties it to a body that is not solved (static,
// kinematic, frozen or the world), or when this step froze it (its result was not finite,
// `end_bodies`), as the CPU's projection anchors it. common.wgsl and shapes.wgsl (StepPair)
// are prepended.
//
// Dispatch order: island_init (bodies), island_link (pairs, then joints), island_flatten
// (bodies), island_mark (bodies), island_count (bodies).

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> body_flags: array<u32>;
@group(0) @binding(2) var<storage, read> pair_list: array<StepPair>;
@group(0) @binding(3) var<storage, read> pair_start: array<u32>;
// Each pair's point count, a byte per pair (contact_narrow.wgsl).
@group(0) @binding(4) var<storage, read> pair_counts: array<u32>;
@group(0) @binding(5) var<storage, read> joints: array<JointHead>;
@group(0) @binding(6) var<storage, read_write> parent: array<atomic<u32>>;
@group(0) @binding(7) var<storage, read_write> anchored: array<atomic<u32>>;
// Per body: its island's root, bit 31 set if the body is anchored; 0xffffffff for a body
// that is not solved. Read by momentum.wgsl (and by tests, on demand).
@group(0) @binding(8) var<storage, read_write> islands: array<u32>;
// The narrow phase's status (contact_narrow.wgsl); [3] counts the islands anchored nowhere,
// which the momentum projection corrects (momentum.wgsl).
@group(0) @binding(9) var<storage, read_write> narrow_status: array<atomic<u32>>;
// `end_bodies`' status (integration.wgsl): per body at FROZEN_FLAGS, 1 if this step froze it.
@group(0) @binding(10) var<storage, read> status: array<u32>;

const JOINT_BROKEN: u32 = 1u;
const FROZEN_FLAGS: u32 = 64u; // 1 + FROZEN_ROOM (integration.wgsl)
const ANCHORED: u32 = 0x80000000u;
// A union's retries are bounded so that no invocation can spin (a contended one retries
// once per union that beat it; a step has far fewer).
const MAX_TRIES: u32 = 1000000u;

fn solved(b: u32) -> bool {
    return b != WORLD && (body_flags[b] & 1u) != 0u;
}

// The root of x's tree, halving the path on the way (each visited body's parent moves up
// to its grandparent, an ancestor either way, so concurrent unions stay correct) to keep
// the trees shallow.
fn root_of(x: u32) -> u32 {
    var r = x;
    var next = atomicLoad(&parent[r]);
    while next != r {
        let up = atomicLoad(&parent[next]);
        if up != next {
            atomicCompareExchangeWeak(&parent[r], next, up);
        }
        r = next;
        next = up;
    }
    return r;
}

fn link(a: u32, b: u32) {
    let sa = solved(a);
    let sb = solved(b);
    if sa && !sb {
        atomicStore(&anchored[a], 1u);
    }
    if sb && !sa {
        atomicStore(&anchored[b], 1u);
    }
    if !(sa && sb) {
        return;
    }
    for (var tries = 0u; tries < MAX_TRIES; tries++) {
        let ra = root_of(a);
        let rb = root_of(b);
        if ra == rb {
            return;
        }
        let lo = min(ra, rb);
        let hi = max(ra, rb);
        if atomicCompareExchangeWeak(&parent[hi], hi, lo).exchanged {
            return;
        }
    }
}

@compute @workgroup_size(64)
fn island_init(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i < params.n_bodies {
        atomicStore(&parent[i], i);
        atomicStore(&anchored[i], 0u);
    }
}

@compute @workgroup_size(64)
fn island_link(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let e = grid_index(gid, nwg);
    let pairs = min(pair_start[params.n_bodies], params.n_pairs);
    if e < params.n_pairs {
        let touching = ((pair_counts[e / 4u] >> (8u * (e % 4u))) & 0xffu) != 0u;
        if e < pairs && touching {
            link(pair_list[e].a, pair_list[e].b);
        }
        return;
    }
    let j = e - params.n_pairs;
    if j < params.n_joints && (joints[j].flags & JOINT_BROKEN) == 0u {
        link(joints[j].body_a, joints[j].body_b);
    }
}

@compute @workgroup_size(64)
fn island_flatten(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= params.n_bodies {
        return;
    }
    if !solved(i) {
        islands[i] = 0xffffffffu;
        return;
    }
    let anchor = atomicLoad(&anchored[i]) != 0u || status[FROZEN_FLAGS + i] != 0u;
    islands[i] = root_of(i) | select(0u, ANCHORED, anchor);
}

// The union–find is done: bit 31 of a root's parent entry marks its island anchored (by
// any of its bodies).
@compute @workgroup_size(64)
fn island_mark(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= params.n_bodies {
        return;
    }
    let r = islands[i];
    if r != 0xffffffffu && (r & ANCHORED) != 0u {
        atomicOr(&parent[r & ~ANCHORED], ANCHORED);
    }
}

// Each island anchored nowhere counts once, at its root (a count: the same on every run).
@compute @workgroup_size(64)
fn island_count(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= params.n_bodies {
        return;
    }
    let r = islands[i];
    if r != 0xffffffffu && (r & ~ANCHORED) == i && (atomicLoad(&parent[i]) & ANCHORED) == 0u {
        atomicAdd(&narrow_status[3], 1u);
    }
}
