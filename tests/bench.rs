//! The benchmark harness itself: `avbd bench` on tiny scenes must produce finite, plausible
//! numbers for both engines, a CSV per table and a PNG plot. No timing thresholds: timings
//! belong in the benchmark.
#![cfg(feature = "bench")]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("avbd-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Parses a CSV written by the harness (no quoted fields) into maps keyed by header.
fn read_csv(path: &PathBuf) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("empty CSV").split(',').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "ragged CSV line: {l}");
            header
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|e| panic!("{key} = {:?} is not a number ({e}) in {row:?}", row[key]))
}

#[test]
fn bench_quick_tiny_reports_both_engines() {
    let dir = out_dir("tiny");
    let o = Command::new(env!("CARGO_BIN_EXE_avbd"))
        .args([
            "bench",
            "--quick",
            "--tiny",
            "--scene",
            "large_pyramid",
            "--scene",
            "joint_grid",
            "--scene",
            "pendulum",
            "--threads",
            "2",
            "--out",
        ])
        .arg(&dir)
        .output()
        .expect("failed to run avbd bench");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "avbd bench failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // The Markdown report: the main table, the ratio table and the sweep.
    assert!(
        stdout.contains("| scene | bodies | joints | engine |"),
        "{stdout}"
    );
    assert!(stdout.contains("### Equal-quality sweep"), "{stdout}");
    for engine in ["bevy_avbd", "rapier3d"] {
        assert!(
            stdout.contains(&format!("| {engine} |")),
            "{engine} missing: {stdout}"
        );
    }

    let rows = read_csv(&dir.join("results.csv"));
    for scene in ["large_pyramid", "joint_grid", "pendulum"] {
        for engine in ["bevy_avbd", "rapier3d"] {
            let r = rows
                .iter()
                .find(|r| r["scene"] == scene && r["engine"] == engine)
                .unwrap_or_else(|| panic!("no {engine} row for {scene} in {rows:?}"));
            let (median, p95) = (num(r, "median_ms"), num(r, "p95_ms"));
            assert!(
                median.is_finite() && median > 0.0 && p95 >= median,
                "{scene}/{engine}: median {median}, p95 {p95}"
            );
            assert!(num(r, "iterations") >= 1.0);
            assert!(num(r, "bodies") >= 1.0);
            assert_eq!(r["finite"], "true", "{scene}/{engine} not finite");
            let (coll, solver) = (num(r, "collision_ms"), num(r, "solver_ms"));
            assert!(coll >= 0.0 && solver >= 0.0 && coll.is_finite() && solver.is_finite());
            for key in [
                "metric_value",
                "max_drift_m",
                "max_stretch_ratio",
                "max_joint_error_m",
                "max_penetration_m",
            ] {
                let v = num(r, key);
                assert!(v.is_finite() && v >= 0.0, "{scene}/{engine}: {key} = {v}");
            }
            // Plausible: a tiny pyramid at rest does not move by a metre or sink by 10 cm,
            // and a 4×4 grid's joints hold within 10 cm.
            match scene {
                "large_pyramid" => {
                    assert_eq!(r["metric"], "max_drift");
                    assert!(num(r, "max_drift_m") < 1.0, "{r:?}");
                    assert!(num(r, "max_penetration_m") < 0.1, "{r:?}");
                }
                "joint_grid" => {
                    assert_eq!(r["metric"], "max_joint_error");
                    assert!(num(r, "max_joint_error_m") < 0.1, "{r:?}");
                    assert_eq!(num(r, "joints"), 4.0 * 3.0 * 2.0 + 4.0);
                }
                "pendulum" => assert_eq!(r["metric"], "max_stretch_ratio"),
                _ => unreachable!(),
            }
        }
        // Both engines ran the same scene.
        let bodies: Vec<f64> = rows
            .iter()
            .filter(|r| r["scene"] == scene && r["scaling"] == "false")
            .map(|r| num(r, "bodies"))
            .collect();
        assert_eq!(bodies.len(), 2, "{scene}: {bodies:?}");
        assert_eq!(bodies[0], bodies[1], "{scene}: body counts differ");
    }

    // The sweep: every attempt of both engines, with a passing budget or an honest failure.
    let sweep = read_csv(&dir.join("sweep.csv"));
    for scene in ["large_pyramid", "joint_grid", "pendulum"] {
        for engine in ["bevy_avbd", "rapier3d"] {
            let attempts: Vec<_> = sweep
                .iter()
                .filter(|r| r["scene"] == scene && r["engine"] == engine)
                .collect();
            assert!(!attempts.is_empty(), "no sweep for {scene}/{engine}");
            for a in &attempts {
                assert!(num(a, "budget") >= 1.0 && num(a, "frames") >= 1.0, "{a:?}");
                assert!(num(a, "metric_value").is_finite(), "{a:?}");
            }
            // Budgets are scanned upwards and stop at the first pass.
            let passed: Vec<bool> = attempts.iter().map(|a| a["passed"] == "true").collect();
            assert!(
                passed.iter().rev().skip(1).all(|p| !p),
                "{scene}/{engine}: {passed:?}"
            );
            if let Some(a) = attempts.iter().find(|a| a["passed"] == "true") {
                assert!(num(a, "median_ms") > 0.0, "{a:?}");
                assert!(num(a, "metric_value") < num(a, "threshold"), "{a:?}");
            }
        }
        // Where both engines pass, both passing budgets are timed again side by side.
        let passing: Vec<_> = sweep
            .iter()
            .filter(|r| r["scene"] == scene && r["passed"] == "true")
            .collect();
        for a in &passing {
            let sbs = &a["side_by_side_median_ms"];
            if passing.len() == 2 {
                let ms: f64 = sbs.parse().unwrap_or(f64::NAN);
                assert!(ms.is_finite() && ms > 0.0, "{a:?}");
            } else {
                assert!(sbs.is_empty(), "{a:?}");
            }
        }
    }

    let png = std::fs::read(dir.join("plot.png")).expect("plot.png not written");
    assert!(png.len() > 1000, "plot.png is only {} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "plot.png is not a PNG");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The deformable cases against rapier3d's soft bodies, at the smoke size: both engines'
/// default rows in results.csv (bevy_avbd, rapier's FEM and constraint solvers), every run
/// in soft.csv, and the Markdown sections; the contact cases with their exact intersection
/// counts.
#[test]
fn bench_tiny_deformable_cases_report_both_engines() {
    let dir = out_dir("soft");
    let o = Command::new(env!("CARGO_BIN_EXE_avbd"))
        .args([
            "bench",
            "--tiny",
            "--scene",
            "hanging_bar",
            "--scene",
            "soft_on_chain",
            "--scene",
            "soft_drop",
            "--scene",
            "soft_stack",
            "--threads",
            "2",
            "--out",
        ])
        .arg(&dir)
        .output()
        .expect("failed to run avbd bench");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "avbd bench failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains("### Deformable bodies"), "{stdout}");
    assert!(stdout.contains("#### Equal quality"), "{stdout}");
    assert!(
        stdout.contains("### Contact against rapier3d's soft bodies"),
        "{stdout}"
    );

    let rows = read_csv(&dir.join("results.csv"));
    for scene in ["hanging_bar", "soft_on_chain"] {
        for (engine, solver) in [
            ("bevy_avbd", "vbd"),
            ("rapier3d", "fem"),
            ("rapier3d", "constraints"),
        ] {
            let r = rows
                .iter()
                .find(|r| r["scene"] == scene && r["engine"] == engine && r["solver"] == solver)
                .unwrap_or_else(|| panic!("no {engine} {solver} row for {scene} in {rows:?}"));
            assert_eq!(r["metric"], "static_error");
            let (median, p95) = (num(r, "median_ms"), num(r, "p95_ms"));
            assert!(
                median.is_finite() && median > 0.0 && p95 >= median,
                "{scene}/{engine}/{solver}: median {median}, p95 {p95}"
            );
            assert!(num(r, "tets") > 0.0 && num(r, "reference_m") > 0.0, "{r:?}");
            assert!(num(r, "iterations") >= 1.0);
            if scene == "soft_on_chain" {
                let gap = num(r, "max_attachment_gap_m");
                assert!(gap.is_finite() && gap >= 0.0, "{r:?}");
            }
            // bevy_avbd at its default budget holds the bar's static stretch from the
            // first frames on (its axial mode is far above 60 Hz).
            if scene == "hanging_bar" && engine == "bevy_avbd" {
                assert_eq!(r["finite"], "true");
                assert!(num(r, "metric_value") < 0.05, "{r:?}");
            }
        }
    }
    // The contact cases: each engine's default run, the exact check's count, the deepest
    // vertex below the ground; bevy_avbd's contact is penetration-free (the harness has
    // already checked its counts against the scene's own metrics).
    for scene in ["soft_drop", "soft_stack"] {
        for (engine, solver) in [
            ("bevy_avbd", "vbd"),
            ("rapier3d", "fem"),
            ("rapier3d", "constraints"),
        ] {
            let r = rows
                .iter()
                .find(|r| r["scene"] == scene && r["engine"] == engine && r["solver"] == solver)
                .unwrap_or_else(|| panic!("no {engine} {solver} row for {scene} in {rows:?}"));
            assert_eq!(r["metric"], "intersections", "{r:?}");
            assert_eq!(r["finite"], "true", "{r:?}");
            let (n, depth) = (num(r, "metric_value"), num(r, "max_penetration_m"));
            assert!(n >= 0.0 && n.fract() == 0.0, "{r:?}");
            assert!(depth.is_finite() && depth >= 0.0, "{r:?}");
            assert!(num(r, "median_ms") > 0.0, "{r:?}");
            if engine == "bevy_avbd" {
                assert_eq!(n, 0.0, "{r:?}");
                assert_eq!(depth, 0.0, "{r:?}");
            }
        }
    }
    let runs = read_csv(&dir.join("soft.csv"));
    for scene in ["soft_drop", "soft_stack"] {
        let of: Vec<_> = runs.iter().filter(|r| r["scene"] == scene).collect();
        // Defaults, and rapier's two solvers with the skin at bevy_avbd's contact gap.
        assert_eq!(of.len(), 5, "{scene}: {of:?}");
        assert_eq!(
            of.iter().filter(|r| r["default_budget"] == "true").count(),
            3,
            "{scene}"
        );
        for r in &of {
            assert!(r["reference_m"].is_empty(), "{r:?}");
            let sep = num(r, "min_separation_m");
            assert!((0.0..=0.01).contains(&sep), "{r:?}");
            assert!(num(r, "intersecting_frames") <= num(r, "frames"), "{r:?}");
            assert!(num(r, "final_lowest_m").is_finite(), "{r:?}");
            // The stack's top cube is followed; the single cube has none.
            assert_eq!(r["top_drift_m"].is_empty(), scene == "soft_drop", "{r:?}");
        }
    }
    for scene in ["hanging_bar", "soft_on_chain"] {
        let of: Vec<_> = runs.iter().filter(|r| r["scene"] == scene).collect();
        assert!(of.len() >= 3, "{scene}: {of:?}");
        assert_eq!(
            of.iter().filter(|r| r["default_budget"] == "true").count(),
            3,
            "{scene}: one default run per engine and solver"
        );
        for r in &of {
            assert!(num(r, "median_ms") > 0.0, "{r:?}");
            assert!(num(r, "frames") >= 1.0, "{r:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_rejects_unknown_scene() {
    let o = Command::new(env!("CARGO_BIN_EXE_avbd"))
        .args(["bench", "--tiny", "--scene", "nope", "--out"])
        .arg(out_dir("bad"))
        .output()
        .expect("failed to run avbd bench");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("error") && stderr.contains("nope"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
