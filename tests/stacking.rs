//! Stacking acceptance: stacks and pyramids stand still under the default budget.
mod common;
use bevy_avbd::SolverConfig;
use common::*;

/// 10 unit boxes (1000 kg each), 10 s at 60 Hz: no box moves more than 1 cm from its start.
#[test]
fn stack_of_ten_holds_within_one_centimetre() {
    let s = run("stack", &[("boxes", 10.0)], SolverConfig::default(), 600);
    let drift = metric(&s, "max_drift");
    assert!(drift < 0.01, "max_drift {drift} m");
    // Resting contacts: penetration stays a small fraction of the 1 m box.
    assert!(metric(&s, "max_penetration") < 0.005);
}

/// Pyramid of base 20 (210 boxes), 10 s: no box moves more than 2 cm.
#[test]
fn pyramid_of_base_twenty_holds_within_two_centimetres() {
    let s = run("pyramid", &[("base", 20.0)], SolverConfig::default(), 600);
    let drift = metric(&s, "max_drift");
    assert!(drift < 0.02, "max_drift {drift} m");
}

/// The masonry arch (convex-hull voussoirs, μ = 0.6) stands: its crown settles by closing
/// the 1 mm joints and nothing slides away.
#[test]
fn masonry_arch_stands() {
    let s = run("arch", &[], SolverConfig::default(), 300);
    let drift = metric(&s, "max_drift");
    assert!(drift < 0.05, "max_drift {drift} m");
}
