//! Coulomb friction against analytic solutions.
mod common;
use bevy_avbd::SolverConfig;
use common::*;

/// tan θ = 0.5, μ = 0.55 > tan θ: static friction holds the box (< 1 mm over 2 s).
#[test]
fn box_on_slope_sticks_when_mu_exceeds_tan_theta() {
    let s = run("slope", &[("mu", 0.55)], SolverConfig::default(), 120);
    let d = metric(&s, "slide_distance").abs();
    assert!(d < 1e-3, "slid {d} m");
}

/// μ = 0.40 < tan θ: the box slides with a = g (sin θ − μ cos θ) within 3%.
#[test]
fn box_on_slope_slides_with_analytic_acceleration() {
    let s = run("slope", &[("mu", 0.40)], SolverConfig::default(), 120);
    let a = metric(&s, "acceleration");
    let expected = metric(&s, "analytic_acceleration");
    assert!((expected - 0.8774).abs() < 1e-3, "analytic {expected}");
    assert!(
        (a - expected).abs() / expected < 0.03,
        "a = {a}, expected {expected}"
    );
}

/// A box launched at 10 m/s stops after v0²/(2 μ g) within 3%, for three μ.
/// (Implicit Euler's own bias is −v0 h/2 ≈ 8 cm, under 1.3% of the shortest distance.)
#[test]
fn sliding_box_stops_at_analytic_distance() {
    for mu in [0.2, 0.5, 0.8] {
        let frames = (10.0 / (mu * 9.81) * 60.0) as u32 + 60;
        let s = run(
            "slide",
            &[("mu", mu), ("v0", 10.0)],
            SolverConfig::default(),
            frames,
        );
        let d = metric(&s, "stop_distance");
        let expected = metric(&s, "analytic_stop_distance");
        assert!(
            (d - expected).abs() / expected < 0.03,
            "μ {mu}: stopped after {d} m, expected {expected}"
        );
        assert!(
            metric(&s, "final_speed").abs() < 1e-2,
            "μ {mu}: still moving"
        );
    }
}
