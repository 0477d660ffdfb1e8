//! Union–find over bodies, shared by the stages that group bodies into islands: the
//! joints' penalty cap ([`super::dual::JointIslands`]) and the momentum projection
//! ([`super::integration::IslandMomentum`]).

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
