// Virtual texturing without sparse textures or sampler feedback: the
// feedback pass writes the (texture, mip, tile) each pixel wants; the main
// pass looks the tile up in the page tables and samples the physical tile
// pool, walking to coarser mips until it finds a resident tile, and falls
// back to the always-resident packed mips.

struct MipInfo {
    // x: page-table offset within a texture, y: tiles across, z: tiles down.
    v: vec4<u32>,
}

struct Params {
    view_proj: mat4x4<f32>,
    size: f32,          // texels of mip 0
    lod_bias: f32,      // -log2(resolution divisor) for the feedback pass
    tiled_mips: u32,
    mip_count: u32,
    per_texture: u32,
    textures: u32,
    pad0: u32,
    pad1: u32,
    mips: array<MipInfo, 16>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> page_table: array<u32>;
@group(0) @binding(2) var pool: texture_2d_array<f32>;
@group(0) @binding(3) var packed: texture_2d_array<f32>;
@group(0) @binding(4) var samp: sampler;

struct VsOut {
    @builtin(position) pos: vec4<f32>,
    @location(0) uv: vec2<f32>,
    @location(1) @interpolate(flat) tex: u32,
}

@vertex
fn vs_main(@location(0) xz: vec2<f32>, @location(1) uv: vec2<f32>, @location(2) tex: u32) -> VsOut {
    var o: VsOut;
    o.pos = p.view_proj * vec4<f32>(xz.x, 0.0, xz.y, 1.0);
    o.uv = uv;
    o.tex = tex;
    return o;
}

// The mip the hardware would pick (isotropic: the longer footprint axis).
fn lod_of(uv: vec2<f32>) -> f32 {
    let dx = dpdx(uv) * p.size;
    let dy = dpdy(uv) * p.size;
    let rho2 = max(dot(dx, dx), dot(dy, dy));
    let lod = 0.5 * log2(max(rho2, 1e-12)) + p.lod_bias;
    return clamp(lod, 0.0, f32(p.mip_count - 1u));
}

fn tile_pos(uv: vec2<f32>, m: u32) -> vec2<f32> {
    let info = p.mips[m].v;
    return clamp(uv, vec2<f32>(0.0), vec2<f32>(0.99999)) * vec2<f32>(info.yz);
}

@fragment
fn fs_feedback(v: VsOut) -> @location(0) u32 {
    let m = u32(floor(lod_of(v.uv)));
    if m >= p.tiled_mips {
        return 0u; // packed mips are always resident
    }
    let t = vec2<u32>(tile_pos(v.uv, m));
    return 0x80000000u | (v.tex << 20u) | (m << 16u) | (t.y << 8u) | t.x;
}

@fragment
fn fs_main(v: VsOut) -> @location(0) vec4<f32> {
    let lod = lod_of(v.uv);
    var m = u32(floor(lod));
    // Bounded by tiled_mips (at most 15): clamp to the finest resident mip.
    loop {
        if m >= p.tiled_mips {
            break;
        }
        let info = p.mips[m].v;
        let tp = tile_pos(v.uv, m);
        let t = vec2<u32>(tp);
        let e = page_table[v.tex * p.per_texture + info.x + t.y * info.y + t.x];
        if e != 0u {
            let c = textureSampleLevel(pool, samp, fract(tp), i32(e - 1u), 0.0);
            return vec4<f32>(c.rgb, 1.0);
        }
        m += 1u;
    }
    let c = textureSampleLevel(packed, samp, v.uv, i32(v.tex), max(lod - f32(p.tiled_mips), 0.0));
    return vec4<f32>(c.rgb, 1.0);
}
