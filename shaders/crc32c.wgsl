// crc32c (Castagnoli) of many blocks per dispatch: one workgroup checks one
// block's stored bytes against the checksum the pack recorded.
//
// Rust twin: src/decode/cpu_twin/crc32c.rs (same names, same loop
// structure; the tests hold this shader to it and to the `crc32c` crate).
// Notes: docs/gpu-decode.md.
//
// How a block is checked:
// * The block is cut into WG contiguous segments, one per lane, with
//   boundaries on 4-byte input addresses so that a lane reads whole words
//   except at the block's two ends.
// * Each lane computes the raw CRC (register starting at 0, no final
//   inversion) of its segment, byte by byte with a 256-entry table that the
//   workgroup builds in workgroup memory.
// * CRCs are linear over GF(2): the raw CRC of the block is the XOR over the
//   lanes of each segment's raw CRC "shifted" past the bytes that follow the
//   segment, and shifting by n bytes is multiplication by x^(8n) modulo the
//   polynomial. x^(8n) is the product of x^(8 * 2^j) over the bits j of n;
//   those 32 powers come precomputed in the uniform block. So every lane
//   shifts its own value independently and one atomicXor per lane combines
//   them (the order does not matter).
// * The standard CRC starts its register at !0 and inverts at the end:
//   crc = !(shift(!0, size) ^ raw).
//
// Safety on malformed input: the descriptor is checked against arrayLength
// of the input binding before anything is read; a bad one gets
// STATUS_BAD_DESCRIPTOR. Every loop is bounded by the block's size.

// Lanes per workgroup; the pipeline sets it.
override WG: u32 = 64u;

// The status codes (STATUS_*) and the block limits (MAX_*) come from the
// preamble each pipeline puts first (src/decode/gpu/preamble.rs), written
// from the Rust constants the twins use.

// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82f63b78u;

// One block to check; mirrors BlockCheckDesc (4 x u32, 16 bytes).
struct CheckDesc {
    src_offset: u32,
    src_size: u32,
    expected: u32,
    reserved: u32,
}

struct Params {
    block_count: u32,
    // Workgroups along x of the 2D dispatch (block = y * stride + x).
    grid_stride: u32,
    pad0: u32,
    pad1: u32,
    // x^(8 * 2^j) mod POLY (reflected) for j = 0..32, four per vec4.
    x8_pow: array<vec4<u32>, 8>,
}

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read> descs: array<CheckDesc>;
@group(0) @binding(2) var<storage, read_write> status: array<u32>;
@group(0) @binding(3) var<storage, read_write> computed: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

var<workgroup> table: array<u32, 256>;
var<workgroup> combined: atomic<u32>;

fn input_byte(addr: u32) -> u32 {
    return (input[addr >> 2u] >> ((addr & 3u) * 8u)) & 0xffu;
}

// The table entry for byte value i: i run through 8 steps of the register.
fn table_entry(i: u32) -> u32 {
    var c = i;
    for (var k = 0u; k < 8u; k = k + 1u) {
        c = (c >> 1u) ^ (POLY & (0u - (c & 1u)));
    }
    return c;
}

// One byte through the register.
fn crc_byte(c: u32, b: u32) -> u32 {
    return table[(c ^ b) & 0xffu] ^ (c >> 8u);
}

// a(x) * b(x) mod POLY, both reflected (bit 31 is x^0).
fn mul_mod(a: u32, b_in: u32) -> u32 {
    var b = b_in;
    var p = 0u;
    for (var k = 0u; k < 32u; k = k + 1u) {
        p = p ^ (b & (0u - ((a >> (31u - k)) & 1u)));
        b = (b >> 1u) ^ (POLY & (0u - (b & 1u)));
    }
    return p;
}

// The raw CRC register `c` advanced past `n` zero bytes: c * x^(8n).
fn shift_bytes(c: u32, n: u32) -> u32 {
    var r = c;
    var left = n;
    var j = 0u;
    loop {
        if (left == 0u || r == 0u) {
            break;
        }
        if ((left & 1u) != 0u) {
            r = mul_mod(r, params.x8_pow[j >> 2u][j & 3u]);
        }
        left = left >> 1u;
        j = j + 1u;
    }
    return r;
}

// The raw CRC (register from 0) of input bytes [lo, hi).
fn segment_crc(lo: u32, hi: u32) -> u32 {
    var c = 0u;
    var p = lo;
    // Up to three bytes before the first whole word.
    loop {
        if (p >= hi || (p & 3u) == 0u) {
            break;
        }
        c = crc_byte(c, input_byte(p));
        p = p + 1u;
    }
    // Whole words: four table steps per load.
    loop {
        if (hi - p < 4u) {
            break;
        }
        c = c ^ input[p >> 2u];
        c = table[c & 0xffu] ^ (c >> 8u);
        c = table[c & 0xffu] ^ (c >> 8u);
        c = table[c & 0xffu] ^ (c >> 8u);
        c = table[c & 0xffu] ^ (c >> 8u);
        p = p + 4u;
    }
    // Up to three bytes after the last whole word.
    loop {
        if (p >= hi) {
            break;
        }
        c = crc_byte(c, input_byte(p));
        p = p + 1u;
    }
    return c;
}

@compute @workgroup_size(WG)
fn crc32c(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    let block = wg_id.y * params.grid_stride + wg_id.x;
    if (block >= params.block_count) {
        return;
    }
    let desc = descs[block];
    let in_bytes = arrayLength(&input) * 4u;
    let ok = desc.src_size <= MAX_CHECK_SIZE
        && desc.src_size <= in_bytes
        && desc.src_offset <= in_bytes - desc.src_size;

    // Build the byte table; the barriers stay in uniform control flow.
    for (var i = lane; i < 256u; i = i + WG) {
        table[i] = table_entry(i);
    }
    if (lane == 0u) {
        atomicStore(&combined, 0u);
    }
    workgroupBarrier();

    if (ok) {
        let start = desc.src_offset;
        let end = start + desc.src_size;
        // Segments of `seg` bytes from the word holding the first byte;
        // seg is a multiple of 4 so inner segments start word-aligned.
        let base = start & ~3u;
        let seg = (((end - base) + WG - 1u) / WG + 3u) & ~3u;
        // Relative to base, so nothing overflows near the top of u32.
        let head = start - base;
        let span = end - base;
        let lo = base + max(head, min(span, lane * seg));
        let hi = base + max(head, min(span, (lane + 1u) * seg));
        let c = shift_bytes(segment_crc(lo, hi), end - hi);
        atomicXor(&combined, c);
    }
    workgroupBarrier();

    if (lane == 0u) {
        var code = STATUS_BAD_DESCRIPTOR;
        var crc = 0u;
        if (ok) {
            crc = ~(shift_bytes(0xffffffffu, desc.src_size) ^ atomicLoad(&combined));
            code = STATUS_OK;
            if (crc != desc.expected) {
                code = STATUS_CHECKSUM_MISMATCH;
            }
        }
        if (block < arrayLength(&status)) {
            status[block] = code;
        }
        if (block < arrayLength(&computed)) {
            computed[block] = crc;
        }
    }
}
