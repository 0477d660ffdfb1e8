//! Continuous collision detection for the penetration-free contact of deformable bodies
//! (Zheng, Luo, Li 2025, "Robust and Efficient Penetration-Free Elastodynamics without
//! Barriers"): after each outer iteration the certified configuration `X` moves toward
//! the solver iterate `x̂` by the largest step α that CCD certifies, and the pairs that CCD
//! reports become contact rows, linearised at `X` with the distances and gradients of this
//! module.
//!
//! * [`distance`](mod@distance): point–triangle and edge–edge squared distances with the
//!   closest feature pair ([`PointTriangleDistanceType`], [`EdgeEdgeDistanceType`]) and
//!   the gradients of `d²` and `d` with respect to the 12 coordinates ([`Closest`]).
//!
//! Everything is plain f32 arithmetic (`+ − × ÷`, `sqrt`, `min`/`max`), with no
//! allocation, no recursion and no loops but over fixed candidates, so the same code
//! ports to WGSL.

// `!(x > y)` is deliberate throughout: a NaN must fail every test that certifies something.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod distance;

pub use distance::{
    Closest, EdgeEdgeClosest, EdgeEdgeDistanceType, PointTriangleClosest,
    PointTriangleDistanceType, edge_edge_closest, edge_edge_distance_gradient,
    edge_edge_distance_squared, edge_edge_distance_squared_gradient, edge_edge_distance_type,
    point_triangle_closest, point_triangle_distance_gradient, point_triangle_distance_squared,
    point_triangle_distance_squared_gradient, point_triangle_distance_type,
};
