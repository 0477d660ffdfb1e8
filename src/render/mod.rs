//! Headless pictures of a world: `avbd render` and the README's images.
//!
//! Every rigid collider's triangulated surface and every deformable's boundary (the
//! triangles [`crate::export`] writes as OBJ) are drawn with wgpu into an offscreen
//! texture and read back: Lambert shading with per-body colours (static bodies grey,
//! dynamic bodies eight hues, touching bodies apart, deformables brighter colours of
//! their own),
//! half-spaces as a checker board fading into the background, one directional light with
//! a shadow map, 4× MSAA. The camera frames the bounding box of the bodies (half-spaces
//! excluded) from a fixed 3/4 view, or looks where it is told; its matrices are public
//! ([`Camera::project`]) so a test can find a body in the picture.
//!
//! - [`snapshot`]: a frame's geometry (triangles, normals, colours, bounds);
//! - [`camera`]: the camera and the light;
//! - [`gpu`]: the device, the two passes and the readback ([`Renderer`]);
//! - [`encode`]: [`Image`], PNG and GIF bytes.

pub mod camera;
pub mod encode;
mod error;
pub mod gpu;
pub mod snapshot;

use std::path::Path;

use glam::Vec3;

pub use camera::Camera;
pub use encode::{Image, gif_bytes};
pub use error::RenderError;
pub use gpu::Renderer;
pub use snapshot::{Palette, Snapshot, color_of};

use crate::scenes::Scene;

/// What file a path asks for, by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Png,
    Gif,
}

impl Format {
    pub fn of_path(path: &Path) -> Result<Format, RenderError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("png") => Ok(Format::Png),
            Some("gif") => Ok(Format::Gif),
            _ => Err(RenderError::BadOutput(path.display().to_string())),
        }
    }
}

/// Parses `WxH` (each side in 16..=8192).
pub fn parse_size(s: &str) -> Result<(u32, u32), RenderError> {
    let bad = || RenderError::BadSize(s.to_string());
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (16..=8192).contains(n))
            .ok_or_else(bad)
    };
    Ok((side(w)?, side(h)?))
}

/// Parses `eye_x,eye_y,eye_z,target_x,target_y,target_z`.
pub fn parse_camera(s: &str) -> Result<(Vec3, Vec3), RenderError> {
    let bad = || RenderError::BadCamera(s.to_string());
    let v: Vec<f32> = s
        .split(',')
        .map(|x| x.trim().parse::<f32>().ok().filter(|x| x.is_finite()))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if v.len() != 6 {
        return Err(bad());
    }
    let (eye, target) = (Vec3::new(v[0], v[1], v[2]), Vec3::new(v[3], v[4], v[5]));
    if (eye - target).length() < 1e-6 {
        return Err(bad());
    }
    Ok((eye, target))
}

/// Size and camera of a picture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenderOptions {
    pub width: u32,
    pub height: u32,
    /// `(eye, target)`; `None` frames the bodies automatically.
    pub camera: Option<(Vec3, Vec3)>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            width: 480,
            height: 300,
            camera: None,
        }
    }
}

/// The box that frames `snaps` together: the union of their bounds (a unit box at the
/// origin for a world with no bounded surface).
pub fn framed_bounds(snaps: &[Snapshot]) -> (Vec3, Vec3) {
    snaps
        .iter()
        .filter_map(|s| s.bounds)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
        .unwrap_or((Vec3::splat(-0.5), Vec3::splat(0.5)))
}

/// The camera of a picture of `snaps` (one for a still, every frame for an animation,
/// so the view does not move while it plays).
pub fn camera_for(snaps: &[Snapshot], options: &RenderOptions) -> Camera {
    let aspect = options.width as f32 / options.height as f32;
    match options.camera {
        Some((eye, target)) => Camera::look_at(eye, target, aspect),
        None => Camera::framing(framed_bounds(snaps), aspect),
    }
}

/// Renders the world as it is now; returns the picture and the camera it used.
pub fn render_world(
    renderer: &Renderer,
    world: &crate::PhysicsWorld,
    options: &RenderOptions,
) -> Result<(Image, Camera), RenderError> {
    let snap = Snapshot::of_world(world);
    let snaps = std::slice::from_ref(&snap);
    let camera = camera_for(snaps, options);
    let image = renderer.render(
        &snap,
        &camera,
        framed_bounds(snaps),
        options.width,
        options.height,
    )?;
    Ok((image, camera))
}

/// What [`render_scene`] wrote.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub format: Format,
    /// Pictures in the file (1 for a PNG).
    pub images: usize,
    pub bytes: usize,
    pub camera: Camera,
}

/// Runs `frames` frames of `scene` and writes `path`: a PNG of the last frame, or a GIF
/// of the start and every `every`-th frame (the last one always included), played at
/// the simulation's speed.
pub fn render_scene(
    renderer: &Renderer,
    scene: &mut Scene,
    frames: u32,
    every: u32,
    options: &RenderOptions,
    path: &Path,
) -> Result<Rendered, RenderError> {
    let format = Format::of_path(path)?;
    if every == 0 {
        return Err(RenderError::BadOption("--every must be at least 1".into()));
    }
    // The colours are chosen on the first picture and kept.
    let mut snaps: Vec<Snapshot> = Vec::new();
    let take = |world: &crate::PhysicsWorld, snaps: &mut Vec<Snapshot>| {
        let palette = snaps.first().map(Snapshot::palette);
        snaps.push(Snapshot::with_palette(world, palette.as_ref()));
    };
    if format == Format::Gif {
        take(&scene.world, &mut snaps);
    }
    for f in 1..=frames {
        scene.step()?;
        if format == Format::Gif && (f % every == 0 || f == frames) {
            take(&scene.world, &mut snaps);
        }
    }
    if format == Format::Png {
        take(&scene.world, &mut snaps);
    }
    let camera = camera_for(&snaps, options);
    let framed = framed_bounds(&snaps);
    let images = snaps
        .iter()
        .map(|s| renderer.render(s, &camera, framed, options.width, options.height))
        .collect::<Result<Vec<_>, _>>()?;
    let bytes = match format {
        Format::Png => images[0].to_png()?,
        Format::Gif => {
            let delay = (every as f32 * scene.world.config.dt * 100.0).round();
            gif_bytes(&images, delay.clamp(2.0, 65535.0) as u16)?
        }
    };
    encode::write_file(path, &bytes)?;
    Ok(Rendered {
        format,
        images: images.len(),
        bytes: bytes.len(),
        camera,
    })
}
