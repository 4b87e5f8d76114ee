// LZ4 block decoder, v2 entry point (`lz4_decode_v2`; twin:
// src/decode/cpu_twin/lz4_decode_v2.rs). The pipeline appends this file to
// lz4_decode.wgsl (whose helpers it shares: descriptor check, sequence
// words, pending tail, finish_block), the output binding (16-byte units,
// lz4_output_quads.wgsl, for the variants with 16-byte stores; words,
// lz4_output_words.wgsl, for the others) and one header window:
// lz4_window_subgroup.wgsl or lz4_window_portable.wgsl. Those define
// `override WIN` (words in the window), window_load and window_byte.
// The pipeline sets `override WIDE` (below): one source for v2 with word
// stores (SubgroupV2, PortableV2) and with 16-byte stores (the *V2Wide
// variants).
//
// What changes from v1 (docs/gpu-decode.md, "v2"):
// - Sequence headers come from a window of WIN input words held one per
//   lane and read with subgroupShuffle, instead of every lane re-reading
//   every header byte from global memory. The window for the next header is
//   loaded before the copy pass, so its latency overlaps the copies.
// - A barrier only before a pass whose match reads an output word written
//   since the last barrier (tracked as the first such word, `dirty`);
//   literal-only passes and matches reaching further back need none.
// - The linear layout's pass addresses words without the per-word row
//   arithmetic. With WIDE, a pass of more than WG words, linear or in rows
//   of whole 16-byte units (rows_in_units), writes the words of each
//   16-byte-aligned unit of the output buffer with one vec4 store (the
//   output is bound as array<vec4<u32>>, lz4_output_quads.wgsl): lane i
//   takes unit i, i + WG, ...; the up to three words before the first unit
//   and after the last are single stores. A unit whose 16 bytes are one contiguous run of final
//   bytes (literals, or a match that does not wrap inside them and reads
//   earlier output) is copied as a run; any other unit is put together word
//   by word exactly as the single stores would be. Either way a unit reads
//   only bytes the pending-word rule already makes final before the pass.

// Whether long passes (linear, or rows of whole units) use 16-byte stores (true: the *V2Wide
// variants, output bound as 16-byte units) or one word store per lane and
// word, as v2 did before them (false). Set by the pipeline; a constant to
// the driver's compiler, so the branch not taken is dead code there.
override WIDE: bool;

// No output word written since the last barrier.
const NO_WORD: u32 = 0xffffffffu;

// Makes sure input bytes [addr, addr + n) (n <= 4) are in the window,
// reloading it at addr's word when they are not. The condition is the same
// in every lane, so the reload (and everything after it) stays uniform.
fn window_cover(addr: u32, n: u32, win: ptr<function, u32>, win_word: ptr<function, u32>, sg_lane: u32) {
    if (((addr + n - 1u) >> 2u) - *win_word >= WIN) {
        *win_word = addr >> 2u;
        *win = window_load(*win_word, sg_lane);
    }
}

// read_length_ext reading its bytes through the window.
fn read_length_ext_win(
    ip: ptr<function, u32>,
    src_end: u32,
    limit: u32,
    win: ptr<function, u32>,
    win_word: ptr<function, u32>,
    sg_lane: u32,
) -> u32 {
    var sum = 0u;
    loop {
        if (*ip >= src_end) {
            sum = LEN_TRUNCATED;
            break;
        }
        window_cover(*ip, 1u, win, win_word, sg_lane);
        let b = window_byte(*win, *win_word, *ip);
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

// Input bytes [addr, addr + 16) as four words; the caller guarantees they
// are inside the block's input range (five loads when addr is unaligned, all
// of them inside that range).
fn input_quad(addr: u32) -> vec4<u32> {
    let i = addr >> 2u;
    let shift = (addr & 3u) * 8u;
    let a = input[i];
    let b = input[i + 1u];
    let c = input[i + 2u];
    let d = input[i + 3u];
    if (shift == 0u) {
        return vec4<u32>(a, b, c, d);
    }
    let e = input[i + 4u];
    let back = 32u - shift;
    return vec4<u32>(
        (a >> shift) | (b << back),
        (b >> shift) | (c << back),
        (c >> shift) | (d << back),
        (d >> shift) | (e << back),
    );
}

// Output bytes [pos, pos + 16) of a block as four words; the caller
// guarantees all sixteen were written in an earlier pass. Linear: one
// 16-byte load when they are one aligned unit of the buffer. Rows: word by
// word, as the sixteen bytes may lie in two rows.
fn output_quad(dst: Layout, pos: u32) -> vec4<u32> {
    if (dst.row_words != 0u) {
        return vec4<u32>(
            output_word(dst, pos),
            output_word(dst, pos + 4u),
            output_word(dst, pos + 8u),
            output_word(dst, pos + 12u),
        );
    }
    let i = dst.word0 + (pos >> 2u);
    let shift = (pos & 3u) * 8u;
    if (shift == 0u && (i & 3u) == 0u) {
        return out_load_quad(i >> 2u);
    }
    let a = out_load(i);
    let b = out_load(i + 1u);
    let c = out_load(i + 2u);
    let d = out_load(i + 3u);
    if (shift == 0u) {
        return vec4<u32>(a, b, c, d);
    }
    let e = out_load(i + 4u);
    let back = 32u - shift;
    return vec4<u32>(
        (a >> shift) | (b << back),
        (b >> shift) | (c << back),
        (c >> shift) | (d << back),
        (d >> shift) | (e << back),
    );
}

// The four output words of block positions [p, p + 16) (p a multiple of 4,
// the range inside [lit_start & ~3, end & ~3)).
fn sequence_quad(dst: Layout, seq: Sequence, p: u32) -> vec4<u32> {
    // Where the 16 bytes come from, when they are one contiguous run.
    var q = 0xffffffffu;
    if (p >= seq.match_start) {
        let k = p - seq.match_start;
        var r = k;
        if (r >= seq.offset) {
            r = r % seq.offset;
        }
        // A match that does not wrap inside the unit (offset >= r + 16).
        if (r + 16u <= seq.offset) {
            q = seq.match_start - seq.offset + r;
        }
    } else if (p >= seq.lit_start) {
        q = p;
    }
    if (q != 0xffffffffu) {
        // Literals: read from the input, never from this pass's output.
        if (q >= seq.lit_start && q + 16u <= seq.match_start) {
            return input_quad(seq.lit_src + (q - seq.lit_start));
        }
        // Earlier output: every word below lit_start & ~3 was written by an
        // earlier pass (the barrier check covers these words: q + 16 is at
        // most src_lo + min(offset, match_len)).
        if (q + 16u <= (seq.lit_start & ~3u)) {
            return output_quad(dst, q);
        }
    }
    // Anything else (a repeat that wraps, a run across the pending bytes or
    // the literal/match boundary): word by word, as single stores would be.
    return vec4<u32>(
        sequence_word(dst, seq, p),
        sequence_word(dst, seq, p + 4u),
        sequence_word(dst, seq, p + 8u),
        sequence_word(dst, seq, p + 12u),
    );
}

// Parses the sequence at *ip: its token, lengths and offset read through
// the window, checked against the input and the output space left. On
// success *ip is past its header and literals, the window covers the next
// token (loaded now, so the load is in flight while the copy pass runs),
// *seq is the sequence and *last says whether it is the block's final,
// literal-only one. Returns STATUS_OK or the error, *ip then being where it
// was found.
fn parse_sequence(
    ip: ptr<function, u32>,
    op: u32,
    pending: u32,
    src_end: u32,
    dst_size: u32,
    win: ptr<function, u32>,
    win_word: ptr<function, u32>,
    sg_lane: u32,
    seq: ptr<function, Sequence>,
    last: ptr<function, bool>,
) -> u32 {
    if (*ip >= src_end) {
        return STATUS_TRUNCATED;
    }
    window_cover(*ip, 1u, win, win_word, sg_lane);
    let token = window_byte(*win, *win_word, *ip);
    *ip = *ip + 1u;

    var lit_len = token >> 4u;
    if (lit_len == 15u) {
        let ext = read_length_ext_win(ip, src_end, dst_size - op, win, win_word, sg_lane);
        if (ext == LEN_TRUNCATED) {
            return STATUS_TRUNCATED;
        }
        if (ext == LEN_TOO_LONG) {
            return STATUS_OUTPUT_OVERRUN;
        }
        lit_len = lit_len + ext;
    }
    if (lit_len > src_end - *ip) {
        return STATUS_TRUNCATED;
    }
    if (lit_len > dst_size - op) {
        return STATUS_OUTPUT_OVERRUN;
    }
    let lit_src = *ip;
    *ip = *ip + lit_len;
    let match_start = op + lit_len;

    *last = *ip >= src_end;
    var offset = 0u;
    var match_len = 0u;
    if (!*last) {
        if (src_end - *ip < 2u) {
            return STATUS_TRUNCATED;
        }
        window_cover(*ip, 2u, win, win_word, sg_lane);
        offset = window_byte(*win, *win_word, *ip) | (window_byte(*win, *win_word, *ip + 1u) << 8u);
        if (offset == 0u) {
            return STATUS_ZERO_OFFSET;
        }
        *ip = *ip + 2u;
        match_len = 4u + (token & 15u);
        if (match_len == 19u) {
            let ext = read_length_ext_win(ip, src_end, dst_size - match_start, win, win_word, sg_lane);
            if (ext == LEN_TRUNCATED) {
                return STATUS_TRUNCATED;
            }
            if (ext == LEN_TOO_LONG) {
                return STATUS_OUTPUT_OVERRUN;
            }
            match_len = match_len + ext;
        }
        if (match_len > dst_size - match_start) {
            return STATUS_OUTPUT_OVERRUN;
        }
        if (offset > match_start) {
            return STATUS_OFFSET_OUT_OF_RANGE;
        }
        // Bring in the next token's window now: the load is in flight
        // while the copy pass runs.
        if (*ip < src_end) {
            window_cover(*ip, 1u, win, win_word, sg_lane);
        }
    }
    *seq = Sequence(op, match_start, match_start + match_len, lit_src, offset, pending);
    return STATUS_OK;
}

// Whether seq's pass must wait for the stores of earlier passes. A match
// reads output words below lit_start & ~3 (the rest of its source is this
// sequence's literals, from the input, or the pending register): words
// [src_lo / 4, (read_end - 1) / 4]. Only if one of them was written since
// the last barrier (`dirty` is the first such word) must the pass wait.
fn fence_needed(seq: Sequence, dirty: u32) -> bool {
    if (seq.offset == 0u) {
        return false;
    }
    let src_lo = seq.match_start - seq.offset;
    let out_hi = seq.lit_start & ~3u;
    if (src_lo >= out_hi) {
        return false;
    }
    let read_end = min(src_lo + min(seq.offset, seq.end - seq.match_start), out_hi);
    return ((read_end - 1u) >> 2u) >= dirty;
}

// Whether a rows layout comes in whole 16-byte units of the buffer: rows
// and pitch whole units, the block's first word on a unit. Then block unit
// boundaries are buffer unit boundaries and no unit spans two rows (true of
// BCn tiles, whose rows are 8- or 16-byte blocks, in the runtime's
// 256-byte-pitched scratch).
fn rows_in_units(dst: Layout) -> bool {
    return ((dst.row_words | dst.pitch_words | dst.word0) & 3u) == 0u;
}

// The cooperative pass of one sequence: whole words [lit_start / 4,
// end / 4), lane `lane` of `width` writing words lane, lane + width, ...;
// one `if` for the common short pass (see v1 on lavapipe's loop cap).
fn copy_pass(dst: Layout, seq: Sequence, lane: u32, width: u32) {
    let first_word = seq.lit_start >> 2u;
    let end_word = seq.end >> 2u;
    let words = end_word - first_word;
    if (WIDE && words > width && (dst.row_words == 0u || rows_in_units(dst))) {
        // A long pass, linear or in rows of whole units. Words up to the
        // first 16-byte boundary of the buffer (head) and after the last
        // whole unit (tail) are single stores, at most three each (width
        // >= 4); lane i writes unit i, i + width, ... of the rest with one
        // vec4 store. In rows of whole units the block's first word is on
        // a unit, so the same head applies and no unit spans two rows;
        // phys_word places each word and unit in its row. (One branch for
        // both layouts: a second branch with a loop of its own, never taken
        // on linear blocks, made dense 64 KiB linear blocks stop short on
        // lavapipe, whose loop limit counts all loops of an invocation
        // together: 2026-12-03.)
        let base = dst.word0;
        let head_end = min(end_word, ((base + first_word + 3u) & ~3u) - base);
        let units = (end_word - head_end) >> 2u;
        let body_end = head_end + units * 4u;
        if (lane < head_end - first_word) {
            let w = first_word + lane;
            out_store(phys_word(dst, w), sequence_word(dst, seq, w * 4u));
        }
        if (lane < end_word - body_end) {
            let w = body_end + lane;
            out_store(phys_word(dst, w), sequence_word(dst, seq, w * 4u));
        }
        if (lane < units) {
            let w = head_end + lane * 4u;
            out_store_quad(phys_word(dst, w) >> 2u, sequence_quad(dst, seq, w * 4u));
        }
        if (units > width) {
            for (var u = width + lane; u < units; u = u + width) {
                let w = head_end + u * 4u;
                out_store_quad(phys_word(dst, w) >> 2u, sequence_quad(dst, seq, w * 4u));
            }
        }
    } else if (dst.row_words == 0u) {
        // A linear pass with word stores: every pass without WIDE, and
        // a short one (at most width words) with it, which is one store
        // per lane already: units would not save a store instruction, and
        // the head/tail/unit branches would each run (lavapipe measured
        // v2 2-3x slower with units on every pass; a GPU warp also runs
        // every branch one of its lanes takes).
        if (lane < words) {
            let w = first_word + lane;
            out_store(dst.word0 + w, sequence_word(dst, seq, w * 4u));
        }
        if (words > width) {
            for (var w = first_word + width + lane; w < end_word; w = w + width) {
                out_store(dst.word0 + w, sequence_word(dst, seq, w * 4u));
            }
        }
    } else {
        // Rows that are not whole units (or a short pass): a row's words
        // need not be contiguous or 16-byte aligned in the buffer, so lane
        // i writes words i, i + width, ... singly.
        if (lane < words) {
            let w = first_word + lane;
            out_store(phys_word(dst, w), sequence_word(dst, seq, w * 4u));
        }
        if (words > width) {
            for (var w = first_word + width + lane; w < end_word; w = w + width) {
                out_store(phys_word(dst, w), sequence_word(dst, seq, w * 4u));
            }
        }
    }
}

// After seq's pass: the first word written since the last barrier.
fn dirty_after(seq: Sequence, dirty: u32) -> u32 {
    let first_word = seq.lit_start >> 2u;
    if ((seq.end >> 2u) != first_word && dirty == NO_WORD) {
        return first_word;
    }
    return dirty;
}

@compute @workgroup_size(WG)
fn lz4_decode_v2(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
    /*@SUBGROUP_LANE_PARAM@*/
) {
    let block = wg_id.y * params.grid_stride + wg_id.x;
    if (block >= params.block_count) {
        return;
    }
    let desc = descs[block];
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
    var win_word = ip >> 2u;
    var win = window_load(win_word, sg_lane);
    var dirty = NO_WORD;

    // Each iteration consumes at least the token byte.
    loop {
        var seq: Sequence;
        var last = false;
        let c = parse_sequence(&ip, op, pending, src_end, dst_size, &win, &win_word, sg_lane, &seq, &last);
        if (c != STATUS_OK) {
            code = c;
            err_at = ip;
            break;
        }
        if (fence_needed(seq, dirty)) {
            storageBarrier();
            dirty = NO_WORD;
        }
        copy_pass(dst, seq, lane, WG);
        dirty = dirty_after(seq, dirty);
        // The bytes of the partly filled last word stay pending; they read
        // only words the barrier check above covered.
        pending = sequence_tail(dst, seq, sg_lane);
        op = seq.end;
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
