//! Graph algorithms shared by rigid and deformable bodies: the greedy colouring that lets
//! one colour's bodies (or vertices) be solved in parallel, and the union–find that groups
//! bodies into islands (the joints' penalty cap, the momentum projection).

/// A union–find forest over body indices. The smaller root always becomes the parent, so
/// the islands (and everything computed from them) do not depend on the order of unions.
#[derive(Default)]
pub struct Forest {
    parent: Vec<u32>,
}

impl Forest {
    /// Every body in its own island; keeps the allocation.
    pub fn reset(&mut self, n: usize) {
        self.parent.clear();
        self.parent.extend(0..n as u32);
    }

    /// Root of `i`'s island (with path halving).
    pub fn find(&mut self, mut i: u32) -> u32 {
        while self.parent[i as usize] != i {
            let up = self.parent[self.parent[i as usize] as usize];
            self.parent[i as usize] = up;
            i = up;
        }
        i
    }

    /// Joins the islands of `a` and `b`.
    pub fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        self.parent[hi as usize] = lo;
    }
}

/// Nodes grouped by colour (CSR): colour c holds `members[offsets[c]..offsets[c + 1]]`, in
/// index order. Nodes of one colour share no edge.
#[derive(Default, Clone, Debug)]
pub struct Coloring {
    pub offsets: Vec<u32>,
    pub members: Vec<u32>,
    /// Colour of each node (`u32::MAX` for nodes that are not coloured).
    pub of: Vec<u32>,
    mark: Vec<u32>,
}

impl Coloring {
    pub fn count(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    #[inline]
    pub fn group(&self, c: usize) -> &[u32] {
        &self.members[self.offsets[c] as usize..self.offsets[c + 1] as usize]
    }

    /// Greedy colouring in index order: every node `i < n` with `colored(i)` takes the
    /// smallest colour none of its already-coloured `neighbours(i)` has (neighbours `≥ n`,
    /// such as the world, are ignored). Deterministic; keeps its allocations.
    pub fn greedy<I: IntoIterator<Item = u32>>(
        &mut self,
        n: usize,
        colored: impl Fn(usize) -> bool,
        neighbours: impl Fn(usize) -> I,
    ) {
        self.of.clear();
        self.of.resize(n, u32::MAX);
        self.mark.clear();
        let mut count = 0usize;
        for i in 0..n {
            if !colored(i) {
                continue;
            }
            // Stamp the colours of already-coloured neighbours with i, then take the first
            // free one.
            for o in neighbours(i) {
                if let Some(&oc) = self.of.get(o as usize)
                    && oc != u32::MAX
                {
                    self.mark[oc as usize] = i as u32;
                }
            }
            let c = (0..count)
                .find(|&c| self.mark[c] != i as u32)
                .unwrap_or(count);
            if c == count {
                count += 1;
                self.mark.push(u32::MAX);
            }
            self.of[i] = c as u32;
        }
        // Group by colour, nodes in index order inside a colour.
        self.offsets.clear();
        self.offsets.resize(count + 1, 0);
        for &c in &self.of {
            if c != u32::MAX {
                self.offsets[c as usize + 1] += 1;
            }
        }
        for c in 0..count {
            self.offsets[c + 1] += self.offsets[c];
        }
        self.members.clear();
        self.members.resize(self.offsets[count] as usize, 0);
        // The stamps are done with: `mark` becomes the fill cursor (no allocation per call).
        let cursor = &mut self.mark;
        cursor.clear();
        cursor.extend_from_slice(&self.offsets[..count]);
        for (i, &c) in self.of.iter().enumerate() {
            if c != u32::MAX {
                self.members[cursor[c as usize] as usize] = i as u32;
                cursor[c as usize] += 1;
            }
        }
    }
}
