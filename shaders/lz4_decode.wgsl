// LZ4 block decoder: one workgroup decodes one block of a batch.
//
// Rust twin: src/decode/cpu_twin/lz4_decode.rs (same names, same loop
// structure; the tests hold this shader to it). Design notes and measured
// figures: docs/gpu-decode.md.
//
// How a block is decoded:
// * Every lane parses every sequence header itself. The parse reads only
//   read-only storage at addresses that are the same in every lane (one
//   broadcast load each), so all lanes agree on every length and offset and
//   the loop stays in uniform control flow, where barriers are allowed. No
//   workgroup memory and no barrier are needed to share a header.
// * A sequence (literals followed by a match) is written in one cooperative
//   pass: lane i writes output words i, i + WG, ... of the sequence. Each
//   word is written whole, once, by one lane: WGSL has no byte stores, and
//   whole-word writes need no read-modify-write.
// * The bytes of a word that the sequence only partly fills stay in a
//   register ("pending", the same value in every lane) until a later
//   sequence completes that word. So a pass never reads a word another lane
//   writes in the same pass, and one storageBarrier per pass (only when the
//   pass wrote a word) makes the pass visible to the matches after it.
// * A match byte at distance k >= offset from the match start repeats the
//   byte k % offset (the LZ4 overlap rule), so every byte of a pass comes
//   from the block's literals, the pending register, or output written in an
//   earlier pass; never from a word written in this pass.
// * The last, partial word of a block whose size is not a multiple of 4 is
//   merged into the existing word by one lane (masked read-modify-write).
//   Block output ranges are disjoint and start 4-byte aligned (rows too), so
//   no other block can own the rest of that word: no race between blocks.
//
// Safety on malformed input: every loop is bounded by the block's sizes
// (a length extension stops once it exceeds the output left),
// every read is checked against the block's input range and every write
// against its output range before it happens. A malformed block stops at
// the first error and reports it in its status word (code in the low 8
// bits, input position relative to src_offset in the high 24 bits).

// The pipeline appends the output binding (lz4_output_words.wgsl for this
// entry point and v2 with word stores, lz4_output_quads.wgsl for v2 with
// 16-byte stores), one of
// lz4_tail_portable.wgsl / lz4_tail_subgroup.wgsl (which defines
// sequence_tail) and, for the subgroup path, puts the
// subgroup_invocation_id parameter (sg_lane) in place of the
// /*@SUBGROUP_LANE_PARAM@*/ marker below; the portable include defines
// sg_lane as a constant instead. (wgpu 30's naga rejects the
// `enable subgroups;` directive; the device feature gates the builtins.)

// Lanes per workgroup; the pipeline sets it (the subgroup size when the
// device has subgroups, 32 otherwise).
override WG: u32 = 32u;

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
// Binding 2, `output`, is declared by the pipeline's output include:
// lz4_output_words.wgsl (v1 and v2 with word stores: array<u32>) or
// lz4_output_quads.wgsl (v2 with 16-byte stores:
// array<vec4<u32>>, for 16-byte stores). Everything here reaches it through
// out_load / out_store / out_words, so both entry points share these helpers.
@group(0) @binding(3) var<storage, read_write> status: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

// Where one block's output goes, in 32-bit words.
struct Layout {
    // First output word of the block.
    word0: u32,
    // Words per row (0 = linear output).
    row_words: u32,
    // Words from one row start to the next.
    pitch_words: u32,
}

// The state of one sequence's copy pass.
struct Sequence {
    // Output position (block-relative) of the first literal.
    lit_start: u32,
    // Output position of the first match byte (= lit_start + literal count).
    match_start: u32,
    // Output position one past the match.
    end: u32,
    // Input byte address of the first literal.
    lit_src: u32,
    // Match offset (0 when the sequence has no match).
    offset: u32,
    // Bytes [lit_start & ~3, lit_start) of the output, little-endian.
    pending: u32,
}

fn input_byte(addr: u32) -> u32 {
    return (input[addr >> 2u] >> ((addr & 3u) * 8u)) & 0xffu;
}

// Four input bytes starting at any byte address; the caller guarantees
// addr + 3 is inside the block's input range.
fn input_word(addr: u32) -> u32 {
    let shift = (addr & 3u) * 8u;
    let lo = input[addr >> 2u];
    if (shift == 0u) {
        return lo;
    }
    let hi = input[(addr >> 2u) + 1u];
    return (lo >> shift) | (hi << (32u - shift));
}

// The output buffer word holding block-relative output word `w`.
fn phys_word(dst: Layout, w: u32) -> u32 {
    if (dst.row_words == 0u) {
        return dst.word0 + w;
    }
    return dst.word0 + (w / dst.row_words) * dst.pitch_words + (w % dst.row_words);
}

fn output_byte(dst: Layout, pos: u32) -> u32 {
    return (out_load(phys_word(dst, pos >> 2u)) >> ((pos & 3u) * 8u)) & 0xffu;
}

// Four output bytes starting at block position `pos`; the caller guarantees
// all four were written in an earlier pass.
fn output_word(dst: Layout, pos: u32) -> u32 {
    let shift = (pos & 3u) * 8u;
    let lo = out_load(phys_word(dst, pos >> 2u));
    if (shift == 0u) {
        return lo;
    }
    let hi = out_load(phys_word(dst, (pos >> 2u) + 1u));
    return (lo >> shift) | (hi << (32u - shift));
}

// Where the byte at match distance k comes from (block output position):
// beyond the offset the match repeats its first `offset` bytes.
fn match_source(seq: Sequence, k: u32) -> u32 {
    var r = k;
    if (r >= seq.offset) {
        r = r % seq.offset;
    }
    return seq.match_start - seq.offset + r;
}

// The value of the byte at block output position `q`, which lies before the
// end of the current sequence and was not written in the current pass.
fn source_byte(dst: Layout, seq: Sequence, q: u32) -> u32 {
    if (q >= seq.lit_start) {
        return input_byte(seq.lit_src + (q - seq.lit_start));
    }
    if (q >= (seq.lit_start & ~3u)) {
        return (seq.pending >> ((q & 3u) * 8u)) & 0xffu;
    }
    return output_byte(dst, q);
}

// The value of the output byte at `pos` in [lit_start & ~3, end).
fn sequence_byte(dst: Layout, seq: Sequence, pos: u32) -> u32 {
    if (pos < seq.match_start) {
        return source_byte(dst, seq, pos);
    }
    return source_byte(dst, seq, match_source(seq, pos - seq.match_start));
}

// Four contiguous source bytes starting at block position q, when they all
// come from one place that can be read a word at a time (else 4 bytes).
fn source_word(dst: Layout, seq: Sequence, q: u32) -> u32 {
    if (q >= seq.lit_start && q + 4u <= seq.match_start) {
        return input_word(seq.lit_src + (q - seq.lit_start));
    }
    if (q + 4u <= (seq.lit_start & ~3u)) {
        return output_word(dst, q);
    }
    return source_byte(dst, seq, q)
        | (source_byte(dst, seq, q + 1u) << 8u)
        | (source_byte(dst, seq, q + 2u) << 16u)
        | (source_byte(dst, seq, q + 3u) << 24u);
}

// The value of the whole output word starting at block position p (p is a
// multiple of 4 in [lit_start & ~3, end & ~3)).
fn sequence_word(dst: Layout, seq: Sequence, p: u32) -> u32 {
    if (p >= seq.lit_start && p + 4u <= seq.match_start) {
        return input_word(seq.lit_src + (p - seq.lit_start));
    }
    if (p >= seq.match_start) {
        let k = p - seq.match_start;
        var r = k;
        if (r >= seq.offset) {
            r = r % seq.offset;
        }
        // The four bytes are contiguous in the source unless the repeat
        // wraps inside this word.
        if (r + 4u <= seq.offset) {
            return source_word(dst, seq, seq.match_start - seq.offset + r);
        }
    }
    return sequence_byte(dst, seq, p)
        | (sequence_byte(dst, seq, p + 1u) << 8u)
        | (sequence_byte(dst, seq, p + 2u) << 16u)
        | (sequence_byte(dst, seq, p + 3u) << 24u);
}

// Reads an LZ4 length extension (bytes added while they are 255) starting
// at *ip. Returns the sum, LEN_TRUNCATED when the input ends first, or
// LEN_TOO_LONG as soon as the sum exceeds `limit` (the output left), which
// bounds the loop by limit / 255 + 1 steps whatever the input holds.
const LEN_TRUNCATED: u32 = 0xffffffffu;
const LEN_TOO_LONG: u32 = 0xfffffffeu;

fn read_length_ext(ip: ptr<function, u32>, src_end: u32, limit: u32) -> u32 {
    var sum = 0u;
    loop {
        if (*ip >= src_end) {
            sum = LEN_TRUNCATED;
            break;
        }
        let b = input_byte(*ip);
        *ip = *ip + 1u;
        sum = sum + b;
        if (b != 255u) {
            break;
        }
        if (sum > limit) {
            sum = LEN_TOO_LONG;
            break;
        }
    }
    return sum;
}

// Marks a descriptor that fails block_layout's checks (a real word0 is at
// most 0x3fffffff).
const BAD_LAYOUT: u32 = 0xffffffffu;

// Checks a descriptor against the bound buffers (overflow-safe, rows
// included) and returns its output layout, or word0 == BAD_LAYOUT. Shared by
// every entry point.
fn block_layout(desc: BlockDesc) -> Layout {
    let in_bytes = arrayLength(&input) * 4u;
    let out_bytes = out_words() * 4u;
    var ok = desc.dst_size <= MAX_BLOCK_SIZE
        && desc.src_size <= MAX_SRC_SIZE
        && (desc.dst_offset & 3u) == 0u
        && desc.src_size <= in_bytes
        && desc.src_offset <= in_bytes - desc.src_size
        && desc.dst_offset <= out_bytes;
    var dst = Layout(desc.dst_offset >> 2u, 0u, 0u);
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
        dst.row_words = desc.row_bytes >> 2u;
        dst.pitch_words = desc.row_pitch >> 2u;
    }
    if (!ok) {
        dst.word0 = BAD_LAYOUT;
    }
    return dst;
}

// Lane 0's last step for a block: merges the last partial output word
// (keeping the bytes past the block) when decoding succeeded, and writes
// the status word.
fn finish_block(block: u32, dst: Layout, dst_size: u32, word: u32, pending: u32) {
    if ((word & 0xffu) == STATUS_OK && (dst_size & 3u) != 0u) {
        let pw = phys_word(dst, dst_size >> 2u);
        let mask = (1u << ((dst_size & 3u) * 8u)) - 1u;
        out_store(pw, (out_load(pw) & ~mask) | (pending & mask));
    }
    if (block < arrayLength(&status)) {
        status[block] = word;
    }
}

@compute @workgroup_size(WG)
fn lz4_decode(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
    /*@SUBGROUP_LANE_PARAM@*/
) {
    let block = wg_id.y * params.grid_stride + wg_id.x;
    if (block >= params.block_count) {
        return;
    }
    let desc = descs[block];

    // Validate the descriptor against the bound buffers before touching them.
    let dst = block_layout(desc);
    if (dst.word0 == BAD_LAYOUT) {
        if (lane == 0u && block < arrayLength(&status)) {
            status[block] = STATUS_BAD_DESCRIPTOR;
        }
        return;
    }

    let src_start = desc.src_offset;
    let src_end = desc.src_offset + desc.src_size;
    let dst_size = desc.dst_size;
    var ip = src_start;
    var op = 0u;
    var pending = 0u;
    var code = STATUS_OK;
    var err_at = src_start;

    // Each iteration consumes at least the token byte, so the loop ends
    // after at most src_size iterations.
    loop {
        if (ip >= src_end) {
            code = STATUS_TRUNCATED;
            err_at = ip;
            break;
        }
        let token = input_byte(ip);
        ip = ip + 1u;

        var lit_len = token >> 4u;
        if (lit_len == 15u) {
            let ext = read_length_ext(&ip, src_end, dst_size - op);
            if (ext == LEN_TRUNCATED) {
                code = STATUS_TRUNCATED;
                err_at = ip;
                break;
            }
            if (ext == LEN_TOO_LONG) {
                code = STATUS_OUTPUT_OVERRUN;
                err_at = ip;
                break;
            }
            lit_len = lit_len + ext;
        }
        if (lit_len > src_end - ip) {
            code = STATUS_TRUNCATED;
            err_at = ip;
            break;
        }
        if (lit_len > dst_size - op) {
            code = STATUS_OUTPUT_OVERRUN;
            err_at = ip;
            break;
        }
        let lit_src = ip;
        ip = ip + lit_len;
        let match_start = op + lit_len;

        // The block ends after a sequence's literals when the input does.
        let last = ip >= src_end;
        var offset = 0u;
        var match_len = 0u;
        if (!last) {
            if (src_end - ip < 2u) {
                code = STATUS_TRUNCATED;
                err_at = ip;
                break;
            }
            offset = input_byte(ip) | (input_byte(ip + 1u) << 8u);
            if (offset == 0u) {
                code = STATUS_ZERO_OFFSET;
                err_at = ip;
                break;
            }
            ip = ip + 2u;
            match_len = 4u + (token & 15u);
            if (match_len == 19u) {
                let ext = read_length_ext(&ip, src_end, dst_size - match_start);
                if (ext == LEN_TRUNCATED) {
                    code = STATUS_TRUNCATED;
                    err_at = ip;
                    break;
                }
                if (ext == LEN_TOO_LONG) {
                    code = STATUS_OUTPUT_OVERRUN;
                    err_at = ip;
                    break;
                }
                match_len = match_len + ext;
            }
            if (match_len > dst_size - match_start) {
                code = STATUS_OUTPUT_OVERRUN;
                err_at = ip;
                break;
            }
            if (offset > match_start) {
                code = STATUS_OFFSET_OUT_OF_RANGE;
                err_at = ip;
                break;
            }
        }

        let seq = Sequence(op, match_start, match_start + match_len, lit_src, offset, pending);

        // The cooperative pass: whole words [lit_start / 4, end / 4).
        let first_word = seq.lit_start >> 2u;
        let end_word = seq.end >> 2u;
        // Most passes are at most WG words: one `if`, no loop. (Loops are
        // kept for long passes only: lavapipe caps the iterations of all
        // loops of an invocation together at 65535.)
        let words = end_word - first_word;
        if (lane < words) {
            let w = first_word + lane;
            out_store(phys_word(dst, w), sequence_word(dst, seq, w * 4u));
        }
        if (words > WG) {
            for (var w = first_word + WG + lane; w < end_word; w = w + WG) {
                out_store(phys_word(dst, w), sequence_word(dst, seq, w * 4u));
            }
        }
        // The bytes of the partly filled last word stay pending.
        pending = sequence_tail(dst, seq, sg_lane);
        op = seq.end;
        if (end_word != first_word) {
            storageBarrier();
        }
        if (last) {
            break;
        }
    }

    if (code == STATUS_OK && op != dst_size) {
        code = STATUS_SHORT_OUTPUT;
        err_at = ip;
    }
    if (lane == 0u) {
        finish_block(block, dst, dst_size, code | ((err_at - src_start) << 8u), pending);
    }
}
