// LZ4 block decoder, v2 entry point (`lz4_decode_v2`; twin:
// src/decode/cpu_twin/lz4_decode_v2.rs). The pipeline appends this file to
// lz4_decode.wgsl (whose helpers it shares: descriptor check, sequence
// words, pending tail, finish_block) and one header window:
// lz4_window_subgroup.wgsl or lz4_window_portable.wgsl. Those define
// `override WIN` (words in the window), window_load and window_byte.
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
//   arithmetic.

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
        if (ip >= src_end) {
            code = STATUS_TRUNCATED;
            err_at = ip;
            break;
        }
        window_cover(ip, 1u, &win, &win_word, sg_lane);
        let token = window_byte(win, win_word, ip);
        ip = ip + 1u;

        var lit_len = token >> 4u;
        if (lit_len == 15u) {
            let ext = read_length_ext_win(&ip, src_end, dst_size - op, &win, &win_word, sg_lane);
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

        let last = ip >= src_end;
        var offset = 0u;
        var match_len = 0u;
        if (!last) {
            if (src_end - ip < 2u) {
                code = STATUS_TRUNCATED;
                err_at = ip;
                break;
            }
            window_cover(ip, 2u, &win, &win_word, sg_lane);
            offset = window_byte(win, win_word, ip) | (window_byte(win, win_word, ip + 1u) << 8u);
            if (offset == 0u) {
                code = STATUS_ZERO_OFFSET;
                err_at = ip;
                break;
            }
            ip = ip + 2u;
            match_len = 4u + (token & 15u);
            if (match_len == 19u) {
                let ext = read_length_ext_win(&ip, src_end, dst_size - match_start, &win, &win_word, sg_lane);
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
            // Bring in the next token's window now: the load is in flight
            // while the copy pass runs.
            if (ip < src_end) {
                window_cover(ip, 1u, &win, &win_word, sg_lane);
            }
        }

        let seq = Sequence(op, match_start, match_start + match_len, lit_src, offset, pending);

        // A match reads output words below lit_start & ~3 (the rest of its
        // source is this sequence's literals, from the input, or the pending
        // register): words [src_lo / 4, (read_end - 1) / 4]. Only if one of
        // them was written since the last barrier must this pass wait.
        if (offset != 0u) {
            let src_lo = match_start - offset;
            let out_hi = op & ~3u;
            if (src_lo < out_hi) {
                let read_end = min(src_lo + min(offset, match_len), out_hi);
                if (((read_end - 1u) >> 2u) >= dirty) {
                    storageBarrier();
                    dirty = NO_WORD;
                }
            }
        }

        // The cooperative pass: whole words [lit_start / 4, end / 4), lane i
        // taking words i, i + WG, ...; one `if` for the common short pass
        // (see v1 on lavapipe's loop cap).
        let first_word = op >> 2u;
        let end_word = seq.end >> 2u;
        let words = end_word - first_word;
        if (dst.row_words == 0u) {
            let base = dst.word0;
            if (lane < words) {
                let w = first_word + lane;
                output[base + w] = sequence_word(dst, seq, w * 4u);
            }
            if (words > WG) {
                for (var w = first_word + WG + lane; w < end_word; w = w + WG) {
                    output[base + w] = sequence_word(dst, seq, w * 4u);
                }
            }
        } else {
            if (lane < words) {
                let w = first_word + lane;
                output[phys_word(dst, w)] = sequence_word(dst, seq, w * 4u);
            }
            if (words > WG) {
                for (var w = first_word + WG + lane; w < end_word; w = w + WG) {
                    output[phys_word(dst, w)] = sequence_word(dst, seq, w * 4u);
                }
            }
        }
        if (words != 0u && dirty == NO_WORD) {
            dirty = first_word;
        }
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
