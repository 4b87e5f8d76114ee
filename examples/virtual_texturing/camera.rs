//! The scene's geometry and the fixed camera path: terrain patches (one
//! virtual texture each) on a square grid in the y = 0 plane, and a camera
//! circling over them at a low height, looking ahead and down.

/// World units per patch side.
pub const PATCH: f32 = 64.0;
/// Camera height above the ground.
pub const HEIGHT: f32 = 4.0;
/// Vertical field of view, radians.
pub const FOV_Y: f32 = 1.0;

type V3 = [f32; 3];

fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn dot(a: V3, b: V3) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn norm(a: V3) -> V3 {
    let l = dot(a, a).sqrt();
    [a[0] / l, a[1] / l, a[2] / l]
}

/// Patches per grid row for `n` textures.
pub fn grid_side(n: u32) -> u32 {
    (n as f64).sqrt().ceil() as u32
}

/// Where planet `i` of a scene with `terrain` patches floats: its centre
/// and radius. Planets ring the terrain grid, outside it, half sunk into
/// the ground plane (the depth buffer sorts that out), so that from the
/// low fixed camera path they rise over the horizon.
pub fn planet(terrain: u32, i: u32, planets: u32) -> (V3, f32) {
    let w = grid_side(terrain) as f32 * PATCH;
    let r = PATCH;
    let ring = w * 0.6 + r;
    let a = 0.6 + i as f32 * std::f32::consts::TAU / planets.max(1) as f32;
    (
        [
            w * 0.5 + ring * a.cos(),
            r + 12.0 + 8.0 * i as f32,
            w * 0.5 + ring * a.sin(),
        ],
        r,
    )
}

/// Latitude bands and longitude segments of a planet's mesh.
const BANDS: u32 = 24;
const SEGMENTS: u32 = 48;

/// The scene's mesh: per vertex x, y, z, u, v (f32) and the texture index
/// (u32). Textures `0..terrain` are ground patches (two triangles each);
/// the next `planets` are spheres, uv by longitude and latitude.
pub fn mesh(terrain: u32, planets: u32) -> Vec<u32> {
    let g = grid_side(terrain);
    let mut out = Vec::with_capacity(terrain as usize * 6 * 6);
    let mut push = |p: V3, u: f32, v: f32, tex: u32| {
        out.extend([p[0], p[1], p[2], u, v].map(f32::to_bits));
        out.push(tex);
    };
    for i in 0..terrain {
        let (x0, z0) = ((i % g) as f32 * PATCH, (i / g) as f32 * PATCH);
        for (u, v) in [
            (0.0, 0.0),
            (0.0, 1.0),
            (1.0, 0.0),
            (1.0, 0.0),
            (0.0, 1.0),
            (1.0, 1.0),
        ] {
            push([x0 + u * PATCH, 0.0, z0 + v * PATCH], u, v, i);
        }
    }
    for i in 0..planets {
        let (c, r) = planet(terrain, i, planets);
        let at = |s: u32, b: u32| {
            let (u, v) = (s as f32 / SEGMENTS as f32, b as f32 / BANDS as f32);
            let (lon, lat) = (u * std::f32::consts::TAU, v * std::f32::consts::PI);
            let p = [
                c[0] + r * lat.sin() * lon.cos(),
                c[1] + r * lat.cos(),
                c[2] + r * lat.sin() * lon.sin(),
            ];
            (p, u, v)
        };
        for b in 0..BANDS {
            for s in 0..SEGMENTS {
                for (ds, db) in [(0, 0), (0, 1), (1, 0), (1, 0), (0, 1), (1, 1)] {
                    let (p, u, v) = at(s + ds, b + db);
                    push(p, u, v, terrain + i);
                }
            }
        }
    }
    out
}

/// Where the camera is and what it looks at.
#[derive(Clone, Copy, Debug)]
pub struct Camera {
    /// Eye position.
    pub eye: V3,
    /// Unit forward vector.
    pub forward: V3,
    /// Unit right vector.
    pub right: V3,
    /// Unit up vector.
    pub up: V3,
    /// Width / height.
    pub aspect: f32,
}

impl Camera {
    /// The camera of frame `frame` on the fixed path: a circle over the
    /// grid's centre, `speed` radians per frame.
    pub fn on_path(textures: u32, frame: u64, speed: f32, aspect: f32) -> Camera {
        let w = grid_side(textures) as f32 * PATCH;
        let (c, r) = (w * 0.5, w * 0.3);
        let a = 0.3 + frame as f32 * speed;
        let eye = [c + r * a.cos(), HEIGHT, c + r * a.sin()];
        let tangent = [-a.sin(), 0.0, a.cos()];
        let target = [eye[0] + tangent[0] * 8.0, 0.0, eye[2] + tangent[2] * 8.0];
        let forward = norm(sub(target, eye));
        let right = norm(cross(forward, [0.0, 1.0, 0.0]));
        let up = cross(right, forward);
        Camera {
            eye,
            forward,
            right,
            up,
            aspect,
        }
    }

    /// A free camera at `eye` turned `yaw` radians about +y (0 looks along
    /// +x, pi/2 along +z) and `pitch` radians up (negative: down).
    pub fn looking(eye: V3, yaw: f32, pitch: f32, aspect: f32) -> Camera {
        let pitch = pitch.clamp(-1.5, 1.5);
        let forward = [
            yaw.cos() * pitch.cos(),
            pitch.sin(),
            yaw.sin() * pitch.cos(),
        ];
        let right = norm(cross(forward, [0.0, 1.0, 0.0]));
        let up = cross(right, forward);
        Camera {
            eye,
            forward,
            right,
            up,
            aspect,
        }
    }

    /// Yaw and pitch of this camera's forward vector ([`Camera::looking`]'s
    /// angles), so a free camera can start where the path left off.
    pub fn angles(&self) -> (f32, f32) {
        let f = self.forward;
        (f[2].atan2(f[0]), f[1].clamp(-1.0, 1.0).asin())
    }

    /// The view-projection matrix, column-major, wgpu clip space (z in 0..1).
    pub fn view_proj(&self) -> [[f32; 4]; 4] {
        let (near, far) = (0.1f32, 2000.0f32);
        let f = 1.0 / (FOV_Y * 0.5).tan();
        // Rows of the view matrix: right, up, -forward (right-handed).
        let r = self.right;
        let u = self.up;
        let b = [-self.forward[0], -self.forward[1], -self.forward[2]];
        let view = [
            [r[0], u[0], b[0], 0.0],
            [r[1], u[1], b[1], 0.0],
            [r[2], u[2], b[2], 0.0],
            [-dot(r, self.eye), -dot(u, self.eye), -dot(b, self.eye), 1.0],
        ];
        let proj = [
            [f / self.aspect, 0.0, 0.0, 0.0],
            [0.0, f, 0.0, 0.0],
            [0.0, 0.0, far / (near - far), -1.0],
            [0.0, 0.0, near * far / (near - far), 0.0],
        ];
        let mut m = [[0.0f32; 4]; 4];
        for (c, col) in m.iter_mut().enumerate() {
            for (row, v) in col.iter_mut().enumerate() {
                *v = (0..4).map(|k| proj[k][row] * view[c][k]).sum();
            }
        }
        m
    }

    /// Where the ray through the centre of pixel (`px`, `py`) of a
    /// `w` x `h` image hits the ground: (texture, u, v), or `None` for sky.
    /// The CPU reference the tests check screenshots against.
    pub fn ground_hit(
        &self,
        textures: u32,
        px: u32,
        py: u32,
        w: u32,
        h: u32,
    ) -> Option<(u32, f32, f32)> {
        let t = (FOV_Y * 0.5).tan();
        let nx = ((px as f32 + 0.5) / w as f32 * 2.0 - 1.0) * t * self.aspect;
        let ny = (1.0 - (py as f32 + 0.5) / h as f32 * 2.0) * t;
        let d = [
            self.forward[0] + self.right[0] * nx + self.up[0] * ny,
            self.forward[1] + self.right[1] * nx + self.up[1] * ny,
            self.forward[2] + self.right[2] * nx + self.up[2] * ny,
        ];
        if d[1] >= -1e-6 {
            return None;
        }
        let s = -self.eye[1] / d[1];
        let (x, z) = (self.eye[0] + d[0] * s, self.eye[2] + d[2] * s);
        let g = grid_side(textures);
        if x < 0.0 || z < 0.0 {
            return None;
        }
        let (gx, gz) = ((x / PATCH) as u32, (z / PATCH) as u32);
        if gx >= g || gz >= g || gz * g + gx >= textures {
            return None;
        }
        Some((gz * g + gx, x / PATCH - gx as f32, z / PATCH - gz as f32))
    }
}
