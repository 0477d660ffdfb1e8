//! Joints: user descriptions, the flat GPU-ready record, and the row evaluation shared by
//! the primal and dual stages.
//!
//! Every joint is a small set of scalar constraint rows C(x) with Jacobians for body A and
//! body B (linear then angular, world frame). Rows are evaluated exactly at the current
//! poses (joints are nonlinear; only contacts use the Taylor cache).

use bytemuck::{Pod, Zeroable};
use glam::{Quat, Vec3};

use crate::error::{BodyHandle, JointHandle};
use crate::math::{Vec6, tangent_basis, vec6};
use crate::rigid::body::PoseRecord;

/// Maximum number of rows of any joint.
pub const MAX_JOINT_ROWS: usize = 8;

/// Constant-velocity motor of a revolute joint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Motor {
    /// Target relative angular velocity about the hinge axis, rad/s.
    pub target_velocity: f32,
    /// Largest torque the motor may apply, N·m.
    pub max_torque: f32,
}

/// What the joint constrains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JointKind {
    /// Spherical joint: anchors coincide, rotation free.
    Ball,
    /// Weld: anchors coincide and the relative rotation is locked.
    Fixed,
    /// Hinge about `axis` (body A frame); optional angle limits (rad) and motor.
    Revolute {
        axis: Vec3,
        limits: Option<(f32, f32)>,
        motor: Option<Motor>,
    },
    /// Slider along `axis` (body A frame), rotation locked; optional limits (m) on the offset.
    Prismatic {
        axis: Vec3,
        limits: Option<(f32, f32)>,
    },
    /// Anchors kept at exactly `length` apart.
    Distance { length: f32 },
    /// Anchors at most `max_length` apart.
    Rope { max_length: f32 },
    /// Spring of finite stiffness k* (N/m) and rest length.
    Spring { rest_length: f32, stiffness: f32 },
}

/// A joint between body A and body B, or between body A and the world (`body_b = None`,
/// then `anchor_b` is a world-space point).
#[derive(Clone, Debug, PartialEq)]
pub struct JointDesc {
    pub body_a: BodyHandle,
    pub body_b: Option<BodyHandle>,
    /// Anchor in body A's frame (relative to its centre of mass).
    pub anchor_a: Vec3,
    /// Anchor in body B's frame, or in the world if `body_b` is `None`.
    pub anchor_b: Vec3,
    pub kind: JointKind,
    /// Optional finite stiffness of the positional rows (N/m); hard if `None`.
    pub stiffness: Option<f32>,
    /// The joint breaks when its positional force exceeds this (N).
    pub breaking_force: Option<f32>,
    /// The joint breaks when its angular torque exceeds this (N·m).
    pub breaking_torque: Option<f32>,
}

impl JointDesc {
    pub fn new(kind: JointKind, body_a: BodyHandle, body_b: Option<BodyHandle>) -> Self {
        Self {
            body_a,
            body_b,
            anchor_a: Vec3::ZERO,
            anchor_b: Vec3::ZERO,
            kind,
            stiffness: None,
            breaking_force: None,
            breaking_torque: None,
        }
    }
    pub fn anchors(mut self, anchor_a: Vec3, anchor_b: Vec3) -> Self {
        self.anchor_a = anchor_a;
        self.anchor_b = anchor_b;
        self
    }
    pub fn breakable(mut self, force: f32) -> Self {
        self.breaking_force = Some(force);
        self
    }
    pub fn breakable_torque(mut self, torque: f32) -> Self {
        self.breaking_torque = Some(torque);
        self
    }
    pub fn with_stiffness(mut self, k: f32) -> Self {
        self.stiffness = Some(k);
        self
    }
}

/// Row kinds packed in `JointRecord::kind`.
pub(crate) mod kind {
    pub const BALL: u32 = 0;
    pub const FIXED: u32 = 1;
    pub const REVOLUTE: u32 = 2;
    pub const PRISMATIC: u32 = 3;
    pub const DISTANCE: u32 = 4;
    pub const ROPE: u32 = 5;
}

/// Flags in `JointRecord::flags`.
pub mod flags {
    pub const BROKEN: u32 = 1;
    pub const HAS_LIMIT: u32 = 2;
    pub const HAS_MOTOR: u32 = 4;
    pub const BREAKABLE_FORCE: u32 = 8;
    pub const BREAKABLE_TORQUE: u32 = 16;
}

/// Sentinel body index for "the world".
pub const WORLD: u32 = u32::MAX;

/// Flat joint record: geometry and parameters (GPU std430 friendly).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct JointRecord {
    pub body_a: u32,
    pub body_b: u32,
    pub kind: u32,
    pub flags: u32,
    pub anchor_a: [f32; 4],
    pub anchor_b: [f32; 4],
    /// Joint frame in body A (x axis = hinge/slide axis).
    pub frame_a: [f32; 4],
    /// Joint frame in body B (or world); coincides with A's at creation.
    pub frame_b: [f32; 4],
    /// lower limit, upper limit, motor velocity, motor max torque
    pub limits_motor: [f32; 4],
    /// length, stiffness k* (0 = hard), breaking force, breaking torque
    pub params: [f32; 4],
}

/// Per-row solver state of a joint: penalty k, multiplier λ, error at step start C*(xᵗ).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct JointRowState {
    pub k: [f32; MAX_JOINT_ROWS],
    pub lambda: [f32; MAX_JOINT_ROWS],
    pub c0: [f32; MAX_JOINT_ROWS],
    /// Hinge angle at the start of the step (motor reference), and padding.
    pub angle0: [f32; 4],
}

/// One evaluated constraint row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Row {
    pub c: f32,
    pub ja: Vec6,
    pub jb: Vec6,
    pub fmin: f32,
    pub fmax: f32,
    /// Finite stiffness k* of a soft row (0 for a hard row).
    pub stiffness: f32,
    /// Angular row (uses β_angular).
    pub angular: bool,
    /// Inequality row: α regularisation only applies to a violated start error.
    pub inequality: bool,
    /// Motor row: no error regularisation.
    pub motor: bool,
}

/// Rows of one joint at given poses, plus what the geometric-stiffness term needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct JointEval {
    pub rows: [Row; MAX_JOINT_ROWS],
    pub n: usize,
    /// Lever arms (world) of the anchors, for the geometric stiffness of the point rows.
    pub arm_a: Vec3,
    pub arm_b: Vec3,
    /// Number of leading point rows whose directions are `dirs` (world axes or tangents).
    pub n_point: usize,
    pub dirs: [Vec3; 3],
    /// Distance rows: unit direction and current length.
    pub dist_dir: Vec3,
    pub dist_len: f32,
    /// Current hinge angle (revolute).
    pub angle: f32,
}

const INF: f32 = f32::INFINITY;
const AXES: [Vec3; 3] = [Vec3::X, Vec3::Y, Vec3::Z];

impl JointRecord {
    #[inline]
    pub fn broken(&self) -> bool {
        self.flags & flags::BROKEN != 0
    }

    /// Evaluates the rows at poses `pa`, `pb` (pb is ignored for world joints).
    pub fn evaluate(&self, pa: &PoseRecord, pb: &PoseRecord) -> JointEval {
        let mut e = JointEval::default();
        let qa = pa.q();
        let qb = if self.body_b == WORLD {
            Quat::IDENTITY
        } else {
            pb.q()
        };
        let pbp = if self.body_b == WORLD {
            Vec3::ZERO
        } else {
            pb.p()
        };
        let arm_a = qa * v3(self.anchor_a);
        let arm_b = qb * v3(self.anchor_b);
        let d = (pa.p() + arm_a) - (pbp + arm_b);
        e.arm_a = arm_a;
        e.arm_b = arm_b;
        let soft = self.params[1];
        let hard_or = |k: f32| if k > 0.0 { k } else { 0.0 };

        // Point rows along directions `dirs`: C = dir · (P_A − P_B).
        let point_rows = |e: &mut JointEval, dirs: &[Vec3]| {
            for (i, &dir) in dirs.iter().enumerate() {
                e.rows[e.n] = Row {
                    c: dir.dot(d),
                    ja: vec6(dir, arm_a.cross(dir)),
                    jb: vec6(-dir, -arm_b.cross(dir)),
                    fmin: -INF,
                    fmax: INF,
                    stiffness: hard_or(soft),
                    ..Default::default()
                };
                e.dirs[i] = dir;
                e.n += 1;
            }
            e.n_point = dirs.len();
        };
        let fa = qa * Quat::from_array(self.frame_a);
        let fb = qb * Quat::from_array(self.frame_b);
        // Angular lock rows: C = 2·vec(fa fb⁻¹), exact Jacobians of that map.
        let angular_lock = |e: &mut JointEval| {
            let err = fa * fb.conjugate();
            let (w, v) = if err.w < 0.0 {
                (-err.w, -Vec3::new(err.x, err.y, err.z))
            } else {
                (err.w, Vec3::new(err.x, err.y, err.z))
            };
            let c = 2.0 * v;
            for i in 0..3 {
                let ei = AXES[i];
                // row i of (w I − [v]×) and −(w I + [v]×)
                let ja = ei * w + ei.cross(v) * -1.0;
                let jb = -(ei * w + ei.cross(v) * 1.0);
                e.rows[e.n] = Row {
                    c: c[i],
                    ja: vec6(Vec3::ZERO, ja),
                    jb: vec6(Vec3::ZERO, jb),
                    fmin: -INF,
                    fmax: INF,
                    angular: true,
                    ..Default::default()
                };
                e.n += 1;
            }
        };
        match self.kind {
            kind::BALL => point_rows(&mut e, &AXES),
            kind::FIXED => {
                point_rows(&mut e, &AXES);
                angular_lock(&mut e);
            }
            kind::REVOLUTE => {
                point_rows(&mut e, &AXES);
                let a = fa * Vec3::X;
                let b = fb * Vec3::X;
                let (t1, t2) = tangent_basis(a);
                let axb = a.cross(b);
                let ab = a.dot(b);
                for t in [t1, t2] {
                    e.rows[e.n] = Row {
                        c: t.dot(axb),
                        ja: vec6(Vec3::ZERO, b * t.dot(a) - t * ab),
                        jb: vec6(Vec3::ZERO, t * ab - a * t.dot(b)),
                        fmin: -INF,
                        fmax: INF,
                        angular: true,
                        ..Default::default()
                    };
                    e.n += 1;
                }
                // Hinge angle: rotation of B's reference y axis from A's, about A's axis.
                let ra = fa * Vec3::Y;
                let rb = fb * Vec3::Y;
                let angle = a.dot(ra.cross(rb)).atan2(ra.dot(rb));
                e.angle = angle;
                let lm = self.limits_motor;
                if self.flags & flags::HAS_LIMIT != 0 {
                    // angle − lo ≥ 0 and hi − angle ≥ 0, force ≤ 0 pushes back inside.
                    for (c, s) in [(angle - lm[0], 1.0f32), (lm[1] - angle, -1.0)] {
                        e.rows[e.n] = Row {
                            c,
                            ja: vec6(Vec3::ZERO, -a * s),
                            jb: vec6(Vec3::ZERO, a * s),
                            fmin: -INF,
                            fmax: 0.0,
                            angular: true,
                            inequality: true,
                            ..Default::default()
                        };
                        e.n += 1;
                    }
                }
                if self.flags & flags::HAS_MOTOR != 0 {
                    e.rows[e.n] = Row {
                        c: 0.0, // filled by the caller from angle0 (needs the step-start angle)
                        ja: vec6(Vec3::ZERO, -a),
                        jb: vec6(Vec3::ZERO, a),
                        fmin: -lm[3],
                        fmax: lm[3],
                        angular: true,
                        motor: true,
                        ..Default::default()
                    };
                    e.n += 1;
                }
            }
            kind::PRISMATIC => {
                let axis = fa * Vec3::X;
                let (t1, t2) = tangent_basis(axis);
                point_rows(&mut e, &[t1, t2]);
                angular_lock(&mut e);
                if self.flags & flags::HAS_LIMIT != 0 {
                    // offset s = axis · (P_B − P_A) within [lo, hi].
                    let s = -axis.dot(d);
                    let lm = self.limits_motor;
                    for (c, sg) in [(s - lm[0], 1.0f32), (lm[1] - s, -1.0)] {
                        let dir = -axis * sg; // ∂s/∂P_A = −axis
                        e.rows[e.n] = Row {
                            c,
                            ja: vec6(dir, arm_a.cross(dir)),
                            jb: vec6(-dir, -arm_b.cross(dir)),
                            fmin: -INF,
                            fmax: 0.0,
                            inequality: true,
                            ..Default::default()
                        };
                        e.n += 1;
                    }
                }
            }
            kind::DISTANCE | kind::ROPE => {
                let len = d.length();
                let n = if len > 1e-9 { d / len } else { Vec3::Y };
                e.dist_dir = n;
                e.dist_len = len;
                let rope = self.kind == kind::ROPE;
                e.rows[0] = Row {
                    c: len - self.params[0],
                    ja: vec6(n, arm_a.cross(n)),
                    jb: vec6(-n, -arm_b.cross(n)),
                    // Rope: only pulls (force ≥ 0 shortens), never pushes.
                    fmin: if rope { 0.0 } else { -INF },
                    fmax: INF,
                    stiffness: hard_or(soft),
                    inequality: rope,
                    ..Default::default()
                };
                e.n = 1;
            }
            _ => {}
        }
        e
    }
}

#[inline]
fn v3(a: [f32; 4]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

/// Wraps an angle difference to (−π, π].
#[inline]
pub fn wrap_angle(a: f32) -> f32 {
    let two_pi = std::f32::consts::TAU;
    let mut a = a % two_pi;
    if a > std::f32::consts::PI {
        a -= two_pi;
    } else if a <= -std::f32::consts::PI {
        a += two_pi;
    }
    a
}

/// Rotation that maps +x to `axis` (unit).
pub(crate) fn frame_from_axis(axis: Vec3) -> Quat {
    Quat::from_rotation_arc(Vec3::X, axis)
}

impl Row {
    /// Whether a start-of-step error `c0` is a violation that Eq. 18 should regularise.
    #[inline]
    pub fn start_error_is_violation(&self, c0: f32) -> bool {
        if self.motor {
            false
        } else if !self.inequality {
            true
        } else if self.fmax == 0.0 {
            c0 < 0.0
        } else {
            c0 > 0.0
        }
    }
}

/// Dense joint storage.
#[derive(Default)]
pub struct JointSet {
    pub(crate) handles: Vec<JointHandle>,
    pub(crate) index_of: Vec<u32>,
    pub(crate) records: Vec<JointRecord>,
    pub(crate) states: Vec<JointRowState>,
    pub(crate) bodies: Vec<(BodyHandle, Option<BodyHandle>)>,
    /// Counts the joints added and removed (the GPU backend uploads its copy of the row
    /// states when this changes).
    pub(crate) edits: u64,
    /// Counts the fractures (the joint islands change with them).
    pub(crate) breaks: u64,
}

impl JointSet {
    /// What the joint records, and the jointed pairs made from them, follow from: the
    /// joints added and removed, the joints broken, and the bodies' layout (a removed body
    /// moves the others' solver indices). Data made for one key holds while it stays.
    pub(crate) fn edit_key(&self, bodies: &super::BodySet) -> [u64; 3] {
        [self.edits, self.breaks, bodies.edits.layout]
    }

    pub(crate) fn index(&self, h: JointHandle) -> Option<usize> {
        match self.index_of.get(h.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }
}
