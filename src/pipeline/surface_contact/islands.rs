//! Islands of the surface contact: objects linked by a candidate pair move together in
//! the advance (one α each), and the free ones (deformables touching only each other) have
//! their momentum restored at the end of the step.

use super::geometry::{self, Owner};
use super::rows::{NO_POINT, PairKind};
use super::{SurfaceContact, object};
use crate::deformable::DeformableSet;
use crate::graph::Forest;
use crate::rigid::BodySet;

impl SurfaceContact {
    /// Islands: objects linked by a candidate pair (static rigid bodies link nothing); an
    /// island with a rigid body, or a pair with a static body or a half-space, is anchored.
    pub(crate) fn build_islands(&mut self, set: &DeformableSet, bodies: &BodySet) {
        let objects = set.len() + bodies.len();
        let mut forest = Forest::default();
        forest.reset(objects);
        self.coupled.clear();
        self.coupled.resize(bodies.len(), false);
        let g = &self.geometry;
        for pair in &self.candidates {
            let pts = self.points_of(pair);
            let mut first: Option<usize> = None;
            let mut soft = false;
            for &p in pts.iter().filter(|&&p| p != NO_POINT) {
                let o = g.owner_of(set, p);
                match o {
                    Owner::Soft(_) => soft = true,
                    Owner::Rigid(i) if !geometry::moves(bodies, i as usize) => continue,
                    Owner::Rigid(_) => {}
                }
                let id = object(set, o);
                match first {
                    None => first = Some(id),
                    Some(f) => forest.union(f as u32, id as u32),
                }
            }
            if soft {
                for &p in pts.iter().filter(|&&p| p != NO_POINT) {
                    if let Owner::Rigid(i) = g.owner_of(set, p)
                        && geometry::moves(bodies, i as usize)
                    {
                        self.coupled[i as usize] = true;
                    }
                }
            }
        }
        self.island_of.clear();
        self.island_of
            .extend((0..objects as u32).map(|o| forest.find(o)));
        self.beta.clear();
        self.beta.resize(objects, 1.0);
        // Anchored islands: a rigid point or a half-space in a pair anchors the island of
        // the pair's deformable side.
        self.anchored.clear();
        self.anchored.resize(objects, false);
        let g = &self.geometry;
        for pair in &self.candidates {
            let pts = self.points_of(pair);
            let rigid = pair.kind == PairKind::PointPlane
                || pts.iter().any(|&p| p != NO_POINT && p >= g.soft_points);
            if let Some(&p) = pts.iter().find(|&&p| p != NO_POINT && p < g.soft_points)
                && rigid
            {
                let island = self.island_of[object(set, g.owner_of(set, p))];
                self.anchored[island as usize] = true;
            }
        }
    }

    /// The groups of deformable bodies that only touch each other this frame (islands
    /// that are not anchored), each as a list of bodies.
    pub(crate) fn free_groups(&self, set: &DeformableSet) -> Vec<Vec<u32>> {
        let mut by_root: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
        for b in 0..set.len() {
            let root = self.island_of.get(b).copied().unwrap_or(b as u32);
            if !self.anchored.get(root as usize).copied().unwrap_or(false) {
                by_root.entry(root).or_default().push(b as u32);
            }
        }
        by_root.into_values().collect()
    }
}
