//! Independent references that tests and the scenes' metrics compare the engine with;
//! never part of a frame:
//!
//! - [`newton`]: Newton's method in f64 on a solid's static equilibrium or one
//!   implicit-Euler step ([`NewtonProblem`]);
//! - [`intersect`]: exact tests of whether surfaces intersect (the `intersections` metric).

pub mod intersect;
pub mod newton;

pub use newton::{NewtonProblem, NewtonSolution};
