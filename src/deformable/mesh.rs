//! Meshes of deformable bodies: tetrahedral solids and triangle cloths, the built-in
//! generators, and the surface a tet mesh exposes to contact (its boundary triangles and
//! edges, extracted at load).

use std::collections::HashMap;

use glam::Vec3;

use crate::error::PhysicsError;

/// A tetrahedral mesh: vertices and four vertex indices per tetrahedron, positively
/// oriented (`det[x1 − x0, x2 − x0, x3 − x0] > 0`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TetMesh {
    pub vertices: Vec<Vec3>,
    pub tets: Vec<[u32; 4]>,
}

/// A triangle mesh (cloth, shells): vertices and three vertex indices per triangle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriMesh {
    pub vertices: Vec<Vec3>,
    pub triangles: Vec<[u32; 3]>,
}

/// How a box grid splits each cubic cell into tetrahedra.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TetPattern {
    /// Five tetrahedra per cell (a central one and four corners), mirrored in alternate
    /// cells so that the faces of neighbouring cells match.
    Five,
    /// Six tetrahedra per cell around the cell's main diagonal (Freudenthal / Kuhn).
    #[default]
    Six,
}

/// The boundary of a mesh: what contact sees of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Surface {
    /// Boundary triangles, oriented with their normal pointing out of the body (for a
    /// cloth: every triangle, as given).
    pub triangles: Vec<[u32; 3]>,
    /// Edges of the boundary triangles, each once, `[a, b]` with `a < b`.
    pub edges: Vec<[u32; 2]>,
}

/// An interior edge of a triangle mesh with the two triangles on either side: the
/// stencil of the dihedral bending energy. `v[0], v[1]` are the edge, `v[2]` and `v[3]`
/// the vertices opposite it in the two triangles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hinge {
    pub v: [u32; 4],
}

/// Signed volume of a tetrahedron.
#[inline]
pub fn tet_volume(x: [Vec3; 4]) -> f32 {
    (x[1] - x[0]).dot((x[2] - x[0]).cross(x[3] - x[0])) / 6.0
}

fn mesh_error(element: &'static str, index: usize, reason: impl Into<String>) -> PhysicsError {
    PhysicsError::InvalidMesh {
        element,
        index,
        reason: reason.into(),
    }
}

fn check_vertices(vertices: &[Vec3]) -> Result<(), PhysicsError> {
    if vertices.is_empty() {
        return Err(mesh_error("vertex", 0, "the mesh has no vertices"));
    }
    if let Some(i) = vertices.iter().position(|v| !v.is_finite()) {
        return Err(mesh_error("vertex", i, "coordinates are not finite"));
    }
    Ok(())
}

/// Every vertex must belong to an element: mass is lumped from the elements, so a free
/// vertex would have none.
fn check_used(n: usize, elements: impl Iterator<Item = u32>) -> Result<(), PhysicsError> {
    let mut used = vec![false; n];
    for v in elements {
        used[v as usize] = true;
    }
    match used.iter().position(|u| !u) {
        Some(i) => Err(mesh_error(
            "vertex",
            i,
            "belongs to no element (it would have no mass)",
        )),
        None => Ok(()),
    }
}

impl TetMesh {
    /// A box of `size` centred at the origin, split into `cells` cubic-ish cells along x,
    /// y and z, each cut into tetrahedra by `pattern`. Vertices are numbered x fastest.
    pub fn box_grid(size: Vec3, cells: [u32; 3], pattern: TetPattern) -> TetMesh {
        let [nx, ny, nz] = cells.map(|c| c.max(1));
        let idx = |i: u32, j: u32, k: u32| i + (nx + 1) * (j + (ny + 1) * k);
        let mut vertices = Vec::with_capacity(((nx + 1) * (ny + 1) * (nz + 1)) as usize);
        for k in 0..=nz {
            for j in 0..=ny {
                for i in 0..=nx {
                    let t = Vec3::new(
                        i as f32 / nx as f32,
                        j as f32 / ny as f32,
                        k as f32 / nz as f32,
                    );
                    vertices.push((t - Vec3::splat(0.5)) * size);
                }
            }
        }
        // Corner c of a cell is at offset (c & 1, c >> 1 & 1, c >> 2 & 1).
        const SIX: [[usize; 4]; 6] = [
            [0, 1, 3, 7],
            [0, 1, 5, 7],
            [0, 2, 3, 7],
            [0, 2, 6, 7],
            [0, 4, 5, 7],
            [0, 4, 6, 7],
        ];
        const FIVE_EVEN: [[usize; 4]; 5] = [
            [1, 2, 4, 7],
            [0, 1, 2, 4],
            [3, 1, 2, 7],
            [5, 1, 4, 7],
            [6, 2, 4, 7],
        ];
        const FIVE_ODD: [[usize; 4]; 5] = [
            [0, 3, 5, 6],
            [1, 0, 3, 5],
            [2, 0, 3, 6],
            [4, 0, 5, 6],
            [7, 3, 5, 6],
        ];
        let mut tets = Vec::new();
        for k in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    let corner = |c: usize| {
                        idx(
                            i + (c & 1) as u32,
                            j + (c >> 1 & 1) as u32,
                            k + (c >> 2 & 1) as u32,
                        )
                    };
                    let pattern: &[[usize; 4]] = match pattern {
                        TetPattern::Six => &SIX,
                        TetPattern::Five if (i + j + k) % 2 == 0 => &FIVE_EVEN,
                        TetPattern::Five => &FIVE_ODD,
                    };
                    for t in pattern {
                        let mut tet = t.map(corner);
                        let x = tet.map(|v| vertices[v as usize]);
                        if tet_volume(x) < 0.0 {
                            tet.swap(2, 3);
                        }
                        tets.push(tet);
                    }
                }
            }
        }
        TetMesh { vertices, tets }
    }

    /// A square rod along x: `length` long, `thickness` wide in y and z, `segments` cells
    /// along its length and one across (six tetrahedra per cell), centred at the origin.
    pub fn rod(length: f32, thickness: f32, segments: u32) -> TetMesh {
        Self::box_grid(
            Vec3::new(length, thickness, thickness),
            [segments, 1, 1],
            TetPattern::Six,
        )
    }

    /// Reads a Gmsh MSH 4.1 file (ASCII or binary): every node and every 4-node
    /// tetrahedron (element type 4); other elements (surface triangles, lines, points) are
    /// ignored. Node tags are mapped to indices in file order.
    pub fn from_msh(bytes: &[u8]) -> Result<TetMesh, PhysicsError> {
        let msh = mshio::parse_msh_bytes(bytes).map_err(|e| PhysicsError::MeshImport {
            format: "msh",
            reason: format!("{e}"),
        })?;
        let import = |reason: String| PhysicsError::MeshImport {
            format: "msh",
            reason,
        };
        let nodes = msh
            .data
            .nodes
            .ok_or_else(|| import("the file has no $Nodes section".into()))?;
        let elements = msh
            .data
            .elements
            .ok_or_else(|| import("the file has no $Elements section".into()))?;
        let mut index_of = HashMap::new();
        let mut vertices = Vec::new();
        // Without a tag map (dense tags), the blocks' nodes follow each other in tag order.
        let mut next_tag = nodes.min_node_tag;
        for block in &nodes.node_blocks {
            let tags: Vec<u64> = match &block.node_tags {
                Some(tags) => {
                    let mut t: Vec<(u64, usize)> = tags.iter().map(|(&tag, &i)| (tag, i)).collect();
                    t.sort_by_key(|&(_, i)| i);
                    t.into_iter().map(|(tag, _)| tag).collect()
                }
                None => (0..block.nodes.len() as u64)
                    .map(|i| next_tag + i)
                    .collect(),
            };
            next_tag += block.nodes.len() as u64;
            for (tag, node) in tags.iter().zip(&block.nodes) {
                index_of.insert(*tag, vertices.len() as u32);
                vertices.push(Vec3::new(node.x as f32, node.y as f32, node.z as f32));
            }
        }
        let mut tets = Vec::new();
        for block in &elements.element_blocks {
            if block.element_type != mshio::ElementType::Tet4 {
                continue;
            }
            for e in &block.elements {
                if e.nodes.len() != 4 {
                    return Err(import(format!(
                        "tetrahedron {} has {} nodes",
                        e.element_tag,
                        e.nodes.len()
                    )));
                }
                let mut tet = [0u32; 4];
                for (slot, tag) in tet.iter_mut().zip(&e.nodes) {
                    *slot = *index_of.get(tag).ok_or_else(|| {
                        import(format!(
                            "tetrahedron {} refers to node {tag}, which does not exist",
                            e.element_tag
                        ))
                    })?;
                }
                tets.push(tet);
            }
        }
        if tets.is_empty() {
            return Err(import("the file has no 4-node tetrahedra".into()));
        }
        // Drop the nodes no tetrahedron uses (geometry points, curve nodes of other
        // entities), keeping file order.
        let mut new_index = vec![u32::MAX; vertices.len()];
        for t in &tets {
            for &v in t {
                new_index[v as usize] = 0;
            }
        }
        let mut kept = Vec::new();
        for (i, v) in vertices.iter().enumerate() {
            if new_index[i] == 0 {
                new_index[i] = kept.len() as u32;
                kept.push(*v);
            }
        }
        for t in &mut tets {
            *t = t.map(|v| new_index[v as usize]);
        }
        Ok(TetMesh {
            vertices: kept,
            tets,
        })
    }

    /// [`Self::from_msh`] of a file.
    pub fn load_msh(path: impl AsRef<std::path::Path>) -> Result<TetMesh, PhysicsError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| PhysicsError::MeshImport {
            format: "msh",
            reason: format!("{}: {e}", path.display()),
        })?;
        Self::from_msh(&bytes)
    }

    /// Checks what the solver needs: finite coordinates, indices in range, four distinct
    /// vertices per tetrahedron, a positive rest volume (neither degenerate nor inverted)
    /// and every vertex in some tetrahedron. The error names the first bad element.
    pub fn validate(&self) -> Result<(), PhysicsError> {
        check_vertices(&self.vertices)?;
        if self.tets.is_empty() {
            return Err(mesh_error("tet", 0, "the mesh has no tetrahedra"));
        }
        let n = self.vertices.len();
        for (i, t) in self.tets.iter().enumerate() {
            if let Some(&v) = t.iter().find(|&&v| v as usize >= n) {
                return Err(mesh_error(
                    "tet",
                    i,
                    format!("vertex index {v} is out of range (the mesh has {n} vertices)"),
                ));
            }
            if (0..4).any(|a| (a + 1..4).any(|b| t[a] == t[b])) {
                return Err(mesh_error("tet", i, format!("repeats a vertex: {t:?}")));
            }
            let x = t.map(|v| self.vertices[v as usize]);
            let volume = tet_volume(x);
            // Degenerate: volume below a millionth of the cube of its longest edge (a sliver
            // that flat has no usable rest shape in f32).
            let longest = (0..4)
                .flat_map(|a| (a + 1..4).map(move |b| (a, b)))
                .map(|(a, b)| (x[a] - x[b]).length())
                .fold(0.0f32, f32::max);
            if volume.abs() <= 1e-6 * longest.powi(3) {
                return Err(mesh_error(
                    "tet",
                    i,
                    format!("is degenerate (rest volume {volume:e} m³)"),
                ));
            }
            if volume < 0.0 {
                return Err(mesh_error(
                    "tet",
                    i,
                    format!(
                        "is inverted in its rest shape (volume {volume:e} m³; swap two vertices)"
                    ),
                ));
            }
        }
        check_used(n, self.tets.iter().flatten().copied())
    }

    /// The boundary: faces that belong to one tetrahedron only, oriented outward, and
    /// their edges.
    pub fn surface(&self) -> Surface {
        let mut faces: HashMap<[u32; 3], ([u32; 3], u32)> = HashMap::new();
        for t in &self.tets {
            for skip in 0..4 {
                let mut f = [0u32; 3];
                let mut k = 0;
                for (a, &v) in t.iter().enumerate() {
                    if a != skip {
                        f[k] = v;
                        k += 1;
                    }
                }
                // Outward: the normal points away from the vertex left out.
                let x = f.map(|v| self.vertices[v as usize]);
                let n = (x[1] - x[0]).cross(x[2] - x[0]);
                if n.dot(self.vertices[t[skip] as usize] - x[0]) > 0.0 {
                    f.swap(1, 2);
                }
                let mut key = f;
                key.sort_unstable();
                faces.entry(key).and_modify(|e| e.1 += 1).or_insert((f, 1));
            }
        }
        let mut triangles: Vec<[u32; 3]> = faces
            .into_values()
            .filter(|&(_, count)| count == 1)
            .map(|(f, _)| f)
            .collect();
        // Deterministic order: by the sorted vertex triple.
        triangles.sort_by_key(|f| {
            let mut k = *f;
            k.sort_unstable();
            k
        });
        let edges = edges_of(&triangles);
        Surface { triangles, edges }
    }
}

/// The unique edges of `triangles`, `[a, b]` with `a < b`, sorted.
pub fn edges_of(triangles: &[[u32; 3]]) -> Vec<[u32; 2]> {
    let mut edges: Vec<[u32; 2]> = triangles
        .iter()
        .flat_map(|t| [[t[0], t[1]], [t[1], t[2]], [t[2], t[0]]])
        .map(|[a, b]| [a.min(b), a.max(b)])
        .collect();
    edges.sort_unstable();
    edges.dedup();
    edges
}

impl TriMesh {
    /// A rectangular cloth in the xz plane centred at the origin, `width` along x and
    /// `depth` along z, with `res_x × res_z` quads split into two triangles each
    /// (alternating diagonals, so the cloth has no preferred shear direction). Vertices are
    /// numbered x fastest; normals point along +y.
    pub fn grid(width: f32, depth: f32, res_x: u32, res_z: u32) -> TriMesh {
        let (nx, nz) = (res_x.max(1), res_z.max(1));
        let idx = |i: u32, k: u32| i + (nx + 1) * k;
        let mut vertices = Vec::with_capacity(((nx + 1) * (nz + 1)) as usize);
        for k in 0..=nz {
            for i in 0..=nx {
                vertices.push(Vec3::new(
                    (i as f32 / nx as f32 - 0.5) * width,
                    0.0,
                    (k as f32 / nz as f32 - 0.5) * depth,
                ));
            }
        }
        let mut triangles = Vec::with_capacity((2 * nx * nz) as usize);
        for k in 0..nz {
            for i in 0..nx {
                let (a, b, c, d) = (idx(i, k), idx(i + 1, k), idx(i, k + 1), idx(i + 1, k + 1));
                // Counter-clockwise seen from +y: (x, z) → normal (z × x) = +y ordering.
                if (i + k) % 2 == 0 {
                    triangles.push([a, c, b]);
                    triangles.push([b, c, d]);
                } else {
                    triangles.push([a, c, d]);
                    triangles.push([a, d, b]);
                }
            }
        }
        TriMesh {
            vertices,
            triangles,
        }
    }

    /// Reads a Wavefront OBJ file's first model (its faces triangulated), positions only.
    pub fn load_obj(path: impl AsRef<std::path::Path>) -> Result<TriMesh, PhysicsError> {
        let path = path.as_ref();
        let options = tobj::LoadOptions {
            triangulate: true,
            single_index: true,
            ..Default::default()
        };
        let (models, _) = tobj::load_obj(path, &options).map_err(|e| PhysicsError::MeshImport {
            format: "obj",
            reason: format!("{}: {e}", path.display()),
        })?;
        let model = models
            .into_iter()
            .next()
            .ok_or_else(|| PhysicsError::MeshImport {
                format: "obj",
                reason: format!("{}: no model in the file", path.display()),
            })?;
        let m = model.mesh;
        Ok(TriMesh {
            vertices: m
                .positions
                .chunks_exact(3)
                .map(|p| Vec3::new(p[0], p[1], p[2]))
                .collect(),
            triangles: m
                .indices
                .chunks_exact(3)
                .map(|t| [t[0], t[1], t[2]])
                .collect(),
        })
    }

    /// Checks finite coordinates, indices in range, three distinct vertices and a non-zero
    /// area per triangle, no edge shared by more than two triangles, and every vertex in
    /// some triangle. The error names the first bad element.
    pub fn validate(&self) -> Result<(), PhysicsError> {
        check_vertices(&self.vertices)?;
        if self.triangles.is_empty() {
            return Err(mesh_error("triangle", 0, "the mesh has no triangles"));
        }
        let n = self.vertices.len();
        for (i, t) in self.triangles.iter().enumerate() {
            if let Some(&v) = t.iter().find(|&&v| v as usize >= n) {
                return Err(mesh_error(
                    "triangle",
                    i,
                    format!("vertex index {v} is out of range (the mesh has {n} vertices)"),
                ));
            }
            if t[0] == t[1] || t[1] == t[2] || t[0] == t[2] {
                return Err(mesh_error(
                    "triangle",
                    i,
                    format!("repeats a vertex: {t:?}"),
                ));
            }
            let x = t.map(|v| self.vertices[v as usize]);
            let twice_area = (x[1] - x[0]).cross(x[2] - x[0]).length();
            let longest = (x[1] - x[0])
                .length()
                .max((x[2] - x[1]).length())
                .max((x[0] - x[2]).length());
            if twice_area <= 1e-6 * longest * longest {
                return Err(mesh_error(
                    "triangle",
                    i,
                    format!("has zero area ({:e} m²)", 0.5 * twice_area),
                ));
            }
        }
        let mut count: HashMap<[u32; 2], u32> = HashMap::new();
        for t in &self.triangles {
            for [a, b] in [[t[0], t[1]], [t[1], t[2]], [t[2], t[0]]] {
                *count.entry([a.min(b), a.max(b)]).or_default() += 1;
            }
        }
        if let Some((i, _)) = self.triangles.iter().enumerate().find(|(_, t)| {
            [[t[0], t[1]], [t[1], t[2]], [t[2], t[0]]]
                .iter()
                .any(|&[a, b]| count[&[a.min(b), a.max(b)]] > 2)
        }) {
            return Err(mesh_error(
                "triangle",
                i,
                "has an edge shared by more than two triangles (non-manifold)",
            ));
        }
        check_used(n, self.triangles.iter().flatten().copied())
    }

    /// Every triangle and every edge: a cloth is all surface.
    pub fn surface(&self) -> Surface {
        Surface {
            triangles: self.triangles.clone(),
            edges: edges_of(&self.triangles),
        }
    }

    /// The bending stencils: each edge shared by exactly two triangles, with the two
    /// vertices opposite it, sorted by edge.
    pub fn hinges(&self) -> Vec<Hinge> {
        let mut by_edge: HashMap<[u32; 2], Vec<u32>> = HashMap::new();
        for t in &self.triangles {
            for k in 0..3 {
                let (a, b, opp) = (t[k], t[(k + 1) % 3], t[(k + 2) % 3]);
                by_edge.entry([a.min(b), a.max(b)]).or_default().push(opp);
            }
        }
        let mut hinges: Vec<Hinge> = by_edge
            .into_iter()
            .filter(|(_, opp)| opp.len() == 2)
            .map(|([a, b], opp)| Hinge {
                v: [a, b, opp[0], opp[1]],
            })
            .collect();
        hinges.sort_by_key(|h| [h.v[0], h.v[1]]);
        hinges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_grids_are_positive_conforming_and_closed() {
        for pattern in [TetPattern::Five, TetPattern::Six] {
            let m = TetMesh::box_grid(Vec3::new(2.0, 1.0, 0.5), [4, 3, 2], pattern);
            m.validate().unwrap();
            let per_cell = if pattern == TetPattern::Five { 5 } else { 6 };
            assert_eq!(m.tets.len(), 24 * per_cell);
            assert_eq!(m.vertices.len(), 5 * 4 * 3);
            let volume: f32 = m
                .tets
                .iter()
                .map(|t| tet_volume(t.map(|v| m.vertices[v as usize])))
                .sum();
            assert!((volume - 1.0).abs() < 1e-5, "{pattern:?}: volume {volume}");
            // A conforming grid's boundary is exactly the box's faces: 2 triangles per
            // boundary quad (matching diagonals between cells leave no interior face
            // counted once).
            let s = m.surface();
            assert_eq!(
                s.triangles.len(),
                2 * 2 * (4 * 3 + 4 * 2 + 3 * 2),
                "{pattern:?}"
            );
            // Closed, outward: the divergence theorem gives the volume back.
            let enclosed: f32 = s
                .triangles
                .iter()
                .map(|t| {
                    let x = t.map(|v| m.vertices[v as usize]);
                    x[0].dot(x[1].cross(x[2])) / 6.0
                })
                .sum();
            assert!(
                (enclosed - 1.0).abs() < 1e-5,
                "{pattern:?}: enclosed {enclosed}"
            );
            // Euler characteristic of a sphere: V − E + F = 2.
            let verts: std::collections::HashSet<u32> =
                s.triangles.iter().flatten().copied().collect();
            let chi = verts.len() as i64 - s.edges.len() as i64 + s.triangles.len() as i64;
            assert_eq!(chi, 2);
        }
    }

    #[test]
    fn cloth_grid_hinges_and_surface() {
        let m = TriMesh::grid(1.0, 1.0, 3, 2);
        m.validate().unwrap();
        assert_eq!(m.triangles.len(), 12);
        // Edges: 3·3 horizontal + 4·2 vertical + 6 diagonals = 23, of which the 10 on the
        // border belong to one triangle: 13 hinges.
        assert_eq!(m.surface().edges.len(), 23);
        assert_eq!(m.hinges().len(), 13);
        for t in &m.triangles {
            let x = t.map(|v| m.vertices[v as usize]);
            assert!(
                (x[1] - x[0]).cross(x[2] - x[0]).y > 0.0,
                "normals point along +y"
            );
        }
    }
}
