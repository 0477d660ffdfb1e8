//! The additive CCD's WGSL port (`shaders/ccd.wgsl`, `gpu::ccd::GpuCcd`) on the device:
//! naga validates the shader; the whole sample query set at the ξ values of `tests/ccd.rs`
//! has zero false negatives and keeps the certificate (the same check as the CPU's), with a
//! false-positive rate close to the CPU's, with the device's margins (`CcdMargins::WGSL`) and
//! with the CPU's; on lavapipe, whose arithmetic is the CPU's, every query gives the bits of
//! the Rust CCD run with the same margins (`ccd::*_accd_with_margins`), which checks the
//! port; the earliest time of impact per point is the CPU's reduction of the same results.
//!
//! Without an adapter the device tests print a note and pass, except under
//! `AVBD_REQUIRE_GPU=1` (set by `.ci/run`, which installs Mesa's lavapipe). Without the
//! shared data folder the sample-set parts are skipped with a notice (they fail under `CI`).
//! `cargo test --release --test ccd_gpu -- --nocapture` prints the statistics.
mod ccd_data;

use std::sync::OnceLock;
use std::time::Instant;

use bevy_avbd::ccd::{self, AccdParams, AccdResult, AccdStop};
use bevy_avbd::gpu::ccd::{CcdMargins, CcdQuery, CcdResult, GpuCcd};
use ccd_data::*;
use glam::Vec3;

fn require_gpu() -> bool {
    std::env::var("AVBD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// One device for the whole test binary (`None`, after a note, without an adapter).
fn device() -> Option<&'static GpuCcd> {
    static GPU: OnceLock<Option<GpuCcd>> = OnceLock::new();
    GPU.get_or_init(|| match GpuCcd::new() {
        Ok(g) => Some(g),
        Err(e) => {
            assert!(!require_gpu(), "AVBD_REQUIRE_GPU=1 but no device: {e}");
            eprintln!("skipping the device CCD tests: {e}");
            None
        }
    })
    .as_ref()
}

/// The sample set and the true minimum distances of its negatives, loaded once.
fn sample_set() -> Option<&'static (DataSet, Vec<f64>)> {
    static SET: OnceLock<Option<(DataSet, Vec<f64>)>> = OnceLock::new();
    SET.get_or_init(|| {
        let dir = data_dir();
        let set = load_full(&dir);
        let dmin = true_min_distances(&set);
        Some((set, dmin))
    })
    .as_ref()
}

fn query(q: &Query, xi: f32) -> CcdQuery {
    if q.ee {
        CcdQuery::edge_edge(&q.x32[0], &q.x32[1], xi)
    } else {
        CcdQuery::point_triangle(&q.x32[0], &q.x32[1], xi)
    }
}

/// Runs `queries` on the device three times (the same results each time), printing the
/// best wall time (upload, dispatch and readback) per query.
fn timed(gpu: &GpuCcd, what: &str, queries: &[CcdQuery], margins: &CcdMargins) -> Vec<CcdResult> {
    let mut best = f64::INFINITY;
    let mut out: Option<Vec<CcdResult>> = None;
    for _ in 0..3 {
        let start = Instant::now();
        let run = gpu
            .run_with_margins(queries, &AccdParams::default(), margins)
            .expect("the CCD runs");
        best = best.min(start.elapsed().as_secs_f64());
        if let Some(first) = &out {
            assert!(
                first == &run,
                "{what}: the device's results differ between runs"
            );
        }
        out = Some(run);
    }
    println!(
        "  device ({}): {} {} queries in {:.2} ms (best of 3), {:.3} µs per query",
        gpu.adapter(),
        what,
        queries.len(),
        best * 1e3,
        best * 1e6 / queries.len().max(1) as f64
    );
    out.unwrap()
}

/// naga (wgpu's shader compiler) parses and validates the CCD's WGSL with no adapter.
#[test]
fn ccd_shader_validates() {
    let source = bevy_avbd::gpu::ccd::CCD_SHADER;
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("WGSL parses: {}", e.emit_to_string(source)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("WGSL validates: {}", e.emit_to_string(source)));
    for entry in ["ccd", "earliest"] {
        assert!(
            module.entry_points.iter().any(|e| e.name == entry),
            "missing entry point {entry}"
        );
    }
}

/// How the device's results compare with the CPU's on the same queries.
#[derive(Default)]
struct Agreement {
    queries: usize,
    /// Hit on one side, miss on the other.
    hit_differs: Vec<String>,
    /// Of those, the device's hits.
    device_only_hits: usize,
    /// Same toi bits, stop and iteration count.
    identical: usize,
    /// Hits on both sides: the largest |Δtoi|, and how many differ in stop or iterations.
    max_dtoi: f32,
    stop_or_iterations_differ: usize,
    /// Hits where the device's toi is later than the CPU's.
    later: usize,
}

impl Agreement {
    fn print(&self, what: &str) {
        println!(
            "{what}: {} queries, {} hit/miss differences ({} device hits where the CPU \
             misses), {} identical (toi bits, stop, iterations), {} hits differ in stop or \
             iterations, max |Δtoi| {:.3e}, {} device tois later than the CPU's",
            self.queries,
            self.hit_differs.len(),
            self.device_only_hits,
            self.identical,
            self.stop_or_iterations_differ,
            self.max_dtoi,
            self.later,
        );
    }

    fn assert_identical(&self, what: &str) {
        assert!(
            self.identical == self.queries,
            "with {what}, the device differs from the CPU on {} of {} queries; hit/miss: \
             {:#?}",
            self.queries - self.identical,
            self.queries,
            &self.hit_differs[..self.hit_differs.len().min(10)]
        );
    }

    fn add(&mut self, what: &str, cpu: &AccdResult, gpu: &CcdResult) {
        let g = gpu.to_accd();
        self.queries += 1;
        if g.toi.is_some() != cpu.toi.is_some() {
            self.device_only_hits += g.toi.is_some() as usize;
            self.hit_differs
                .push(format!("{what}: cpu {cpu:?}, device {g:?}"));
            return;
        }
        if g.toi.map(f32::to_bits) == cpu.toi.map(f32::to_bits)
            && g.stop == cpu.stop
            && g.iterations == cpu.iterations
        {
            self.identical += 1;
        }
        if let (Some(a), Some(b)) = (cpu.toi, g.toi) {
            self.max_dtoi = self.max_dtoi.max((a - b).abs());
            self.later += (b > a) as usize;
            self.stop_or_iterations_differ +=
                (g.stop != cpu.stop || g.iterations != cpu.iterations) as usize;
        }
    }
}

/// Whether the bit-for-bit comparisons with the CPU are asserted: on Mesa's llvmpipe
/// (lavapipe), whose arithmetic is the CPU's (IEEE round to nearest, nothing fused or
/// reassociated across the kernel's barriers). On other devices they are printed only.
fn computes_like_the_cpu(gpu: &GpuCcd) -> bool {
    gpu.adapter().contains("llvmpipe")
}

/// The whole sample set on the device at the three ξ of `tests/ccd.rs`, with the WGSL
/// margins and with the CPU's: zero false negatives and the sampled certificate (the CPU's
/// check, `check_results`) for both, the WGSL margins' false positives within 1% of the
/// negatives of the CPU's count; on lavapipe, the bits of the Rust CCD run with the same
/// margins on every query. How the WGSL margins change the CPU's answers (hits where the
/// CPU's narrower margins certify a miss) is printed.
#[test]
fn device_sample_queries_have_no_false_negatives() {
    let Some(gpu) = device() else { return };
    let Some((set, dmin)) = sample_set() else {
        return;
    };
    let params = AccdParams::default();
    let mut failures = Vec::new();
    // Device against the CPU with the same margins (the port), and the WGSL margins on the
    // device against the CPU's default (what the wider margins change).
    let mut port_wgsl = Agreement::default();
    let mut port_cpu = Agreement::default();
    let mut margins_effect = Agreement::default();
    for (label, sep) in seps() {
        let queries: Vec<CcdQuery> = set.queries.iter().map(|q| query(q, sep(q))).collect();
        let cpu: Vec<AccdResult> = set
            .queries
            .iter()
            .map(|q| run_query(q, sep(q), &params))
            .collect();
        let cpu_wgsl: Vec<AccdResult> = queries
            .iter()
            .map(|q| q.run_cpu_with_margins(&params, &CcdMargins::WGSL).unwrap())
            .collect();
        let cpu_tallies = check_results(set, dmin, label, sep, &cpu, &mut Vec::new());
        for (name, margins, reference, port) in [
            ("WGSL margins", &CcdMargins::WGSL, &cpu_wgsl, &mut port_wgsl),
            ("CPU margins", &CcdMargins::CPU, &cpu, &mut port_cpu),
        ] {
            let device = timed(gpu, &format!("{label}, {name},"), &queries, margins);
            let device_accd: Vec<AccdResult> = device.iter().map(CcdResult::to_accd).collect();
            let tallies = check_results(set, dmin, label, sep, &device_accd, &mut failures);
            for ee in [false, true] {
                let (t, c) = (&tallies[ee as usize], &cpu_tallies[ee as usize]);
                println!("device, {name}{}", t.line(label, ee));
                println!(
                    "    false positives: device {} ({:.2}%), CPU {} ({:.2}%)",
                    t.false_positives,
                    t.fp_percent(),
                    c.false_positives,
                    c.fp_percent()
                );
                assert!(
                    t.false_positives <= c.false_positives + c.negatives / 100,
                    "{label} {name} {}: {} device false positives against the CPU's {}",
                    kind_name(ee),
                    t.false_positives,
                    c.false_positives
                );
            }
            for ((q, c), g) in set.queries.iter().zip(reference).zip(&device) {
                port.add(&format!("{label} {}", q.source), c, g);
            }
            if margins == &CcdMargins::WGSL {
                for ((q, c), g) in set.queries.iter().zip(&cpu).zip(&device) {
                    margins_effect.add(&format!("{label} {}", q.source), c, g);
                }
            }
        }
    }
    port_wgsl.print("device vs CPU, both with the WGSL margins");
    port_cpu.print("device vs CPU, both with the CPU margins");
    margins_effect.print("device with the WGSL margins vs the CPU with its own");
    for d in margins_effect.hit_differs.iter().take(5) {
        println!("    {d}");
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if computes_like_the_cpu(gpu) {
        port_wgsl.assert_identical("the WGSL margins");
        port_cpu.assert_identical("the CPU margins");
    }
}

/// Random queries (both kinds, motions that cross) on the device: the certificate holds
/// (sampled in f64) and no sampled contact is missed, with both margins; on lavapipe, the
/// Rust CCD's bits with the same margins on every query.
#[test]
fn device_random_queries_are_conservative() {
    let Some(gpu) = device() else { return };
    let mut rng = Rng(23);
    let xi = 1e-4f32;
    let mut queries = Vec::new();
    for i in 0..20_000 {
        let scale = [1.0, 1e-2, 30.0][i % 3];
        let x0: [Vec3; 4] = std::array::from_fn(|_| f32v(rng.vec(scale)));
        let x1: [Vec3; 4] = std::array::from_fn(|k| x0[k] + f32v(rng.vec(0.8 * scale)));
        queries.push(if i % 2 == 1 {
            CcdQuery::edge_edge(&x0, &x1, xi)
        } else {
            CcdQuery::point_triangle(&x0, &x1, xi)
        });
    }
    let params = AccdParams::default();
    let mut violations = Vec::new();
    for (name, margins) in [
        ("WGSL margins", &CcdMargins::WGSL),
        ("CPU margins", &CcdMargins::CPU),
    ] {
        let device = timed(gpu, &format!("random, {name},"), &queries, margins);
        let mut port = Agreement::default();
        let mut margins_effect = Agreement::default();
        let mut starts_inside = 0;
        for (i, q) in queries.iter().enumerate() {
            let what = format!("random #{i} ({name})");
            let cpu = q.run_cpu(&params).unwrap();
            port.add(
                &what,
                &q.run_cpu_with_margins(&params, margins).unwrap(),
                &device[i],
            );
            margins_effect.add(&what, &cpu, &device[i]);
            let ee = q.kind == CcdQuery::EDGE_EDGE;
            let x0 = q.start.map(|p| Vec3::from(p).as_dvec3());
            let x1 = q.end.map(|p| Vec3::from(p).as_dvec3());
            let toi = device[i].toi();
            starts_inside += (toi == Some(0.0)) as usize;
            // A toi of 0 certifies nothing (the start is not certified farther apart than
            // ξ; `check_results` and `tests/ccd.rs` skip it too); otherwise [0, toi] (all of
            // [0, 1] for a miss) must stay farther apart than ξ.
            let t_end = toi.unwrap_or(1.0) as f64;
            if t_end > 0.0 {
                for k in 0..=64 {
                    let t = t_end * k as f64 / 64.0;
                    let d = d2_64(ee, &lerp4(&x0, &x1, t)).sqrt();
                    if d <= xi as f64 - 1e-12 {
                        violations.push(format!(
                            "{what}: certified to {t_end}, d({t}) = {d:e} ≤ ξ = {xi:e}"
                        ));
                        break;
                    }
                }
            }
        }
        let hits = device.iter().filter(|r| r.hit != 0).count();
        println!(
            "random, {name}: {} queries, {hits} hits ({starts_inside} at t = 0)",
            queries.len()
        );
        port.print(&format!("    device vs CPU, both with the {name}"));
        margins_effect.print("    device vs the CPU with its own margins");
        if computes_like_the_cpu(gpu) {
            port.assert_identical(name);
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

/// The earliest time of impact per point (`atomicMin` on the toi bits) equals the CPU's
/// reduction of the same results, and on lavapipe that of the Rust CCD's results with the
/// same (WGSL) margins: the sample set at ξ = 1e-5, each query naming four points
/// drawn from a pool a third its size (so points are shared by many queries and some by
/// none), some ids out of range.
#[test]
fn device_earliest_per_point_matches_the_cpu() {
    let Some(gpu) = device() else { return };
    let mut queries: Vec<CcdQuery> = match sample_set() {
        Some((set, _)) => set
            .queries
            .iter()
            .map(|q| query(q, ccd::DEFAULT_MIN_SEP))
            .collect(),
        None => Vec::new(),
    };
    // Random queries too (and the only ones without the data set).
    let mut rng = Rng(31);
    for i in 0..3000 {
        let x0: [Vec3; 4] = std::array::from_fn(|_| f32v(rng.vec(1.0)));
        let x1: [Vec3; 4] = std::array::from_fn(|k| x0[k] + f32v(rng.vec(0.8)));
        queries.push(if i % 2 == 0 {
            CcdQuery::point_triangle(&x0, &x1, 1e-3)
        } else {
            CcdQuery::edge_edge(&x0, &x1, 1e-3)
        });
    }
    let points = queries.len() / 3;
    let ids: Vec<[u32; 4]> = (0..queries.len())
        .map(|i| {
            std::array::from_fn(|k| {
                if (i + k) % 97 == 0 {
                    u32::MAX // skipped
                } else if (i + k) % 89 == 0 {
                    points as u32 + 5 // out of range: skipped
                } else {
                    (rng.next_u64() % points as u64) as u32
                }
            })
        })
        .collect();
    let start = Instant::now();
    let (results, earliest) = gpu
        .run_with_earliest(&queries, &ids, points, &AccdParams::default())
        .expect("the CCD runs");
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let reduce = |tois: &mut dyn Iterator<Item = Option<f32>>| {
        let mut out = vec![1.0f32; points];
        for (t, ids) in tois.zip(&ids) {
            if let Some(t) = t {
                for &id in ids {
                    if (id as usize) < points {
                        out[id as usize] = out[id as usize].min(t);
                    }
                }
            }
        }
        out
    };
    let cpu_of_device = reduce(&mut results.iter().map(CcdResult::toi));
    let params = AccdParams::default();
    let cpu_of_cpu = reduce(&mut queries.iter().map(|q| {
        q.run_cpu_with_margins(&params, &CcdMargins::WGSL)
            .unwrap()
            .toi
    }));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let touched = earliest.iter().filter(|&&t| t < 1.0).count();
    let same_as_cpu = earliest
        .iter()
        .zip(&cpu_of_cpu)
        .filter(|(a, b)| a.to_bits() == b.to_bits())
        .count();
    let max_d = earliest
        .iter()
        .zip(&cpu_of_cpu)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "earliest per point: {} queries, {points} points, {touched} with a hit, {:.1} ms; \
         equal to the CPU reduction of the device's results; {same_as_cpu} of {points} equal to \
         that of the CPU's results with the WGSL margins (max |Δ| {max_d:.3e})",
        queries.len(),
        ms
    );
    assert_eq!(bits(&earliest), bits(&cpu_of_device));
    assert!(touched > points / 2 && touched < points);
    if computes_like_the_cpu(gpu) {
        assert_eq!(bits(&earliest), bits(&cpu_of_cpu));
    }
}

/// What the device does outside the CPU's paths: inputs outside its domain (|x| ≥ 2²⁴, NaN,
/// infinity) and unknown kinds are hits at 0; ξ that is negative or NaN counts as 0, an
/// infinite one gives a hit at 0 (as on the CPU); no queries give no results.
#[test]
fn device_edge_cases() {
    let Some(gpu) = device() else { return };
    let params = AccdParams::default();
    let (a, b, c) = (Vec3::ZERO, Vec3::X, Vec3::Y);
    let p0 = Vec3::new(0.2, 0.2, 1.0);
    let p1 = Vec3::new(0.2, 0.2, 2.0);
    let apart = CcdQuery::point_triangle(&[p0, a, b, c], &[p1, a, b, c], 1e-4);
    let through = CcdQuery::point_triangle(
        &[p0, a, b, c],
        &[-p0 + Vec3::new(0.4, 0.4, 0.0), a, b, c],
        1e-4,
    );
    let mut far = apart;
    far.start[0][0] = 16_777_216.0;
    let mut nan = apart;
    nan.end[2][1] = f32::NAN;
    let mut inf = apart;
    inf.start[3][2] = f32::INFINITY;
    let mut kind = apart;
    kind.kind = 7;
    let with_sep = |q: CcdQuery, s: f32| CcdQuery { min_sep: s, ..q };
    let cases = [
        apart,
        through,
        far,
        nan,
        inf,
        kind,
        with_sep(apart, -1.0),
        with_sep(apart, f32::NAN),
        with_sep(apart, f32::INFINITY),
        with_sep(through, 0.0),
    ];
    let out = gpu.run(&cases, &params).expect("the CCD runs");
    let show: Vec<_> = out.iter().map(CcdResult::to_accd).collect();
    println!("edge cases: {show:#?}");
    assert_eq!(out[0].toi(), None);
    assert!(matches!(out[1].toi(), Some(t) if t > 0.0 && t < 0.5));
    for r in &out[2..6] {
        assert_eq!((r.toi(), r.stop()), (Some(0.0), AccdStop::StartInside));
        assert_eq!(r.toi.to_bits(), 0);
    }
    assert_eq!(out[6].toi(), None);
    assert_eq!(out[7].toi(), None);
    assert_eq!(
        (out[8].toi(), out[8].stop()),
        (Some(0.0), AccdStop::StartInside)
    );
    assert!(matches!(out[9].toi(), Some(t) if t > 0.0 && t < 0.5));
    // The CPU agrees where it is defined the same way.
    for i in [0, 1, 3, 4, 6, 7, 8, 9] {
        let cpu = cases[i].run_cpu(&params).unwrap();
        assert_eq!(cpu.toi.is_some(), out[i].hit != 0, "case {i}: {cpu:?}");
    }
    assert!(gpu.run(&[], &params).unwrap().is_empty());
    let (r, e) = gpu.run_with_earliest(&[], &[], 3, &params).unwrap();
    assert!(r.is_empty() && e == vec![1.0; 3]);
}
