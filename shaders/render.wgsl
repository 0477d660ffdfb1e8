// The renderer of `bevy_avbd::render`: a depth-only pass from the light (shadow map), then
// the camera pass: Lambert shading with a hemisphere ambient and 3×3 PCF shadows; surfaces
// whose colour has alpha 0 are half-spaces, painted as a filtered checker board that fades
// into the background with distance.

struct Globals {
    view_proj: mat4x4<f32>,
    light_view_proj: mat4x4<f32>,
    // xyz: towards the light (unit); w: shadow-map texel size in world units.
    light: vec4<f32>,
    // rgb: background (linear); w: checker cell (m).
    background: vec4<f32>,
    // xyz: scene centre; w: scene radius (fog distances are multiples of it).
    scene: vec4<f32>,
};

@group(0) @binding(0) var<uniform> g: Globals;
@group(0) @binding(1) var shadow_map: texture_depth_2d;
@group(0) @binding(2) var shadow_sampler: sampler_comparison;

struct VertexIn {
    @location(0) pos: vec3<f32>,
    @location(1) normal: vec3<f32>,
    @location(2) color: vec4<f32>,
};

struct VertexOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) world: vec3<f32>,
    @location(1) normal: vec3<f32>,
    @location(2) color: vec4<f32>,
};

@vertex
fn vs_shadow(v: VertexIn) -> @builtin(position) vec4<f32> {
    return g.light_view_proj * vec4<f32>(v.pos, 1.0);
}

@vertex
fn vs_main(v: VertexIn) -> VertexOut {
    var o: VertexOut;
    o.clip = g.view_proj * vec4<f32>(v.pos, 1.0);
    o.world = v.pos;
    o.normal = v.normal;
    o.color = v.color;
    return o;
}

fn srgb_to_linear(c: vec3<f32>) -> vec3<f32> {
    return select(pow((c + 0.055) / 1.055, vec3<f32>(2.4)), c / 12.92, c <= vec3<f32>(0.04045));
}

// Share of light reaching `world` (1 = lit): 3×3 percentage-closer filtering, the lookup
// offset along the normal by two texels against acne.
fn lit(world: vec3<f32>, n: vec3<f32>) -> f32 {
    let p = g.light_view_proj * vec4<f32>(world + n * (2.0 * g.light.w), 1.0);
    let uv = vec2<f32>(p.x * 0.5 + 0.5, 0.5 - p.y * 0.5);
    if (any(uv < vec2<f32>(0.0)) || any(uv > vec2<f32>(1.0)) || p.z > 1.0 || p.z < 0.0) {
        return 1.0;
    }
    let texel = 1.0 / vec2<f32>(textureDimensions(shadow_map));
    var sum = 0.0;
    for (var i = -1; i <= 1; i++) {
        for (var j = -1; j <= 1; j++) {
            let o = vec2<f32>(f32(i), f32(j)) * texel;
            sum += textureSampleCompareLevel(shadow_map, shadow_sampler, uv + o, p.z - 1e-4);
        }
    }
    return sum / 9.0;
}

// A checker board box-filtered over the pixel's footprint `w` (no moiré far away).
fn checker(p: vec2<f32>, w: vec2<f32>) -> f32 {
    let i = 2.0 * (abs(fract((p - 0.5 * w) * 0.5) - 0.5) - abs(fract((p + 0.5 * w) * 0.5) - 0.5)) / w;
    return 0.5 - 0.5 * i.x * i.y;
}

@fragment
fn fs_main(in: VertexOut, @builtin(front_facing) front: bool) -> @location(0) vec4<f32> {
    var n = normalize(in.normal);
    // Two-sided: a cloth, or a solid seen through a gap, is lit on the side we see.
    if (!front) {
        n = -n;
    }
    // The plane's checker coordinates, and their derivatives taken in uniform control flow.
    let t = normalize(cross(n, select(vec3<f32>(1.0, 0.0, 0.0), vec3<f32>(0.0, 0.0, 1.0), abs(n.x) > 0.9)));
    let b = cross(n, t);
    let uv = vec2<f32>(dot(in.world, t), dot(in.world, b)) / g.background.w;
    let w = max(abs(dpdx(uv)), abs(dpdy(uv))) + vec2<f32>(1e-4);
    let plane = in.color.a < 0.5;
    var albedo = srgb_to_linear(in.color.rgb);
    if (plane) {
        albedo = mix(vec3<f32>(0.52, 0.54, 0.57), vec3<f32>(0.64, 0.66, 0.68), checker(uv, w));
    }
    let l = g.light.xyz;
    let diffuse = max(dot(n, l), 0.0) * lit(in.world, n);
    let ambient = mix(0.16, 0.36, 0.5 + 0.5 * n.y);
    var c = albedo * (ambient + 0.85 * diffuse);
    if (plane) {
        let d = length(in.world - g.scene.xyz) / g.scene.w;
        c = mix(c, g.background.rgb, smoothstep(2.5, 9.0, d));
    }
    return vec4<f32>(c, 1.0);
}
