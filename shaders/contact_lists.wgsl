// The contact rows' lists (appended to surface_contact.wgsl): each soft point and each
// moving rigid body lists the rows it is in, in candidate order, which is the order every
// sum over them follows. Each list has room for every candidate of its point or body (a
// row's pair is always a candidate, so no list overflows): the frame's first kernels count
// them (`contact_count_slots`), a prefix sum (scan.wgsl, over the counts in `ca`) makes the
// lists' offsets, and `contact_list_rows` and `contact_sort_slots` fill them with the
// carried rows. The host uploads the candidates and the carried rows' records (candidate and
// multipliers: `contact_list_rows` makes the rows); everything else the
// lists take lives in the atomics buffer (`ca`), so none of it crosses the bus: the status
// words, each candidate's row, the lists' offsets and contents, and the islands' steps.

// The frame's start: X at the start positions, no candidate has a row yet, every list is
// empty and has no room yet, every island's step and reach is whole, and the status counts
// the carried rows.
@compute @workgroup_size(64)
fn contact_start(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let k = lane_index(wid, nwg, lid);
    if (cparams.on == 0u) {
        return;
    }
    if (k < cparams.n_candidates) {
        atomicStore(&ca[cparams.o_cand_row + k], NONE);
    }
    if (k < cparams.soft_points) {
        atomicStore(&ca[cparams.o_slot_count + k], 0u);
        cf[cparams.o_certified + k] = vec4<f32>(verts[k].p.xyz, 0.0);
        atomicStore(&ca[cparams.o_hold + k], ONE);
        atomicStore(&ca[cparams.o_hold + cparams.soft_points + k], ONE);
    }
    if (k < cparams.n_bodies) {
        atomicStore(&ca[cparams.o_bslot_count + k], 0u);
        atomicStore(&ca[cparams.o_separation + k], bitcast<u32>(cparams.xi));
    }
    // The lists' rooms (soft points, then bodies, then their total), counted next.
    if (k <= cparams.soft_points + cparams.n_bodies) {
        atomicStore(&ca[cparams.o_slot_offsets + k], 0u);
    }
    if (k < cparams.n_objects) {
        atomicStore(&ca[cparams.o_alpha + k], ONE);
        atomicStore(&ca[cparams.o_reach + k], ONE);
    }
    if (k < STATUS_WORDS) {
        atomicStore(&ca[k], select(0u, cparams.carried_rows, k == ST_ROWS));
    }
}

// Each candidate makes room in the lists of its soft points and, once each, of its moving
// rigid bodies (the host's `pack_candidates` did this before; the counts become offsets
// in the prefix sum that follows).
@compute @workgroup_size(64)
fn contact_count_slots(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let k = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || k >= cparams.n_candidates) {
        return;
    }
    let points = cand(k).points;
    for (var j = 0u; j < 4u; j++) {
        let p = points[j];
        if (p == NONE) {
            continue;
        }
        if (p < cparams.soft_points) {
            atomicAdd(&ca[cparams.o_slot_offsets + p], 1u);
            continue;
        }
        let b = rigid_body(p);
        if (first_of_moving_body(points, j, b)) {
            atomicAdd(&ca[cparams.o_bslot_offsets + b], 1u);
        }
    }
}

// Whether rigid point j of `points`, of body b, is that body's first among them and the
// body moves (a body's rows are listed once per row).
fn first_of_moving_body(points: vec4<u32>, j: u32, b: u32) -> bool {
    var seen = !body_moves(b);
    for (var k = 0u; k < j; k++) {
        seen = seen || (points[k] != NONE && points[k] >= cparams.soft_points && rigid_body(points[k]) == b);
    }
    return !seen;
}

// Each carried row, from its record (gpu::soft_contact::upload `carried_record`: its
// candidate, whether the coarse operators hold it, λ, γ, the friction force): the row,
// linearised at X and lagged there as the host's `SurfaceContact::begin_frame` does, its
// candidate's row, and its place in its points' lists.
@compute @workgroup_size(64)
fn contact_list_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || i >= cparams.carried_rows) {
        return;
    }
    let head = cf[cparams.o_carried + 2u * i];
    let force = cf[cparams.o_carried + 2u * i + 1u];
    let k = u32(head.x) | (u32(head.y) << 16u);
    let c = cand(k);
    let coarse = select(0u, ROW_COARSE, force.w != 0.0);
    var r = fresh_row(c, k, vec4<f32>(force.xyz, head.z), head.w, coarse, NONE);
    linearise(&r);
    rows[i] = r;
    atomicStore(&ca[cparams.o_cand_row + k], i);
    join_lists(i, r.points);
}

// Row i joins the lists of its soft points and, once each, of its moving rigid bodies (in
// the order the invocations run: contact_sort_slots orders them).
fn join_lists(i: u32, points: vec4<u32>) {
    for (var j = 0u; j < 4u; j++) {
        let p = points[j];
        if (p == NONE) {
            continue;
        }
        if (p < cparams.soft_points) {
            let s = atomicAdd(&ca[cparams.o_slot_count + p], 1u);
            atomicStore(&ca[cparams.o_slot_items + slot_offset(p) + s], i);
            continue;
        }
        let b = rigid_body(p);
        if (first_of_moving_body(points, j, b)) {
            let s = atomicAdd(&ca[cparams.o_bslot_count + b], 1u);
            atomicStore(&ca[cparams.o_slot_items + body_slot_offset(b) + s], i);
        }
    }
}

// Each soft point's and each moving rigid body's rows in candidate order, then row order
// (a candidate has one row at most, so the second key only orders rows of no candidate):
// invocation p < soft_points sorts point p's list, the others body p − soft_points's.
@compute @workgroup_size(64)
fn contact_sort_slots(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (cparams.on == 0u) {
        return;
    }
    sort_list(lane_index(wid, nwg, lid));
}

fn sort_list(p: u32) {
    if (p >= cparams.soft_points + cparams.n_bodies) {
        return;
    }
    var first: u32;
    var count: u32;
    if (p < cparams.soft_points) {
        first = cparams.o_slot_items + slot_offset(p);
        count = atomicLoad(&ca[cparams.o_slot_count + p]);
    } else {
        let b = p - cparams.soft_points;
        first = cparams.o_slot_items + body_slot_offset(b);
        count = atomicLoad(&ca[cparams.o_bslot_count + b]);
    }
    for (var i = 1u; i < count; i++) {
        let item = atomicLoad(&ca[first + i]);
        let key = rows[item].info.z;
        var j = i;
        while (j > 0u) {
            let before = atomicLoad(&ca[first + j - 1u]);
            let before_key = rows[before].info.z;
            if (before_key < key || (before_key == key && before < item)) {
                break;
            }
            atomicStore(&ca[first + j], before);
            j--;
        }
        atomicStore(&ca[first + j], item);
    }
}

// Where soft point p's list and rigid body b's list start (in their items regions).
fn slot_offset(p: u32) -> u32 {
    return atomicLoad(&ca[cparams.o_slot_offsets + p]);
}

fn body_slot_offset(b: u32) -> u32 {
    return atomicLoad(&ca[cparams.o_bslot_offsets + b]);
}
