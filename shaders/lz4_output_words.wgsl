// The output binding of the v1 entry point (`lz4_decode`): plain words.
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
