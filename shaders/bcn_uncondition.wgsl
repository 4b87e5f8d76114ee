// BCn un-conditioning: the pass after the LZ4 decoder for blocks the packer
// stored field by field (src/pack/condition.rs). The decoder writes such a
// block, in its conditioned order, linearly into a region of the output
// buffer; this pass gathers every byte back to where the texture has it and
// writes the block to its real output range (linear, or rows padded for
// copy_buffer_to_texture). One workgroup per block, many blocks per
// dispatch. Transform 0 (none) is a plain relayout: it moves a linearly
// decoded block's bytes, or a piece of them, into rows at the region's
// pitch (a texture's packed mips, whose block the decoder writes linearly).
//
// Rust twin: src/decode/cpu_twin/bcn_uncondition.rs (same names, same loop
// structure; the tests hold this shader to it). Notes: docs/gpu-decode.md.
//
// How a block is put back:
// * Lane i writes output words i, i + WG, ... of the block, each whole and
//   once. Output byte p (in the texture's order) comes from conditioned
//   byte source_offset(p); a word's four bytes may come from four fields,
//   so each is gathered on its own.
// * Rows start 4-byte aligned and hold a multiple of 4 bytes, so an output
//   word never straddles two rows; the block's last word, if partial, is
//   merged with the bytes past the block (masked read-modify-write; no
//   other block writes that word).
// * The conditioned bytes and the block's output range are both in the
//   `output` binding and must not overlap (checked here); the blocks of one
//   dispatch must not write each other's conditioned bytes (the caller's
//   promise, checked on the CPU by validate_uncondition_descs).
//
// Safety on malformed input: the descriptor is checked against arrayLength
// of the bindings (overflow-safe, rows included) and the transform id
// against the known ones before anything is read or written; a bad one gets
// STATUS_BAD_DESCRIPTOR and writes nothing.

override WG: u32 = 64u;

// The status codes (STATUS_*) and the block limits (MAX_*) come from the
// preamble each pipeline puts first (src/decode/gpu/preamble.rs), written
// from the Rust constants the twins use.

// BlockTransform ids (src/pack/condition.rs).
const TRANSFORM_BYTE_PLANES_16: u32 = 5u;
const TRANSFORM_LAST: u32 = 5u;

// Field lengths of transforms 1..=4, one per nibble, first field lowest:
// bc1-split 4|4, bc3-split 2|6|4|4, bc4-split 2|6, bc5-split 2|6|2|6.
const FIELD_NIBBLES = array<u32, 4>(0x44u, 0x4462u, 0x62u, 0x6262u);

// One block; mirrors BlockDesc (8 x u32). src_offset: where its
// conditioned bytes start in `output`; src_size == dst_size; reserved0:
// the transform id (0: none, a plain relayout).
struct UnconditionDesc {
    src_offset: u32,
    src_size: u32,
    dst_offset: u32,
    dst_size: u32,
    row_bytes: u32,
    row_pitch: u32,
    transform: u32,
    reserved1: u32,
}

struct Params {
    block_count: u32,
    grid_stride: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> descs: array<UnconditionDesc>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;
@group(0) @binding(2) var<storage, read_write> status: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

// Bytes of one element (one BC block) of a transform; 0 for none.
fn element_bytes(t: u32) -> u32 {
    switch t {
        case 1u, 3u: { return 8u; }
        case 2u, 4u, 5u: { return 16u; }
        default: { return 0u; }
    }
}

// Where byte `at` of a `len`-byte block, in the texture's order, lies in
// the conditioned block (BlockTransform::source_offset).
fn source_offset(t: u32, len: u32, at: u32) -> u32 {
    let e = element_bytes(t);
    if (e == 0u) {
        return at;
    }
    let n = len / e;
    if (at >= n * e) {
        return at;
    }
    let elem = at / e;
    var byte = at % e;
    if (t == TRANSFORM_BYTE_PLANES_16) {
        return byte * n + elem;
    }
    var fields = FIELD_NIBBLES[t - 1u];
    var start = 0u;
    for (var f = 0u; f < 4u; f++) {
        let flen = fields & 15u;
        if (byte < flen) {
            return start * n + elem * flen + byte;
        }
        byte -= flen;
        start += flen;
        fields = fields >> 4u;
    }
    return at;
}

fn output_byte(addr: u32) -> u32 {
    return (output[addr >> 2u] >> ((addr & 3u) * 8u)) & 0xffu;
}

// The bytes a block spans in the output, padding between rows included
// (BlockDesc::dst_extent), or 0xffffffff when it overflows.
fn dst_extent(d: UnconditionDesc) -> u32 {
    if (d.row_bytes == 0u || d.dst_size == 0u) {
        return d.dst_size;
    }
    let last_row = (d.dst_size - 1u) / d.row_bytes;
    let last_len = d.dst_size - last_row * d.row_bytes;
    if (last_row != 0u && d.row_pitch > (0xffffffffu - last_len) / last_row) {
        return 0xffffffffu;
    }
    return last_row * d.row_pitch + last_len;
}

fn valid(d: UnconditionDesc) -> bool {
    // Clamped so a binding of 4 GiB or more does not wrap (as the twin).
    let out_len = min(arrayLength(&output), 0x3fffffffu) * 4u;
    let extent = dst_extent(d);
    if (d.transform > TRANSFORM_LAST) {
        return false;
    }
    if (d.src_size != d.dst_size || d.dst_size > MAX_BLOCK_SIZE || (d.dst_offset & 3u) != 0u) {
        return false;
    }
    if (d.row_bytes != 0u && ((d.row_bytes & 3u) != 0u || (d.row_pitch & 3u) != 0u || d.row_pitch < d.row_bytes)) {
        return false;
    }
    if (d.src_offset > out_len || d.src_size > out_len - d.src_offset) {
        return false;
    }
    if (extent == 0xffffffffu || d.dst_offset > out_len || extent > out_len - d.dst_offset) {
        return false;
    }
    // The conditioned bytes and the output range must not overlap.
    return d.src_offset + d.src_size <= d.dst_offset || d.dst_offset + extent <= d.src_offset;
}

@compute @workgroup_size(WG)
fn bcn_uncondition(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let block = wg.y * params.grid_stride + wg.x;
    if (block >= params.block_count) {
        return;
    }
    let d = descs[block];
    if (!valid(d)) {
        if (lane == 0u) {
            status[block] = STATUS_BAD_DESCRIPTOR;
        }
        return;
    }
    let words = (d.dst_size + 3u) / 4u;
    for (var w = lane; w < words; w += WG) {
        let p = w * 4u;
        var dst = d.dst_offset + p;
        if (d.row_bytes != 0u) {
            let row = p / d.row_bytes;
            dst = d.dst_offset + row * d.row_pitch + (p - row * d.row_bytes);
        }
        var word = 0u;
        var mask = 0u;
        for (var k = 0u; k < 4u; k++) {
            if (p + k < d.dst_size) {
                let src = d.src_offset + source_offset(d.transform, d.dst_size, p + k);
                word |= output_byte(src) << (k * 8u);
                mask |= 0xffu << (k * 8u);
            }
        }
        if (mask == 0xffffffffu) {
            output[dst >> 2u] = word;
        } else {
            output[dst >> 2u] = (output[dst >> 2u] & ~mask) | word;
        }
    }
    if (lane == 0u) {
        status[block] = STATUS_OK;
    }
}
