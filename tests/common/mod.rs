//! Shared helpers of the acceptance tests: build a scene, run it, read a metric.
#![allow(dead_code)]

use bevy_avbd::SolverConfig;
use bevy_avbd::scenes::Scene;

/// Builds `name` with parameter overrides and a config, runs `frames`, returns the scene.
pub fn run(name: &str, params: &[(&str, f64)], config: SolverConfig, frames: u32) -> Scene {
    let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let mut scene = Scene::build(name, &params, config).expect("scene builds");
    scene.run(frames).expect("scene steps");
    scene
}

/// A numeric metric of a scene.
pub fn metric(scene: &Scene, name: &str) -> f64 {
    let m = scene.metrics();
    assert_eq!(
        m["finite"],
        serde_json::Value::Bool(true),
        "{} went non-finite: {m:?}",
        scene.name
    );
    m.get(name)
        .and_then(|v| v.as_f64())
        .unwrap_or_else(|| panic!("{} has no metric {name}: {m:?}", scene.name))
}

pub fn with_iterations(iterations: u32) -> SolverConfig {
    SolverConfig {
        iterations,
        ..SolverConfig::default()
    }
}

/// Angle between two rotations (rad), computed in f64 from the relative rotation's vector
/// part. `Quat::angle_between` takes the arccosine of an f32 dot product, which cannot
/// resolve angles below ~7e-4 rad: quaternions one ulp apart read as 6.9e-4 rad.
#[allow(dead_code)]
pub fn rotation_gap(a: bevy_avbd::glam::Quat, b: bevy_avbd::glam::Quat) -> f64 {
    let (a, b) = (a.as_dquat(), b.as_dquat());
    let r = a.conjugate() * b;
    2.0 * r.xyz().length().atan2(r.w.abs())
}

/// Whether a missing GPU adapter fails the test (`AVBD_REQUIRE_GPU=1`, set by `.ci/run`)
/// instead of skipping it.
pub fn require_gpu() -> bool {
    std::env::var("AVBD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Builds a scene on the GPU backend, or `None` (after a note) when no adapter exists.
pub fn gpu_scene(name: &str, params: &[(&str, f64)], config: SolverConfig) -> Option<Scene> {
    let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    match Scene::build_on(name, &params, config, bevy_avbd::Backend::Gpu) {
        Ok(s) => Some(s),
        Err(e) => {
            assert!(
                !require_gpu(),
                "AVBD_REQUIRE_GPU=1 but the GPU backend failed: {e}"
            );
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

/// An empty world on the GPU backend with the default config, or `None` (after a note)
/// when no adapter exists.
pub fn gpu_world() -> Option<bevy_avbd::PhysicsWorld> {
    match bevy_avbd::PhysicsWorld::with_backend(SolverConfig::default(), bevy_avbd::Backend::Gpu) {
        Ok(w) => Some(w),
        Err(e) => {
            assert!(
                !require_gpu(),
                "AVBD_REQUIRE_GPU=1 but the GPU backend failed: {e}"
            );
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}
