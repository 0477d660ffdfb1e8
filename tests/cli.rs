//! The `avbd` binary: scene listing, JSON report, and clean failures on bad input.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use bevy_avbd::scenes::SCENES;
use serde_json::Value;

fn avbd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_avbd"))
        .args(args)
        .output()
        .expect("failed to run avbd")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is not UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is not UTF-8")
}

/// Runs `avbd run ... --json`, checks it succeeded and printed exactly one JSON object.
fn run_json(args: &[&str]) -> serde_json::Map<String, Value> {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = avbd(&all);
    assert!(o.status.success(), "avbd {all:?} failed: {}", stderr(&o));
    let out = stdout(&o);
    let values: Vec<Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out}"));
    assert_eq!(
        values.len(),
        1,
        "expected exactly one JSON value, got: {out}"
    );
    assert_eq!(
        out.trim().lines().count(),
        1,
        "JSON report spans several lines: {out}"
    );
    match values.into_iter().next().unwrap() {
        Value::Object(m) => m,
        other => panic!("expected a JSON object, got {other}"),
    }
}

fn num(v: &Value, what: &str) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

/// Asserts that the command fails cleanly: non-zero exit, an `error` message on stderr
/// that mentions `needle`, nothing on stdout, and no panic.
#[track_caller]
fn assert_clean_failure(args: &[&str], needle: &str) {
    let o = avbd(args);
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "avbd {args:?} succeeded; stdout: {}",
        stdout(&o)
    );
    assert!(
        o.status.code().is_some(),
        "avbd {args:?} was killed by a signal"
    );
    assert!(!err.contains("panicked"), "avbd {args:?} panicked: {err}");
    assert!(
        err.contains("error"),
        "avbd {args:?}: no error message on stderr: {err:?}"
    );
    assert!(
        err.contains(needle),
        "avbd {args:?}: stderr does not mention `{needle}`: {err}"
    );
    assert!(
        stdout(&o).trim().is_empty(),
        "avbd {args:?} printed to stdout: {}",
        stdout(&o)
    );
}

#[test]
fn list_shows_every_scene_with_its_parameters_and_defaults() {
    let o = avbd(&["list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // Scene lines start in column 0, parameter lines are indented: `name = default help`.
    let mut listed: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    let mut order = Vec::new();
    let mut current = None;
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let mut tokens = line.split_whitespace();
        let first = tokens.next().unwrap().to_string();
        if line.starts_with(char::is_whitespace) {
            let scene = current.clone().expect("parameter line before any scene");
            assert_eq!(tokens.next(), Some("="), "malformed parameter line: {line}");
            let default: f64 = tokens
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no numeric default in: {line}"));
            listed.get_mut(&scene).unwrap().push((first, default));
        } else {
            assert!(
                listed.insert(first.clone(), Vec::new()).is_none(),
                "{first} listed twice"
            );
            order.push(first.clone());
            current = Some(first);
        }
    }
    let expected: Vec<&str> = SCENES.iter().map(|s| s.name).collect();
    assert_eq!(order, expected, "scene list differs from SCENES");
    for s in SCENES {
        let params = &listed[s.name];
        let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        let want: Vec<&str> = s.params.iter().map(|p| p.name).collect();
        assert_eq!(names, want, "parameters of {}", s.name);
        for ((n, d), p) in params.iter().zip(s.params) {
            // Printed with Display: round-trips exactly for these defaults.
            assert_eq!(*d, p.default, "default of {}.{n}", s.name);
        }
    }
}

#[test]
fn run_json_reports_every_field() {
    let m = run_json(&["stack", "--frames", "30"]);
    for key in [
        "scene",
        "params",
        "backend",
        "bodies",
        "constraints",
        "colors",
        "iterations",
        "dt",
        "frames",
        "timing_ms",
        "metrics",
    ] {
        assert!(m.contains_key(key), "missing key {key} in {m:?}");
    }
    assert_eq!(m["scene"], "stack");
    assert_eq!(m["backend"], "cpu");
    // Default stack: 10 boxes plus the ground.
    assert_eq!(m["bodies"], 11);
    assert_eq!(num(&m["params"]["boxes"], "params.boxes"), 10.0);
    assert_eq!(num(&m["params"]["size"], "params.size"), 1.0);
    assert_eq!(m["frames"], 30);
    assert_eq!(m["iterations"], 10);
    assert!((num(&m["dt"], "dt") - 1.0 / 60.0).abs() < 1e-7);
    // 10 resting boxes: at least one contact point per box face pair (9 + ground).
    let constraints = m["constraints"]
        .as_u64()
        .expect("constraints is not an integer");
    assert!(constraints >= 10, "constraints = {constraints}");
    let colors = m["colors"].as_u64().expect("colors is not an integer");
    assert!(colors >= 1, "colors = {colors}");

    let t = &m["timing_ms"];
    let (median, p95, max) = (
        num(&t["median"], "median"),
        num(&t["p95"], "p95"),
        num(&t["max"], "max"),
    );
    assert!(0.0 < median && median <= p95 && p95 <= max, "timing {t}");

    let metrics = &m["metrics"];
    assert_eq!(metrics["finite"], true);
    // A stack that starts at rest: penetration stays well inside the 1 cm contact margin
    // and no box drifts by more than a few mm in 0.5 s (a collapse moves boxes by metres).
    let pen = num(&metrics["max_penetration"], "max_penetration");
    assert!((0.0..0.01).contains(&pen), "max_penetration {pen}");
    let drift = num(&metrics["max_drift"], "max_drift");
    assert!((0.0..0.05).contains(&drift), "max_drift {drift}");
}

#[test]
fn run_applies_scene_params_and_solver_options() {
    let m = run_json(&["stack", "--frames", "10", "--set", "boxes=3"]);
    assert_eq!(m["bodies"], 4, "3 boxes + ground");
    assert_eq!(num(&m["params"]["boxes"], "params.boxes"), 3.0);
    let m = run_json(&[
        "stack",
        "--frames",
        "10",
        "--iterations",
        "4",
        "--dt",
        "0.01",
    ]);
    assert_eq!(m["iterations"], 4);
    assert!((num(&m["dt"], "dt") - 0.01).abs() < 1e-7);
    assert_eq!(m["frames"], 10);
    let m = run_json(&["stack", "--frames", "5", "--config", "iterations=7"]);
    assert_eq!(m["iterations"], 7);
}

#[test]
fn bad_command_lines_fail_cleanly() {
    assert_clean_failure(&["run", "nope"], "nope");
    assert_clean_failure(&["run", "stack", "--set", "nope=1"], "nope");
    assert_clean_failure(&["run", "stack", "--set", "boxes"], "key=value");
    assert_clean_failure(&["run", "stack", "--set", "boxes=abc"], "abc");
    assert_clean_failure(&["run", "stack", "--set", "boxes=-1"], "boxes");
    assert_clean_failure(&["run", "stack", "--config", "nope=1"], "nope");
    assert_clean_failure(&["run", "stack", "--config", "dt=-1"], "dt");
    assert_clean_failure(&["run", "stack", "--config", "dt"], "key=value");
    assert_clean_failure(&["run", "stack", "--iterations", "0"], "iterations");
    assert_clean_failure(&["run", "stack", "--dt", "0"], "dt");
    assert_clean_failure(&["frobnicate"], "frobnicate");
}
