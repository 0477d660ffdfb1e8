//! The camera (a perspective look-at, its matrices public so tests can project a body into
//! the picture) and the light (a directional light whose orthographic shadow map covers
//! the scene).

use glam::camera::rh::{proj::directx, view::look_at_mat4};
use glam::{Mat4, Vec2, Vec3, Vec4Swizzles};

/// From the target towards the eye in the automatic framing: a 3/4 view from the front
/// (+z), a little to the right (+x) and above (about 22° of elevation).
const VIEW_FROM: Vec3 = Vec3::new(0.5, 0.45, 1.0);
/// Towards the light: above, from the front-left, so shadows fall behind and to the right.
pub(crate) const TO_LIGHT: Vec3 = Vec3::new(-0.45, 1.0, 0.5);
/// Vertical field of view.
const FOV_Y: f32 = 35.0 * std::f32::consts::PI / 180.0;
/// Share of the picture the framed box may fill (the rest is margin).
const FILL: f32 = 0.86;

/// A perspective camera. Depth is reversed with an infinite far plane, so a huge ground
/// plane and a small body share the depth buffer without fighting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub eye: Vec3,
    pub target: Vec3,
    /// Vertical field of view (rad).
    pub fov_y: f32,
    /// Width / height of the picture.
    pub aspect: f32,
    pub near: f32,
}

fn up_for(dir: Vec3) -> Vec3 {
    if dir.normalize().cross(Vec3::Y).length_squared() < 1e-6 {
        Vec3::Z
    } else {
        Vec3::Y
    }
}

impl Camera {
    /// Looks from `eye` at `target`.
    pub fn look_at(eye: Vec3, target: Vec3, aspect: f32) -> Self {
        let d = (target - eye).length();
        Camera {
            eye,
            target,
            fov_y: FOV_Y,
            aspect,
            near: (d * 1e-3).max(1e-4),
        }
    }

    /// The fixed 3/4 view, at the distance where the box `(lo, hi)` fills the picture, its
    /// projection centred.
    pub fn framing(bounds: (Vec3, Vec3), aspect: f32) -> Self {
        let (lo, hi) = bounds;
        // A box too thin to frame (one flat cloth) is padded to 5 cm.
        let pad = (Vec3::splat(0.05) - (hi - lo)).max(Vec3::ZERO) * 0.5;
        let (lo, hi) = (lo - pad, hi + pad);
        let centre = (lo + hi) * 0.5;
        let back = VIEW_FROM.normalize();
        let right = up_for(back).cross(back).normalize();
        let up = back.cross(right);
        let ty = (FOV_Y * 0.5).tan() * FILL;
        let tx = ty * aspect;
        let corners: Vec<Vec3> = (0..8)
            .map(|i| {
                let c = Vec3::new(
                    if i & 1 == 0 { lo.x } else { hi.x },
                    if i & 2 == 0 { lo.y } else { hi.y },
                    if i & 4 == 0 { lo.z } else { hi.z },
                ) - centre;
                Vec3::new(c.dot(right), c.dot(up), c.dot(back))
            })
            .collect();
        // Distance so that every corner is inside, then re-centre on the corners'
        // projection; a few rounds converge.
        let (mut off, mut dist) = (Vec2::ZERO, 0.0f32);
        for _ in 0..6 {
            dist = corners
                .iter()
                .map(|c| c.z + ((c.x - off.x).abs() / tx).max((c.y - off.y).abs() / ty))
                .fold(0.0, f32::max);
            let (mut min, mut max) = (Vec2::splat(f32::MAX), Vec2::splat(f32::MIN));
            for c in &corners {
                let s = (c.truncate() - off) / (dist - c.z);
                min = min.min(s);
                max = max.max(s);
            }
            off += (min + max) * 0.5 * dist;
        }
        let target = centre + right * off.x + up * off.y;
        Self::look_at(target + back * dist, target, aspect)
    }

    pub fn view(&self) -> Mat4 {
        look_at_mat4(self.eye, self.target, up_for(self.target - self.eye))
    }

    /// Reversed depth (1 at the near plane, 0 at infinity), in wgpu's (WebGPU's) clip space.
    pub fn projection(&self) -> Mat4 {
        directx::perspective_infinite_reverse(self.fov_y, self.aspect, self.near)
    }

    pub fn view_projection(&self) -> Mat4 {
        self.projection() * self.view()
    }

    /// Where `p` lands in a `width` × `height` picture, in pixels from the top-left corner
    /// (pixel `(i, j)` covers `[i, i+1) × [j, j+1)`); `None` behind the camera.
    pub fn project(&self, p: Vec3, width: u32, height: u32) -> Option<Vec2> {
        let c = self.view_projection() * p.extend(1.0);
        if c.w <= 0.0 {
            return None;
        }
        let ndc = c.xy() / c.w;
        Some(Vec2::new(
            (ndc.x + 1.0) * 0.5 * width as f32,
            (1.0 - ndc.y) * 0.5 * height as f32,
        ))
    }
}

/// The light's view-projection: orthographic along the light, covering a sphere of
/// `radius` about `centre` (what casts and receives shadows), depth 0..1.
pub(crate) fn light_view_projection(centre: Vec3, radius: f32) -> Mat4 {
    let dir = TO_LIGHT.normalize();
    let view = look_at_mat4(centre + dir * 2.0 * radius, centre, up_for(dir));
    directx::orthographic(-radius, radius, -radius, radius, 0.0, 4.0 * radius) * view
}
