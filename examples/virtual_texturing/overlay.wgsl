// The on-screen panel: flat-coloured triangles built on the CPU
// (overlay.rs), already in clip space, alpha-blended over the frame.

struct VsOut {
    @builtin(position) pos: vec4<f32>,
    @location(0) rgba: vec4<f32>,
}

@vertex
fn vs_main(@location(0) pos: vec2<f32>, @location(1) rgba: vec4<f32>) -> VsOut {
    var o: VsOut;
    o.pos = vec4<f32>(pos, 0.0, 1.0);
    o.rgba = rgba;
    return o;
}

@fragment
fn fs_main(v: VsOut) -> @location(0) vec4<f32> {
    return v.rgba;
}
