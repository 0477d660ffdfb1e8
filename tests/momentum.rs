//! Momentum in free flight.
mod common;
use bevy_avbd::SolverConfig;
use common::*;

/// An anisotropic box spinning about a non-principal axis: the world-space inertia R I Rᵀ
/// and the angular-momentum form of the inertia term keep |ΔL|/|L| under 1% over 10 s
/// (a body-frame inertia drifts by tens of percent here).
#[test]
fn spinning_box_conserves_angular_momentum() {
    let s = run("spinning_box", &[], SolverConfig::default(), 600);
    let drift = metric(&s, "angular_momentum_drift");
    assert!(drift < 0.01, "angular momentum drift {drift}");
}

/// Two bodies colliding in free flight. Linear momentum is conserved exactly by every
/// converged step (contact forces are equal and opposite), so the error measures how far
/// the Gauss–Seidel sweep is from convergence: frictionless, 50 iterations reach 1e-5
/// relative; the default 10-iteration budget leaves 1e-2 (see README, known gaps).
#[test]
fn colliding_bodies_conserve_linear_momentum() {
    let s = run("free_collision", &[("mu", 0.0)], with_iterations(50), 120);
    let e = metric(&s, "momentum_error");
    assert!(e < 1e-5, "momentum error {e} at 50 iterations");
    let s = run("free_collision", &[], SolverConfig::default(), 120);
    let e = metric(&s, "momentum_error");
    assert!(e < 1e-2, "momentum error {e} at the default budget");
}
