//! Materials of deformable bodies, in SI units, and the flat record the solver reads.

use bytemuck::{Pod, Zeroable};

use crate::error::PhysicsError;

/// An elastic solid (tetrahedral mesh): Stable Neo-Hookean (Smith, de Goes, Kim 2018, in
/// the simplified form without the log term that VBD codes use), invertible.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolidMaterial {
    /// Young's modulus E (Pa). Rubber 1e6–1e7, soft tissue 1e4–1e5.
    pub youngs: f32,
    /// Poisson ratio ν, in (−1, 0.5): 0.5 is incompressible.
    pub poisson: f32,
    /// Mass density ρ (kg/m³).
    pub density: f32,
    /// Rayleigh-style damping time τ (s): a viscous stress `2 τ μ Ė` on the rate of the
    /// Green strain, which is zero for rigid motions (translations and rotations of any
    /// size are not damped). 0 disables it; 1e-3–1e-2 damps the fast modes.
    pub damping: f32,
    /// Static and dynamic friction coefficients of the surface (a pair takes the
    /// geometric mean of its two sides', as rigid colliders do).
    pub friction: f32,
    pub dynamic_friction: f32,
}

impl Default for SolidMaterial {
    /// Rubber-like: E = 1 MPa, ν = 0.3, ρ = 1000 kg/m³, no damping.
    fn default() -> Self {
        Self {
            youngs: 1e6,
            poisson: 0.3,
            density: 1000.0,
            damping: 0.0,
            friction: 0.5,
            dynamic_friction: 0.5,
        }
    }
}

/// A cloth or thin shell (triangle mesh): a 2-D Stable Neo-Hookean membrane in plane stress
/// and a dihedral bending energy with its own stiffness.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClothMaterial {
    /// Young's modulus E of the fabric (Pa).
    pub youngs: f32,
    /// Poisson ratio ν, in (−1, 0.5).
    pub poisson: f32,
    /// Thickness t (m): the membrane moduli are E·t (N/m).
    pub thickness: f32,
    /// Mass density ρ (kg/m³): the area density is ρ·t (kg/m²).
    pub density: f32,
    /// Bending stiffness D (N·m) of the dihedral energy `½ D · 3|e|²/(A₁+A₂) · (θ − θ₀)²`
    /// per interior edge. `None` takes the plate value `E t³ / (12 (1 − ν²))`.
    pub bending: Option<f32>,
    /// Damping time τ (s) of the membrane, as for [`SolidMaterial::damping`].
    pub damping: f32,
    /// Static and dynamic friction coefficients, as for [`SolidMaterial::friction`].
    pub friction: f32,
    pub dynamic_friction: f32,
}

impl Default for ClothMaterial {
    /// Cotton-like: E = 10 MPa, ν = 0.3, 1 mm thick, ρ = 200 kg/m³ (0.2 kg/m²), plate
    /// bending, no damping.
    fn default() -> Self {
        Self {
            youngs: 1e7,
            poisson: 0.3,
            thickness: 1e-3,
            density: 200.0,
            bending: None,
            damping: 0.0,
            friction: 0.5,
            dynamic_friction: 0.5,
        }
    }
}

/// What the element kernels read of a material (one record per deformable body; shared by
/// the CPU and GPU backends).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct MaterialRecord {
    /// Shear modulus μ (Pa; N/m for a membrane).
    pub mu: f32,
    /// The Neo-Hookean volume modulus λ' = λ + μ (Lamé λ mapped as in Smith 2018, Eq. 13,
    /// so that the energy linearises to Lamé's λ and μ).
    pub lambda: f32,
    /// Rest volume ratio of the energy, `1 + μ/λ'`: the rest state is stress-free.
    pub alpha: f32,
    /// Viscosity η = τ μ (Pa·s; N·s/m for a membrane).
    pub viscosity: f32,
    /// Bending stiffness D (N·m); 0 for solids.
    pub bending: f32,
    /// Density: kg/m³ for solids, kg/m² (area density) for cloth.
    pub density: f32,
    /// Static and dynamic friction coefficients of the surface.
    pub friction: [f32; 2],
}

fn bad(field: &'static str, reason: impl Into<String>) -> PhysicsError {
    PhysicsError::InvalidMaterial {
        field,
        reason: reason.into(),
    }
}

fn positive(field: &'static str, v: f32) -> Result<(), PhysicsError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(bad(field, format!("must be finite and > 0, got {v}")))
    }
}

fn poisson_ok(nu: f32) -> Result<(), PhysicsError> {
    if nu.is_finite() && nu > -1.0 && nu < 0.5 {
        Ok(())
    } else {
        Err(bad("poisson", format!("must lie in (−1, 0.5), got {nu}")))
    }
}

fn damping_ok(tau: f32) -> Result<(), PhysicsError> {
    if tau.is_finite() && tau >= 0.0 {
        Ok(())
    } else {
        Err(bad("damping", format!("must be finite and ≥ 0, got {tau}")))
    }
}

fn friction_ok(mu_s: f32, mu_d: f32) -> Result<(), PhysicsError> {
    for (field, mu) in [("friction", mu_s), ("dynamic_friction", mu_d)] {
        if !(mu.is_finite() && mu >= 0.0) {
            return Err(bad(field, format!("must be finite and ≥ 0, got {mu}")));
        }
    }
    Ok(())
}

/// What the element kernels and the contact rows read of a material.
struct Moduli {
    mu: f32,
    lame_lambda: f32,
    tau: f32,
    bending: f32,
    density: f32,
    friction: [f32; 2],
}

/// Neo-Hookean moduli from shear modulus and Lamé λ.
fn record(m: Moduli) -> MaterialRecord {
    let lambda = m.lame_lambda + m.mu;
    MaterialRecord {
        mu: m.mu,
        lambda,
        alpha: 1.0 + m.mu / lambda,
        viscosity: m.tau * m.mu,
        bending: m.bending,
        density: m.density,
        friction: m.friction,
    }
}

impl SolidMaterial {
    pub fn validate(&self) -> Result<(), PhysicsError> {
        positive("youngs", self.youngs)?;
        poisson_ok(self.poisson)?;
        positive("density", self.density)?;
        damping_ok(self.damping)?;
        friction_ok(self.friction, self.dynamic_friction)
    }

    /// Lamé parameters (μ, λ) in Pa.
    pub fn lame(&self) -> (f32, f32) {
        let (e, nu) = (self.youngs as f64, self.poisson as f64);
        let mu = e / (2.0 * (1.0 + nu));
        let lambda = e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
        (mu as f32, lambda as f32)
    }

    pub fn record(&self) -> MaterialRecord {
        let (mu, lame_lambda) = self.lame();
        record(Moduli {
            mu,
            lame_lambda,
            tau: self.damping,
            bending: 0.0,
            density: self.density,
            friction: [self.friction, self.dynamic_friction],
        })
    }
}

impl ClothMaterial {
    pub fn validate(&self) -> Result<(), PhysicsError> {
        positive("youngs", self.youngs)?;
        poisson_ok(self.poisson)?;
        positive("thickness", self.thickness)?;
        positive("density", self.density)?;
        if let Some(d) = self.bending
            && !(d.is_finite() && d >= 0.0)
        {
            return Err(bad("bending", format!("must be finite and ≥ 0, got {d}")));
        }
        damping_ok(self.damping)?;
        friction_ok(self.friction, self.dynamic_friction)
    }

    /// The bending stiffness D used (N·m).
    pub fn bending_stiffness(&self) -> f32 {
        self.bending.unwrap_or_else(|| {
            let (e, t, nu) = (self.youngs, self.thickness, self.poisson);
            e * t * t * t / (12.0 * (1.0 - nu * nu))
        })
    }

    /// Membrane moduli in plane stress, integrated over the thickness (N/m): μ = E t /
    /// (2(1 + ν)), λ = E t ν / (1 − ν²).
    pub fn membrane_lame(&self) -> (f32, f32) {
        let (et, nu) = ((self.youngs * self.thickness) as f64, self.poisson as f64);
        let mu = et / (2.0 * (1.0 + nu));
        let lambda = et * nu / (1.0 - nu * nu);
        (mu as f32, lambda as f32)
    }

    pub fn record(&self) -> MaterialRecord {
        let (mu, lame_lambda) = self.membrane_lame();
        record(Moduli {
            mu,
            lame_lambda,
            tau: self.damping,
            bending: self.bending_stiffness(),
            density: self.density * self.thickness,
            friction: [self.friction, self.dynamic_friction],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_state_is_stress_free_and_moduli_match_lame() {
        let m = SolidMaterial {
            youngs: 2e6,
            poisson: 0.35,
            ..Default::default()
        };
        let (mu, lambda) = m.lame();
        let r = m.record();
        assert_eq!(r.mu, mu);
        assert!((r.lambda - (lambda + mu)).abs() <= 1e-6 * r.lambda);
        // P(I) = μ I + λ'(1 − α) I = 0.
        assert!((r.mu + r.lambda * (1.0 - r.alpha)).abs() < 1e-6 * r.mu);
    }

    #[test]
    fn invalid_fields_are_named() {
        let bad = |m: SolidMaterial| match m.validate() {
            Err(PhysicsError::InvalidMaterial { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let d = SolidMaterial::default();
        assert_eq!(bad(SolidMaterial { youngs: 0.0, ..d }), "youngs");
        assert_eq!(
            bad(SolidMaterial {
                youngs: f32::NAN,
                ..d
            }),
            "youngs"
        );
        assert_eq!(bad(SolidMaterial { poisson: 0.5, ..d }), "poisson");
        assert_eq!(bad(SolidMaterial { poisson: -1.0, ..d }), "poisson");
        assert_eq!(bad(SolidMaterial { density: -1.0, ..d }), "density");
        assert_eq!(bad(SolidMaterial { damping: -1.0, ..d }), "damping");
        assert_eq!(
            bad(SolidMaterial {
                friction: -0.1,
                ..d
            }),
            "friction"
        );
        assert_eq!(
            bad(SolidMaterial {
                dynamic_friction: f32::NAN,
                ..d
            }),
            "dynamic_friction"
        );
    }
}
