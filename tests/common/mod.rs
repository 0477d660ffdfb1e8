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
    gpu_world_with(SolverConfig::default())
}

/// [`gpu_world`] with `cfg`.
pub fn gpu_world_with(cfg: SolverConfig) -> Option<bevy_avbd::PhysicsWorld> {
    match bevy_avbd::PhysicsWorld::with_backend(cfg, bevy_avbd::Backend::Gpu) {
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

/// Every deformable vertex of a world, body after body (bit-for-bit comparisons of runs).
pub fn all_positions(w: &bevy_avbd::PhysicsWorld) -> Vec<[f32; 3]> {
    w.deformable_handles()
        .iter()
        .flat_map(|&h| {
            w.deformable(h)
                .unwrap()
                .positions()
                .iter()
                .map(|p| p.to_array())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The cantilever of the trajectory tests (1 m × 0.1 m × 0.1 m, 20×2×2 cells, E = 1e8,
/// clamped at its left face, placed at (0.5, 1, 0)) and the f64 Newton solve of `frames`
/// implicit-Euler steps of 1/60 s from rest: its tip's deflection after each step.
pub struct CantileverTrajectory {
    pub desc: bevy_avbd::DeformableDesc,
    pub tip: Vec<usize>,
    pub rest_tip: f64,
    /// The static deflection (the scale of the deviations).
    pub statics: f64,
    pub newton: Vec<f64>,
}

pub fn cantilever_trajectory(frames: usize) -> CantileverTrajectory {
    use bevy_avbd::glam::{DVec3, Quat, Vec3};
    use bevy_avbd::{DeformableDesc, SolidMaterial, TetMesh, TetPattern};
    let mesh = TetMesh::box_grid(Vec3::new(1.0, 0.1, 0.1), [20, 2, 2], TetPattern::Six);
    let pinned: Vec<u32> = (0..mesh.vertices.len() as u32)
        .filter(|&i| mesh.vertices[i as usize].x < -0.4999)
        .collect();
    let tip: Vec<usize> = (0..mesh.vertices.len())
        .filter(|&i| mesh.vertices[i].x > 0.4999)
        .collect();
    let material = SolidMaterial {
        youngs: 1e8,
        ..Default::default()
    };
    let place = (Vec3::new(0.5, 1.0, 0.0), Quat::IDENTITY);
    let g = Vec3::new(0.0, -9.81, 0.0);
    let mut p =
        bevy_avbd::reference::NewtonProblem::statics(&mesh, &material, place, &pinned, g).unwrap();
    let tip_y = |x: &[DVec3]| tip.iter().map(|&i| x[i].y).sum::<f64>() / tip.len() as f64;
    let rest_tip = tip_y(&p.rest);
    let statics = rest_tip - tip_y(&p.solve_static().unwrap().x);
    let h = 1.0 / 60.0f64;
    let (mut x, mut v) = (p.rest.clone(), vec![DVec3::ZERO; p.rest.len()]);
    let mut newton = Vec::new();
    for _ in 0..frames {
        let y: Vec<DVec3> = x.iter().zip(&v).map(|(a, b)| *a + *b * h).collect();
        p.inertia = Some((h, y));
        let s = p.solve(&x, 1e-9, 50).unwrap();
        for i in 0..x.len() {
            v[i] = (s.x[i] - x[i]) / h;
        }
        x = s.x;
        newton.push(rest_tip - tip_y(&x));
    }
    CantileverTrajectory {
        desc: DeformableDesc::solid(mesh, material)
            .at(place.0)
            .pinned(pinned),
        tip,
        rest_tip,
        statics,
        newton,
    }
}

impl CantileverTrajectory {
    /// Adds the cantilever to `w`, steps it through the reference's frames and returns the
    /// largest deviation of its tip from the Newton steps, as a share of `statics`.
    pub fn largest_deviation(&self, w: &mut bevy_avbd::PhysicsWorld) -> f64 {
        let body = w.add_deformable(self.desc.clone()).unwrap();
        let mut worst = 0.0f64;
        for reference in &self.newton {
            w.step().unwrap();
            let d = w.deformable(body).unwrap();
            let y = self
                .tip
                .iter()
                .map(|&i| d.positions()[i].y as f64)
                .sum::<f64>()
                / self.tip.len() as f64;
            worst = worst.max(((self.rest_tip - y) - reference).abs() / self.statics);
        }
        worst
    }
}

/// The rigid box of `mattress` with `count` = 1 (5 kg, resting on the soft slab after its
/// drop): the vertical force the slab's contact rows put on it (N), its weight (N) and its
/// speed (m/s).
pub fn box_on_the_slab(scene: &Scene) -> (f64, f64, f64) {
    let w = &scene.world;
    let (h, b) = w
        .body_handles()
        .iter()
        .map(|&h| (h, w.body(h).unwrap()))
        .find(|(_, b)| b.kind == bevy_avbd::BodyKind::Dynamic && b.position.x < 0.5)
        .expect("the box on the slab");
    let force = w.surface_contact_force(h).unwrap();
    let weight = b.mass as f64 * -w.config.gravity.y as f64;
    (force.y as f64, weight, b.linear_velocity.length() as f64)
}

/// The inversion filter's case: one tetrahedron (0.1 m legs) with its base pinned and its
/// apex driven 2 cm a frame straight down through the base, `frames` frames in `world`.
/// Returns V/V₀ at each frame's end.
pub fn crush_one_tet(world: &mut bevy_avbd::PhysicsWorld, frames: u32) -> Vec<f32> {
    let h = add_crushed_tet(world, &[]);
    (0..frames)
        .map(|k| {
            step_crushing(world, h, k);
            world.deformable(h).expect("the body").min_volume_ratio().0
        })
        .collect()
}

/// Where the crushed tetrahedron's body stands.
const CRUSHED_AT: bevy_avbd::glam::Vec3 = bevy_avbd::glam::Vec3::new(0.0, 0.5, 0.0);

/// The legs of the crushed tetrahedron, 0.1 m along z, x and y (its apex).
fn corner_tet() -> [bevy_avbd::glam::Vec3; 4] {
    use bevy_avbd::glam::Vec3;
    [Vec3::ZERO, 0.1 * Vec3::Z, 0.1 * Vec3::X, 0.1 * Vec3::Y]
}

/// A body of the crushed tetrahedron (its base pinned) and of one more free one at each
/// of `free` (offsets from it).
fn add_crushed_tet(
    world: &mut bevy_avbd::PhysicsWorld,
    free: &[bevy_avbd::glam::Vec3],
) -> bevy_avbd::DeformableHandle {
    use bevy_avbd::{DeformableDesc, SolidMaterial, TetMesh};
    let corner = corner_tet();
    let mut mesh = TetMesh {
        vertices: corner.to_vec(),
        tets: vec![[0, 1, 2, 3]],
    };
    for &offset in free {
        let first = mesh.vertices.len() as u32;
        mesh.vertices.extend(corner.map(|p| p + offset));
        mesh.tets.push([first, first + 1, first + 2, first + 3]);
    }
    world
        .add_deformable(
            DeformableDesc::solid(mesh, SolidMaterial::default())
                .at(CRUSHED_AT)
                .pinned([0, 1, 2]),
        )
        .expect("valid tetrahedra")
}

/// Frame `k` (from 0) of the crushing: the apex driven 2 cm a frame down from its rest
/// place, and a step.
fn step_crushing(world: &mut bevy_avbd::PhysicsWorld, h: bevy_avbd::DeformableHandle, k: u32) {
    let apex = CRUSHED_AT + bevy_avbd::glam::Vec3::new(0.0, 0.1 - 0.02 * (k + 1) as f32, 0.0);
    world.drive_vertices(h, &[(3, apex)]).expect("the apex");
    world.step().expect("a step");
}

/// The tetrahedron of [`crush_one_tet`] (three vertices pinned, the apex driven 2 cm a
/// frame through its base) and, in the same body but 1 m away, a second one falling
/// freely, for `frames` frames in `world`. Per frame: the crushed one's V/V₀, how far
/// the free one's centre has fallen (m), and how often an iterate left its cages (the
/// broad phase's runs again and the GPU step's runs again).
pub fn crush_one_tet_beside_a_falling_one(
    world: &mut bevy_avbd::PhysicsWorld,
    frames: u32,
) -> Vec<(f32, f32, usize)> {
    let h = add_crushed_tet(world, &[bevy_avbd::glam::Vec3::X]);
    let centre = |w: &bevy_avbd::PhysicsWorld| -> f32 {
        let body = w.deformable(h).expect("the body");
        body.positions()[4..].iter().map(|p| p.y).sum::<f32>() / 4.0
    };
    let start = centre(world);
    (0..frames)
        .map(|k| {
            step_crushing(world, h, k);
            let j = world.deformable(h).expect("the body").min_volume_ratio().0;
            let sc = world.stats().surface_contact;
            (j, start - centre(world), sc.rebuilds + sc.runs_again)
        })
        .collect()
}

/// Checks [`crush_one_tet_beside_a_falling_one`]'s frames under `cfg`'s gravity: the
/// crushed tetrahedron never below the floor and held 1% above it from frame 5 (where its
/// apex's path reaches it), the free one `g h² k (k + 1) / 2` below its start after k
/// frames within 10 µm (f32 positions near 0.5 m round at 0.06 µm), and no iterate out of
/// its cages: the held apex's comoving cage allows for its staying while the body's mean
/// falls on (until 2026-11-30 it left it from frame 6 at 9.81 m/s², and the broad phase
/// ran again; on the GPU the step ran again, then stopped the body at the cages).
pub fn falls_freely_beside_the_floor(cfg: &SolverConfig, frames: &[(f32, f32, usize)]) {
    let (g, h) = (-cfg.gravity.y, cfg.dt);
    println!("(V/V0, fall, runs again) by frame: {frames:?}");
    for (k, &(j, fall, again)) in frames.iter().enumerate() {
        let k1 = (k + 1) as f32;
        let expected = g * h * h * k1 * (k1 + 1.0) / 2.0;
        assert!(j >= 0.0099, "frame {k1}: V/V0 {j}");
        if k >= 4 {
            assert!(j <= 0.0102, "frame {k1}: V/V0 {j}");
        }
        assert!(
            (fall - expected).abs() < 1e-5,
            "frame {k1}: fell {fall} m, implicit Euler {expected} m"
        );
        assert_eq!(again, 0, "frame {k1}: an iterate left its cages");
    }
}

/// A rigid bar (0.3 × 0.08 × 0.08 m, 5 kg) tilted 0.4 rad, spinning at `spin` rad/s about
/// (0, 1, 1) and falling at `drop` m/s onto a soft slab (1 × 0.2 × 1 m, E = 1e5 Pa) on the
/// ground, 5 cm below its lowest corner, for `frames` frames in `world`. Per frame: the
/// surfaces' intersections at its end (exact, `reference::intersect`) and the active
/// contact rows.
pub fn spinning_bar_on_a_slab(
    world: &mut bevy_avbd::PhysicsWorld,
    spin: f32,
    drop: f32,
    frames: u32,
) -> Vec<(usize, usize)> {
    use bevy_avbd::glam::{Quat, Vec3};
    use bevy_avbd::{BodyDesc, Collider, DeformableDesc, SolidMaterial, TetMesh, TetPattern};
    world
        .add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
        .expect("the ground");
    let slab = TetMesh::box_grid(Vec3::new(1.0, 0.2, 1.0), [10, 2, 10], TetPattern::Six);
    let rubber = SolidMaterial {
        youngs: 1e5,
        ..Default::default()
    };
    world
        .add_deformable(DeformableDesc::solid(slab, rubber).at(Vec3::new(0.0, 0.103, 0.0)))
        .expect("the slab");
    world
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(0.0, 0.35, 0.0))
                .rotated(Quat::from_rotation_z(0.4))
                .with_mass(5.0)
                .with_velocity(Vec3::new(0.0, -drop, 0.0), Vec3::new(0.0, spin, spin))
                .with_collider(Collider::cuboid(Vec3::new(0.15, 0.04, 0.04)).unwrap()),
        )
        .expect("the bar");
    (0..frames)
        .map(|_| {
            world.step().expect("a step");
            let report = bevy_avbd::reference::intersect::check(world, 0.01);
            (report.intersections, world.stats().surface_contact.rows)
        })
        .collect()
}
