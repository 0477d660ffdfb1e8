//! Deformable bodies at the edges: bad meshes, materials and references give typed errors
//! that name what is wrong and change nothing; meshes import; run-time removal keeps the
//! rest intact; runs are bit-identical across repeats and thread counts; the OBJ export
//! parses with a standard reader.

use bevy_avbd::glam::{Vec3, Vec3A};
use bevy_avbd::scenes::Scene;
use bevy_avbd::{
    AttachmentDesc, AttachmentHandle, BodyDesc, BodyHandle, ClothMaterial, Collider,
    DeformableDesc, DeformableHandle, PhysicsError, PhysicsWorld, SolidMaterial, SolverConfig,
    TetMesh, TetPattern, TriMesh,
};

fn cube() -> TetMesh {
    TetMesh::box_grid(Vec3::splat(0.2), [2, 2, 2], TetPattern::Six)
}

fn one_tet(x: [Vec3; 4]) -> TetMesh {
    TetMesh {
        vertices: x.to_vec(),
        tets: vec![[0, 1, 2, 3]],
    }
}

const UNIT: [Vec3; 4] = [Vec3::ZERO, Vec3::X, Vec3::Y, Vec3::Z];

/// `(element, index)` of an `InvalidMesh` error, or the field of the other typed errors.
fn named(e: PhysicsError) -> String {
    match e {
        PhysicsError::InvalidMesh { element, index, .. } => format!("{element} {index}"),
        PhysicsError::InvalidMaterial { field, .. }
        | PhysicsError::InvalidDeformable { field, .. }
        | PhysicsError::InvalidAttachment { field, .. } => field.to_string(),
        other => format!("{other:?}"),
    }
}

#[test]
fn bad_meshes_and_materials_are_typed_errors_that_name_the_culprit() {
    let solid = |mesh: TetMesh| DeformableDesc::solid(mesh, SolidMaterial::default());
    let material = |m: SolidMaterial| DeformableDesc::solid(cube(), m);
    let d = SolidMaterial::default();
    let mut flat = UNIT;
    flat[3] = Vec3::new(0.3, 0.3, 0.0);
    let mut nan = UNIT;
    nan[2] = Vec3::new(0.0, f32::NAN, 0.0);
    let mut unused = one_tet(UNIT);
    unused.vertices.push(Vec3::ONE);
    let mut second_bad = cube();
    second_bad.tets[5] = [second_bad.tets[5][0], second_bad.tets[5][0], 1, 2];
    let cases: Vec<(&str, DeformableDesc, &str)> = vec![
        ("degenerate tet", solid(one_tet(flat)), "tet 0"),
        (
            "inverted rest tet",
            solid(one_tet([UNIT[0], UNIT[2], UNIT[1], UNIT[3]])),
            "tet 0",
        ),
        (
            "out-of-range index",
            solid(TetMesh {
                vertices: UNIT.to_vec(),
                tets: vec![[0, 1, 2, 9]],
            }),
            "tet 0",
        ),
        ("repeated vertex (6th tet)", solid(second_bad), "tet 5"),
        ("non-finite coordinate", solid(one_tet(nan)), "vertex 2"),
        ("vertex in no element", solid(unused), "vertex 4"),
        (
            "no tets",
            solid(TetMesh {
                vertices: UNIT.to_vec(),
                tets: vec![],
            }),
            "tet 0",
        ),
        (
            "E = 0",
            material(SolidMaterial { youngs: 0.0, ..d }),
            "youngs",
        ),
        (
            "E = NaN",
            material(SolidMaterial {
                youngs: f32::NAN,
                ..d
            }),
            "youngs",
        ),
        (
            "ρ < 0",
            material(SolidMaterial { density: -1.0, ..d }),
            "density",
        ),
        (
            "ν = 0.5",
            material(SolidMaterial { poisson: 0.5, ..d }),
            "poisson",
        ),
        (
            "ν = −1",
            material(SolidMaterial { poisson: -1.0, ..d }),
            "poisson",
        ),
        (
            "ν = 0.7",
            material(SolidMaterial { poisson: 0.7, ..d }),
            "poisson",
        ),
        (
            "negative damping",
            material(SolidMaterial { damping: -1.0, ..d }),
            "damping",
        ),
        ("pinned out of range", solid(cube()).pinned([27]), "pinned"),
        (
            "non-finite position",
            solid(cube()).at(Vec3::new(f32::INFINITY, 0.0, 0.0)),
            "position",
        ),
        (
            "non-finite velocity",
            solid(cube()).with_velocity(Vec3::NAN),
            "linear_velocity",
        ),
    ];
    let mut tri = TriMesh::grid(1.0, 1.0, 2, 2);
    tri.triangles[3] = [
        tri.triangles[3][0],
        tri.triangles[3][0],
        tri.triangles[3][2],
    ];
    let mut zero_area = TriMesh::grid(1.0, 1.0, 1, 1);
    zero_area.vertices[2] = (zero_area.vertices[0] + zero_area.vertices[1]) * 0.5;
    let mut fan = TriMesh::grid(1.0, 1.0, 1, 1);
    fan.vertices.push(Vec3::new(0.0, 1.0, 0.0));
    fan.triangles
        .push([fan.triangles[0][0], fan.triangles[0][1], 4]);
    fan.vertices.push(Vec3::new(0.0, -1.0, 0.0));
    fan.triangles
        .push([fan.triangles[0][0], fan.triangles[0][1], 5]);
    let cloth = |mesh: TriMesh| DeformableDesc::cloth(mesh, ClothMaterial::default());
    let cloths: Vec<(&str, DeformableDesc, &str)> = vec![
        ("repeated vertex", cloth(tri), "triangle 3"),
        ("zero-area triangle", cloth(zero_area), "triangle 0"),
        ("non-manifold edge", cloth(fan), "triangle 0"),
        (
            "cloth thickness 0",
            DeformableDesc::cloth(
                TriMesh::grid(1.0, 1.0, 2, 2),
                ClothMaterial {
                    thickness: 0.0,
                    ..Default::default()
                },
            ),
            "thickness",
        ),
        (
            "cloth bending NaN",
            DeformableDesc::cloth(
                TriMesh::grid(1.0, 1.0, 2, 2),
                ClothMaterial {
                    bending: Some(f32::NAN),
                    ..Default::default()
                },
            ),
            "bending",
        ),
    ];
    let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
    let kept = w.add_deformable(DeformableDesc::solid(cube(), d)).unwrap();
    let before: Vec<Vec3A> = w.deformable(kept).unwrap().positions().to_vec();
    for (what, desc, culprit) in cases.into_iter().chain(cloths) {
        let err = w.add_deformable(desc).expect_err(what);
        assert_eq!(named(err.clone()), culprit, "{what}: {err}");
        assert!(!err.to_string().is_empty());
        // Nothing changed.
        assert_eq!(w.deformable_count(), 1, "{what}");
        assert_eq!(
            w.deformable(kept).unwrap().positions(),
            &before[..],
            "{what}"
        );
    }
    w.step().unwrap();
}

#[test]
fn dangling_references_are_typed_errors() {
    let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
    let d = w
        .add_deformable(DeformableDesc::solid(cube(), SolidMaterial::default()))
        .unwrap();
    let b = w
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(1.0, 0.0, 0.0))
                .with_collider(Collider::ball(0.1).unwrap()),
        )
        .unwrap();
    let gone = DeformableHandle(77);
    assert_eq!(
        w.add_attachment(AttachmentDesc::new(gone, 0, b))
            .unwrap_err(),
        PhysicsError::MissingDeformable(gone)
    );
    assert_eq!(
        w.add_attachment(AttachmentDesc::new(d, 0, BodyHandle(99)))
            .unwrap_err(),
        PhysicsError::MissingBody(BodyHandle(99))
    );
    assert_eq!(
        named(
            w.add_attachment(AttachmentDesc::new(d, 1000, b))
                .unwrap_err()
        ),
        "vertex"
    );
    assert_eq!(
        named(
            w.add_attachment(AttachmentDesc::new(d, 0, b).at_anchor(Vec3::NAN))
                .unwrap_err()
        ),
        "anchor"
    );
    assert_eq!(
        named(
            w.add_attachment(AttachmentDesc::new(d, 0, b).breakable(-1.0))
                .unwrap_err()
        ),
        "breaking_force"
    );
    assert_eq!(
        named(w.drive_vertices(d, &[(0, Vec3::NAN)]).unwrap_err()),
        "target"
    );
    assert_eq!(
        named(w.pin_vertices(d, &[5000], true).unwrap_err()),
        "vertex"
    );
    assert_eq!(
        w.remove_attachment(AttachmentHandle(3)).unwrap_err(),
        PhysicsError::MissingAttachment(AttachmentHandle(3))
    );
    assert!(w.attachment_handles().is_empty());
    assert_eq!(
        w.remove_deformable(gone).unwrap_err(),
        PhysicsError::MissingDeformable(gone)
    );
    // Garbage is an import error, not a panic.
    assert!(matches!(
        TetMesh::from_msh(b"$MeshFormat\nnot a mesh"),
        Err(PhysicsError::MeshImport { format: "msh", .. })
    ));
    assert!(matches!(
        TriMesh::load_obj("/nonexistent/cloth.obj"),
        Err(PhysicsError::MeshImport { format: "obj", .. })
    ));
    w.step().unwrap();
}

/// The shipped meshes load, are valid and closed (ball and bean: Euler characteristic 2,
/// torus: 0), with the counts their licence file lists.
#[test]
fn shipped_meshes_import() {
    for (name, nodes, tets, chi) in [
        ("ball", 386, 1433, 2),
        ("bean", 417, 1359, 2),
        ("torus", 638, 2176, 0),
    ] {
        let path = format!("{}/assets/meshes/{name}.msh", env!("CARGO_MANIFEST_DIR"));
        let m = TetMesh::load_msh(&path).unwrap();
        assert_eq!((m.vertices.len(), m.tets.len()), (nodes, tets), "{name}");
        m.validate().unwrap();
        let s = m.surface();
        let used: std::collections::BTreeSet<u32> = s.triangles.iter().flatten().copied().collect();
        let euler = used.len() as i64 - s.edges.len() as i64 + s.triangles.len() as i64;
        assert_eq!(euler, chi, "{name}");
        let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
        w.add_deformable(DeformableDesc::solid(m, SolidMaterial::default()))
            .unwrap();
        w.step().unwrap();
    }
}

/// Removing a deformable body (and a rigid body) at run time keeps the others' vertices,
/// attachments and motion intact.
#[test]
fn removal_at_run_time_keeps_the_rest() {
    let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
    let mesh = TetMesh::rod(1.0, 0.05, 8);
    let top: Vec<u32> = (0..mesh.vertices.len() as u32)
        .filter(|&v| mesh.vertices[v as usize].x > 0.499)
        .collect();
    let first = w
        .add_deformable(
            DeformableDesc::solid(cube(), SolidMaterial::default()).at(Vec3::new(-3.0, 5.0, 0.0)),
        )
        .unwrap();
    let rod = w
        .add_deformable(
            DeformableDesc::solid(
                mesh,
                SolidMaterial {
                    youngs: 1e7,
                    ..Default::default()
                },
            )
            .at(Vec3::new(0.0, 3.0, 0.0))
            .pinned([0, 1, 2, 3]),
        )
        .unwrap();
    let weight = w
        .add_body(
            BodyDesc::dynamic()
                // 1 mm from the rod's end: bodies may not start touching.
                .at(Vec3::new(0.551, 3.0, 0.0))
                .with_mass(2.0)
                .with_collider(Collider::ball(0.05).unwrap()),
        )
        .unwrap();
    let held: Vec<AttachmentHandle> = top
        .iter()
        .map(|&v| {
            w.add_attachment(AttachmentDesc::new(rod, v, weight))
                .unwrap()
        })
        .collect();
    for _ in 0..30 {
        w.step().unwrap();
    }
    let removed = w.remove_deformable(first).unwrap();
    assert!(removed.is_empty());
    assert!(!w.contains_deformable(first));
    for _ in 0..30 {
        w.step().unwrap();
    }
    // The attachments were re-pointed: they still hold the weight at the rod's end.
    for &a in &held {
        assert!(w.attachment_error(a).unwrap() < 1e-3);
    }
    let y = w.body(weight).unwrap().position.y;
    assert!(y > 2.5, "the weight fell: {y}");
    // Removing the body removes its attachments.
    w.remove_body(weight).unwrap();
    assert!(w.attachment_handles().is_empty());
    for _ in 0..10 {
        w.step().unwrap();
    }
    assert!(
        w.deformable(rod)
            .unwrap()
            .positions()
            .iter()
            .all(|p| p.is_finite())
    );
}

fn final_bits(name: &str, frames: u32, threads: usize) -> Vec<u32> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let mut s = Scene::build(name, &[], SolverConfig::default()).unwrap();
        s.run(frames).unwrap();
        let w = &s.world;
        let mut bits = Vec::new();
        for &h in w.deformable_handles() {
            let d = w.deformable(h).unwrap();
            for p in d.positions().iter().chain(d.velocities()) {
                bits.extend(p.to_array().map(f32::to_bits));
            }
        }
        for &h in w.body_handles() {
            let b = w.body(h).unwrap();
            bits.extend(b.position.to_array().map(f32::to_bits));
            bits.extend(b.linear_velocity.to_array().map(f32::to_bits));
        }
        bits
    })
}

/// Same input, same bits: repeated runs and 1, 2 or 8 threads.
#[test]
fn deformable_runs_are_bit_identical_across_threads_and_repeats() {
    for (scene, frames) in [
        ("twisting_beam", 120),
        ("cloth_hang", 60),
        ("soft_on_chain", 60),
    ] {
        let one = final_bits(scene, frames, 1);
        let two = final_bits(scene, frames, 2);
        let again = final_bits(scene, frames, 2);
        // 8 threads (more than the 2-core CI machine has): rayon splits the parallel
        // loops into other chunks, and `build_adjacency` fills its lists in ranges from 4
        // threads on.
        let eight = final_bits(scene, frames, 8);
        assert!(!one.is_empty());
        assert_eq!(one, two, "{scene}: 1 vs 2 threads");
        assert_eq!(two, again, "{scene}: repeated run");
        assert_eq!(one, eight, "{scene}: 1 vs 8 threads");
    }
}

/// The OBJ export parses with `tobj` with one model per body and the right counts: every
/// surface vertex and triangle of each deformable, 8 vertices and 12 triangles per box.
#[test]
fn obj_export_parses_with_the_right_counts() {
    let mut s = Scene::build("soft_on_chain", &[], SolverConfig::default()).unwrap();
    s.run(5).unwrap();
    let dir = std::env::temp_dir().join(format!("avbd-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    bevy_avbd::export::write_frame(&s.world, &dir, 5).unwrap();
    let path = bevy_avbd::export::frame_path(&dir, 5);
    assert!(path.ends_with("frame_00005.obj"));
    let (models, _) = tobj::load_obj(
        &path,
        &tobj::LoadOptions {
            single_index: true,
            ..Default::default()
        },
    )
    .unwrap();
    let w = &s.world;
    let mut expected = Vec::new();
    for (k, &h) in w.deformable_handles().iter().enumerate() {
        let d = w.deformable(h).unwrap();
        let tris: Vec<[u32; 3]> = d.surface_triangles().collect();
        let verts: std::collections::BTreeSet<u32> = tris.iter().flatten().copied().collect();
        expected.push((format!("solid_{k}"), verts.len(), tris.len()));
    }
    for i in 0..w.body_count() {
        expected.push((format!("dynamic_{i}"), 8, 12));
    }
    let got: Vec<(String, usize, usize)> = models
        .iter()
        .map(|m| {
            (
                m.name.clone(),
                m.mesh.positions.len() / 3,
                m.mesh.indices.len() / 3,
            )
        })
        .collect();
    assert_eq!(got, expected);
    std::fs::remove_dir_all(&dir).unwrap();
}
