//! The coarse level's dense algebra: the operator's lower triangle and its Cholesky
//! factorisation and solve, in f64, and the block accumulator the element assembly sums
//! into.

use glam::DMat3;

use super::pairs::Block;

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
/// The restriction `Pᵀ (H P)` fills it a node row at a time: each block is one short
/// contiguous run instead of three rows of the dense matrix, and it is a quarter of the
/// dense matrix's size.
#[derive(Clone, Debug, Default)]
pub(super) struct Blocks {
    nodes: usize,
    blocks: Vec<Block>,
}

impl Blocks {
    /// Zero blocks over `nodes` nodes (the storage is kept).
    pub(super) fn reset(&mut self, nodes: usize) {
        self.nodes = nodes;
        self.blocks.clear();
        self.blocks.resize(nodes * (nodes + 1) / 2, [0.0; 9]);
    }

    /// Whether it has no blocks (reset over no nodes).
    pub(super) fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Adds `m` to block (i, j) of the lower triangle (`i ≥ j`).
    #[inline]
    pub(super) fn add_lower(&mut self, i: u32, j: u32, m: &DMat3) {
        let (i, j) = (i as usize, j as usize);
        debug_assert!(i >= j, "block ({i}, {j}) is above the diagonal");
        let b = &mut self.blocks[i * (i + 1) / 2 + j];
        for (x, y) in b.iter_mut().zip(m.to_cols_array()) {
            *x += y;
        }
    }

    /// Adds `other`'s blocks (over as many nodes, or none).
    pub(super) fn add(&mut self, other: &Blocks) {
        for (b, o) in self.blocks.iter_mut().zip(&other.blocks) {
            for t in 0..9 {
                b[t] += o[t];
            }
        }
    }

    /// Each node row's blocks: row `i` holds `(i, 0..=i)`.
    pub(super) fn rows_mut(&mut self) -> Vec<&mut [Block]> {
        let mut rows = Vec::with_capacity(self.nodes);
        let mut rest = &mut self.blocks[..];
        for i in 0..self.nodes {
            let (row, tail) = std::mem::take(&mut rest).split_at_mut(i + 1);
            rows.push(row);
            rest = tail;
        }
        rows
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

/// [`dot`] of `a[..len]` and `b[..len]` where both are zero before `from`: the terms from
/// `from` rounded down to a multiple of 8, so each one lands in the running sum it would
/// over the whole length. The skipped products are zeros, and a running sum (from +0,
/// never −0) does not change when a zero is added: the bits of the whole-length [`dot`].
#[inline]
fn dot_from(a: &[f64], b: &[f64], from: usize, len: usize) -> f64 {
    let k = (from & !7).min(len);
    dot(&a[k..len], &b[k..len])
}

/// A dense symmetric positive definite system, factored in place (lower Cholesky, f64).
#[derive(Clone, Debug, Default)]
pub(super) struct Dense {
    pub(super) n: usize,
    /// Row-major n × n; the lower triangle is the matrix, then its factor L.
    pub(super) a: Vec<f64>,
    pub(super) ok: bool,
    /// The elements' terms restricted to the nodes, both parts (the exact operator's).
    pub(super) elements: Blocks,
    /// Per row, its first nonzero column (the operator's envelope, which its Cholesky
    /// factor keeps: no fill-in before a row's first nonzero).
    pub(super) first: Vec<usize>,
}

impl Dense {
    /// Cholesky factorisation; false (and unusable) if a pivot is not positive.
    ///
    /// Only each row's envelope is computed: the grid's nodes are numbered along x, then
    /// y, then z, and a node couples only to the nodes of the cells its elements span, so
    /// the last layers' rows start far in (a flat cloth's 64 nodes: 15% of the dense
    /// factorisation's multiplications; a soft ball's, whose tets span two cells, 65%).
    /// The entries before a row's first nonzero stay zero, as a dense factorisation
    /// leaves them, and every entry inside it gets the same bits as there ([`dot_from`]).
    pub(super) fn factor(&mut self) -> bool {
        let n = self.n;
        let a = &mut self.a;
        self.first.clear();
        self.first.extend((0..n).map(|i| {
            a[i * n..=i * n + i]
                .iter()
                .position(|&x| x != 0.0)
                .unwrap_or(i)
        }));
        let first = &self.first;
        // A tiny relative shift keeps nodes that free vertices barely touch invertible.
        let trace: f64 = (0..n).map(|i| a[i * n + i]).sum();
        let shift = 1e-12 * trace / n.max(1) as f64;
        for j in 0..n {
            let (row_j, rest) = a.split_at_mut((j + 1) * n);
            let row_j = &mut row_j[j * n..];
            let d = row_j[j] + shift - dot_from(row_j, row_j, first[j], j);
            if !(d > 0.0 && d.is_finite()) {
                self.ok = false;
                return false;
            }
            let d = d.sqrt();
            row_j[j] = d;
            let row_j = &row_j[..j];
            for (row_i, &fi) in rest.chunks_exact_mut(n).zip(&first[j + 1..]) {
                if fi <= j {
                    row_i[j] = (row_i[j] - dot_from(row_i, row_j, fi.max(first[j]), j)) / d;
                }
            }
        }
        self.ok = true;
        true
    }

    /// Solves `A x = b` in place with the factor: `L y = b` row by row, then `Lᵀ x = y`
    /// column by column (each column of `Lᵀ` is a row of `L`, read in order), each over
    /// the row's envelope.
    pub(super) fn solve(&self, b: &mut [f64]) {
        let (n, a) = (self.n, &self.a);
        for i in 0..n {
            let row = &a[i * n..];
            b[i] = (b[i] - dot_from(row, b, self.first[i], i)) / row[i];
        }
        for i in (0..n).rev() {
            let x = b[i] / a[i * n + i];
            b[i] = x;
            let f = self.first[i];
            for (bk, l) in b[f..i].iter_mut().zip(&a[i * n + f..i * n + i]) {
                *bk -= l * x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random number in [-1, 1).
    fn rand(state: &mut u64) -> f64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
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

    /// The factorisation and solve over whole rows, as before the envelope.
    fn dense_reference(a: &mut [f64], n: usize, b: &mut [f64]) {
        let trace: f64 = (0..n).map(|i| a[i * n + i]).sum();
        let shift = 1e-12 * trace / n.max(1) as f64;
        for j in 0..n {
            let (row_j, rest) = a.split_at_mut((j + 1) * n);
            let row_j = &mut row_j[j * n..];
            let d = (row_j[j] + shift - dot(&row_j[..j], &row_j[..j])).sqrt();
            row_j[j] = d;
            let lj = &row_j[..j];
            for row_i in rest.chunks_exact_mut(n) {
                row_i[j] = (row_i[j] - dot(&row_i[..j], lj)) / d;
            }
        }
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

    #[test]
    fn the_envelope_factor_has_the_bits_of_the_dense_one() {
        // Grid operators as the coarse level assembles them: nodes of an nx × ny × nz grid
        // numbered along x first, each coupled to the nodes of the cells it shares, blocks
        // of random numbers on a dominant diagonal; some nodes dropped (a ball's corners).
        for (dims, drop) in [
            ([4, 4, 4], 5),
            ([3, 5, 4], 0),
            ([8, 2, 4], 3),
            ([1, 1, 1], 0),
        ] {
            let mut s = 3 + dims[0] as u64;
            let index = |x: usize, y: usize, z: usize| x + dims[0] * (y + dims[1] * z);
            let total = dims[0] * dims[1] * dims[2];
            let kept: Vec<Option<usize>> = (0..total)
                .scan(0, |next, k| {
                    let keep = drop == 0 || k % 7 != drop;
                    *next += keep as usize;
                    Some(keep.then_some(*next - 1))
                })
                .collect();
            let nodes = kept.iter().flatten().count();
            let n = 3 * nodes;
            let mut a = vec![0.0; n * n];
            for z in 0..dims[2] {
                for y in 0..dims[1] {
                    for x in 0..dims[0] {
                        let Some(i) = kept[index(x, y, z)] else {
                            continue;
                        };
                        for (dz, dy, dx) in (0..27).map(|k| (k / 9, k / 3 % 3, k % 3)) {
                            let (xj, yj, zj) = (x + dx, y + dy, z + dz);
                            if xj < 1 || yj < 1 || zj < 1 {
                                continue;
                            }
                            let (xj, yj, zj) = (xj - 1, yj - 1, zj - 1);
                            if xj >= dims[0] || yj >= dims[1] || zj >= dims[2] {
                                continue;
                            }
                            let Some(j) = kept[index(xj, yj, zj)] else {
                                continue;
                            };
                            if j > i {
                                continue;
                            }
                            for r in 0..3 {
                                for c in 0..3 {
                                    let diag = if i == j && r == c { 100.0 } else { 0.0 };
                                    a[(3 * i + r) * n + 3 * j + c] = diag + rand(&mut s);
                                }
                            }
                        }
                    }
                }
            }
            // The blocks on the diagonal are symmetric in the operator.
            for i in 0..n {
                for j in (i - i % 3)..i {
                    a[i * n + j] = a[j * n + i];
                }
            }
            let b: Vec<f64> = (0..n).map(|_| rand(&mut s)).collect();
            let mut sys = Dense {
                n,
                a: a.clone(),
                ..Default::default()
            };
            assert!(sys.factor(), "{dims:?}");
            let mut x = b.clone();
            sys.solve(&mut x);
            let (mut reference, mut y) = (a.clone(), b.clone());
            dense_reference(&mut reference, n, &mut y);
            for i in 0..n {
                for j in 0..=i {
                    let (e, d) = (sys.a[i * n + j], reference[i * n + j]);
                    assert_eq!(
                        e.to_bits(),
                        d.to_bits(),
                        "{dims:?} L({i}, {j}): {e} and {d}"
                    );
                }
                assert_eq!(
                    x[i].to_bits(),
                    y[i].to_bits(),
                    "{dims:?} x({i}): {} and {}",
                    x[i],
                    y[i]
                );
            }
            // The envelope was narrower than the rows (what makes it cheaper).
            if dims[2] > 1 {
                assert!(sys.first[n - 1] > n / 3, "{dims:?}: {}", sys.first[n - 1]);
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
