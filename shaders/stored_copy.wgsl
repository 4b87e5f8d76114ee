// Stored-block copy: one workgroup copies one block (codec `none`) of a
// batch from the input binding (any byte offset) to its output range.
//
// Rust twin: src/decode/cpu_twin/stored_copy.rs (same names, same loop
// structure; the tests hold this shader to it). Notes: docs/gpu-decode.md.
//
// How a block is copied:
// * The block's output is a list of rows (one row when linear). Rows are
//   walked in order by every lane (the same loop in every lane, uniform
//   control flow); a row's start is advanced by adding the pitch, so the
//   loops do no division or remainder.
// * A row's whole output words split into a head (words before the first
//   16-byte-aligned word), a body of 16-byte units, and a tail (the whole
//   words after the last unit). Lane i writes body units i, i + WG, ...
//   with one vec4 store each: neighbouring lanes read and write neighbouring
//   16 bytes, so loads and stores coalesce. Lanes 0..2 write the head words,
//   lanes 4..6 the tail words, lane 8 the last partial word.
// * WGSL has no byte stores: an output word whose source bytes start at an
//   unaligned input address is a funnel shift of two input words.
// * The partial word of a row whose length is not a multiple of 4 is merged
//   with a masked read-modify-write that keeps the bytes past the row. Rows
//   start 4-byte aligned and blocks' output ranges are disjoint, so no other
//   block and no other lane writes that word: no race.
// * `output` and `output4` are the same buffer seen as words and as 16-byte
//   units. Every word is written through exactly one of the two views, and
//   only through `output` where a read-modify-write is needed (a write to
//   one component of a vector may touch the whole vector, which would race
//   with a neighbouring block).
//
// Safety on malformed input: the descriptor is checked against arrayLength
// of the bindings (overflow-safe, rows included) before anything is read or
// written; a bad one gets STATUS_BAD_DESCRIPTOR and writes nothing.

// Lanes per workgroup; the pipeline sets it (at least 9: lanes 0..8 have
// the edge jobs above).
override WG: u32 = 64u;

// The status codes (STATUS_*), the block limits (MAX_*) and BlockDesc (an
// BlockDesc: 8 x u32) come from the preamble each pipeline puts first
// (src/decode/gpu/preamble.rs), written from the Rust constants the twins use.

struct Params {
    block_count: u32,
    // Workgroups along x of the 2D dispatch (block = y * stride + x).
    grid_stride: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read> descs: array<BlockDesc>;
@group(0) @binding(2) var<storage, read_write> output: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;
@group(0) @binding(5) var<storage, read_write> output4: array<vec4<u32>>;

// Four input bytes starting at any byte address. Words past the binding
// read as 0: the caller only uses bytes inside the block, which is inside
// the binding.
fn input_word(addr: u32) -> u32 {
    let i = addr >> 2u;
    let shift = (addr & 3u) * 8u;
    let lo = input[i];
    if (shift == 0u) {
        return lo;
    }
    var hi = 0u;
    if (i + 1u < arrayLength(&input)) {
        hi = input[i + 1u];
    }
    return (lo >> shift) | (hi << (32u - shift));
}

// Sixteen input bytes starting at any byte address, all inside the binding:
// four or five word loads and a funnel shift.
fn input_vec4(addr: u32) -> vec4<u32> {
    let i = addr >> 2u;
    let shift = (addr & 3u) * 8u;
    let w0 = input[i];
    let w1 = input[i + 1u];
    let w2 = input[i + 2u];
    let w3 = input[i + 3u];
    if (shift == 0u) {
        return vec4<u32>(w0, w1, w2, w3);
    }
    // addr + 15 is inside the block and the address is unaligned, so the
    // fifth word holds some of its bytes and exists.
    let w4 = input[i + 4u];
    let back = 32u - shift;
    return vec4<u32>(
        (w0 >> shift) | (w1 << back),
        (w1 >> shift) | (w2 << back),
        (w2 >> shift) | (w3 << back),
        (w3 >> shift) | (w4 << back),
    );
}

// Copies one row: `len` bytes from input byte address `src` to output word
// `dst_word` on. Lane `lane` does its share (see the header).
fn copy_row(src: u32, dst_word: u32, len: u32, lane: u32) {
    let full = len >> 2u;
    let head = min((4u - (dst_word & 3u)) & 3u, full);
    let units = (full - head) >> 2u;
    let tail_start = head + units * 4u;
    let tail = full - tail_start;

    for (var u = lane; u < units; u = u + WG) {
        let j = head + u * 4u;
        output4[(dst_word + j) >> 2u] = input_vec4(src + j * 4u);
    }
    if (lane < head) {
        output[dst_word + lane] = input_word(src + lane * 4u);
    }
    if (lane >= 4u && lane - 4u < tail) {
        let j = tail_start + lane - 4u;
        output[dst_word + j] = input_word(src + j * 4u);
    }
    let rem = len & 3u;
    if (lane == 8u && rem != 0u) {
        let w = dst_word + full;
        let mask = (1u << (rem * 8u)) - 1u;
        output[w] = (output[w] & ~mask) | (input_word(src + full * 4u) & mask);
    }
}

@compute @workgroup_size(WG)
fn stored_copy(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    let block = wg_id.y * params.grid_stride + wg_id.x;
    if (block >= params.block_count) {
        return;
    }
    let desc = descs[block];

    // Validate the descriptor against the bound buffers before touching them.
    let in_bytes = arrayLength(&input) * 4u;
    let out_bytes = arrayLength(&output) * 4u;
    var ok = desc.dst_size <= MAX_BLOCK_SIZE
        && desc.src_size == desc.dst_size
        && (desc.dst_offset & 3u) == 0u
        && desc.src_size <= in_bytes
        && desc.src_offset <= in_bytes - desc.src_size
        && desc.dst_offset <= out_bytes;
    // Linear output is one row of the whole block.
    var row_bytes = desc.dst_size;
    var pitch = 0u;
    if (ok && desc.row_bytes == 0u) {
        ok = desc.dst_size <= out_bytes - desc.dst_offset;
    } else if (ok) {
        ok = (desc.row_bytes & 3u) == 0u
            && (desc.row_pitch & 3u) == 0u
            && desc.row_pitch >= desc.row_bytes;
        if (ok && desc.dst_size > 0u) {
            let last_row = (desc.dst_size - 1u) / desc.row_bytes;
            let last_len = desc.dst_size - last_row * desc.row_bytes;
            let room = out_bytes - desc.dst_offset;
            // last_row * row_pitch + last_len <= room, without overflow.
            ok = last_len <= room
                && (last_row == 0u || desc.row_pitch <= (room - last_len) / last_row);
        }
        row_bytes = desc.row_bytes;
        pitch = desc.row_pitch;
    }
    if (!ok) {
        if (lane == 0u && block < arrayLength(&status)) {
            status[block] = STATUS_BAD_DESCRIPTOR;
        }
        return;
    }

    // Rows in order; at most dst_size / 4 of them (rows are whole words).
    var src = desc.src_offset;
    var dst_word = desc.dst_offset >> 2u;
    var left = desc.dst_size;
    loop {
        if (left == 0u) {
            break;
        }
        let len = min(row_bytes, left);
        copy_row(src, dst_word, len, lane);
        src = src + len;
        dst_word = dst_word + (pitch >> 2u);
        left = left - len;
    }

    if (lane == 0u && block < arrayLength(&status)) {
        status[block] = STATUS_OK;
    }
}
