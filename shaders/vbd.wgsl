// Vertex block descent of the deformable bodies on the device (src/gpu/soft/mod.rs): the
// port of src/pipeline/vbd.rs (one 3×3 block solve per vertex, one colour per dispatch) and
// the bindings of the two-level step's per-iteration correction, whose kernels are
// coarse.wgsl (appended to this file). Every record is the CPU's bytemuck struct;
// the element formulas mirror src/deformable/elastic.rs line by line.
//
// WGSL has no float atomics: everything is gathered per vertex (over its incident
// elements) or per coarse node (over the vertices it weighs), never scattered.

struct SoftParams {
    n_vertices: u32,
    n_bodies: u32, // bodies with a coarse system
    inv_h: f32,
    n_attachments: u32,
    // SolverConfig's alpha, lambda_max, beta_linear, k_max (the attachments' rows).
    alpha: f32,
    lambda_max: f32,
    beta_linear: f32,
    k_max: f32,
    // The coarse step's line search (contact rows in the coarse operators, coarse.rs
    // `correct`): on or off, and where its per-body slots start in `delta`.
    line_search: u32,
    search_at: u32,
    // Where each vertex's colour starts in `color_list` (after the colours' members; NONE:
    // not solved).
    color_of: u32,
    // Elements by kind, for `coarse_element_forces`.
    n_tets: u32,
    n_tris: u32,
    n_hinges: u32,
    pad0: u32,
    pad1: u32,
};

// One colour's range of `color_list` and its index (a 256-byte dynamic-offset slot per
// colour).
struct ColorRange {
    start: u32,
    count: u32,
    color: u32,
    pad: u32,
};

// Per vertex, uploaded every step: start position and mass; inertial target as a
// displacement (y − xᵗ) and whether the vertex is solved (1.0) or pinned (0.0).
struct SoftVertex {
    p: vec4<f32>,
    yd: vec4<f32>,
};

// TetRecord, TriRecord, HingeRecord, MaterialRecord (src/deformable/).
struct Tet {
    v: vec4<u32>,
    m: array<f32, 9>,
    volume: f32,
    material: u32,
    pad: u32,
};

struct Tri {
    v0: u32,
    v1: u32,
    v2: u32,
    material: u32,
    m: vec4<f32>,
    area: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
};

struct Hinge {
    v: vec4<u32>,
    rest_angle: f32,
    weight: f32,
    material: u32,
    pad: u32,
};

struct Material {
    mu: f32,
    lambda: f32,
    alpha: f32,
    viscosity: f32,
    bending: f32,
    density: f32,
    friction: vec2<f32>,
};

// The coarse space of one vertex: up to 8 nodes (global, NONE unused) and their weights.
struct CoarseVertex {
    nodes: array<u32, 8>,
    weights: array<f32, 8>,
};

// One body's coarse system: its unknowns (3 per node) start at 3·node_start in `delta`,
// its factor L (lower triangle, row by row) at `factor_start`.
struct CoarseBody {
    node_start: u32,
    unknowns: u32,
    factor_start: u32,
    ok: u32, // 0: the frame's factorisation failed (no correction)
    body: u32, // the deformable body
    size: f32, // its size (the line search's threshold is 1% of it)
    vertex_start: u32, // its vertices
    vertex_end: u32,
};

// A vertex weighed by a coarse node (the node's CSR list).
struct NodeItem {
    vertex: u32,
    weight: f32,
};

// AttachmentRecord (src/deformable/attachment.rs): a vertex held to a point of a rigid body
// by three hard rows; k and λ per row, c0 the error at the step's start.
struct Attachment {
    vertex: u32,
    body: u32,
    flags: u32,
    breaking_force: f32,
    anchor: vec4<f32>,
    k: vec4<f32>,
    lambda: vec4<f32>,
    c0: vec4<f32>,
};

// The rigid bodies' start poses and iterates (the rigid step's buffers, PoseRecord and
// IterateRecord); the iterates are written only by the contact stage's frame end
// (`contact_end_bodies`, surface_contact.wgsl).
struct BodyPose {
    p: vec4<f32>,
    q: vec4<f32>,
};

struct BodyIterate {
    dp: vec4<f32>,
    dtheta: vec4<f32>,
    q: vec4<f32>,
};

@group(0) @binding(0) var<uniform> params: SoftParams;
@group(0) @binding(1) var<storage, read> verts: array<SoftVertex>;
@group(0) @binding(2) var<storage, read_write> disp: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> incident_offsets: array<u32>;
@group(0) @binding(4) var<storage, read> incident: array<u32>;
@group(0) @binding(5) var<storage, read> tets: array<Tet>;
@group(0) @binding(6) var<storage, read> tris: array<Tri>;
@group(0) @binding(7) var<storage, read> hinges: array<Hinge>;
@group(0) @binding(8) var<storage, read> materials: array<Material>;
@group(0) @binding(9) var<storage, read> color_list: array<u32>;
@group(0) @binding(10) var<storage, read> coarse_vertices: array<CoarseVertex>;
@group(0) @binding(11) var<storage, read> coarse_bodies: array<CoarseBody>;
@group(0) @binding(12) var<storage, read> factor: array<f32>;
@group(0) @binding(13) var<storage, read> node_offsets: array<u32>;
@group(0) @binding(14) var<storage, read> node_items: array<NodeItem>;
@group(0) @binding(15) var<storage, read_write> residual: array<vec4<f32>>;
@group(0) @binding(16) var<storage, read_write> delta: array<f32>;
@group(0) @binding(17) var<storage, read_write> attachments: array<Attachment>;
@group(0) @binding(18) var<storage, read> att_vertex_offsets: array<u32>;
@group(0) @binding(19) var<storage, read> att_vertex_items: array<u32>;
@group(0) @binding(20) var<storage, read> body_poses: array<BodyPose>;
@group(0) @binding(21) var<storage, read_write> body_iterate: array<BodyIterate>;
// Each element's force on each of its vertices at the iterate, at 4i + a, i counting the
// tets, then the membranes, then the hinges (coarse.wgsl `coarse_element_forces`, gathered
// by the coarse residual).
@group(0) @binding(22) var<storage, read_write> element_forces: array<vec4<f32>>;
@group(1) @binding(0) var<uniform> range: ColorRange;

const WG: u32 = 64u;
const NONE: u32 = 0xffffffffu;
const ITEM_TET: u32 = 0u;
const ITEM_TRI: u32 = 1u;
const PI: f32 = 3.14159265358979323846;
const FRAC_PI_2: f32 = 1.57079632679489661923;

fn outer(a: vec3<f32>, b: vec3<f32>) -> mat3x3<f32> {
    return mat3x3<f32>(a * b.x, a * b.y, a * b.z);
}

fn diag(s: f32) -> mat3x3<f32> {
    return mat3x3<f32>(vec3<f32>(s, 0.0, 0.0), vec3<f32>(0.0, s, 0.0), vec3<f32>(0.0, 0.0, s));
}

// The iterate of vertex v, xᵗ + d (what the elements read).
fn x_at(v: u32) -> vec3<f32> {
    return verts[v].p.xyz + disp[v].xyz;
}

// The colour a sweep kernel is solving (NONE outside the sweeps).
var<private> sweep_color: u32 = NONE;

fn vertex_color(v: u32) -> u32 {
    return color_list[params.color_of + v];
}

// Vertex v as the sweep of a colour reads it: as it was before the colour (the snapshot in
// `residual`) if v has that colour, else as it is. Elements never join two vertices of one
// colour, contact rows may: only their reads need this.
fn x_in_sweep(v: u32) -> vec3<f32> {
    if (sweep_color != NONE && vertex_color(v) == sweep_color) {
        return verts[v].p.xyz + residual[v].xyz;
    }
    return x_at(v);
}

fn start_at(v: u32) -> vec3<f32> {
    return verts[v].p.xyz;
}

// A vertex's share of an element: force and Hessian block.
struct Block {
    f: vec3<f32>,
    h: mat3x3<f32>,
};

// Viscous force and block (elastic.rs `viscous`).
fn viscous(f: mat3x3<f32>, ft: mat3x3<f32>, m: vec3<f32>, c: f32, inv_h: f32) -> Block {
    let ft_f = transpose(f) * f;
    let ct = transpose(ft) * ft;
    let edot = (ft_f - ct) * (0.5 * inv_h);
    let fm = f * m;
    let force = -2.0 * c * (f * (edot * m));
    let h = (f * transpose(f) * dot(m, m) + outer(fm, fm)) * (c * inv_h);
    return Block(force, h);
}

fn tet_grad(t: Tet, a: u32) -> vec3<f32> {
    let m0 = vec3<f32>(t.m[0], t.m[1], t.m[2]);
    let m1 = vec3<f32>(t.m[3], t.m[4], t.m[5]);
    let m2 = vec3<f32>(t.m[6], t.m[7], t.m[8]);
    switch a {
        case 0u: { return -(m0 + m1 + m2); }
        case 1u: { return m0; }
        case 2u: { return m1; }
        default: { return m2; }
    }
}

fn tet_deformation(t: Tet, x0: vec3<f32>, x1: vec3<f32>, x2: vec3<f32>, x3: vec3<f32>) -> mat3x3<f32> {
    return outer(x1 - x0, tet_grad(t, 1u)) + outer(x2 - x0, tet_grad(t, 2u))
        + outer(x3 - x0, tet_grad(t, 3u));
}

// What a tetrahedron's vertices share at the iterate: F, its cofactor, λ(J − α), and F at
// the step's start where the material is viscous.
struct TetState {
    f: mat3x3<f32>,
    cof: mat3x3<f32>,
    s: f32,
    ft: mat3x3<f32>,
};

fn tet_state(t: Tet, mat: Material) -> TetState {
    let f = tet_deformation(t, x_at(t.v.x), x_at(t.v.y), x_at(t.v.z), x_at(t.v.w));
    let cof = mat3x3<f32>(cross(f[1], f[2]), cross(f[2], f[0]), cross(f[0], f[1]));
    let j = dot(f[0], cof[0]);
    var ft = mat3x3<f32>();
    if (mat.viscosity > 0.0) {
        ft = tet_deformation(
            t, start_at(t.v.x), start_at(t.v.y), start_at(t.v.z), start_at(t.v.w));
    }
    return TetState(f, cof, mat.lambda * (j - mat.alpha), ft);
}

// Stable Neo-Hookean (TetRecord::vertex_block): vertex `a`'s share, from the shared state.
fn tet_share(t: Tet, mat: Material, st: TetState, a: u32) -> Block {
    let m = tet_grad(t, a);
    let g = st.cof * m;
    var force = -t.volume * (mat.mu * (st.f * m) + st.s * g);
    var h = diag(mat.mu * dot(m, m)) + outer(g, g * mat.lambda);
    h = h * t.volume;
    if (mat.viscosity > 0.0) {
        let d = viscous(st.f, st.ft, m, t.volume * mat.viscosity, params.inv_h);
        force += d.f;
        h += d.h;
    }
    return Block(force, h);
}

fn tet_block(e: u32, a: u32) -> Block {
    let t = tets[e];
    let mat = materials[t.material];
    return tet_share(t, mat, tet_state(t, mat), a);
}

fn tri_grad(t: Tri, a: u32) -> vec3<f32> {
    let m1 = vec3<f32>(t.m.x, t.m.y, 0.0);
    let m2 = vec3<f32>(t.m.z, t.m.w, 0.0);
    switch a {
        case 0u: { return -(m1 + m2); }
        case 1u: { return m1; }
        default: { return m2; }
    }
}

// What a membrane's vertices share at the iterate: positions, F (3×2), the normal and its
// length, F at the step's start where the material is viscous.
struct TriState {
    x: array<vec3<f32>, 3>,
    f: mat3x3<f32>,
    n: vec3<f32>,
    len: f32,
    ft: mat3x3<f32>,
};

fn tri_state(t: Tri, mat: Material) -> TriState {
    let x = array<vec3<f32>, 3>(x_at(t.v0), x_at(t.v1), x_at(t.v2));
    let f = outer(x[1] - x[0], tri_grad(t, 1u)) + outer(x[2] - x[0], tri_grad(t, 2u));
    let n = cross(x[1] - x[0], x[2] - x[0]);
    var ft = mat3x3<f32>();
    if (mat.viscosity > 0.0) {
        let s0 = start_at(t.v0);
        ft = outer(start_at(t.v1) - s0, tri_grad(t, 1u))
            + outer(start_at(t.v2) - s0, tri_grad(t, 2u));
    }
    return TriState(x, f, n, length(n), ft);
}

// Membrane (TriRecord::vertex_block): vertex `a`'s share, from the shared state.
fn tri_share(t: Tri, mat: Material, st: TriState, a: u32) -> Block {
    var x = st.x;
    let m = tri_grad(t, a);
    var force = -(mat.mu * (st.f * m));
    var h = diag(mat.mu * dot(m, m));
    if (st.len > 0.0) {
        let nh = st.n / st.len;
        let j = st.len / (2.0 * t.area);
        let d = x[(a + 2u) % 3u] - x[(a + 1u) % 3u];
        let gj = cross(nh, d) / (2.0 * t.area);
        let s = mat.lambda * (j - mat.alpha);
        force -= s * gj;
        h += outer(gj, gj * mat.lambda);
        if (s > 0.0) {
            h += outer(nh, nh) * (s * dot(d, d) / (2.0 * t.area * st.len));
        }
    }
    force *= t.area;
    h = h * t.area;
    if (mat.viscosity > 0.0) {
        let dv = viscous(st.f, st.ft, m, t.area * mat.viscosity, params.inv_h);
        force += dv.f;
        h += dv.h;
    }
    return Block(force, h);
}

fn tri_block(e: u32, a: u32) -> Block {
    let t = tris[e];
    let mat = materials[t.material];
    return tri_share(t, mat, tri_state(t, mat), a);
}

// crate::math::atan2: the same polynomial, so both backends bend alike.
fn atan2_poly(y: f32, x: f32) -> f32 {
    let ax = abs(x);
    let ay = abs(y);
    let lo = min(ax, ay);
    let hi = max(ax, ay);
    if (hi == 0.0) {
        if (x < 0.0) {
            return select(PI, -PI, y < 0.0);
        }
        return 0.0;
    }
    let t = lo / hi;
    let t2 = t * t;
    var r = 0.0068117925;
    r = r * t2 + -0.03360422;
    r = r * t2 + 0.07962367;
    r = r * t2 + -0.13233343;
    r = r * t2 + 0.19807816;
    r = r * t2 + -0.3331737;
    r = r * t2 + 0.9999961;
    r = r * t;
    if (ay > ax) {
        r = FRAC_PI_2 - r;
    }
    if (x < 0.0) {
        r = PI - r;
    }
    return select(r, -r, y < 0.0);
}

// What a hinge's vertices share at the iterate (elastic.rs `dihedral`): the dihedral
// gradient's two normal terms and edge ratios, the angle's distance from rest and the
// stiffness; `valid` false where a triangle or the edge is degenerate.
struct HingeState {
    g2: vec3<f32>,
    g3: vec3<f32>,
    sa: f32,
    sb: f32,
    diff: f32,
    k: f32,
    valid: bool,
};

fn hinge_state(t: Hinge, mat: Material) -> HingeState {
    let x0 = x_at(t.v.x);
    let x1 = x_at(t.v.y);
    let x2 = x_at(t.v.z);
    let x3 = x_at(t.v.w);
    let ed = x1 - x0;
    let na = cross(ed, x2 - x0);
    let nb = cross(x3 - x0, ed);
    let la2 = dot(na, na);
    let lb2 = dot(nb, nb);
    let le2 = dot(ed, ed);
    var st = HingeState(vec3<f32>(0.0), vec3<f32>(0.0), 0.0, 0.0, 0.0, 0.0, false);
    if (la2 <= 0.0 || lb2 <= 0.0 || le2 <= 0.0) {
        return st;
    }
    let le = sqrt(le2);
    let theta = atan2_poly(dot(cross(na, nb), ed) / le, dot(na, nb));
    st.g2 = na * (-le / la2);
    st.g3 = nb * (-le / lb2);
    st.sa = dot(x2 - x0, ed) / le2;
    st.sb = dot(x3 - x0, ed) / le2;
    var diff = theta - t.rest_angle;
    if (diff > PI) {
        diff -= 2.0 * PI;
    } else if (diff <= -PI) {
        diff += 2.0 * PI;
    }
    st.diff = diff;
    st.k = mat.bending * t.weight;
    st.valid = true;
    return st;
}

// Bending (HingeRecord::vertex_block): vertex `a`'s share, from the shared state.
fn hinge_share(st: HingeState, a: u32) -> Block {
    var blk = Block(vec3<f32>(0.0), mat3x3<f32>());
    if (!st.valid) {
        return blk;
    }
    var g: vec3<f32>;
    switch a {
        case 0u: { g = st.g2 * (st.sa - 1.0) + st.g3 * (st.sb - 1.0); }
        case 1u: { g = st.g2 * (-st.sa) + st.g3 * (-st.sb); }
        case 2u: { g = st.g2; }
        default: { g = st.g3; }
    }
    blk.f = g * (-st.k * st.diff);
    blk.h = outer(g, g * st.k);
    return blk;
}

fn hinge_block(e: u32, a: u32) -> Block {
    let t = hinges[e];
    return hinge_share(hinge_state(t, materials[t.material]), a);
}

fn element_block(item: u32) -> Block {
    let kind = (item >> 2u) & 3u;
    let e = item >> 4u;
    let a = item & 3u;
    if (kind == ITEM_TET) {
        return tet_block(e, a);
    } else if (kind == ITEM_TRI) {
        return tri_block(e, a);
    }
    return hinge_block(e, a);
}

fn qrot(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    let t = 2.0 * cross(q.xyz, v);
    return v + q.w * t + cross(q.xyz, t);
}

const BROKEN: u32 = 1u;

// Attachment a's error at vertex position x (the body at its iterate): x − (p + q·anchor).
fn attachment_error(a: Attachment, x: vec3<f32>) -> vec3<f32> {
    let it = body_iterate[a.body];
    let p = body_poses[a.body].p.xyz + it.dp.xyz;
    return x - (p + qrot(it.q, a.anchor.xyz));
}

// Its force on the body, k (C − α C₀) + λ (AttachmentRecord::force).
fn attachment_force(a: Attachment, c: vec3<f32>) -> vec3<f32> {
    return a.k.xyz * (c - params.alpha * a.c0.xyz) + a.lambda.xyz;
}

fn is_solved(v: u32) -> bool {
    return verts[v].yd.w > 0.5;
}

// The inertia block of vertex v at the iterate.
fn inertia_block(v: u32) -> Block {
    let m_h2 = verts[v].p.w * params.inv_h * params.inv_h;
    return Block((verts[v].yd.xyz - disp[v].xyz) * m_h2, diag(m_h2));
}

// `start` plus every `stride`-th incident element of v from its `first`, in list order.
fn add_elements(v: u32, start: Block, first: u32, stride: u32) -> Block {
    var acc = start;
    for (var k = incident_offsets[v] + first; k < incident_offsets[v + 1u]; k += stride) {
        let b = element_block(incident[k]);
        acc.f += b.f;
        acc.h += b.h;
    }
    return acc;
}

// The inertia block's force and every incident element's, at the iterate; then the
// attachments' and the contact rows' (surface_contact.wgsl).
fn vertex_block(v: u32) -> Block {
    return add_rows(v, add_elements(v, inertia_block(v), 0u, 1u));
}

// `start` plus v's attachment and contact rows.
fn add_rows(v: u32, start: Block) -> Block {
    var acc = start;
    // Attachment rows (the vertex side of pipeline::vbd's block); the lists hold unbroken
    // attachments only.
    if (v + 1u < arrayLength(&att_vertex_offsets)) {
        let x = x_at(v);
        for (var k = att_vertex_offsets[v]; k < att_vertex_offsets[v + 1u]; k++) {
            let a = attachments[att_vertex_items[k]];
            acc.f -= attachment_force(a, attachment_error(a, x));
            acc.h += mat3x3<f32>(
                vec3<f32>(a.k.x, 0.0, 0.0), vec3<f32>(0.0, a.k.y, 0.0), vec3<f32>(0.0, 0.0, a.k.z));
        }
    }
    let c = contact_block(v);
    acc.f += c.f;
    acc.h += c.h;
    return acc;
}

// One colour of the sweep: each vertex's block solve, written in place. Vertices of one
// colour share no element, so no element of the colour reads another's new position; a
// contact row can join two of them, and reads its other points of the colour from the
// snapshot `vbd_snapshot` took before the sweeps (`x_in_sweep`): every read of the colour
// is at the positions before it, as on the CPU, with one dispatch a colour.
@compute @workgroup_size(64)
fn vbd_sweep(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if (i >= range.count) {
        return;
    }
    sweep_color = range.color;
    let v = color_list[range.start + i];
    solve_vertex(v, vertex_block(v));
}

// Before an iteration's colours, with contact rows: every displacement into `residual`
// (free during the sweeps), which the rows read a point of the colour being swept from.
// With the coarse line search on, its last pass (`coarse_prolong_checked`) does this.
// A vertex changes only in its colour's sweep, so this holds each vertex as it is before
// its colour.
@compute @workgroup_size(64)
fn vbd_snapshot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v = lane_index(wid, nwg, lid);
    if (v >= params.n_vertices) {
        return;
    }
    residual[v] = disp[v];
}

// Lanes per vertex of `vbd_sweep_lanes` (SolverConfig::gpu_vertex_lanes; a power of two).
override VERTEX_LANES: u32 = 1u;
var<workgroup> lane_f: array<vec3<f32>, WG>;
var<workgroup> lane_h: array<mat3x3<f32>, WG>;

// `vbd_sweep` with VERTEX_LANES lanes per vertex: lane s of a vertex sums its elements s,
// s + VERTEX_LANES, … (lane 0 from the inertia block), then its first lane adds the
// lanes' sums in lane order and the rows, and solves. With one lane, `vbd_sweep`'s sums.
// A workgroup takes WG / VERTEX_LANES vertices at a time, striding over the colour (the
// dispatch is capped at the device's workgroup count).
@compute @workgroup_size(64)
fn vbd_sweep_lanes(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    let per_group = WG / VERTEX_LANES;
    let sub = lane % VERTEX_LANES;
    sweep_color = range.color;
    for (var first = wid.x * per_group; first < range.count; first += groups.x * per_group) {
        let i = first + lane / VERTEX_LANES;
        let live = i < range.count;
        var v = 0u;
        var part = Block(vec3<f32>(0.0), mat3x3<f32>());
        if (live) {
            v = color_list[range.start + i];
            if (sub == 0u) {
                part = inertia_block(v);
            }
            part = add_elements(v, part, sub, VERTEX_LANES);
        }
        lane_f[lane] = part.f;
        lane_h[lane] = part.h;
        workgroupBarrier();
        if (live && sub == 0u) {
            var acc = part;
            for (var s = 1u; s < VERTEX_LANES; s++) {
                acc.f += lane_f[lane + s];
                acc.h += lane_h[lane + s];
            }
            solve_vertex(v, add_rows(v, acc));
        }
        workgroupBarrier();
    }
}

// v's block solve at the colour's positions, into `disp[v]` (kept as it is when the
// block is not SPD).
fn solve_vertex(v: u32, acc: Block) {
    // glam's Mat3::determinant and inverse, in their order of operations.
    let c0 = cross(acc.h[1], acc.h[2]);
    let c1 = cross(acc.h[2], acc.h[0]);
    let c2 = cross(acc.h[0], acc.h[1]);
    let det = dot(acc.h[0], c0);
    // Not SPD or not finite: keep the iterate (the end-of-step guard reports it).
    if (!(det > 0.0 && det <= 3.4028235e38)) {
        return;
    }
    let inv_det = 1.0 / det;
    let step = transpose(mat3x3<f32>(c0 * inv_det, c1 * inv_det, c2 * inv_det)) * acc.f;
    disp[v] = vec4<f32>(disp[v].xyz + step, 0.0);
}

// The attachments' dual update after each iteration (pipeline::attachments::update):
// λ ← k C̃ + λ, never clamped to a sign (equality rows), and the penalty ramp.
@compute @workgroup_size(64)
fn attachment_dual(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if (i >= params.n_attachments) {
        return;
    }
    var a = attachments[i];
    if ((a.flags & BROKEN) != 0u) {
        return;
    }
    let c = attachment_error(a, x_at(a.vertex));
    let f = attachment_force(a, c);
    let lm = params.lambda_max;
    a.lambda = vec4<f32>(clamp(f, vec3<f32>(-lm), vec3<f32>(lm)), a.lambda.w);
    a.k = vec4<f32>(min(a.k.xyz + params.beta_linear * abs(c), vec3<f32>(params.k_max)), a.k.w);
    attachments[i] = a;
}
