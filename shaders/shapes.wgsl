// The colliders the device handles (src/pipeline/collision/primitive/mod.rs,
// PrimitiveShape and its kinds; src/pipeline/collision/device.rs, BodyShape): read by the
// narrow phase (narrow_phase.wgsl and what includes it) and the broad phase
// (broad_phase.wgsl).

const SPHERE: u32 = 0u;
const CAPSULE: u32 = 1u;
const BOX: u32 = 2u;
const HALF_SPACE: u32 = 3u;

// PrimitiveShape: sphere (radius), capsule along local y (half height, radius), box (half
// extents), half-space (outward unit normal).
struct Shape {
    dims: vec3<f32>,
    kind: u32,
};

// Per body: its collider as a primitive (kind NOT_PRIMITIVE for a body without one), and
// the collider's offset from the body's origin in the body frame (w: 0); the colliders of
// the step's narrow phase (contact_narrow.wgsl) and broad phase (broad_phase.wgsl).
struct BodyShape {
    shape: Shape,
    offset: vec4<f32>,
};

// A candidate pair of a step (the broad phase's output, the narrow phase's input): solver
// indices of its bodies, lower first, and the pair's index in the last step's list
// (0xffffffff: a new pair).
struct StepPair {
    a: u32,
    b: u32,
    old: u32,
    pad: u32,
};
