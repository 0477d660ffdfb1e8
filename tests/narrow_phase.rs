//! The primitive narrow phase (`pipeline::collision::primitive`) against parry3d's
//! `contact_manifolds` on random sphere, capsule, box and half-space configurations, the
//! persistence of its feature ids under small motions, and its WGSL port on the device.
//!
//! Every difference from parry3d needs a stated reason, checked configuration by
//! configuration (`compare`); a difference without one fails the test. The device test
//! skips with a note when no adapter exists, except under `AVBD_REQUIRE_GPU=1`.
mod narrow;

use bevy_avbd::glam::Vec3;
use bevy_avbd::parry3d::shape::SharedShape;
use bevy_avbd::pipeline::collision::primitive::{
    PrimitiveContact, PrimitiveManifold, PrimitivePair, case, collide_pair, kind,
};
use narrow::reference::*;
use narrow::*;

/// Per pair type: what agreed and what differed.
#[derive(Default)]
struct Tally {
    configs: usize,
    contacts: usize,
    normals_compared: usize,
    max_normal: f64,
    depths_compared: usize,
    max_depth: f64,
    /// Our points found among parry3d's (same place within 1e-3 m, same distance to 1e-4).
    points: usize,
    points_matched: usize,
    side_by_side_points: usize,
    /// Seconds in our narrow phase and in parry3d's manifolds.
    ours_s: f64,
    parry_s: f64,
    same_count: usize,
    /// Against the f64 reference (capsule pairs): configurations, our and parry3d's largest
    /// normal errors.
    ref_compared: usize,
    /// Box–box: largest separation gained by parry3d's other axis, in units of the bias.
    max_gain: f64,
    max_ref_normal: f64,
    max_parry_ref_normal: f64,
    max_ref_depth: f64,
    max_parry_ref_depth: f64,
    /// Differences that have a stated reason, and those that do not (must stay empty).
    reasons: std::collections::BTreeMap<String, usize>,
    unexplained: Vec<String>,
}

impl Tally {
    fn note(&mut self, why: impl Into<String>) {
        *self.reasons.entry(why.into()).or_default() += 1;
    }
}

fn describe(c: &Config, ours: &PrimitiveManifold, theirs: &Reference) -> String {
    format!(
        "{}–{} gap {:?} mode {} case {} n {:?} vs {:?}, ours {:?} parry {:?}, pair {:?}",
        name(c.pair.a.kind),
        name(c.pair.b.kind),
        c.gap,
        c.mode,
        ours.case,
        ours.normal(),
        theirs.n,
        (0..ours.count as usize)
            .map(|i| ours.dist(i))
            .collect::<Vec<_>>(),
        theirs.points.iter().map(|p| p.2).collect::<Vec<_>>(),
        c.pair
    )
}

const NORMAL_TOL: f64 = 1e-3;
const DEPTH_TOL: f64 = 1e-4;

fn compare(c: &Config, t: &mut Tally) {
    let ours = collide_pair(&c.pair, MARGIN);
    let theirs = parry_manifold(c);
    t.configs += 1;
    let n = ours.count as usize;
    // parry3d's points within the margin, without repeats (its capsule–box manifold adds the
    // GJK point to the clipped ones, and meets a segment crossing a face edge twice).
    let mut kept: Vec<&(Vec3, Vec3, f32)> = Vec::new();
    let mut kept_gjk = 0;
    for (p, &unknown) in theirs.points.iter().zip(&theirs.unknown) {
        if p.2 <= MARGIN
            && !kept
                .iter()
                .any(|k| (k.0 - p.0).length() < 1e-4 && (k.2 - p.2).abs() < 1e-5)
        {
            kept.push(p);
            kept_gjk += unknown as usize;
        }
    }
    if n == 0 && kept.is_empty() {
        t.same_count += 1;
        return;
    }
    t.contacts += 1;
    let (ka, kb) = (
        c.pair.a.kind.min(c.pair.b.kind),
        c.pair.a.kind.max(c.pair.b.kind),
    );
    let boxes = (ka, kb) == (kind::BOX, kind::BOX);
    if n == 0 || kept.is_empty() {
        // Only at the margin, where the two round differently.
        let ours_min = (0..n).map(|i| ours.dist(i)).fold(f32::MAX, f32::min);
        let theirs_min = theirs.points.iter().map(|p| p.2).fold(f32::MAX, f32::min);
        if (ours_min.min(theirs_min) - MARGIN).abs() < 1e-5 {
            t.note("one side empty: distance at the margin (rounding)");
        } else if boxes
            && c.gap == Gap::Apart
            && n > 0
            && box_separation(c, theirs.n.normalize_or_zero()) > MARGIN as f64
        {
            t.note("one side empty: no parry3d manifold, its blended axis separates by more than the margin");
        } else {
            t.unexplained
                .push(format!("one side empty: {}", describe(c, &ours, &theirs)));
        }
        return;
    }
    let ours_min = (0..n).map(|i| ours.dist(i)).fold(f32::MAX, f32::min) as f64;
    let theirs_min = theirs.points.iter().map(|p| p.2).fold(f32::MAX, f32::min) as f64;
    let err = angle(ours.normal(), theirs.n);
    let truth = reference(c);
    if let Some((d, tn)) = truth {
        let e = angle(ours.normal(), tn.as_vec3());
        t.ref_compared += 1;
        t.max_ref_normal = t.max_ref_normal.max(e);
        t.max_parry_ref_normal = t.max_parry_ref_normal.max(angle(theirs.n, tn.as_vec3()));
        t.max_ref_depth = t.max_ref_depth.max((d - ours_min).abs());
        t.max_parry_ref_depth = t.max_parry_ref_depth.max((d - theirs_min).abs());
    }
    if err > NORMAL_TOL {
        if boxes && !is_box_axis(c, theirs.n) && ours_min > 0.0 {
            t.note("normal: apart, parry3d blends the separating face axes (not a SAT axis)");
        } else if boxes {
            let gain = box_separation(c, theirs.n) - box_separation(c, ours.normal());
            let (ha, hb) = (
                Vec3::from_array(c.pair.a.dims),
                Vec3::from_array(c.pair.b.dims),
            );
            let bias = 1e-3 * ha.max_element().min(hb.max_element()) as f64;
            if gain <= bias + 1e-6 {
                let theirs_kind = if is_face_of(&c.pair.pose_a, theirs.n) {
                    "A's face"
                } else if is_face_of(&c.pair.pose_b, theirs.n) {
                    "B's face"
                } else {
                    "an edge axis"
                };
                t.max_gain = t.max_gain.max(gain / bias);
                let ours_kind = ["", "", "", "", "A's face", "B's face", "an edge axis"];
                let orientation = ["random orientation", "near-aligned", "aligned"];
                t.note(format!(
                    "normal: ours {}, parry3d {theirs_kind} separating by at most the bias more ({})",
                    ours_kind[ours.case as usize],
                    orientation[c.mode as usize]
                ));
            } else {
                t.unexplained.push(format!(
                    "normal (gain {gain:.2e}): {}",
                    describe(c, &ours, &theirs)
                ));
            }
        } else if truth.is_some_and(|(_, tn)| angle(ours.normal(), tn.as_vec3()) <= NORMAL_TOL) {
            t.note(
                "normal: parry3d's off by more than 1e-3 rad (the f64 reference agrees with ours)",
            );
        } else {
            t.unexplained
                .push(format!("normal {err:.2e}: {}", describe(c, &ours, &theirs)));
        }
        return;
    }
    t.normals_compared += 1;
    t.max_normal = t.max_normal.max(err);
    let dd = (ours_min - theirs_min).abs();
    if dd > DEPTH_TOL {
        if truth.is_some_and(|(d, _)| (d - ours_min).abs() <= DEPTH_TOL) {
            t.note("depth: parry3d's off (f64 reference agrees with ours)");
        } else if boxes && ours.case == case::EDGE_EDGE && ours_min > 0.0 {
            t.note("depth: apart on an edge axis whose edges do not cross: our SAT separation is a lower bound, parry3d's clipped faces sit farther");
        } else {
            t.unexplained
                .push(format!("depth {dd:.2e}: {}", describe(c, &ours, &theirs)));
        }
    } else {
        t.depths_compared += 1;
        t.max_depth = t.max_depth.max(dd);
    }
    // Our points among parry3d's.
    let fa = c.pair.pose_a;
    let fb = c.pair.pose_b;
    if ours.case == case::SIDE_BY_SIDE && (ka, kb) == (kind::CAPSULE, kind::CAPSULE) {
        // parry3d's 3-D capsule pair has one point: ours at the overlap's ends are not in it.
        t.side_by_side_points += n;
    }
    for i in 0..n {
        if ours.case == case::SIDE_BY_SIDE && (ka, kb) == (kind::CAPSULE, kind::CAPSULE) {
            continue;
        }
        t.points += 1;
        let (pa, _) = ours.world_points(i, &fa, &fb);
        let d = ours.dist(i);
        if theirs
            .points
            .iter()
            .any(|p| (p.0 - pa).length() < 1e-3 && ((p.2 - d) as f64).abs() < DEPTH_TOL)
        {
            t.points_matched += 1;
        }
    }
    let capsule_box = (ka, kb) == (kind::CAPSULE, kind::BOX);
    let box_pose = if c.pair.a.kind == kind::BOX {
        &c.pair.pose_a
    } else {
        &c.pair.pose_b
    };
    if n == kept.len() {
        t.same_count += 1;
    } else if boxes && ours.case == case::EDGE_EDGE && n == 1 {
        t.note("count: edge–edge, one point by design (parry3d clips the support faces along the edge axis)");
    } else if boxes && n == 4 && kept.len() > 4 {
        t.note("count: reduced to 4 (parry3d keeps every clipped point)");
    } else if (ka, kb) == (kind::CAPSULE, kind::CAPSULE)
        && ours.case == case::SIDE_BY_SIDE
        && kept.len() == 1
    {
        t.note("count: side by side, two points (parry3d's 3-D capsule pair makes one)");
    } else if capsule_box && kept.len() - kept_gjk == n {
        t.note("count: parry3d adds its GJK point to the clipped ones");
    } else if capsule_box && n == 1 && !is_face_of(box_pose, ours.normal()) {
        t.note(
            "count: normal off the box's faces, one point (parry3d clips the box's face along it)",
        );
    } else {
        t.unexplained
            .push(format!("count: {}", describe(c, &ours, &theirs)));
    }
}

/// Thousands of configurations per pair type (both orders), against parry3d: normals within
/// 1e-3 rad and deepest distances within 1e-4 m wherever both pick the same feature, our
/// points among parry3d's, and every other difference explained.
#[test]
fn matches_parry_on_random_configurations() {
    let started = std::time::Instant::now();
    let mut rng = Rng(7);
    let mut unexplained = Vec::new();
    for (ka, kb) in PAIRS {
        let mut t = Tally::default();
        let cs = configs(ka, kb, 3000, &mut rng);
        for c in &cs {
            compare(c, &mut t);
        }
        // Time per pair, each in its own loop (parry3d from scratch: a fresh manifold).
        let started = std::time::Instant::now();
        for c in &cs {
            std::hint::black_box(collide_pair(std::hint::black_box(&c.pair), MARGIN));
        }
        t.ours_s = started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        for c in &cs {
            std::hint::black_box(parry_manifold(std::hint::black_box(c)));
        }
        t.parry_s = started.elapsed().as_secs_f64();
        eprintln!(
            "{}–{}: {} configs, {} with contacts; normals {} within 1e-3 rad (max {:.2e}); \
             depths {} within 1e-4 m (max {:.2e}); our points in parry3d's {}/{}; same count {}; \
             {:.2} µs per pair (parry3d {:.2})",
            name(ka),
            name(kb),
            t.configs,
            t.contacts,
            t.normals_compared,
            t.max_normal,
            t.depths_compared,
            t.max_depth,
            t.points_matched,
            t.points,
            t.same_count,
            t.ours_s / t.configs as f64 * 1e6,
            t.parry_s / t.configs as f64 * 1e6,
        );
        if t.ref_compared > 0 {
            eprintln!(
                "    f64 reference: {} configs; normal error ours {:.2e} rad, parry3d {:.2e} rad; \
                 depth error ours {:.2e} m, parry3d {:.2e} m",
                t.ref_compared,
                t.max_ref_normal,
                t.max_parry_ref_normal,
                t.max_ref_depth,
                t.max_parry_ref_depth
            );
            assert!(t.max_ref_normal <= NORMAL_TOL, "{}–{}", name(ka), name(kb));
            assert!(t.max_ref_depth <= DEPTH_TOL, "{}–{}", name(ka), name(kb));
        }
        if t.max_gain > 0.0 {
            eprintln!(
                "    parry3d's other axes separate by at most {:.3} × the bias more",
                t.max_gain
            );
        }
        for (why, k) in &t.reasons {
            eprintln!("    {k:5}  {why}");
        }
        let what = format!("{}–{}", name(ka), name(kb));
        assert!(
            t.max_normal <= NORMAL_TOL && t.max_depth <= DEPTH_TOL,
            "{what}"
        );
        assert!(t.contacts > t.configs * 9 / 10, "{what}: too few contacts");
        // Where parry3d has our points at all (not the capsules' side-by-side pair), it has
        // nearly all of them; the misses are ill-conditioned places (a capsule parallel to a
        // box edge, an incident edge nearly parallel to a side plane).
        assert!(t.points_matched * 100 >= t.points * 99, "{what}: points");
        // Normal differences (box–box: another axis within the bias) stay a small share.
        let normals = t.contacts - t.normals_compared;
        assert!(
            normals * 100 <= t.contacts * 6,
            "{what}: {normals} normals differ"
        );
        unexplained.extend(t.unexplained);
    }
    eprintln!("{:.2} s", started.elapsed().as_secs_f32());
    for u in unexplained.iter().take(10) {
        eprintln!("UNEXPLAINED {u}");
    }
    assert!(
        unexplained.is_empty(),
        "{} unexplained differences",
        unexplained.len()
    );
}

/// Small motions keep the feature ids: after B moves by up to 1e-4 m and turns by up to
/// 1e-4 rad (more than a resting body does in a step), nearly every manifold has the same
/// ids, and the changes are points crossing the margin or a capsule exactly parallel to a
/// box edge (one point at an end of a flat contact, which the turn moves to the other end).
#[test]
fn small_motions_keep_feature_ids() {
    let mut rng = Rng(11);
    let step = 1e-4;
    for (ka, kb) in PAIRS {
        let (mut with_contacts, mut kept, mut moved_max) = (0, 0, 0.0f32);
        let mut reasons = std::collections::BTreeMap::<&str, usize>::new();
        for c in configs(ka, kb, 2000, &mut rng) {
            let before = collide_pair(&c.pair, MARGIN);
            if before.count == 0 {
                continue;
            }
            with_contacts += 1;
            let pair = nudge(&c, step, &mut rng);
            let after = collide_pair(&pair, MARGIN);
            let ids = |m: &PrimitiveManifold| {
                let mut v = m.ids[..m.count as usize].to_vec();
                v.sort_unstable();
                v
            };
            if ids(&before) == ids(&after) {
                kept += 1;
                for i in 0..before.count as usize {
                    let j = (0..after.count as usize)
                        .find(|&j| after.ids[j] == before.ids[i])
                        .unwrap();
                    let (a0, _) = before.world_points(i, &c.pair.pose_a, &c.pair.pose_b);
                    let (a1, _) = after.world_points(j, &pair.pose_a, &pair.pose_b);
                    moved_max = moved_max.max((a1 - a0).length());
                }
                continue;
            }
            let near_margin = |m: &PrimitiveManifold| {
                (0..m.count as usize).any(|i| (m.dist(i) - MARGIN).abs() < 2e-3)
            };
            let why = if near_margin(&before) || near_margin(&after) {
                "a point crossed the margin"
            } else if c.mode == 2 && before.case == case::CLOSEST {
                "flat contact (exactly parallel): its one point moved to the other end"
            } else if before.case != after.case {
                "the contact changed kind (one point ↔ two, face ↔ edge)"
            } else {
                "a clipped point left the reference face"
            };
            *reasons.entry(why).or_default() += 1;
        }
        eprintln!(
            "{}–{}: {kept}/{with_contacts} manifolds keep their ids; kept points moved ≤ {moved_max:.2e} m",
            name(ka),
            name(kb)
        );
        for (why, k) in &reasons {
            eprintln!("    {k:5}  {why}");
        }
        let what = format!("{}–{}", name(ka), name(kb));
        assert!(kept * 100 >= with_contacts * 99, "{what}");
        // A point named by the same features stays near: boxes' edge crossings slide along
        // nearly parallel edges (up to 2 cm here), everything else moves with the nudge.
        let bound = if (ka, kb) == (kind::BOX, kind::BOX) {
            0.05
        } else {
            1e-3
        };
        assert!(moved_max <= bound, "{what}: {moved_max}");
    }
}

/// naga (wgpu's shader compiler) parses and validates the narrow phase's WGSL with no
/// adapter at all.
#[test]
fn narrow_phase_shader_validates() {
    let source = bevy_avbd::gpu::narrow::NARROW_PHASE_SHADER;
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("WGSL parses: {}", e.emit_to_string(source)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("WGSL validates: {}", e.emit_to_string(source)));
    for entry in ["narrow_phase", "narrow_persistent"] {
        assert!(
            module.entry_points.iter().any(|e| e.name == entry),
            "{entry}"
        );
    }
}

fn require_gpu() -> bool {
    std::env::var("AVBD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Tolerances of the device against the Rust narrow phase: f32 rounding of the same
/// operations on other hardware (fused multiply-adds, `normalize` and division within a
/// few ulp). Points are 2e-5: a cut of an edge nearly parallel to a side plane multiplies
/// the rounding.
const DEVICE_TOL: f32 = 1e-5;
const DEVICE_POINT_TOL: f32 = 2e-5;

/// The WGSL port on the device against the Rust narrow phase, on the configurations of
/// the parry3d test and a nudged copy of each: same point counts, cases and feature ids
/// (but for threshold ties: at most 1 in 10,000, each the Rust answer for the pair moved by
/// 1e-6); normals and distances within 1e-5, local points within 2e-5 m.
#[test]
fn device_matches_the_rust_narrow_phase() {
    let gpu = match bevy_avbd::gpu::narrow::GpuNarrowPhase::new() {
        Ok(g) => g,
        Err(e) => {
            assert!(!require_gpu(), "AVBD_REQUIRE_GPU=1 but no device: {e}");
            eprintln!("skipping the device narrow phase test: {e}");
            return;
        }
    };
    let mut rng = Rng(7);
    let mut nudges = Rng(17);
    let mut pairs = Vec::new();
    for (ka, kb) in PAIRS {
        for c in configs(ka, kb, 3000, &mut rng) {
            pairs.push(c.pair);
            pairs.push(nudge(&c, 1e-4, &mut nudges));
        }
    }
    let started = std::time::Instant::now();
    let device = gpu.run(&pairs, MARGIN).expect("narrow phase runs");
    let first = started.elapsed();
    let started = std::time::Instant::now();
    let again = gpu.run(&pairs, MARGIN).expect("narrow phase runs");
    let second = started.elapsed();
    assert_eq!(device, again, "the device repeats itself");
    let (mut differ, mut ties, mut with_contacts, mut points) = (Vec::new(), 0, 0, 0);
    let same = |a: &PrimitiveManifold, b: &PrimitiveManifold| {
        let n = a.count as usize;
        a.count == b.count && a.case == b.case && a.ids[..n] == b.ids[..n]
    };
    let (mut max_n, mut max_d, mut max_p) = (0.0f32, 0.0f32, 0.0f32);
    for (pair, got) in pairs.iter().zip(&device) {
        let want = collide_pair(pair, MARGIN);
        let n = want.count as usize;
        if !same(got, &want) {
            // A threshold tie: the Rust narrow phase gives the device's answer for the pair
            // moved by 1e-6 m and turned by 1e-6 rad (f32 rounding of the inputs).
            let mut jiggle = Rng(ties as u64 + 99);
            let c = Config {
                pair: *pair,
                sa: SharedShape::ball(1.0),
                sb: SharedShape::ball(1.0),
                gap: Gap::Touch,
                mode: 0,
            };
            if (0..64).any(|_| same(got, &collide_pair(&nudge(&c, 1e-6, &mut jiggle), MARGIN))) {
                ties += 1;
            } else {
                differ.push(format!("cpu {want:?}\n  gpu {got:?}\n  pair {pair:?}"));
            }
            continue;
        }
        with_contacts += (n > 0) as usize;
        points += n;
        if n > 0 {
            max_n = max_n.max((got.normal() - want.normal()).abs().max_element());
        }
        for i in 0..n {
            let (g, w) = (&got.points[i], &want.points[i]);
            max_d = max_d.max((g.local_a[3] - w.local_a[3]).abs());
            let (ga, wa) = (Vec3::from_slice(&g.local_a), Vec3::from_slice(&w.local_a));
            let (gb, wb) = (Vec3::from_slice(&g.local_b), Vec3::from_slice(&w.local_b));
            max_p = max_p.max(
                (ga - wa)
                    .abs()
                    .max_element()
                    .max((gb - wb).abs().max_element()),
            );
        }
    }
    eprintln!(
        "device ({}): {} pairs, {} with contacts, {} points; {} threshold ties, {} differ; max \
         |Δnormal| {max_n:.2e}, |Δdist| {max_d:.2e} m, |Δpoint| {max_p:.2e} m; {:.0} ms with the \
         shader's first compilation, {:.1} ms after",
        gpu.adapter(),
        pairs.len(),
        with_contacts,
        points,
        ties,
        differ.len(),
        first.as_secs_f64() * 1e3,
        second.as_secs_f64() * 1e3,
    );
    for d in differ.iter().take(5) {
        eprintln!("  {d}");
    }
    assert!(differ.is_empty(), "{} manifolds differ", differ.len());
    assert!(ties * 10_000 <= pairs.len(), "{ties} threshold ties");
    assert!(max_n <= DEVICE_TOL && max_d <= DEVICE_TOL && max_p <= DEVICE_POINT_TOL);
}

/// B moved by up to `step` m and turned by up to `step` rad.
fn move_b(pair: &PrimitivePair, step: f32, rng: &mut Rng) -> PrimitivePair {
    let mut p = *pair;
    let turn = bevy_avbd::glam::Quat::from_axis_angle(rng.unit(), rng.range(0.0, step));
    let at = p.pose_b.p() + rng.unit() * rng.range(0.0, step);
    p.pose_b = record(at, (turn * p.pose_b.q()).normalize());
    p
}

/// The contact persistence on the device (`narrow_persistent`) against
/// `PrimitiveContact::update` over 12 steps of 3,600 pairs (400 per pair type), B moving
/// each step by up to 1e-6 (carried), 3e-4 (carried until a point slides 1 mm) or 5e-3 m
/// and rad (found again, points continued by id or by place), each pair's regime turning
/// over step by step. Both sides read the same last state each step (the Rust one, with
/// fresh record indices as the collision stage writes them), so a rounding tie cannot
/// cascade: counts, cases, ids and the continued indices must be equal, normals and
/// distances within the narrow phase test's tolerances. Skips without an adapter unless
/// AVBD_REQUIRE_GPU=1.
#[test]
fn device_persistence_matches_the_rust_one() {
    use bevy_avbd::gpu::narrow::{GpuNarrowPhase, NO_OLD};
    let gpu = match GpuNarrowPhase::new() {
        Ok(g) => g,
        Err(e) => {
            assert!(!require_gpu(), "AVBD_REQUIRE_GPU=1 but no device: {e}");
            eprintln!("skipping the device persistence test: {e}");
            return;
        }
    };
    let mut rng = Rng(23);
    let mut motion = Rng(29);
    let mut pairs: Vec<PrimitivePair> = PAIRS
        .iter()
        .flat_map(|&(ka, kb)| configs(ka, kb, 400, &mut rng))
        .map(|c| c.pair)
        .collect();
    let n = pairs.len();
    let mut states: Vec<PrimitiveContact> = Vec::new();
    let (mut points, mut continued, mut carried, mut differ) = (0usize, 0usize, 0usize, Vec::new());
    let (mut max_n, mut max_d) = (0.0f32, 0.0f32);
    for step in 0..12usize {
        if step > 0 {
            for (i, p) in pairs.iter_mut().enumerate() {
                *p = move_b(p, [1e-6, 3e-4, 5e-3][(i + step) % 3], &mut motion);
            }
        }
        let old_index: Vec<u32> = if step == 0 {
            vec![NO_OLD; n]
        } else {
            (0..n as u32).collect()
        };
        let want: Vec<PrimitiveContact> = pairs
            .iter()
            .zip(&old_index)
            .map(|(p, &o)| {
                let old = (o != NO_OLD).then(|| &states[o as usize]);
                PrimitiveContact::update((&p.a, &p.b), (&p.pose_a, &p.pose_b), MARGIN, old)
            })
            .collect();
        let got = gpu
            .run_persistent(&pairs, &old_index, &states, MARGIN)
            .expect("persistent narrow phase runs");
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            let c = w.count();
            let same = w.manifold.count == g.manifold.count
                && w.manifold.case == g.manifold.case
                && w.manifold.ids[..c] == g.manifold.ids[..c]
                && w.prev[..c] == g.prev[..c];
            if !same {
                differ.push(format!("step {step} pair {i}:\n  cpu {w:?}\n  gpu {g:?}"));
                continue;
            }
            points += c;
            continued += w.prev[..c].iter().filter(|&&p| p != u32::MAX).count();
            carried += (step > 0 && c > 0 && w.normal_a == states[i].normal_a) as usize;
            if c > 0 {
                max_n = max_n.max(
                    (g.manifold.normal() - w.manifold.normal())
                        .abs()
                        .max_element(),
                );
            }
            for k in 0..c {
                max_d = max_d.max((g.manifold.dist(k) - w.manifold.dist(k)).abs());
            }
        }
        // The collision stage overwrites `prev` with this step's record indices.
        states = want;
        for (i, s) in states.iter_mut().enumerate() {
            for k in 0..4 {
                s.prev[k] = (step * 4 * n + 4 * i + k) as u32;
            }
        }
    }
    eprintln!(
        "device persistence ({}): {} pair-steps, {points} points, {continued} continued, \
         {carried} manifolds carried, {} differ; max |Δnormal| {max_n:.2e}, |Δdist| {max_d:.2e} m",
        gpu.adapter(),
        12 * n,
        differ.len()
    );
    for d in differ.iter().take(3) {
        eprintln!("  {d}");
    }
    assert!(differ.is_empty(), "{} pair-steps differ", differ.len());
    assert!(carried > 0 && continued > carried && points > continued);
    assert!(max_n <= DEVICE_TOL && max_d <= DEVICE_TOL);
}
