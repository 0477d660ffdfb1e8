//! The CCD sample query set (`tests/data/ccd-sample-queries`: exact rationals, rounded
//! to f32 by exact long division) and the f64 references that judge a CCD on it, shared by
//! `tests/ccd.rs` (the Rust CCD) and `tests/ccd_gpu.rs` (its WGSL port on the device): the
//! loader, the true minimum distances, and [`check_results`], the zero-false-negative and
//! certificate check with the false-positive statistics.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use bevy_avbd::ccd::{self, AccdParams, AccdResult};
use glam::{DVec3, Vec3};

// ---------------------------------------------------------------------------------------
// Helpers: a small deterministic RNG, f64 reference distances.
// ---------------------------------------------------------------------------------------

pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
    pub fn vec(&mut self, r: f64) -> DVec3 {
        DVec3::new(self.range(-r, r), self.range(-r, r), self.range(-r, r))
    }
}

pub fn f32v(v: DVec3) -> Vec3 {
    v.as_vec3()
}
pub fn f64v(v: Vec3) -> DVec3 {
    v.as_dvec3()
}

pub fn seg_d2(p: DVec3, a: DVec3, b: DVec3) -> f64 {
    let e = b - a;
    let ee = e.dot(e);
    if ee == 0.0 {
        return (p - a).length_squared();
    }
    let s = ((p - a).dot(e) / ee).clamp(0.0, 1.0);
    (p - a - e * s).length_squared()
}

/// f64 point–triangle squared distance (projection inside → plane, else nearest edge).
pub fn pt_d2(p: DVec3, a: DVec3, b: DVec3, c: DVec3) -> f64 {
    let n = (b - a).cross(c - a);
    let nn = n.dot(n);
    if nn > 0.0 {
        let wa = (b - p).cross(c - p).dot(n);
        let wb = (c - p).cross(a - p).dot(n);
        let wc = (a - p).cross(b - p).dot(n);
        if wa >= 0.0 && wb >= 0.0 && wc >= 0.0 {
            let h = (p - a).dot(n);
            return h * h / nn;
        }
    }
    seg_d2(p, a, b).min(seg_d2(p, b, c)).min(seg_d2(p, c, a))
}

/// f64 edge–edge squared distance (interior line–line if inside, else nearest endpoint pair).
pub fn ee_d2(a0: DVec3, a1: DVec3, b0: DVec3, b1: DVec3) -> f64 {
    let da = a1 - a0;
    let db = b1 - b0;
    let n = da.cross(db);
    let nn = n.dot(n);
    if nn > 1e-24 * da.length_squared() * db.length_squared() {
        let q = b0 - a0;
        let s = q.cross(db).dot(n) / nn;
        let t = q.cross(da).dot(n) / nn;
        if s > 0.0 && s < 1.0 && t > 0.0 && t < 1.0 {
            let h = (a0 - b0).dot(n);
            return h * h / nn;
        }
    }
    seg_d2(a0, b0, b1)
        .min(seg_d2(a1, b0, b1))
        .min(seg_d2(b0, a0, a1))
        .min(seg_d2(b1, a0, a1))
}

pub fn d2_64(ee: bool, x: &[DVec3; 4]) -> f64 {
    if ee {
        ee_d2(x[0], x[1], x[2], x[3])
    } else {
        pt_d2(x[0], x[1], x[2], x[3])
    }
}

pub fn lerp4(x0: &[DVec3; 4], x1: &[DVec3; 4], t: f64) -> [DVec3; 4] {
    std::array::from_fn(|i| x0[i] + (x1[i] - x0[i]) * t)
}

/// Approximate minimum distance over `[0, 1]` (dense samples, then golden-section search
/// around the smallest sample).
pub fn min_distance_64(ee: bool, x0: &[DVec3; 4], x1: &[DVec3; 4]) -> f64 {
    let n = 2000;
    let f = |t: f64| d2_64(ee, &lerp4(x0, x1, t)).sqrt();
    let (mut best_t, mut best) = (0.0, f(0.0));
    for k in 1..=n {
        let t = k as f64 / n as f64;
        let d = f(t);
        if d < best {
            best = d;
            best_t = t;
        }
    }
    let (mut lo, mut hi) = (
        (best_t - 1.0 / n as f64).max(0.0),
        (best_t + 1.0 / n as f64).min(1.0),
    );
    let g = 0.5 * (5f64.sqrt() - 1.0);
    for _ in 0..80 {
        let m1 = hi - g * (hi - lo);
        let m2 = lo + g * (hi - lo);
        if f(m1) < f(m2) {
            hi = m2;
        } else {
            lo = m1;
        }
    }
    best.min(f(0.5 * (lo + hi)))
}

// ---------------------------------------------------------------------------------------
// The sample queries.
// ---------------------------------------------------------------------------------------

/// `n/d` rounded to nearest (ties to even) to `bits` significant bits, exactly: binary long
/// division on the integers (the numerators and denominators reach 2¹¹¹, beyond f64).
pub fn round_ratio(n: i128, d: i128, bits: u32) -> f64 {
    assert!(d != 0, "zero denominator");
    if n == 0 {
        return 0.0;
    }
    let neg = (n < 0) != (d < 0);
    let (a, b) = (n.unsigned_abs(), d.unsigned_abs());
    let (q, mut r) = (a / b, a % b);
    let want = bits + 1; // significant bits plus the round bit
    let nb = 128 - q.leading_zeros();
    let (m, mut e, sticky) = if nb > want {
        let sh = nb - want;
        (q >> sh, sh as i32, q & ((1u128 << sh) - 1) != 0 || r != 0)
    } else {
        let (mut m, mut e) = (q, 0i32);
        while 128 - m.leading_zeros() < want {
            r <<= 1; // r < b ≤ 2¹²⁷: no overflow
            let bit = r >= b;
            if bit {
                r -= b;
            }
            m = (m << 1) | bit as u128;
            e -= 1;
        }
        (m, e, r != 0)
    };
    let round = m & 1 == 1;
    let mut mant = m >> 1;
    e += 1;
    if round && (sticky || mant & 1 == 1) {
        mant += 1;
        if mant >> bits != 0 {
            mant >>= 1;
            e += 1;
        }
    }
    // mant < 2^bits ≤ 2^53 and 2^e a normal f64 here: the product is exact.
    assert!((-1000..1000).contains(&e));
    let v = mant as f64 * f64::from_bits(((e + 1023) as u64) << 52);
    if neg { -v } else { v }
}

pub struct Query {
    pub ee: bool,
    pub x32: [[Vec3; 4]; 2],
    pub x64: [[DVec3; 4]; 2],
    pub truth: bool,
    pub max_abs: f32,
    pub source: String,
}

pub struct DataSet {
    pub queries: Vec<Query>,
    /// Coordinates whose f64-division route `(n as f64 / d as f64) as f32` differs from
    /// the correctly rounded f32.
    pub f64_route_mismatches: usize,
    pub coords: usize,
}

pub fn data_dir() -> PathBuf {
    let dir = match std::env::var_os("AVBD_CCD_DATA") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ccd-sample-queries"),
    };
    if dir.is_dir() {
        return dir;
    }
    // The set ships with the repository: a missing folder is a broken checkout, not a
    // reason to skip the zero-false-negative tests.
    panic!(
        "CCD sample queries not found at {} (set AVBD_CCD_DATA to the folder)",
        dir.display()
    )
}

pub fn load(dir: &std::path::Path) -> DataSet {
    let mut files = Vec::new();
    let mut scenes: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    scenes.sort();
    for scene in scenes.iter().filter(|p| p.is_dir()) {
        for (kind, ee) in [("vertex-face", false), ("edge-edge", true)] {
            let sub = scene.join(kind);
            if !sub.is_dir() {
                continue;
            }
            let mut csvs: Vec<_> = std::fs::read_dir(&sub)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .collect();
            csvs.sort();
            files.extend(csvs.into_iter().map(|p| (p, ee)));
        }
    }
    let mut set = DataSet {
        queries: Vec::new(),
        f64_route_mismatches: 0,
        coords: 0,
    };
    for (path, ee) in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: Vec<[i128; 7]> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Vec<i128> = l.split(',').map(|c| c.trim().parse().unwrap()).collect();
                assert_eq!(v.len(), 7, "{}: bad row {l}", path.display());
                v.try_into().unwrap()
            })
            .collect();
        assert_eq!(
            rows.len() % 8,
            0,
            "{}: rows not a multiple of 8",
            path.display()
        );
        let rel = path.strip_prefix(dir).unwrap().display().to_string();
        for (qi, q) in rows.chunks(8).enumerate() {
            let truth = q[0][6] == 1;
            assert!(q.iter().all(|r| r[6] == q[0][6]), "{rel}: mixed truth");
            let mut x32 = [[Vec3::ZERO; 4]; 2];
            let mut x64 = [[DVec3::ZERO; 4]; 2];
            let mut max_abs = 0f32;
            for (k, r) in q.iter().enumerate() {
                let mut c32 = [0f32; 3];
                let mut c64 = [0f64; 3];
                for j in 0..3 {
                    let (n, d) = (r[2 * j], r[2 * j + 1]);
                    c32[j] = round_ratio(n, d, 24) as f32;
                    c64[j] = round_ratio(n, d, 53);
                    if (n as f64 / d as f64) as f32 != c32[j] {
                        set.f64_route_mismatches += 1;
                    }
                    set.coords += 1;
                    max_abs = max_abs.max(c32[j].abs());
                }
                x32[k / 4][k % 4] = Vec3::from(c32);
                x64[k / 4][k % 4] = DVec3::from(c64);
            }
            set.queries.push(Query {
                ee,
                x32,
                x64,
                truth,
                max_abs,
                source: format!("{rel}#{qi}"),
            });
        }
    }
    set
}

pub fn run_query(q: &Query, min_sep: f32, params: &AccdParams) -> ccd::AccdResult {
    if q.ee {
        ccd::edge_edge_accd(&q.x32[0], &q.x32[1], min_sep, params)
    } else {
        ccd::point_triangle_accd(&q.x32[0], &q.x32[1], min_sep, params)
    }
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

// ---------------------------------------------------------------------------------------
// Judging a CCD on the sample set.
// ---------------------------------------------------------------------------------------

/// ξ of a query.
pub type SepFn = fn(&Query) -> f32;

/// The minimum separations the sample set is run at: (label, ξ per query).
pub fn seps() -> [(&'static str, SepFn); 3] {
    [
        ("floor 4 ulp(max|x|) per query", |q| {
            ccd::min_sep_floor(q.max_abs)
        }),
        ("DEFAULT_MIN_SEP 1e-5", |_| ccd::DEFAULT_MIN_SEP),
        ("1e-4", |_| 1e-4),
    ]
}

/// Edges of the distance buckets of the statistics.
pub const BUCKETS: [f64; 8] = [0.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, f64::INFINITY];

pub fn bucket(d: f64) -> usize {
    BUCKETS
        .windows(2)
        .position(|w| d >= w[0] && d < w[1])
        .unwrap()
}

/// True minimum distance over [0, 1] of the exact (rational) trajectory of each negative
/// (0 for the positives).
pub fn true_min_distances(set: &DataSet) -> Vec<f64> {
    set.queries
        .iter()
        .map(|q| {
            if q.truth {
                0.0
            } else {
                min_distance_64(q.ee, &q.x64[0], &q.x64[1])
            }
        })
        .collect()
}

/// Loads the set and prints what it holds; asserts that it is the full set.
pub fn load_full(dir: &std::path::Path) -> DataSet {
    let set = load(dir);
    let n = set.queries.len();
    let positives = set.queries.iter().filter(|q| q.truth).count();
    let set_max = set.queries.iter().map(|q| q.max_abs).fold(0.0, f32::max);
    println!(
        "ccd sample queries: {n} queries ({} vertex-face, {} edge-edge), {positives} positives; \
         max |coordinate| {set_max}; {} of {} coordinates differ between the f64-division \
         route and exact rounding to f32",
        set.queries.iter().filter(|q| !q.ee).count(),
        set.queries.iter().filter(|q| q.ee).count(),
        set.f64_route_mismatches,
        set.coords,
    );
    assert!(
        n >= 7000 && positives >= 400,
        "expected the full set from {}, got {n} / {positives}",
        dir.display()
    );
    set
}

/// Prints the negatives by their true minimum distance.
pub fn print_negatives(set: &DataSet, dmin: &[f64]) {
    for ee in [false, true] {
        let mut hist = vec![0; BUCKETS.len() - 1];
        for (q, d) in set.queries.iter().zip(dmin) {
            if q.ee == ee && !q.truth {
                hist[bucket(*d)] += 1;
            }
        }
        println!(
            "  {} negatives by true minimum distance over [0, 1], counts between the edges {:?}: {hist:?}",
            kind_name(ee),
            &BUCKETS[1..BUCKETS.len() - 1]
        );
    }
}

pub fn kind_name(ee: bool) -> &'static str {
    if ee { "edge-edge" } else { "vertex-face" }
}

/// What a CCD did on one primitive kind at one ξ.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub queries: usize,
    pub positives: usize,
    pub negatives: usize,
    pub false_negatives: usize,
    pub false_positives: usize,
    /// Negatives that stay farther than ξ, and those of them reported.
    pub far: usize,
    pub far_fp: usize,
    /// False positives by true minimum distance (`BUCKETS`) and by stop reason.
    pub fp_hist: Vec<usize>,
    pub stops: BTreeMap<String, usize>,
    pub iterations: Vec<f64>,
}

impl Tally {
    /// False positives in % of the negatives.
    pub fn fp_percent(&self) -> f64 {
        100.0 * self.false_positives as f64 / self.negatives as f64
    }

    /// False positives that stay farther than ξ, in % of the negatives that do.
    pub fn far_fp_percent(&self) -> f64 {
        100.0 * self.far_fp as f64 / self.far as f64
    }

    /// One line of statistics.
    pub fn line(&self, label: &str, ee: bool) -> String {
        let mut iters = self.iterations.clone();
        iters.sort_by(f64::total_cmp);
        format!(
            "  ξ = {label}, {}: {} queries, {} positives, {} false negatives, {} false \
             positives = {:.2}% of {} negatives; {} of the {} negatives that stay \
             farther than ξ = {:.2}%; false positives by true min distance {:?}, by \
             stop {:?}; iterations mean {:.2} median {} max {}",
            kind_name(ee),
            self.queries,
            self.positives,
            self.false_negatives,
            self.false_positives,
            self.fp_percent(),
            self.negatives,
            self.far_fp,
            self.far,
            self.far_fp_percent(),
            self.fp_hist,
            self.stops,
            iters.iter().sum::<f64>() / iters.len() as f64,
            percentile(&iters, 0.5),
            iters.last().unwrap(),
        )
    }
}

/// Judges one result per query of `set`, computed at ξ = `sep(q)`: every positive must be
/// a hit (zero false negatives), and the certificate must hold, sampled: the exact
/// trajectory of the f32 inputs stays farther than ξ on `[0, toi]` (on `[0, 1]` for a
/// miss; f64 evaluation at 65 times), so a hit's toi is at most the earliest time the
/// pair comes within ξ. Each violation is pushed to `failures`. Returns the statistics of
/// the vertex-face and the edge-edge queries.
pub fn check_results(
    set: &DataSet,
    dmin: &[f64],
    label: &str,
    sep: SepFn,
    results: &[AccdResult],
    failures: &mut Vec<String>,
) -> [Tally; 2] {
    assert_eq!(results.len(), set.queries.len());
    let mut tallies = [Tally::default(), Tally::default()];
    for t in &mut tallies {
        t.fp_hist = vec![0; BUCKETS.len() - 1];
    }
    for ((q, &d), r) in set.queries.iter().zip(dmin).zip(results) {
        let t = &mut tallies[q.ee as usize];
        let xi = sep(q);
        t.queries += 1;
        t.iterations.push(r.iterations as f64);
        let hit = r.toi.is_some();
        if q.truth {
            t.positives += 1;
            if !hit {
                t.false_negatives += 1;
                failures.push(format!("{label}: false negative {} ({r:?})", q.source));
            }
        } else {
            t.negatives += 1;
            t.far += (d > xi as f64) as usize;
            if hit {
                t.false_positives += 1;
                t.far_fp += (d > xi as f64) as usize;
                t.fp_hist[bucket(d)] += 1;
                *t.stops.entry(format!("{:?}", r.stop)).or_insert(0) += 1;
            }
        }
        let t_end = r.toi.unwrap_or(1.0) as f64;
        if t_end > 0.0 {
            let x0 = q.x32[0].map(f64v);
            let x1 = q.x32[1].map(f64v);
            for k in 0..=64 {
                let t = t_end * k as f64 / 64.0;
                let d = d2_64(q.ee, &lerp4(&x0, &x1, t)).sqrt();
                if d <= xi as f64 - 1e-12 {
                    failures.push(format!(
                        "{label}: {} certified to t = {t_end} but d({t}) = {d:e} ≤ ξ = {xi:e}",
                        q.source
                    ));
                    break;
                }
            }
        }
    }
    tallies
}
