//! Pictures in memory and on disk: PNG (RGB, lossless) and animated GIF (one palette for
//! the whole animation, each frame stored as its changes from the previous one, so a
//! scene whose ground and sky do not move costs little per frame).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use super::RenderError;

/// An RGB picture, 8 bits per channel (sRGB), rows from the top.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl Image {
    /// The pixel at column `x`, row `y` (from the top).
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = (y as usize * self.width as usize + x as usize) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// PNG bytes of the picture.
    pub fn to_png(&self) -> Result<Vec<u8>, RenderError> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, self.width, self.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        let mut w = enc
            .write_header()
            .map_err(|e| RenderError::Encode(e.to_string()))?;
        w.write_image_data(&self.rgb)
            .map_err(|e| RenderError::Encode(e.to_string()))?;
        w.finish().map_err(|e| RenderError::Encode(e.to_string()))?;
        Ok(out)
    }
}

pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RenderError> {
    let io = |source| RenderError::Io {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(io)
}

/// Index 255 is kept for "unchanged since the previous frame" (transparent).
const KEEP: u8 = 255;

/// GIF bytes of an animation of equal-sized frames, `delay_cs` hundredths of a second
/// each, looping.
pub fn gif_bytes(frames: &[Image], delay_cs: u16) -> Result<Vec<u8>, RenderError> {
    let first = frames
        .first()
        .ok_or_else(|| RenderError::Encode("an animation needs a frame".into()))?;
    let (w, h) = (first.width, first.height);
    if frames.iter().any(|f| (f.width, f.height) != (w, h)) || w > 65535 || h > 65535 {
        return Err(RenderError::Encode("frames of different sizes".into()));
    }
    let enc_err = |e: gif::EncodingError| RenderError::Encode(e.to_string());
    // One palette of 255 colours learnt from up to 8 frames across the animation.
    let step = frames.len().div_ceil(8);
    let mut sample = Vec::new();
    for f in frames.iter().step_by(step) {
        for px in f.rgb.chunks_exact(3) {
            sample.extend_from_slice(&[px[0], px[1], px[2], 255]);
        }
    }
    let quant = color_quant::NeuQuant::new(10, 255, &sample);
    let mut palette = quant.color_map_rgb();
    palette.resize(256 * 3, 0);
    let mut cache: HashMap<[u8; 3], u8> = HashMap::new();
    let mut index = |px: &[u8]| -> u8 {
        let key = [px[0], px[1], px[2]];
        *cache
            .entry(key)
            .or_insert_with(|| quant.index_of(&[key[0], key[1], key[2], 255]) as u8)
    };
    let mut out = Vec::new();
    {
        let mut enc = gif::Encoder::new(&mut out, w as u16, h as u16, &palette).map_err(enc_err)?;
        enc.set_repeat(gif::Repeat::Infinite).map_err(enc_err)?;
        let mut prev: Option<Vec<u8>> = None;
        for f in frames {
            let cur: Vec<u8> = f.rgb.chunks_exact(3).map(&mut index).collect();
            let mut frame = gif::Frame {
                delay: delay_cs,
                dispose: gif::DisposalMethod::Keep,
                ..Default::default()
            };
            match &prev {
                None => {
                    frame.width = w as u16;
                    frame.height = h as u16;
                    frame.buffer = cur.clone().into();
                }
                Some(p) => {
                    // The rectangle of changed pixels; inside it, unchanged ones are
                    // transparent, so long runs compress to almost nothing.
                    let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
                    for y in 0..h {
                        for x in 0..w {
                            let i = (y * w + x) as usize;
                            if cur[i] != p[i] {
                                (x0, y0) = (x0.min(x), y0.min(y));
                                (x1, y1) = (x1.max(x + 1), y1.max(y + 1));
                            }
                        }
                    }
                    if x0 >= x1 {
                        (x0, y0, x1, y1) = (0, 0, 1, 1);
                    }
                    let mut buf = Vec::with_capacity(((x1 - x0) * (y1 - y0)) as usize);
                    for y in y0..y1 {
                        for x in x0..x1 {
                            let i = (y * w + x) as usize;
                            buf.push(if cur[i] == p[i] { KEEP } else { cur[i] });
                        }
                    }
                    frame.left = x0 as u16;
                    frame.top = y0 as u16;
                    frame.width = (x1 - x0) as u16;
                    frame.height = (y1 - y0) as u16;
                    frame.transparent = Some(KEEP);
                    frame.buffer = buf.into();
                }
            }
            enc.write_frame(&frame).map_err(enc_err)?;
            prev = Some(cur);
        }
    }
    Ok(out)
}
