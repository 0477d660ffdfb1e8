// The narrow phase as standalone kernels over uploaded pairs (src/gpu/narrow.rs, for
// tests and tools): `narrow_phase` writes each pair's manifold, `narrow_persistent` each
// pair's PrimitiveContact from its last one. common.wgsl, narrow_phase.wgsl, box_box.wgsl
// and contact_persistence.wgsl are prepended.

struct NarrowParams {
    margin: f32,
    count: u32,
    pad0: u32,
    pad1: u32,
};

@group(0) @binding(0) var<uniform> np: NarrowParams;
@group(0) @binding(1) var<storage, read> pairs: array<Pair>;
@group(0) @binding(2) var<storage, read_write> manifolds: array<Manifold>;
// Per pair, the index of its last state in `old_contacts` (NO_OLD: a new pair).
@group(0) @binding(3) var<storage, read> old_index: array<u32>;
@group(0) @binding(4) var<storage, read> old_contacts: array<PairContact>;
@group(0) @binding(5) var<storage, read_write> contacts_out: array<PairContact>;

@compute @workgroup_size(64)
fn narrow_phase(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= np.count {
        return;
    }
    let pair = pairs[i];
    manifolds[i] = collide(pair.a, pair.pose_a, pair.b, pair.pose_b, np.margin);
}

@compute @workgroup_size(64)
fn narrow_persistent(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= np.count {
        return;
    }
    let o = old_index[i];
    var old = PairContact();
    if o != NO_OLD {
        old = old_contacts[o];
    }
    contacts_out[i] = update_contact(pairs[i], np.margin, o != NO_OLD, old);
}
