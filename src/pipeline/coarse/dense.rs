//! The coarse level's dense algebra: the operator's lower triangle and its Cholesky
//! factorisation and solve, in f64, and the block accumulator the element assembly sums
//! into.

use glam::DMat3;

/// Adds `m` to block (i, j) of the lower triangle (i ≥ j; for i == j the block itself is
/// symmetric and only its lower part is read).
#[inline]
pub(super) fn add_lower(a: &mut [f64], n: usize, i: usize, j: usize, m: &DMat3) {
    let (i, j, m) = if i >= j {
        (i, j, *m)
    } else {
        (j, i, m.transpose())
    };
    for r in 0..3 {
        for c in 0..3 {
            a[(3 * i + r) * n + 3 * j + c] += m.col(c)[r];
        }
    }
}

/// The lower block triangle of a symmetric operator over `nodes` nodes, each 3×3 block in
/// 9 adjacent numbers (block (i, j), i ≥ j, at i(i+1)/2 + j; column-major as `DMat3`).
/// The element assembly adds a few dozen blocks per element: here each is one short
/// contiguous run instead of three rows of the dense matrix, and the accumulator is a
/// quarter of the dense one's size. Each entry receives the same additions in the same
/// order as with [`add_lower`], so the operator's bits are those of a dense assembly.
#[derive(Clone, Debug, Default)]
pub(super) struct Blocks {
    nodes: usize,
    blocks: Vec<[f64; 9]>,
}

impl Blocks {
    /// Zero blocks over `nodes` nodes (the storage is kept).
    pub(super) fn reset(&mut self, nodes: usize) {
        self.nodes = nodes;
        self.blocks.clear();
        self.blocks.resize(nodes * (nodes + 1) / 2, [0.0; 9]);
    }

    /// Adds `m` to block (i, j) of the lower triangle (`i ≥ j`), as [`add_lower`] does to
    /// a dense matrix.
    #[inline]
    pub(super) fn add_lower(&mut self, i: u32, j: u32, m: &DMat3) {
        let (i, j) = (i as usize, j as usize);
        debug_assert!(i >= j, "block ({i}, {j}) is above the diagonal");
        let b = &mut self.blocks[i * (i + 1) / 2 + j];
        for (x, y) in b.iter_mut().zip(m.to_cols_array()) {
            *x += y;
        }
    }

    /// Adds the blocks to the dense row-major `a` (side `3 · nodes`).
    pub(super) fn add_to(&self, a: &mut [f64]) {
        let n = 3 * self.nodes;
        for i in 0..self.nodes {
            for j in 0..=i {
                let b = &self.blocks[i * (i + 1) / 2 + j];
                for r in 0..3 {
                    let row = &mut a[(3 * i + r) * n + 3 * j..][..3];
                    for (c, x) in row.iter_mut().enumerate() {
                        *x += b[3 * c + r];
                    }
                }
            }
        }
    }
}

/// `Σ aₖ bₖ` over eight running sums: the factorisation's and the solve's inner loop,
/// bound by the additions' latency when summed in one chain.
#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut s = [0.0f64; 8];
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            s[l] += x[l] * y[l];
        }
    }
    ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail
}

/// A dense symmetric positive definite system, factored in place (lower Cholesky, f64).
#[derive(Clone, Debug, Default)]
pub(super) struct Dense {
    pub(super) n: usize,
    /// Row-major n × n; the lower triangle is the matrix, then its factor L.
    pub(super) a: Vec<f64>,
    pub(super) ok: bool,
    /// The assembly's partial sums, one per chunk of elements: the Gauss–Newton terms,
    /// then the tets' second-order terms.
    pub(super) partial: Vec<(Blocks, Blocks)>,
    /// The Gauss–Newton operator, kept while the exact one is tried.
    pub(super) gauss_newton: Vec<f64>,
}

impl Dense {
    /// Cholesky factorisation; false (and unusable) if a pivot is not positive.
    pub(super) fn factor(&mut self) -> bool {
        let n = self.n;
        let a = &mut self.a;
        // A tiny relative shift keeps nodes that free vertices barely touch invertible.
        let trace: f64 = (0..n).map(|i| a[i * n + i]).sum();
        let shift = 1e-12 * trace / n.max(1) as f64;
        for j in 0..n {
            let (row_j, rest) = a.split_at_mut((j + 1) * n);
            let row_j = &mut row_j[j * n..];
            let d = row_j[j] + shift - dot(&row_j[..j], &row_j[..j]);
            if !(d > 0.0 && d.is_finite()) {
                self.ok = false;
                return false;
            }
            let d = d.sqrt();
            row_j[j] = d;
            let lj = &row_j[..j];
            for row_i in rest.chunks_exact_mut(n) {
                row_i[j] = (row_i[j] - dot(&row_i[..j], lj)) / d;
            }
        }
        self.ok = true;
        true
    }

    /// Solves `A x = b` in place with the factor: `L y = b` row by row, then `Lᵀ x = y`
    /// column by column (each column of `Lᵀ` is a row of `L`, read in order).
    pub(super) fn solve(&self, b: &mut [f64]) {
        let (n, a) = (self.n, &self.a);
        for i in 0..n {
            b[i] = (b[i] - dot(&a[i * n..i * n + i], &b[..i])) / a[i * n + i];
        }
        for i in (0..n).rev() {
            let x = b[i] / a[i * n + i];
            b[i] = x;
            for (bk, l) in b[..i].iter_mut().zip(&a[i * n..i * n + i]) {
                *bk -= l * x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::DVec3;

    /// A deterministic pseudo-random number in [-1, 1).
    fn rand(state: &mut u64) -> f64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    #[test]
    fn blocks_sum_to_the_bits_of_a_dense_assembly() {
        let nodes = 13;
        let n = 3 * nodes;
        let (mut dense, mut blocks) = (vec![0.0; n * n], Blocks::default());
        blocks.reset(nodes);
        let mut s = 7;
        for _ in 0..500 {
            let (i, j) = ((rand(&mut s) + 1.0) * 6.5, (rand(&mut s) + 1.0) * 6.5);
            let cols = [0; 3].map(|_| DVec3::new(rand(&mut s), rand(&mut s), rand(&mut s)));
            let m = DMat3::from_cols(cols[0], cols[1], cols[2]) * 1e3;
            let (i, j) = (i as usize, j as usize);
            add_lower(&mut dense, n, i, j, &m);
            // (`add_lower` of the dense matrix transposes a block above the diagonal.)
            let (i, j, m) = if i >= j {
                (i, j, m)
            } else {
                (j, i, m.transpose())
            };
            blocks.add_lower(i as u32, j as u32, &m);
        }
        let mut from_blocks = vec![0.0; n * n];
        blocks.add_to(&mut from_blocks);
        for r in 0..n {
            for c in 0..=r - r % 3 + 2 {
                let (d, b) = (dense[r * n + c], from_blocks[r * n + c]);
                assert_eq!(d.to_bits(), b.to_bits(), "entry ({r}, {c}): {d} and {b}");
            }
        }
    }

    #[test]
    fn the_factor_solves_an_ill_conditioned_system_to_its_residual() {
        // A = M Mᵀ + diag, entries spread over eight decades (the coarse operators mix
        // stiffnesses of 1e5 N/m and more with inertias of a few N/m).
        for n in [1, 5, 8, 9, 30, 192] {
            let mut s = 11 + n as u64;
            let m: Vec<f64> = (0..n * n).map(|_| rand(&mut s)).collect();
            let scale: Vec<f64> = (0..n).map(|i| 10f64.powf(4.0 * (i % 3) as f64)).collect();
            let mut a = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    let mm: f64 = (0..n).map(|k| m[i * n + k] * m[j * n + k]).sum();
                    a[i * n + j] = scale[i].sqrt() * scale[j].sqrt() * mm
                        + if i == j { scale[i] } else { 0.0 };
                }
            }
            let x: Vec<f64> = (0..n).map(|_| rand(&mut s)).collect();
            let b: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| a[i * n + j] * x[j]).sum())
                .collect();
            let mut sys = Dense {
                n,
                a: a.clone(),
                ..Default::default()
            };
            assert!(sys.factor(), "n = {n}");
            let mut y = b.clone();
            sys.solve(&mut y);
            // The factor is of A + σ I, σ = 1e-12 tr(A)/n (see `factor`); backward stable:
            // the residual of that system is at the rounding of |A| |y|.
            let sigma = 1e-12 * (0..n).map(|i| a[i * n + i]).sum::<f64>() / n as f64;
            for i in 0..n {
                let r: f64 = b[i] - sigma * y[i] - (0..n).map(|j| a[i * n + j] * y[j]).sum::<f64>();
                let size: f64 = (0..n).map(|j| (a[i * n + j] * y[j]).abs()).sum();
                assert!(
                    r.abs() <= 1e-12 * size.max(f64::MIN_POSITIVE),
                    "n = {n}, row {i}: residual {r} of {size}"
                );
            }
        }
    }

    #[test]
    fn an_indefinite_matrix_is_refused() {
        let mut sys = Dense {
            n: 2,
            a: vec![1.0, 0.0, 2.0, 1.0],
            ..Default::default()
        };
        assert!(!sys.factor());
        assert!(!sys.ok);
    }
}
