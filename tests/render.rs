//! `avbd render` and `bevy_avbd::render`: the pictures are not blank, the bodies are drawn
//! where the physics put them (projected with the renderer's own camera), GIFs decode with
//! the right frame count, and bad input fails with a typed error.
//!
//! Without an adapter the tests that draw print a note and pass, except under
//! `AVBD_REQUIRE_GPU=1` (set by `.ci/run`, which installs Mesa's lavapipe), where a missing
//! adapter fails them, as in `tests/gpu.rs`.

use std::path::PathBuf;
use std::process::{Command, Output};

use bevy_avbd::glam::Vec3;
use bevy_avbd::render::{Camera, Image, RenderOptions, Renderer, Snapshot, render_world};
use bevy_avbd::scenes::Scene;
use bevy_avbd::{BodyKind, SolverConfig};

fn require_gpu() -> bool {
    std::env::var("AVBD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The renderer, or `None` (after a note) when no adapter exists.
fn renderer() -> Option<Renderer> {
    match Renderer::new() {
        Ok(r) => Some(r),
        Err(e) => {
            assert!(
                !require_gpu(),
                "AVBD_REQUIRE_GPU=1 but the renderer failed: {e}"
            );
            eprintln!("skipping render test: {e}");
            None
        }
    }
}

fn avbd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_avbd"))
        .args(args)
        .output()
        .expect("failed to run avbd")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `avbd render …`; `false` (after a note) when it failed for want of an adapter.
fn render_cli(args: &[&str]) -> bool {
    let o = avbd(args);
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "avbd {args:?} panicked: {err}");
    if !o.status.success() && err.contains("no GPU adapter") {
        assert!(
            !require_gpu(),
            "AVBD_REQUIRE_GPU=1 but avbd {args:?}: {err}"
        );
        eprintln!("skipping render test: {err}");
        return false;
    }
    assert!(o.status.success(), "avbd {args:?} failed: {err}");
    true
}

fn out_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("avbd_render_{}_{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read_png(path: &std::path::Path) -> Image {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    buf.truncate(info.buffer_size());
    Image {
        width: info.width,
        height: info.height,
        rgb: buf,
    }
}

/// Hue (degrees) and saturation of an sRGB colour.
fn hue_sat(c: [u8; 3]) -> (f32, f32) {
    let [r, g, b] = c.map(|v| v as f32 / 255.0);
    let (max, min) = (r.max(g).max(b), r.min(g).min(b));
    let d = max - min;
    let sat = if max > 0.0 { d / max } else { 0.0 };
    if d < 1e-6 {
        return (0.0, sat);
    }
    let h = if max == r {
        60.0 * ((g - b) / d).rem_euclid(6.0)
    } else if max == g {
        60.0 * ((b - r) / d + 2.0)
    } else {
        60.0 * ((r - g) / d + 4.0)
    };
    (h, sat)
}

/// Asserts that the pixel where `p` projects has the hue of `color` (shading scales a
/// colour, it does not turn it), and is saturated (not the grey ground or background).
#[track_caller]
fn assert_drawn_at(image: &Image, camera: &Camera, p: Vec3, color: [u8; 3], what: &str) {
    let px = camera
        .project(p, image.width, image.height)
        .unwrap_or_else(|| panic!("{what} is behind the camera"));
    let (x, y) = (px.x.floor() as i64, px.y.floor() as i64);
    assert!(
        (0..image.width as i64).contains(&x) && (0..image.height as i64).contains(&y),
        "{what} projects outside the picture: {px}"
    );
    let got = image.pixel(x as u32, y as u32);
    let (h, s) = hue_sat(got);
    let (h0, _) = hue_sat(color);
    let dh = (h - h0).abs().min(360.0 - (h - h0).abs());
    assert!(
        s > 0.25 && dh < 12.0,
        "{what} at pixel ({x}, {y}) is {got:?} (hue {h:.0}°, saturation {s:.2}); \
         its colour is {color:?} (hue {h0:.0}°)"
    );
}

#[test]
fn cli_renders_a_pyramid_that_is_not_blank() {
    let dir = out_dir("png");
    let path = dir.join("pyramid.png");
    let p = path.to_str().unwrap();
    if !render_cli(&[
        "render", "pyramid", "--frames", "30", "--size", "320x240", "--out", p,
    ]) {
        return;
    }
    let img = read_png(&path);
    assert_eq!((img.width, img.height), (320, 240));
    let mut colors = std::collections::HashSet::new();
    let mut saturated = 0;
    for px in img.rgb.chunks_exact(3) {
        colors.insert([px[0], px[1], px[2]]);
        if hue_sat([px[0], px[1], px[2]]).1 > 0.25 {
            saturated += 1;
        }
    }
    let n = (img.width * img.height) as usize;
    assert!(colors.len() > 500, "only {} distinct colours", colors.len());
    // The 210 coloured boxes cover a good part of the picture, not all of it.
    assert!(
        saturated > n / 10 && saturated < n * 9 / 10,
        "{saturated} of {n} pixels are body colours"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `--backend gpu` pictures a run of the GPU backend: a soft cube between kinematic plates
/// (deformable contact with moving bodies on the device), drawn with its colour.
#[test]
fn cli_renders_a_gpu_run() {
    let dir = out_dir("gpu");
    let path = dir.join("compress.png");
    let p = path.to_str().unwrap();
    if !render_cli(&[
        "render",
        "compress",
        "--backend",
        "gpu",
        "--frames",
        "5",
        "--size",
        "160x120",
        "--out",
        p,
    ]) {
        return;
    }
    let img = read_png(&path);
    assert_eq!((img.width, img.height), (160, 120));
    let saturated = img
        .rgb
        .chunks_exact(3)
        .filter(|px| hue_sat([px[0], px[1], px[2]]).1 > 0.25)
        .count();
    assert!(saturated > 100, "{saturated} pixels of body colour");
    let _ = std::fs::remove_dir_all(dir);
}

/// Each body's centre, projected with the renderer's camera, lands on that body's colour:
/// the top box of a pyramid, and each cube of a soft stack (two colours, so a swapped or
/// misplaced body fails).
#[test]
fn bodies_are_drawn_where_the_physics_put_them() {
    let Some(renderer) = renderer() else { return };
    let options = RenderOptions {
        width: 320,
        height: 240,
        camera: None,
    };
    let set = |k: &str, v: f64| (k.to_string(), v);
    let mut pyramid =
        Scene::build("pyramid", &[set("base", 8.0)], SolverConfig::default()).unwrap();
    pyramid.run(30).unwrap();
    let w = &pyramid.world;
    let top = *w
        .body_handles()
        .iter()
        .filter(|&&h| w.body(h).unwrap().kind == BodyKind::Dynamic)
        .max_by(|&&a, &&b| {
            w.body(a)
                .unwrap()
                .position
                .y
                .total_cmp(&w.body(b).unwrap().position.y)
        })
        .unwrap();
    let (image, camera) = render_world(&renderer, w, &options).unwrap();
    let color = Snapshot::of_world(w).body_color(top).unwrap();
    let centre = w.body(top).unwrap().position;
    assert!(centre.y > 7.0, "the top box fell: {centre}");
    assert_drawn_at(&image, &camera, centre, color, "the pyramid's top box");

    let mut stack = Scene::build(
        "soft_stack",
        &[set("count", 2.0), set("cells", 2.0)],
        SolverConfig::default(),
    )
    .unwrap();
    stack.run(20).unwrap();
    let w = &stack.world;
    let snap = Snapshot::of_world(w);
    let (image, camera) = render_world(&renderer, w, &options).unwrap();
    let handles = w.deformable_handles().to_vec();
    assert_eq!(handles.len(), 2);
    let colors: Vec<[u8; 3]> = handles
        .iter()
        .map(|&h| snap.deformable_color(h).unwrap())
        .collect();
    assert_ne!(colors[0], colors[1]);
    for (i, &h) in handles.iter().enumerate() {
        let centre = w.deformable(h).unwrap().center_of_mass();
        assert_drawn_at(
            &image,
            &camera,
            centre,
            colors[i],
            &format!("soft cube {i}"),
        );
    }
}

#[test]
fn cli_writes_a_gif_of_the_run() {
    let dir = out_dir("gif");
    let path = dir.join("drop.gif");
    let p = path.to_str().unwrap();
    let args = [
        "render",
        "soft_drop",
        "--set",
        "cells=2",
        "--frames",
        "20",
        "--every",
        "5",
        "--size",
        "160x120",
        "--out",
        p,
    ];
    if !render_cli(&args) {
        return;
    }
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options
        .read_info(std::fs::File::open(&path).unwrap())
        .unwrap();
    assert_eq!((decoder.width(), decoder.height()), (160, 120));
    let mut frames = 0;
    while let Some(f) = decoder.read_next_frame().unwrap() {
        // 5 frames at 60 Hz: 8 hundredths of a second each.
        assert_eq!(f.delay, 8);
        frames += 1;
    }
    // The start and frames 5, 10, 15, 20.
    assert_eq!(frames, 5);
    assert!(std::fs::metadata(&path).unwrap().len() < 200_000);
    let _ = std::fs::remove_dir_all(dir);
}

/// Bad arguments fail before any device is opened: a message, exit code 2, no panic.
#[test]
fn bad_input_is_a_clean_error() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["render", "no_such_scene", "--out", "x.png"],
            "unknown scene",
        ),
        (
            &["render", "pyramid", "--size", "0x100", "--out", "x.png"],
            "bad image size",
        ),
        (
            &["render", "pyramid", "--size", "big", "--out", "x.png"],
            "bad image size",
        ),
        (
            &["render", "pyramid", "--out", "x.bmp"],
            "must end in .png or .gif",
        ),
        (
            &["render", "pyramid", "--camera", "1,2,3", "--out", "x.png"],
            "bad camera",
        ),
        (
            &["render", "pyramid", "--set", "base=0", "--out", "x.png"],
            "base",
        ),
    ];
    for (args, needle) in cases {
        let o = avbd(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "avbd {args:?}: {err}");
        assert!(!err.contains("panicked"), "avbd {args:?} panicked: {err}");
        assert!(
            err.contains(needle),
            "avbd {args:?}: stderr lacks `{needle}`: {err}"
        );
    }
    assert!(!std::path::Path::new("x.png").exists());
}

/// With no adapter (a backend that does not exist on this platform), the error says so.
#[test]
fn no_adapter_is_a_clear_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_avbd"))
        .args(["render", "stack", "--frames", "1", "--out", "never.png"])
        .env("WGPU_BACKEND", "metal")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no GPU adapter found"), "{err}");
    assert!(!std::path::Path::new("never.png").exists());
}

/// naga (wgpu's shader compiler) parses and validates the renderer's WGSL with no adapter.
#[test]
fn render_shader_validates() {
    let module = naga::front::wgsl::parse_str(bevy_avbd::render::gpu::SHADER).expect("WGSL parses");
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .expect("WGSL validates");
    for entry in ["vs_shadow", "vs_main", "fs_main"] {
        assert!(
            module.entry_points.iter().any(|e| e.name == entry),
            "missing entry point {entry}"
        );
    }
}

/// The camera frames a box: its corners project inside the picture, its centre near the
/// middle; `project` puts the target at the centre pixel.
#[test]
fn framing_keeps_the_box_in_the_picture() {
    let (lo, hi) = (Vec3::new(-3.0, 0.0, -1.0), Vec3::new(5.0, 2.0, 1.0));
    let cam = Camera::framing((lo, hi), 480.0 / 300.0);
    for i in 0..8 {
        let c = Vec3::new(
            if i & 1 == 0 { lo.x } else { hi.x },
            if i & 2 == 0 { lo.y } else { hi.y },
            if i & 4 == 0 { lo.z } else { hi.z },
        );
        let p = cam.project(c, 480, 300).unwrap();
        assert!(
            (0.0..480.0).contains(&p.x) && (0.0..300.0).contains(&p.y),
            "{c} → {p}"
        );
    }
    let t = cam.project(cam.target, 480, 300).unwrap();
    assert!(
        (t.x - 240.0).abs() < 1e-3 && (t.y - 150.0).abs() < 1e-3,
        "{t}"
    );
}
