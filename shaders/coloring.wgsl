// Per-step body colouring on the GPU: Jones–Plassmann–Luby parallel greedy colouring over
// the body → constraint adjacency (CSR, built on the device by adjacency.wgsl, bindings in
// constraint_graph.wgsl), then compaction of the bodies into per-colour ranges and
// indirect dispatch arguments for the primal sweeps.
//
// * Priorities are a fixed integer hash of the body index: the smaller (hash, index)
//   wins, so the same input gives the same colouring, bit for bit, on any run. A colouring
//   from scratch (the first step, or the first after the seeds' buffers grew) gives the
//   priority to the smaller index instead, in all but its last rounds: its rounds then
//   make the CPU's colouring, greedy in index order (a body takes a colour once every
//   lower-index neighbour has one, the smallest they leave free). Its rounds are as many
//   as the longest chain of rising indices, too many for every step (a falling pile's
//   worklist has long chains), so later steps, which recolour only what their seeds
//   lost, keep the hash.
// * A round is one dispatch (`color_round`) over a worklist, the bodies the seeding left
//   uncoloured: each uncoloured body whose priority beats all its open neighbours takes
//   the smallest colour below `palette` (≤ 64) that no neighbour holds. Open means
//   uncoloured when the round began: a colour taken in round r is written stamped with
//   r + 1 (bits 8 and up), and reads as open to the rest of round r. Two neighbours cannot
//   both beat each other, so no body reads a colour taken in its own round, and the
//   outcome does not depend on the order in which invocations run. `color_count` strips
//   the stamps. The round's number is the dynamic-offset slot of group 1.
// * Rounds recorded: the host records a few (twice what the last step needed, at least
//   four, at most JPL_ROUNDS = 48) and, when bodies are left uncoloured with fewer than 48
//   recorded, runs the step again with 48 (src/gpu/finish.rs). So the colouring is the one
//   48 rounds give, and a steady scene dispatches a handful of rounds, not 48. A colouring
//   from scratch records SCRATCH_ROUNDS = 255 (the most the stamps allow), the smaller
//   index first in the first 207, by the hash in the rest; the host writes its seeds as
//   uncoloured (src/gpu/step.rs).
// * Re-greedy pass (Culberson's iterated greedy), recorded by the host in the step after
//   one whose rounds coloured a body (so a steady colouring stays as it is): the classes are coloured greedily again, highest first, one dispatch each
//   (`color_regreedy`): each body of the class takes the smallest colour that no neighbour
//   of an earlier class has taken in this pass. A class is an independent set, so its
//   bodies may go at once, and the j-th class processed takes colours below j: the count
//   never grows, and on a pile of boxes it falls from the 12 Jones–Plassmann–Luby leaves
//   to 10, next to the 9 of a sequential greedy colouring. The new colours are numbered
//   back to front (the class processed first takes the highest), which keeps the classes'
//   order in the sweep: a chain the pass 2-colours is swept in the CPU's order. The host records a dispatch
//   per class it has seen (`color_classes`, 0 when the pass is not recorded); a step
//   with more classes runs again with more.
// * Fallback: a body that finds every palette colour taken by its neighbours, or that is
//   still uncoloured after the fixed number of rounds, joins the *serial group*: it is not
//   a colour; the primal solves those bodies one dispatch each, one after another
//   (Gauss–Seidel, sorted by body index), so two adjacent bodies are never solved at once.
//   The group is empty in practice; it exists so that no input can break the invariant.
// * Static, kinematic and frozen bodies (`body_flags` bit 0 clear) are never coloured.
// * Seeded: each body starts with its colour of the last accepted step (`seed_prev`), and
//   of every pair of neighbours that now share a colour the one the other beats gives it
//   up (`color_unseed_mark`, `color_unseed`); only the bodies left uncoloured go through
//   the rounds, which then find little to do in a scene that changed little. Any seed is
//   safe: the unseeding leaves no two neighbours with one colour whatever the seeds hold
//   (a buffer just allocated reads zero: everybody colour 0, and the rounds do the rest).
//   The seeds alternate like the contacts' carried state, so a step run again (more
//   colour dispatches needed) starts from the same seeds.
//
// Within a colour the order of the bodies (atomic scatter) is not deterministic, but it
// does not matter: no body of a colour reads what another of its colour writes.

@group(0) @binding(6) var<storage, read_write> color_of: array<u32>;
// [0, n): bodies grouped by colour, then the serial group; [n, 2n): serial scratch
// (unordered, from atomics).
@group(0) @binding(7) var<storage, read_write> color_bodies: array<u32>;
// ranges[c] = (start, count) for c < 64, ranges[64] = serial group,
// ranges[65] = (colours used, bodies left uncoloured after the rounds),
// ranges[66] = (rounds in which a body took a colour, worklist size),
// ranges[67] = (colours before the re-greedy pass, 0).
@group(0) @binding(8) var<storage, read_write> ranges: array<vec2<u32>>;
// (x, y, z) workgroup counts: slot 64 the serial group's (0 or 1 workgroup); from
// LANE_ARGS the primal sweep's per colour.
@group(0) @binding(9) var<storage, read_write> indirect: array<u32>;
// [0, 64): members per colour; [64, 128): scatter cursors; 128: serial count;
// 129: max colour + 1; 130: bodies left uncoloured after the rounds; 131: worklist size;
// 132: the last round in which a body took a colour; 133: colours before the re-greedy;
// 134: colours after it.
@group(0) @binding(10) var<storage, read_write> counters: array<atomic<u32>>;
// Each body's colour in the last accepted step, and in this one.
@group(0) @binding(18) var<storage, read> seed_prev: array<u32>;
@group(0) @binding(19) var<storage, read_write> seed_next: array<u32>;

struct RoundSlot {
    index: u32,
    // 1: the smaller index has the priority in this round (a colouring from scratch).
    by_index: u32,
};
// The round a `color_round` dispatch runs (0-based), and its priority.
@group(1) @binding(0) var<uniform> this_round: RoundSlot;
// The rounds' dispatch arguments, written by `color_work_args`: a buffer of its own, since
// a dispatch may not read its arguments from a buffer its bind groups can write.
@group(1) @binding(1) var<storage, read_write> round_args: array<u32>;

const NONE: u32 = 0xffffffffu;       // not solved: never coloured
const UNCOLORED: u32 = 0xfffffffeu;
const OVERFLOW: u32 = 0xfffffffcu;   // no palette colour free: serial group
// Colours taken in a round, stamped: colour (or MAX_COLORS for "no palette colour free")
// + (round + 1) × STAMP, all below STAMPED_END.
const STAMP: u32 = 256u;
const STAMPED_END: u32 = 0x10000u;
const WORK: u32 = 131u;
const ROUNDS_USED: u32 = 132u;
const TOP: u32 = 133u;
const NEW_TOP: u32 = 134u;
// Colours taken in the re-greedy pass: NEW_BASE + colour.
const NEW_BASE: u32 = 0x20000u;
const MAX_COLORS: u32 = 64u;
const SERIAL: u32 = 64u;
// Bodies per workgroup of the primal sweep (shaders/avbd.wgsl: 64 / LANES) and where its
// dispatch arguments start in `indirect` (after the 65 slots of which the serial group's is
// the one in use).
const BODIES_PER_GROUP: u32 = 8u;
const LANE_ARGS: u32 = 65u * 3u;
const N_COUNTERS: u32 = 135u;

// Fixed 32-bit integer hash (lowbias32); the smaller (hash, index) has priority.
fn hash(x: u32) -> u32 {
    var h = x;
    h ^= h >> 16u;
    h *= 0x7feb352du;
    h ^= h >> 15u;
    h *= 0x846ca68bu;
    h ^= h >> 16u;
    return h;
}

fn beats(a: u32, ha: u32, b: u32, hb: u32) -> bool {
    return ha < hb || (ha == hb && a < b);
}

// Body i's priority key in a round: its hash, or 0 for all where the smaller index goes
// first (`beats` then breaks every tie by index).
fn round_key(i: u32, by_index: bool) -> u32 {
    return select(hash(i), 0u, by_index);
}

// The other body of adjacency item `item` of body `me` (a pair's bodies are those of its
// first slot).
fn other_body(item: u32, me: u32) -> u32 {
    let idx = item >> 1u;
    var a: u32;
    var b: u32;
    if ((item & 1u) != 0u) {
        a = joints[idx].body_a;
        b = joints[idx].body_b;
    } else {
        let ab = contact_bodies(idx << params.contact_slots_log2);
        a = ab.x;
        b = ab.y;
    }
    return select(a, b, a == me);
}

@compute @workgroup_size(64)
fn color_init(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < N_COUNTERS) {
        atomicStore(&counters[i], 0u);
    }
    if (i >= params.n_bodies) {
        return;
    }
    let seed = seed_prev[i];
    let open = select(UNCOLORED, seed, seed < params.palette);
    color_of[i] = select(NONE, open, (body_flags[i] & 1u) != 0u);
}

// Marks (in color_bodies, rewritten by the scatter at the end) each seeded body that a
// neighbour of the same colour beats. Reads colours only, so the marks do not depend on
// the order in which invocations run.
@compute @workgroup_size(64)
fn color_unseed_mark(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.n_bodies) {
        return;
    }
    color_bodies[i] = 0u;
    let c = color_of[i];
    if (c >= MAX_COLORS) {
        return;
    }
    let hi = hash(i);
    for (var a = adj_offsets[i]; a < adj_offsets[i + 1u]; a++) {
        let o = other_body(adj_items[a], i);
        if (o == WORLD || o == i) {
            continue;
        }
        if (color_of[o] == c && beats(o, hash(o), i, hi)) {
            color_bodies[i] = 1u;
            return;
        }
    }
}

// Unseeds the marked bodies and lists every uncoloured body in the worklist (in
// color_bodies[n, 2n), free until color_count; the list's order depends on the atomics,
// the rounds' outcome does not).
@compute @workgroup_size(64)
fn color_unseed(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.n_bodies) {
        return;
    }
    if (color_bodies[i] == 1u) {
        color_of[i] = UNCOLORED;
    }
    let c = color_of[i];
    if (c == UNCOLORED) {
        let k = atomicAdd(&counters[WORK], 1u);
        color_bodies[params.n_bodies + k] = i;
    } else if (c < MAX_COLORS) {
        atomicMax(&counters[TOP], c + 1u);
    }
}

// One invocation: the rounds' dispatch arguments, 64 worklist bodies per workgroup, on a
// 2-D grid past `max_groups` workgroups.
@compute @workgroup_size(1)
fn color_work_args() {
    let g = (atomicLoad(&counters[WORK]) + 63u) / 64u;
    round_args[0] = min(g, params.max_groups);
    round_args[1] = (g + params.max_groups - 1u) / params.max_groups;
    round_args[2] = 1u;
}

// The colour a body holds after the rounds (stamps stripped); MAX_COLORS or more if none.
fn colour_after_rounds(v: u32) -> u32 {
    return select(v, v % STAMP, v < STAMPED_END && v >= STAMP);
}

// A set of palette colours as 64 bits: `used` with colour c added (c ≥ MAX_COLORS: none).
fn with_colour(used: vec2<u32>, c: u32) -> vec2<u32> {
    if (c < 32u) {
        return used | vec2<u32>(1u << c, 0u);
    }
    if (c < MAX_COLORS) {
        return used | vec2<u32>(0u, 1u << (c - 32u));
    }
    return used;
}

// The smallest colour not in `used` (MAX_COLORS when all 64 are).
fn first_free(used: vec2<u32>) -> u32 {
    if (~used.x != 0u) {
        return countTrailingZeros(~used.x);
    }
    if (~used.y != 0u) {
        return 32u + countTrailingZeros(~used.y);
    }
    return MAX_COLORS;
}

@compute @workgroup_size(64)
fn color_round(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = grid_index(gid, nwg);
    if (k >= atomicLoad(&counters[WORK])) {
        return;
    }
    let i = color_bodies[params.n_bodies + k];
    if (color_of[i] != UNCOLORED) {
        return;
    }
    let stamp = (this_round.index + 1u) * STAMP;
    let by_index = this_round.by_index != 0u;
    let hi = round_key(i, by_index);
    var used = vec2<u32>(0u, 0u);
    for (var a = adj_offsets[i]; a < adj_offsets[i + 1u]; a++) {
        let o = other_body(adj_items[a], i);
        if (o == WORLD || o == i) {
            continue;
        }
        let v = color_of[o];
        let taken_now = v < STAMPED_END && v >= stamp && v < stamp + STAMP;
        if ((v == UNCOLORED || taken_now) && beats(o, round_key(o, by_index), i, hi)) {
            return;
        }
        // Colours of earlier rounds (a neighbour taking one in this round would have had
        // to beat this body, which then returned above).
        used = with_colour(used, colour_after_rounds(v));
    }
    let pick = first_free(used);
    color_of[i] = min(pick, params.palette) + stamp;
    atomicMax(&counters[ROUNDS_USED], this_round.index + 1u);
    if (pick < params.palette) {
        atomicMax(&counters[TOP], pick + 1u);
    }
}

// Class `top - 1 - slot` of the re-greedy pass: each of its bodies takes the smallest
// colour no neighbour took earlier in the pass. Runs only when a dispatch was recorded for
// every class (else the host runs the step again with more).
@compute @workgroup_size(64)
fn color_regreedy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let top = atomicLoad(&counters[TOP]);
    let s = this_round.index;
    if (i >= params.n_bodies || top > params.color_classes || s >= top) {
        return;
    }
    let v = color_of[i];
    if (v >= NEW_BASE || colour_after_rounds(v) != top - 1u - s) {
        return;
    }
    var used = vec2<u32>(0u, 0u);
    for (var a = adj_offsets[i]; a < adj_offsets[i + 1u]; a++) {
        let o = other_body(adj_items[a], i);
        if (o == WORLD || o == i) {
            continue;
        }
        let w = color_of[o];
        used = with_colour(used, select(MAX_COLORS, w - NEW_BASE, w >= NEW_BASE));
    }
    // At most s classes went before, so the pick is at most s < top ≤ palette.
    let pick = first_free(used);
    color_of[i] = NEW_BASE + pick;
    atomicMax(&counters[NEW_TOP], pick + 1u);
}

@compute @workgroup_size(64)
fn color_count(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.n_bodies) {
        return;
    }
    var c = color_of[i];
    if (c >= NEW_BASE && c < NEW_BASE + MAX_COLORS) {
        // Taken in the re-greedy pass.
        c = atomicLoad(&counters[NEW_TOP]) - 1u - (c - NEW_BASE);
        color_of[i] = c;
    } else if (c < STAMPED_END) {
        // Taken in a round: the colour, or the serial group past the palette.
        c = c % STAMP;
        if (c >= params.palette) {
            c = OVERFLOW;
        }
        color_of[i] = c;
    }
    // The next step's seed (NONE, OVERFLOW and uncoloured bodies start uncoloured).
    seed_next[i] = c;
    if (c == NONE) {
        return;
    }
    if (c < MAX_COLORS) {
        atomicAdd(&counters[c], 1u);
        atomicMax(&counters[129], c + 1u);
    } else {
        if (c != OVERFLOW) {
            atomicAdd(&counters[130], 1u);
        }
        let k = atomicAdd(&counters[128], 1u);
        color_bodies[params.n_bodies + k] = i;
    }
}

// One invocation: prefix sum of the colour sizes and the dispatch arguments (loops are
// kept short: llvmpipe/lavapipe caps the loop iterations of one invocation at 65535).
@compute @workgroup_size(1)
fn color_scan() {
    var start = 0u;
    for (var c = 0u; c < MAX_COLORS; c++) {
        let n = atomicLoad(&counters[c]);
        ranges[c] = vec2<u32>(start, n);
        atomicStore(&counters[MAX_COLORS + c], start);
        // The primal sweep's arguments: BODIES_PER_GROUP bodies per workgroup, on a 2-D
        // grid when a colour needs more than `max_groups` workgroups. Every argument stays
        // within the dispatch limits, so the step needs no indirect validation.
        let g = (n + BODIES_PER_GROUP - 1u) / BODIES_PER_GROUP;
        indirect[LANE_ARGS + c * 3u] = min(g, params.max_groups);
        indirect[LANE_ARGS + c * 3u + 1u] = (g + params.max_groups - 1u) / params.max_groups;
        indirect[LANE_ARGS + c * 3u + 2u] = 1u;
        start += n;
    }
    let n_serial = atomicLoad(&counters[128]);
    ranges[SERIAL] = vec2<u32>(start, n_serial);
    indirect[SERIAL * 3u] = min(n_serial, 1u);
    indirect[SERIAL * 3u + 1u] = 1u;
    indirect[SERIAL * 3u + 2u] = 1u;
    ranges[65] = vec2<u32>(atomicLoad(&counters[129]), atomicLoad(&counters[130]));
    ranges[66] = vec2<u32>(atomicLoad(&counters[ROUNDS_USED]), atomicLoad(&counters[WORK]));
    ranges[67] = vec2<u32>(atomicLoad(&counters[TOP]), 0u);
}

// Places the serial group after the colours, sorted by body index: the rank of a member is
// the number of members with a smaller index (the group is empty or tiny in practice).
@compute @workgroup_size(64)
fn color_serial_rank(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = ranges[SERIAL];
    let t = gid.x;
    if (t >= r.y) {
        return;
    }
    let base = params.n_bodies;
    let v = color_bodies[base + t];
    var rank = 0u;
    for (var u = 0u; u < r.y; u++) {
        rank += select(0u, 1u, color_bodies[base + u] < v);
    }
    color_bodies[r.x + rank] = v;
}

@compute @workgroup_size(64)
fn color_scatter(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= params.n_bodies) {
        return;
    }
    let c = color_of[i];
    if (c < MAX_COLORS) {
        let slot = atomicAdd(&counters[MAX_COLORS + c], 1u);
        color_bodies[slot] = i;
    }
}
