//! Reference solutions the scene metrics compare against.

/// Static equilibrium of a planar chain of point masses joined by springs, with both end
/// points fixed, under gravity `g` (pointing to −y). Solved in f64 by Newton's method on
/// the total potential energy with a backtracking line search.
///
/// `ends` are the fixed end points, `masses` the free points' masses, `springs` the
/// (stiffness, rest length) of the `masses.len() + 1` springs in order. Returns the
/// equilibrium positions of the free points.
pub fn static_spring_chain(
    ends: [[f64; 2]; 2],
    masses: &[f64],
    springs: &[(f64, f64)],
    g: f64,
) -> Vec<[f64; 2]> {
    let n = masses.len();
    assert_eq!(springs.len(), n + 1, "one spring more than free masses");
    // Initial guess: evenly spaced on the straight line between the ends.
    let mut x: Vec<f64> = (0..n)
        .flat_map(|i| {
            let t = (i + 1) as f64 / (n + 1) as f64;
            [
                ends[0][0] + t * (ends[1][0] - ends[0][0]),
                ends[0][1] + t * (ends[1][1] - ends[0][1]),
            ]
        })
        .collect();
    let point = |x: &[f64], i: isize| -> [f64; 2] {
        if i < 0 {
            ends[0]
        } else if i as usize >= n {
            ends[1]
        } else {
            [x[2 * i as usize], x[2 * i as usize + 1]]
        }
    };
    let energy = |x: &[f64]| -> f64 {
        let mut e = 0.0;
        for (s, &(k, l)) in springs.iter().enumerate() {
            let (a, b) = (point(x, s as isize - 1), point(x, s as isize));
            let d = ((b[0] - a[0]).powi(2) + (b[1] - a[1]).powi(2)).sqrt();
            e += 0.5 * k * (d - l).powi(2);
        }
        for i in 0..n {
            e += masses[i] * g * x[2 * i + 1];
        }
        e
    };
    let dim = 2 * n;
    for _ in 0..200 {
        // Gradient and (dense) Hessian.
        let mut grad = vec![0.0; dim];
        let mut hess = vec![0.0; dim * dim];
        for i in 0..n {
            grad[2 * i + 1] += masses[i] * g;
        }
        for (s, &(k, l)) in springs.iter().enumerate() {
            let (ia, ib) = (s as isize - 1, s as isize);
            let (a, b) = (point(&x, ia), point(&x, ib));
            let dv = [b[0] - a[0], b[1] - a[1]];
            let d = (dv[0] * dv[0] + dv[1] * dv[1]).sqrt();
            let u = [dv[0] / d, dv[1] / d];
            let f = k * (d - l);
            // Block ∂²E/∂b² = k u uᵀ + f/d (I − u uᵀ) (clamped to stay positive).
            let mut blk = [[0.0; 2]; 2];
            for r in 0..2 {
                for c in 0..2 {
                    let id = if r == c { 1.0 } else { 0.0 };
                    blk[r][c] = k * u[r] * u[c] + (f / d).max(0.0) * (id - u[r] * u[c]);
                }
            }
            let idx = |p: isize| {
                if p >= 0 && (p as usize) < n {
                    Some(p as usize)
                } else {
                    None
                }
            };
            for (p, sign) in [(ia, -1.0), (ib, 1.0)] {
                if let Some(p) = idx(p) {
                    grad[2 * p] += sign * f * u[0];
                    grad[2 * p + 1] += sign * f * u[1];
                }
            }
            for (p, sp) in [(ia, -1.0), (ib, 1.0)] {
                for (q, sq) in [(ia, -1.0), (ib, 1.0)] {
                    if let (Some(p), Some(q)) = (idx(p), idx(q)) {
                        for r in 0..2 {
                            for c in 0..2 {
                                hess[(2 * p + r) * dim + 2 * q + c] += sp * sq * blk[r][c];
                            }
                        }
                    }
                }
            }
        }
        let gnorm = grad.iter().map(|v| v * v).sum::<f64>().sqrt();
        if gnorm < 1e-10 {
            break;
        }
        let step = solve_dense(&mut hess, &grad, dim);
        let e0 = energy(&x);
        let mut t = 1.0;
        loop {
            let trial: Vec<f64> = x.iter().zip(&step).map(|(xi, si)| xi - t * si).collect();
            if energy(&trial) <= e0 || t < 1e-8 {
                x = trial;
                break;
            }
            t *= 0.5;
        }
    }
    (0..n).map(|i| [x[2 * i], x[2 * i + 1]]).collect()
}

/// Gaussian elimination with partial pivoting (small dense systems only).
fn solve_dense(a: &mut [f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut b = b.to_vec();
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap();
        if piv != col {
            for c in 0..n {
                a.swap(col * n + c, piv * n + c);
            }
            b.swap(col, piv);
        }
        let d = a[col * n + col];
        for r in (col + 1)..n {
            let f = a[r * n + col] / d;
            for c in col..n {
                a[r * n + c] -= f * a[col * n + c];
            }
            b[r] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = ((r + 1)..n).map(|c| a[r * n + c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r * n + r];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vertical_chain_matches_hand_solution() {
        // Two 1 kg masses hanging below a fixed point... modelled with a far, weak anchor
        // below so the chain is fixed at both ends: the top spring carries 2mg + T.
        let g = 9.81;
        let (k1, k2, k3) = (1000.0, 500.0, 1e-9);
        let x = static_spring_chain(
            [[0.0, 0.0], [0.0, -10.0]],
            &[1.0, 1.0],
            &[(k1, 1.0), (k2, 1.0), (k3, 1.0)],
            g,
        );
        let e1 = 2.0 * g / k1;
        let e2 = g / k2;
        assert!((x[0][1] - (-1.0 - e1)).abs() < 1e-6, "{x:?}");
        assert!((x[1][1] - (-2.0 - e1 - e2)).abs() < 1e-6, "{x:?}");
    }
}
