//! The coarse level's dense algebra: the operator's lower triangle and its Cholesky
//! factorisation and solve, in f64.

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

/// A dense symmetric positive definite system, factored in place (lower Cholesky, f64).
#[derive(Clone, Debug, Default)]
pub(super) struct Dense {
    pub(super) n: usize,
    /// Row-major n × n; the lower triangle is the matrix, then its factor L.
    pub(super) a: Vec<f64>,
    pub(super) ok: bool,
    /// The assembly's partial sums, one per chunk of elements: the Gauss–Newton terms,
    /// then the tets' second-order terms (2 n² each).
    pub(super) partial: Vec<Vec<f64>>,
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
            let d = row_j[j] + shift - row_j[..j].iter().map(|x| x * x).sum::<f64>();
            if !(d > 0.0 && d.is_finite()) {
                self.ok = false;
                return false;
            }
            let d = d.sqrt();
            row_j[j] = d;
            let lj = &row_j[..j];
            for row_i in rest.chunks_exact_mut(n) {
                let s = row_i[j] - row_i[..j].iter().zip(lj).map(|(x, y)| x * y).sum::<f64>();
                row_i[j] = s / d;
            }
        }
        self.ok = true;
        true
    }

    /// Solves `A x = b` in place with the factor.
    pub(super) fn solve(&self, b: &mut [f64]) {
        let (n, a) = (self.n, &self.a);
        for i in 0..n {
            let row = &a[i * n..i * n + i];
            let s = b[i] - row.iter().zip(&b[..i]).map(|(x, y)| x * y).sum::<f64>();
            b[i] = s / a[i * n + i];
        }
        for i in (0..n).rev() {
            let mut s = b[i];
            for k in i + 1..n {
                s -= a[k * n + i] * b[k];
            }
            b[i] = s / a[i * n + i];
        }
    }
}
