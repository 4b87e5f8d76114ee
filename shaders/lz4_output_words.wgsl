// The output binding as plain words: the v1 entry point (`lz4_decode`) and
// v2 with word stores (WIDE false).
// The pipeline puts one of lz4_output_words.wgsl / lz4_output_quads.wgsl
// after lz4_decode.wgsl; the shared helpers reach the binding only through
// these three functions.
@group(0) @binding(2) var<storage, read_write> output: array<u32>;

fn out_load(i: u32) -> u32 {
    return output[i];
}

fn out_store(i: u32, v: u32) {
    output[i] = v;
}

// Words in the binding.
fn out_words() -> u32 {
    return arrayLength(&output);
}

// Unit u (words 4u .. 4u + 3) as four words. v2's 16-byte path needs these
// to compile; with this binding WIDE is false and they are never called.
fn out_load_quad(u: u32) -> vec4<u32> {
    let i = u * 4u;
    return vec4<u32>(output[i], output[i + 1u], output[i + 2u], output[i + 3u]);
}

fn out_store_quad(u: u32, v: vec4<u32>) {
    let i = u * 4u;
    output[i] = v.x;
    output[i + 1u] = v.y;
    output[i + 2u] = v.z;
    output[i + 3u] = v.w;
}
