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
    debug: u32,         // 0 image, 1 mip tint, 2 residency (DebugView)
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
fn vs_main(@location(0) pos: vec3<f32>, @location(1) uv: vec2<f32>, @location(2) tex: u32) -> VsOut {
    var o: VsOut;
    o.pos = p.view_proj * vec4<f32>(pos, 1.0);
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

struct Fetched {
    c: vec3<f32>,
    // The mip the colour came from (tiled_mips and up: the packed tail).
    mip: u32,
}

// Clamp to the finest resident mip, walking the page tables from the mip
// the pixel wants; bounded by tiled_mips (at most 15).
fn fetch(v: VsOut, lod: f32) -> Fetched {
    var m = u32(floor(lod));
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
            return Fetched(c.rgb, m);
        }
        m += 1u;
    }
    let tail = max(lod - f32(p.tiled_mips), 0.0);
    let c = textureSampleLevel(packed, samp, v.uv, i32(v.tex), tail);
    return Fetched(c.rgb, p.tiled_mips + u32(tail));
}

// The tint of each mip in the mip view: red, yellow, green, cyan, blue,
// magenta, then grey for everything coarser.
fn mip_tint(m: u32) -> vec3<f32> {
    switch m {
        case 0u: { return vec3<f32>(1.0, 0.15, 0.15); }
        case 1u: { return vec3<f32>(1.0, 0.9, 0.1); }
        case 2u: { return vec3<f32>(0.2, 1.0, 0.2); }
        case 3u: { return vec3<f32>(0.1, 0.9, 1.0); }
        case 4u: { return vec3<f32>(0.25, 0.35, 1.0); }
        case 5u: { return vec3<f32>(1.0, 0.3, 1.0); }
        default: { return vec3<f32>(0.6, 0.6, 0.6); }
    }
}

@fragment
fn fs_main(v: VsOut) -> @location(0) vec4<f32> {
    let lod = lod_of(v.uv);
    let f = fetch(v, lod);
    if p.debug == 1u {
        return vec4<f32>(mix(f.c, mip_tint(f.mip), 0.5), 1.0);
    }
    if p.debug == 2u {
        // Keep the image's shading so tiles stay recognisable.
        let luma = dot(f.c, vec3<f32>(0.299, 0.587, 0.114));
        let want = u32(floor(lod));
        var tint = vec3<f32>(0.15, 0.95, 0.2); // the wanted mip is resident
        if f.mip >= p.tiled_mips && want < p.tiled_mips {
            tint = vec3<f32>(1.0, 0.1, 0.1); // only the packed tail
        } else if f.mip > want {
            tint = vec3<f32>(1.0, 0.55, 0.1); // a coarser tile stands in
        }
        return vec4<f32>(tint * (0.35 + 0.65 * luma), 1.0);
    }
    return vec4<f32>(f.c, 1.0);
}
