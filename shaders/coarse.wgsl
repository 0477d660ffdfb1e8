// The two-level step of the vertex block descent on the device, per iteration before the
// vertex colours (src/pipeline/coarse.rs on the CPU): the exact residual at the iterate,
// its restriction to each body's coarse nodes, the solve with the factor the CPU assembled
// for the frame, the secant line search, the prolongation. vbd.wgsl, prepended, holds the
// bindings and the vertices' block assembly the residual uses.

// The two-level step, 0: each element's force on each of its vertices at the iterate,
// once per element (coarse.rs `residual` keeps each element's forces the same way): the
// residual below gathers them instead of working out each element once per vertex.
@compute @workgroup_size(64)
fn coarse_element_forces(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if (i < params.n_tets) {
        let t = tets[i];
        let mat = materials[t.material];
        let st = tet_state(t, mat);
        for (var a = 0u; a < 4u; a++) {
            element_forces[4u * i + a] = vec4<f32>(tet_share(t, mat, st, a).f, 0.0);
        }
    } else if (i < params.n_tets + params.n_tris) {
        let t = tris[i - params.n_tets];
        let mat = materials[t.material];
        let st = tri_state(t, mat);
        for (var a = 0u; a < 3u; a++) {
            element_forces[4u * i + a] = vec4<f32>(tri_share(t, mat, st, a).f, 0.0);
        }
    } else if (i < params.n_tets + params.n_tris + params.n_hinges) {
        let t = hinges[i - params.n_tets - params.n_tris];
        let st = hinge_state(t, materials[t.material]);
        for (var a = 0u; a < 4u; a++) {
            element_forces[4u * i + a] = vec4<f32>(hinge_share(st, a).f, 0.0);
        }
    }
}

// An incident item's slot in `element_forces`.
fn element_slot(item: u32) -> u32 {
    let kind = (item >> 2u) & 3u;
    var i = item >> 4u;
    if (kind == ITEM_TRI) {
        i += params.n_tets;
    } else if (kind != ITEM_TET) {
        i += params.n_tets + params.n_tris;
    }
    return 4u * i + (item & 3u);
}

// 1: every solved vertex's force at the iterate (coarse.rs `residual`; the block's force
// without its Hessian): inertia, its elements' forces in list order (from
// `coarse_element_forces`), attachments and contact rows.
@compute @workgroup_size(64)
fn coarse_residual(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v = lane_index(wid, nwg, lid);
    if (v >= params.n_vertices) {
        return;
    }
    var f = vec3<f32>(0.0);
    if (is_solved(v)) {
        var acc = inertia_block(v);
        for (var k = incident_offsets[v]; k < incident_offsets[v + 1u]; k++) {
            acc.f += element_forces[element_slot(incident[k])].xyz;
        }
        f = add_rows(v, acc).f;
    }
    residual[v] = vec4<f32>(f, 0.0);
}

var<workgroup> rhs: array<f32, 3072>;
// The substitutions' diagonal block: its lower triangle, row by row.
var<workgroup> diag_block: array<f32, 528>;
var<workgroup> slope: f32;
// (Pᵀ r)·δ of the solve, kept for the line search's start (the same sum in the same order
// as summing `restricted` again, which one lane would gather from every vertex).
var<workgroup> restricted_slope: f32;
// Each lane's share of δᵀ ΔA δ, then the step's length α.
var<workgroup> fresh: array<f32, WG>;
// Each lane's part of the step is finite (1) or not (0).
var<workgroup> finite_lanes: array<u32, WG>;
var<workgroup> alpha: f32;

// 2: one workgroup per body: rhs = Pᵀ r (each lane gathers its nodes' vertices), then
// L Lᵀ δ = rhs by blocked substitution (`forward_substitution`, `backward_substitution`);
// the step shortened to α = rᵀδ / (rᵀδ + δᵀ ΔA δ) when rows
// the factor does not hold (made since the frame's start) stiffen it, into `delta`
// (coarse.rs `correct`). A step that is not a descent step or not finite is written as
// zeros (coarse.rs skips it).
@compute @workgroup_size(64)
fn coarse_solve(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    // One workgroup per body, in a 2-D grid past the workgroups per dimension.
    let b = wid.y * nwg.x + wid.x;
    if (b >= params.n_bodies) {
        return;
    }
    let body = coarse_bodies[b];
    let n = body.unknowns;
    let n0 = body.node_start;
    for (var i = lane; i < n / 3u; i += WG) {
        var s = vec3<f32>(0.0);
        for (var k = node_offsets[n0 + i]; k < node_offsets[n0 + i + 1u]; k++) {
            let it = node_items[k];
            s += it.weight * residual[it.vertex].xyz;
        }
        rhs[3u * i] = s.x;
        rhs[3u * i + 1u] = s.y;
        rhs[3u * i + 2u] = s.z;
        delta[3u * n0 + 3u * i] = s.x;
        delta[3u * n0 + 3u * i + 1u] = s.y;
        delta[3u * n0 + 3u * i + 2u] = s.z;
    }
    workgroupBarrier();
    forward_substitution(body.factor_start, n, lane);
    backward_substitution(body.factor_start, n, lane);
    // The slope r·Pδ = (Pᵀr)·δ, and whether the step is finite, each lane over a stride.
    let s = delta_dot_rhs(n0, n, lane);
    var finite = true;
    for (var i = lane; i < n; i += WG) {
        finite = finite && abs(rhs[i]) <= 3.4028235e38;
    }
    finite_lanes[lane] = u32(finite);
    workgroupBarrier();
    if (lane == 0u) {
        var all = true;
        for (var i = 0u; i < WG; i++) {
            all = all && finite_lanes[i] != 0u;
        }
        slope = select(0.0, 1.0, s >= 0.0 && all && body.ok != 0u);
        restricted_slope = s;
    }
    workgroupBarrier();
    let keep = slope;
    // δᵀ ΔA δ: each lane over a stride of the body's vertices, then summed in lane order.
    var own = 0.0;
    if (keep > 0.0) {
        for (var v = body.vertex_start + lane; v < body.vertex_end; v += WG) {
            own += fresh_stiffness(v, body);
        }
    }
    fresh[lane] = own;
    workgroupBarrier();
    if (lane == 0u) {
        var sum = 0.0;
        for (var i = 0u; i < WG; i++) {
            sum += fresh[i];
        }
        alpha = 1.0;
        if (sum > 0.0 && restricted_slope > 0.0) {
            alpha = restricted_slope / (restricted_slope + sum);
        }
    }
    workgroupBarrier();
    let a = alpha;
    for (var i = lane; i < n; i += WG) {
        delta[3u * n0 + i] = select(0.0, a * rhs[i], keep > 0.0);
    }
    // A step that moves a node by more than 1% of the body is checked by the line search:
    // its slope at the start, or −1 (no check).
    if (lane == 0u && params.line_search != 0u) {
        var start = -1.0;
        if (keep > 0.0) {
            var largest = 0.0;
            for (var i = 0u; i < n / 3u; i++) {
                largest = max(largest, length(vec3<f32>(rhs[3u * i], rhs[3u * i + 1u], rhs[3u * i + 2u])));
            }
            if (a * largest > 0.01 * body.size && atomicLoad(&ca[ST_ROWS]) > 0u) {
                start = a * restricted_slope;
            }
        }
        delta[params.search_at + 2u * body.body] = start;
        delta[params.search_at + 2u * body.body + 1u] = 0.0;
    }
}

// The substitutions go through the factor in blocks of BLOCK unknowns. A step of a
// column-by-column substitution is a barrier and a read of the factor from device
// memory that the next step waits for, n of them in a row per sweep. The host uploads
// each diagonal block of the factor inverted (gpu/soft/upload.rs `invert_diagonal_blocks`),
// so a block is solved by one product with it, each lane one unknown, from workgroup
// memory; the rows outside the block then take the block's columns in one pass, in
// parallel, PANEL reads at a time. A sweep is a few barriers a block instead of one per
// unknown.
const BLOCK: u32 = 32u;
// The rows outside the block read PANEL of its columns' entries before they use them, so
// that the reads overlap instead of each waiting for the last product.
const PANEL: u32 = 8u;

fn triangle(i: u32) -> u32 {
    return i * (i + 1u) / 2u;
}

// The lower triangle of the factor's diagonal block at unknowns [s, s + b) (uploaded
// inverted) into `diag_block`.
fn load_diag_block(l0: u32, s: u32, b: u32, lane: u32) {
    for (var k = lane; k < BLOCK * BLOCK; k += WG) {
        let r = k / BLOCK;
        let c = k % BLOCK;
        if (r < b && c <= r) {
            diag_block[triangle(r) + c] = factor[l0 + triangle(s + r) + s + c];
        }
    }
    workgroupBarrier();
}

// L y = rhs in place (L: the lower triangle at l0, row by row, its diagonal blocks
// inverted).
fn forward_substitution(l0: u32, n: u32, lane: u32) {
    for (var s = 0u; s < n; s += BLOCK) {
        let b = min(BLOCK, n - s);
        load_diag_block(l0, s, b, lane);
        // y_b = L_bb⁻¹ rhs_b: lane i takes row i of the inverse.
        var y = 0.0;
        if (lane < b) {
            for (var j = 0u; j <= lane; j++) {
                y += diag_block[triangle(lane) + j] * rhs[s + j];
            }
        }
        workgroupBarrier();
        if (lane < b) {
            rhs[s + lane] = y;
        }
        workgroupBarrier();
        for (var i = s + b + lane; i < n; i += WG) {
            let row = l0 + triangle(i) + s;
            var r = rhs[i];
            for (var j0 = 0u; j0 < b; j0 += PANEL) {
                var l: array<f32, PANEL>;
                for (var k = 0u; k < PANEL; k++) {
                    if (j0 + k < b) {
                        l[k] = factor[row + j0 + k];
                    }
                }
                for (var k = 0u; k < min(PANEL, b - j0); k++) {
                    r -= l[k] * rhs[s + j0 + k];
                }
            }
            rhs[i] = r;
        }
        workgroupBarrier();
    }
}

// Lᵀ δ = y in place, the blocks from the last.
fn backward_substitution(l0: u32, n: u32, lane: u32) {
    let blocks = (n + BLOCK - 1u) / BLOCK;
    for (var kb = 0u; kb < blocks; kb++) {
        let s = (blocks - 1u - kb) * BLOCK;
        let b = min(BLOCK, n - s);
        load_diag_block(l0, s, b, lane);
        // δ_b = (L_bb⁻¹)ᵀ y_b: lane i takes column i of the inverse.
        var x = 0.0;
        if (lane < b) {
            for (var j = lane; j < b; j++) {
                x += diag_block[triangle(j) + lane] * rhs[s + j];
            }
        }
        workgroupBarrier();
        if (lane < b) {
            rhs[s + lane] = x;
        }
        workgroupBarrier();
        for (var i = lane; i < s; i += WG) {
            var r = rhs[i];
            for (var j0 = 0u; j0 < b; j0 += PANEL) {
                var l: array<f32, PANEL>;
                for (var k = 0u; k < PANEL; k++) {
                    if (j0 + k < b) {
                        l[k] = factor[l0 + triangle(s + b - 1u - j0 - k) + i];
                    }
                }
                for (var k = 0u; k < min(PANEL, b - j0); k++) {
                    r -= l[k] * rhs[s + b - 1u - j0 - k];
                }
            }
            rhs[i] = r;
        }
        workgroupBarrier();
    }
}

// Σ delta · rhs over the body's unknowns (its `delta` from node n0): each lane over a
// stride of them, then the lanes' sums in lane order (through `fresh`), the same sum on
// every run. Every lane calls it and gets the sum.
fn delta_dot_rhs(n0: u32, n: u32, lane: u32) -> f32 {
    var part = 0.0;
    for (var i = lane; i < n; i += WG) {
        part += delta[3u * n0 + i] * rhs[i];
    }
    fresh[lane] = part;
    workgroupBarrier();
    var s = 0.0;
    for (var i = 0u; i < WG; i++) {
        s += fresh[i];
    }
    workgroupBarrier();
    return s;
}

// The stiffness along the solve's step δ (in `rhs`) of the rows with vertex v as their
// first point in the body that the frame's factor does not hold (SurfaceContact::
// fresh_stiffness): k (n·u)² and the friction's k (|u_t|² − (t·u_t)²), u the step of the
// row's points in the body (the other side held still).
fn fresh_stiffness(v: u32, body: CoarseBody) -> f32 {
    var sum = 0.0;
    if (cparams.on == 0u || v >= cparams.soft_points) {
        return sum;
    }
    let count = point_row_count(v);
    for (var s = 0u; s < count; s++) {
        let r = point_row(v, s);
        if ((r.info.x & ROW_ALIVE) == 0u || (r.info.x & ROW_COARSE) != 0u) {
            continue;
        }
        var lead = NONE;
        var u = vec3<f32>(0.0);
        var ut = vec3<f32>(0.0);
        for (var k = 0u; k < 4u; k++) {
            let p = r.points[k];
            if (p != NONE && p >= body.vertex_start && p < body.vertex_end) {
                if (lead == NONE) {
                    lead = p;
                }
                let d = prolonged_solve(p, body.node_start);
                u += d * r.weights[k];
                ut += d * r.lagged_weights[k];
            }
        }
        if (lead != v) {
            continue;
        }
        let stiffness = r.fr.x * row_mu(r);
        let un = dot(r.normal.xyz, u);
        sum += stiffness * un * un;
        if (has_friction(r)) {
            let tu = dot(r.lagged_normal.xyz, ut);
            sum += stiffness * (dot(ut, ut) - tu * tu);
        }
    }
    return sum;
}

// (P δ)_p with δ the solve's result in `rhs` (the body's nodes from n0).
fn prolonged_solve(p: u32, n0: u32) -> vec3<f32> {
    let c = coarse_vertices[p];
    var step = vec3<f32>(0.0);
    for (var k = 0u; k < 8u; k++) {
        let node = c.nodes[k];
        if (node != NONE) {
            let i = 3u * (node - n0);
            step += c.weights[k] * vec3<f32>(rhs[i], rhs[i + 1u], rhs[i + 2u]);
        }
    }
    return step;
}

// Component i of Pᵀ r over the body's nodes from node n0 (the residual at the iterate).
fn restricted(n0: u32, i: u32) -> f32 {
    var s = 0.0;
    for (var k = node_offsets[n0 + i / 3u]; k < node_offsets[n0 + i / 3u + 1u]; k++) {
        let it = node_items[k];
        s += it.weight * residual[it.vertex][i % 3u];
    }
    return s;
}

// The line search, 1: the residual again, at the end of the step, for the vertices of the
// bodies whose step is checked (`owner` from the contact stage: the search runs with
// contact only).
@compute @workgroup_size(64)
fn coarse_residual_checked(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v = lane_index(wid, nwg, lid);
    if (v >= params.n_vertices || delta[params.search_at + 2u * su[cparams.o_owner + v]] < 0.0) {
        return;
    }
    var f = vec3<f32>(0.0);
    if (is_solved(v)) {
        f = vertex_block(v).f;
    }
    residual[v] = vec4<f32>(f, 0.0);
}

// 2: one workgroup per body: where the slope at the step's end, (Pᵀ r)·δ, has turned, the
// step is cut back to the secant estimate of the minimum along it, α = s₀ / (s₀ − s₁): the
// prolongation's scale α − 1.
@compute @workgroup_size(64)
fn coarse_line_search(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    // One workgroup per body, in a 2-D grid past the workgroups per dimension.
    let b = wid.y * nwg.x + wid.x;
    if (b >= params.n_bodies) {
        return;
    }
    let body = coarse_bodies[b];
    let at = params.search_at + 2u * body.body;
    let start = delta[at];
    if (start < 0.0) {
        return;
    }
    let n = body.unknowns;
    let n0 = body.node_start;
    for (var i = lane; i < n; i += WG) {
        rhs[i] = restricted(n0, i);
    }
    workgroupBarrier();
    let end = delta_dot_rhs(n0, n, lane);
    if (lane == 0u) {
        var scale = 0.0;
        if (end < 0.0) {
            scale = start / (start - end) - 1.0;
        }
        delta[at + 1u] = scale;
    }
}

// 3: x += (α − 1) P δ for the vertices of the bodies cut back. The last pass before the
// colours' sweeps, which it also leaves every displacement's snapshot for (`vbd_snapshot`'s
// work, in the same dispatch: the line search runs only with contact rows, which read it).
@compute @workgroup_size(64)
fn coarse_prolong_checked(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v = lane_index(wid, nwg, lid);
    if (v >= params.n_vertices) {
        return;
    }
    var d = disp[v];
    let scale = delta[params.search_at + 2u * su[cparams.o_owner + v] + 1u];
    if (scale != 0.0) {
        let step = coarse_step_at(v);
        if (step.w > 0.0) {
            d = vec4<f32>(d.xyz + scale * step.xyz, 0.0);
            disp[v] = d;
        }
    }
    residual[v] = d;
}

// 3: x += P δ for every vertex of a body with a coarse space.
@compute @workgroup_size(64)
fn coarse_prolong(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v = lane_index(wid, nwg, lid);
    if (v >= params.n_vertices) {
        return;
    }
    let step = coarse_step_at(v);
    if (step.w > 0.0) {
        disp[v] = vec4<f32>(disp[v].xyz + step.xyz, 0.0);
    }
}

// (P δ)_v, and w = 1 where vertex v has a coarse node (pinned vertices have none).
fn coarse_step_at(v: u32) -> vec4<f32> {
    let c = coarse_vertices[v];
    var step = vec4<f32>(0.0);
    for (var k = 0u; k < 8u; k++) {
        let node = c.nodes[k];
        if (node != NONE) {
            step += vec4<f32>(c.weights[k] * vec3<f32>(delta[3u * node], delta[3u * node + 1u], delta[3u * node + 2u]), 1.0);
        }
    }
    return vec4<f32>(step.xyz, min(step.w, 1.0));
}
