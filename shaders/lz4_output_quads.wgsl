// The output binding of the v2 entry point with 16-byte stores (WIDE true,
// the *V2Wide variants): 16-byte units,
// so a pass can write four whole words with one vec4 store. It is the only
// binding of the output buffer (no aliasing): single words are one component
// of a unit, and a component store is a 4-byte store (naga emits an access
// chain to the component, not a read-modify-write of the vector), so two
// lanes writing different words of one unit do not race.
@group(0) @binding(2) var<storage, read_write> output: array<vec4<u32>>;

fn out_load(i: u32) -> u32 {
    return output[i >> 2u][i & 3u];
}

fn out_store(i: u32, v: u32) {
    output[i >> 2u][i & 3u] = v;
}

// Words in the binding. The pipeline's encode requires an output buffer of a
// multiple of 16 bytes for these variants, so no word of the buffer lies past the last
// whole unit; arrayLength is at most 2^28 here, so the product cannot wrap.
fn out_words() -> u32 {
    return arrayLength(&output) * 4u;
}

// Output unit u (words 4u .. 4u + 3) as one 16-byte load.
fn out_load_quad(u: u32) -> vec4<u32> {
    return output[u];
}

// Output unit u (words 4u .. 4u + 3) as one 16-byte store.
fn out_store_quad(u: u32, v: vec4<u32>) {
    output[u] = v;
}
