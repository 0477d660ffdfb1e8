// The constraint graph as the colouring and the adjacency build read it: the body indices
// of each contact and joint record (through the contact chunks), and the adjacency (CSR)
// built on the device by adjacency.wgsl. Shared by coloring.wgsl and adjacency.wgsl, which
// bind the same group.

// Only the body indices of the records are read; the rest keeps the stride.
struct ContactHead {
    body_a: u32,
    body_b: u32,
    mu: vec2<f32>,
    rest: array<vec4<f32>, 5>,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> contacts0: array<ContactHead>;
@group(0) @binding(2) var<storage, read> joints: array<JointHead>;
// adj_offsets[i]..adj_offsets[i + 1]: the items of body i, `(index << 1) | is_joint`.
@group(0) @binding(3) var<storage, read_write> adj_offsets: array<u32>;
@group(0) @binding(4) var<storage, read_write> adj_items: array<u32>;
@group(0) @binding(5) var<storage, read> body_flags: array<u32>;
// Further contact chunks (see contact_chunks.wgsl; only each record's head is read here).
@group(0) @binding(11) var<storage, read> contacts1: array<ContactHead>;
@group(0) @binding(12) var<storage, read> contacts2: array<ContactHead>;
@group(0) @binding(13) var<storage, read> contacts3: array<ContactHead>;
@group(0) @binding(14) var<storage, read> contacts4: array<ContactHead>;
@group(0) @binding(15) var<storage, read> contacts5: array<ContactHead>;
@group(0) @binding(16) var<storage, read> contacts6: array<ContactHead>;
@group(0) @binding(17) var<storage, read> contacts7: array<ContactHead>;

fn contact_bodies(i: u32) -> vec2<u32> {
    let j = i & ((1u << params.contact_shift) - 1u);
    switch (i >> params.contact_shift) {
        case 0u: { return vec2<u32>(contacts0[j].body_a, contacts0[j].body_b); }
        case 1u: { return vec2<u32>(contacts1[j].body_a, contacts1[j].body_b); }
        case 2u: { return vec2<u32>(contacts2[j].body_a, contacts2[j].body_b); }
        case 3u: { return vec2<u32>(contacts3[j].body_a, contacts3[j].body_b); }
        case 4u: { return vec2<u32>(contacts4[j].body_a, contacts4[j].body_b); }
        case 5u: { return vec2<u32>(contacts5[j].body_a, contacts5[j].body_b); }
        case 6u: { return vec2<u32>(contacts6[j].body_a, contacts6[j].body_b); }
        default: { return vec2<u32>(contacts7[j].body_a, contacts7[j].body_b); }
    }
}

// Whether body b is solved this step (dynamic, not frozen): `body_flags` bit 0.
fn is_solved(b: u32) -> bool {
    return b != WORLD && (body_flags[b] & 1u) != 0u;
}
