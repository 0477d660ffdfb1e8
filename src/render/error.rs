//! Typed errors of the renderer: every failure is a value, never a panic.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum RenderError {
    #[error(transparent)]
    Scene(#[from] crate::scenes::SceneError),
    #[error(transparent)]
    Physics(#[from] crate::PhysicsError),
    #[error("bad image size `{0}`: expected WxH with each side in 16..=8192 (e.g. 480x300)")]
    BadSize(String),
    #[error("bad output `{0}`: the file name must end in .png or .gif")]
    BadOutput(String),
    #[error(
        "bad camera `{0}`: expected eye_x,eye_y,eye_z,target_x,target_y,target_z (6 finite numbers, eye ≠ target)"
    )]
    BadCamera(String),
    #[error("bad option: {0}")]
    BadOption(String),
    #[error(
        "no GPU adapter found: rendering needs a wgpu adapter (a GPU driver, or Mesa's lavapipe: \
         apt-get install mesa-vulkan-drivers libvulkan1; WGPU_BACKEND selects the backend)"
    )]
    NoAdapter,
    #[error("GPU device: {0}")]
    Device(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("encoding the image: {0}")]
    Encode(String),
}
