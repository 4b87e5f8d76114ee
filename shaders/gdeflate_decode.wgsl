// GDeflate 1.0 page decoder: one 32-lane workgroup decodes one page (the
// bytes libdeflate_gdeflate_compress writes for up to 64 KiB, no tile-stream
// header) of a batch.
//
// Rust twin: src/decode/cpu_twin/gdeflate_decode.rs (same names, same phases
// in the same order; the tests hold this shader to it).
//
// The format. GDeflate is Deflate64 (length symbols 285..287 are 3 + 16 extra
// bits, distance symbols 30 and 31 reach 64 KiB) with its bits dealt out to
// 32 sub-streams. Each stream has a 64-bit bit buffer; the page is read
// strictly in order, 32 bits at a time, by whichever stream refills next: a
// stream refills (takes the next page word) when an "advance" leaves it with
// fewer than 32 bits. Symbols are taken from the streams round-robin, each
// followed by an advance to the next stream. A length symbol does not copy at
// once: it reserves its output bytes and leaves the copy pending in its
// stream; the next time that stream's turn comes, it decodes the distance
// instead of a literal/length symbol and does the copy. End-of-block at
// stream k ends the block after one more turn of every stream from k (the
// pending copies of the other streams are done).
//
// How a page is decoded: lane i is stream i, and each round is one turn of
// the 32 streams.
// * Each lane decodes its symbol from its own bit buffer (decode_round,
//   no bits consumed yet): a distance if it has a pending copy, otherwise a
//   literal/length symbol. Every step needs at most 31 bits and a buffer
//   holds at least 32 after its refill, so no lane waits for input.
// * The stream order the sequential decoder follows is then recovered in
//   parallel (run_round): the first end-of-block lane (atomicMin; later
//   lanes keep only their copies and consume nothing else), output
//   positions and the copies' flattened offsets (a 5-step prefix sum over
//   the lanes), each refill's read position (a popcount of the refill mask
//   below the lane), every check, and the first error in stream order
//   (atomicMin over lane * 2 + 1 for a refill, lane * 2 for the op).
// * Every lane then consumes its bits, writes its literal, reserves or
//   retires its copy and refills.
// * The round's copies are done together (copy_round): their bytes laid end
//   to end, lane t takes bytes t, t + 32, ... Byte b of a copy of distance
//   dist reads dst - dist + (b % dist), never its own bytes. That source can
//   lie in an earlier copy of the same round (the copies of a round were
//   reserved in one round, in stream order, so they are sorted and
//   disjoint): it is then followed back to that copy's own source, at most
//   once per earlier copy, until it reaches a byte written before the round.
// * Huffman codes are canonical tables in workgroup memory: per length the
//   left-justified limit, first codeword and first index into the symbols
//   sorted by codeword. A symbol's length is 1 + the number of limits its
//   next 15 bits reach (four vector compares), so decoding has no loop.
//   Codes are built together (counts with atomics, limits by lane 0, lane
//   `len` places the symbols of length `len`). Code lengths (lane 0 plans
//   their at most 10 rounds per block) and stored blocks use the same
//   round shape; block headers read stream 0.
// * Loops are kept off the per-round path (decode, prefix sums and the copy
//   search are unrolled) because lavapipe stops every loop of an
//   invocation once all of its loops together have run 65535 iterations: a
//   64 KiB page takes up to about 2,100 rounds there, plus one pass per
//   copied byte per lane. Real GPUs have no such cap.
//
// Output: WGSL has no byte stores. The workgroup first zeroes the words of
// its page's output range (the last partial word belongs to the page:
// ranges start 4-byte aligned and never share a word), then bytes are or-ed
// in with atomicOr and read back with atomicLoad; storageBarrier between
// rounds makes one round's bytes visible to the next.
//
// Safety on malformed input: every loop is bounded (a round budget from the
// page size; rounds, code lengths and copies are bounded by the page's
// sizes), every refill is checked against the page's range before it reads
// (valid pages from the reference encoder never read past their end, so a
// read past it is TRUNCATED), every output position against the declared
// size before it is reserved. The first error in stream order stops the page
// and is reported in its status word (code in the low 8 bits, the read
// cursor relative to src_offset in the high 24 bits).

// One stream per lane: the workgroup size is the format's stream count.
override WG: u32 = 32u;
const LANES: u32 = 32u;

// The status codes (STATUS_*), the block limits (MAX_*), BlockDesc (an
// BlockDesc: 8 x u32), the precode order and Deflate64's length and
// distance tables (PRECODE_ORDER, LEN_BASE, LEN_EXTRA, DIST_BASE,
// DIST_EXTRA) come from the preamble each pipeline puts first
// (src/decode/gpu/preamble.rs), written from the Rust constants the twins use.

// What a lane does in a round.
const KIND_NONE: u32 = 0u;
const KIND_LIT: u32 = 1u;
const KIND_LEN: u32 = 2u;
const KIND_EOB: u32 = 3u;
const KIND_COPY: u32 = 4u;
const NO_REFILL: u32 = 0xffffffffu;

// The codes in the tables, and their first slot in code_syms.
const CODE_LITLEN: u32 = 0u;
const CODE_DIST: u32 = 1u;
const CODE_PRE: u32 = 2u;
const SYM_BASE = array<u32, 3>(0u, 288u, 320u);


// One page of the batch; mirrors BlockDesc (8 x u32, 32 bytes).

struct Params {
    block_count: u32,
    // Workgroups along x of the 2D dispatch (block = y * stride + x).
    grid_stride: u32,
    pad0: u32,
    pad1: u32,
}

// Where one page's output goes, in 32-bit words.
struct Layout {
    word0: u32,
    // Words per row (0 = linear output).
    row_words: u32,
    pitch_words: u32,
}

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read> descs: array<BlockDesc>;
@group(0) @binding(2) var<storage, read_write> output: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> status: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

// Per-stream bit buffers (low, high word) and bit counts.
var<workgroup> s_lo: array<u32, 32>;
var<workgroup> s_hi: array<u32, 32>;
var<workgroup> s_left: array<u32, 32>;
// Per-stream pending copy: length (0 = none) and output position.
var<workgroup> p_len: array<u32, 32>;
var<workgroup> p_dst: array<u32, 32>;
// Code-length rounds, per lane: symbol, repeat count, bits used, refill
// read position (lane 0 plans them in stream order).
var<workgroup> r_val: array<u32, 32>;
var<workgroup> r_aux: array<u32, 32>;
var<workgroup> r_used: array<u32, 32>;
var<workgroup> r_refill: array<u32, 32>;
// This round's copies in stream order: destination, length, distance, first
// byte in the flattened copy space.
var<workgroup> c_dst: array<u32, 32>;
var<workgroup> c_len: array<u32, 32>;
var<workgroup> c_dist: array<u32, 32>;
var<workgroup> c_off: array<u32, 32>;
var<workgroup> c_count: u32;
var<workgroup> c_total: u32;
// Code lengths; per code c (entries c * 16 + len): the left-justified
// 15-bit limit of the codewords of each length, the first codeword and the
// first sorted-symbol index of each length; symbols sorted by codeword; 1 +
// the only symbol of an accepted incomplete code (0: a complete code).
var<workgroup> lens: array<u32, 320>;
var<workgroup> code_lim: array<u32, 48>;
var<workgroup> code_first: array<u32, 48>;
var<workgroup> code_index: array<u32, 48>;
var<workgroup> code_syms: array<u32, 339>;
var<workgroup> code_single: array<u32, 3>;
// Round scratch: prefix sums, first end-of-block lane, first error in
// stream order, refill and copy lane masks, codeword counts per length.
var<workgroup> w_scan: array<vec2<u32>, 32>;
var<workgroup> w_eob: atomic<u32>;
var<workgroup> w_order: atomic<u32>;
var<workgroup> w_mask: atomic<u32>;
var<workgroup> w_cmask: atomic<u32>;
var<workgroup> w_count: array<atomic<u32>, 16>;
// Lane 0's results for everyone (read with workgroupUniformLoad).
var<workgroup> g_err: u32;
var<workgroup> g_cursor: u32;
var<workgroup> g_out: u32;
var<workgroup> g_eob: u32;
var<workgroup> g_last: u32;
var<workgroup> g_btype: u32;
var<workgroup> g_len: u32;
var<workgroup> g_nlit: u32;
var<workgroup> g_ndist: u32;
var<workgroup> g_npre: u32;
var<workgroup> g_done: u32;
var<workgroup> g_code_state: u32;

const NO_ORDER: u32 = 0xffffffffu;

// ---- descriptor and output ------------------------------------------------

fn out_words() -> u32 {
    // Clamped so a binding of 4 GiB or more does not wrap (as the twin).
    return min(arrayLength(&output), 0x3fffffffu);
}

const BAD_LAYOUT: u32 = 0xffffffffu;

// Checks a descriptor against the bound buffers (overflow-safe, rows
// included), the rules of cpu_twin::lz4_decode::check_desc; returns its
// layout, or word0 == BAD_LAYOUT.
fn block_layout(desc: BlockDesc) -> Layout {
    let in_bytes = min(arrayLength(&input), 0x3fffffffu) * 4u;
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

// The output buffer word holding page-relative output word `w`.
fn phys_word(dst: Layout, w: u32) -> u32 {
    if (dst.row_words == 0u) {
        return dst.word0 + w;
    }
    return dst.word0 + (w / dst.row_words) * dst.pitch_words + (w % dst.row_words);
}

fn clear_output(lane: u32, dst: Layout, size: u32) {
    let words = (size + 3u) / 4u;
    for (var w = lane; w < words; w += LANES) {
        atomicStore(&output[phys_word(dst, w)], 0u);
    }
}

fn write_byte(dst: Layout, p: u32, v: u32) {
    atomicOr(&output[phys_word(dst, p >> 2u)], v << ((p & 3u) * 8u));
}

fn read_byte(dst: Layout, p: u32) -> u32 {
    return (atomicLoad(&output[phys_word(dst, p >> 2u)]) >> ((p & 3u) * 8u)) & 0xffu;
}

// ---- bit buffers ----------------------------------------------------------

// Four page bytes at page position `at`; the caller checked the range.
fn input_word(d: BlockDesc, at: u32) -> u32 {
    let addr = d.src_offset + at;
    let shift = (addr & 3u) * 8u;
    let lo = input[addr >> 2u];
    if (shift == 0u) {
        return lo;
    }
    let hi = input[(addr >> 2u) + 1u];
    return (lo >> shift) | (hi << (32u - shift));
}

fn consume(l: u32, n: u32) {
    if (n == 0u) {
        return;
    }
    s_lo[l] = (s_lo[l] >> n) | (s_hi[l] << (32u - n));
    s_hi[l] = s_hi[l] >> n;
    s_left[l] -= n;
}

fn refill(d: BlockDesc, l: u32, at: u32) {
    let w = input_word(d, at);
    let n = s_left[l];
    s_lo[l] |= w << n;
    if (n != 0u) {
        s_hi[l] |= w >> (32u - n);
    }
    s_left[l] += 32u;
}

// Lane 0: the error word for `code` at the current cursor.
fn fail(code: u32) {
    g_err = code | (g_cursor << 8u);
}

// Lane 0: lane l's refill after it uses r_used[l] bits. False (and g_err
// set) when the read would pass the page end.
fn schedule_refill(d: BlockDesc, l: u32) -> bool {
    r_refill[l] = NO_REFILL;
    if (s_left[l] - r_used[l] >= 32u) {
        return true;
    }
    if (g_cursor + 4u > d.src_size) {
        fail(STATUS_TRUNCATED);
        return false;
    }
    r_refill[l] = g_cursor;
    g_cursor += 4u;
    return true;
}

fn apply_refills(d: BlockDesc, lane: u32) {
    consume(lane, r_used[lane]);
    if (r_refill[lane] != NO_REFILL) {
        refill(d, lane, r_refill[lane]);
    }
}

// Every lane uses `used` bits of its stream; then the streams refill in
// stream order from stream `first` (a refill rank is a popcount of the lanes
// before it in that order). False (g_err set) when a refill would read past
// the page end.
fn refill_step(d: BlockDesc, lane: u32, first: u32, used: u32) -> bool {
    if (lane == 0u) {
        atomicStore(&w_mask, 0u);
        atomicStore(&w_order, NO_ORDER);
    }
    workgroupBarrier();
    let i = (lane + LANES - first) % LANES;
    let need = s_left[lane] - used < 32u;
    if (need) {
        atomicOr(&w_mask, 1u << i);
    }
    workgroupBarrier();
    let mask = atomicLoad(&w_mask);
    let at = g_cursor + 4u * countOneBits(mask & ((1u << i) - 1u));
    let bad = need && at + 4u > d.src_size;
    if (bad) {
        atomicMin(&w_order, i);
    }
    workgroupBarrier();
    if (bad && atomicLoad(&w_order) == i) {
        g_err = STATUS_TRUNCATED | (at << 8u);
    }
    if (lane == 0u) {
        g_cursor += 4u * countOneBits(mask);
    }
    if (workgroupUniformLoad(&g_err) != 0u) {
        return false;
    }
    consume(lane, used);
    if (need) {
        refill(d, lane, at);
    }
    workgroupBarrier();
    return true;
}

// Every stream refills, in stream order from `first`. False on error.
fn refill_all(d: BlockDesc, lane: u32, first: u32) -> bool {
    return refill_step(d, lane, first, 0u);
}

// ---- Huffman codes --------------------------------------------------------

// Lane 0, once the codeword counts per length are in w_count: checks them
// like the reference (oversubscribed: bad; incomplete: bad unless no
// codeword or a single codeword of length 1, both then decode as one symbol
// of 1 bit) and fills the code's limits. g_code_state: 0 bad, 1 single
// symbol, 2 complete (its symbols still to place).
fn code_limits(c: u32, first: u32, n: u32, max_len: u32) {
    let cb = c * 16u;
    var used = 0u;
    for (var len = 1u; len <= max_len; len++) {
        used = (used << 1u) + atomicLoad(&w_count[len]);
    }
    code_single[c] = 0u;
    g_code_state = 0u;
    if (used > (1u << max_len)) {
        return;
    }
    if (used < (1u << max_len)) {
        if (used == 0u) {
            code_single[c] = 1u;
            g_code_state = 1u;
        } else if (used == (1u << (max_len - 1u)) && atomicLoad(&w_count[1]) == 1u) {
            for (var s = 0u; s < n; s++) {
                if (lens[first + s] == 1u) {
                    code_single[c] = s + 1u;
                }
            }
            g_code_state = 1u;
        }
        return;
    }
    var code = 0u;
    var index = 0u;
    for (var len = 1u; len <= 15u; len++) {
        let count = atomicLoad(&w_count[len]);
        code_first[cb + len] = code;
        code_index[cb + len] = index;
        code_lim[cb + len] = (code + count) << (15u - len);
        index += count;
        code = (code + count) << 1u;
    }
    g_code_state = 2u;
}

// Every lane: the canonical code of lens[first .. first + n] (code c).
// False when the lengths are invalid (g_err not yet set).
fn build_code(lane: u32, c: u32, first: u32, n: u32, max_len: u32) -> bool {
    if (lane < 16u) {
        atomicStore(&w_count[lane], 0u);
    }
    workgroupBarrier();
    for (var s = lane; s < n; s += LANES) {
        atomicAdd(&w_count[lens[first + s]], 1u);
    }
    workgroupBarrier();
    if (lane == 0u) {
        code_limits(c, first, n, max_len);
    }
    let state = workgroupUniformLoad(&g_code_state);
    if (state == 2u && lane >= 1u && lane <= 15u) {
        // Lane `len` places the symbols of that length, in symbol order.
        var slot = SYM_BASE[c] + code_index[c * 16u + lane];
        for (var s = 0u; s < n; s++) {
            if (lens[first + s] == lane) {
                code_syms[slot] = s;
                slot += 1u;
            }
        }
    }
    workgroupBarrier();
    return state != 0u;
}

// One symbol of code c from the low bits of `bits`: (symbol, codeword
// length). The length is 1 + the number of length limits the next 15 bits
// (first bit highest) reach: no loop (lavapipe caps the loop iterations of
// an invocation, all loops together, at 65535).
fn decode_symbol(c: u32, bits: u32) -> vec2<u32> {
    let single = code_single[c];
    if (single != 0u) {
        return vec2<u32>(single - 1u, 1u);
    }
    let code15 = reverseBits(bits) >> 17u;
    let cb = c * 16u;
    let v = vec4<u32>(code15);
    let one = vec4<u32>(1u);
    let zero = vec4<u32>(0u);
    let a = select(zero, one, v >= vec4<u32>(code_lim[cb + 1u], code_lim[cb + 2u], code_lim[cb + 3u], code_lim[cb + 4u]));
    let b = select(zero, one, v >= vec4<u32>(code_lim[cb + 5u], code_lim[cb + 6u], code_lim[cb + 7u], code_lim[cb + 8u]));
    let e = select(zero, one, v >= vec4<u32>(code_lim[cb + 9u], code_lim[cb + 10u], code_lim[cb + 11u], code_lim[cb + 12u]));
    let f = select(zero, one, v >= vec4<u32>(code_lim[cb + 13u], code_lim[cb + 14u], 0xffffffffu, 0xffffffffu));
    let sum = a + b + e + f;
    let len = 1u + sum.x + sum.y + sum.z + sum.w;
    let off = (code15 >> (15u - len)) - code_first[cb + len];
    return vec2<u32>(code_syms[SYM_BASE[c] + code_index[cb + len] + off], len);
}

// Every lane: the distance and literal/length codes. False (g_err set) if bad.
fn build_tables(lane: u32, nlit: u32, ndist: u32) -> bool {
    var ok = build_code(lane, CODE_DIST, nlit, ndist, 15u);
    if (ok) {
        ok = build_code(lane, CODE_LITLEN, 0u, nlit, 15u);
    }
    if (!ok && lane == 0u) {
        fail(STATUS_BAD_HUFFMAN_CODE);
    }
    return ok;
}

fn fixed_codes(lane: u32) -> bool {
    for (var s = lane; s < 320u; s += LANES) {
        var len = 5u;
        if (s < 144u) {
            len = 8u;
        } else if (s < 256u) {
            len = 9u;
        } else if (s < 280u) {
            len = 7u;
        } else if (s < 288u) {
            len = 8u;
        }
        lens[s] = len;
    }
    workgroupBarrier();
    return build_tables(lane, 288u, 32u);
}

// Every lane: one precode symbol and its repeat bits.
fn code_length_decode(lane: u32) {
    let bits = s_lo[lane];
    let sn = decode_symbol(CODE_PRE, bits);
    let sym = sn.x;
    var rep = 1u;
    var extra = 0u;
    if (sym == 16u) {
        rep = 3u + ((bits >> sn.y) & 3u);
        extra = 2u;
    } else if (sym == 17u) {
        rep = 3u + ((bits >> sn.y) & 7u);
        extra = 3u;
    } else if (sym == 18u) {
        rep = 11u + ((bits >> sn.y) & 127u);
        extra = 7u;
    }
    r_val[lane] = sym;
    r_aux[lane] = rep;
    r_used[lane] = sn.y + extra;
    r_refill[lane] = NO_REFILL;
}

// Lane 0: in stream order, the round's code lengths (lanes past the last
// length use no bits) and refills; g_done = lengths done. (At most 10 such
// rounds per block: a serial walk costs little here.)
fn plan_code_lengths(d: BlockDesc, total: u32) {
    var i = g_done;
    for (var l = 0u; l < LANES; l++) {
        if (i >= total) {
            r_used[l] = 0u;
            r_refill[l] = NO_REFILL;
            continue;
        }
        let sym = r_val[l];
        var value = 0u;
        var rep = r_aux[l];
        if (sym < 16u) {
            value = sym;
        } else if (sym == 16u) {
            if (i == 0u) {
                fail(STATUS_BAD_REPEAT);
                return;
            }
            value = lens[i - 1u];
        }
        rep = min(rep, total - i);
        for (var k = 0u; k < rep; k++) {
            lens[i + k] = value;
        }
        i += rep;
        if (!schedule_refill(d, l)) {
            return;
        }
    }
    g_done = i;
}

fn dynamic_codes(d: BlockDesc, lane: u32, budget: ptr<function, u32>) -> bool {
    // HLIT, HDIST, HCLEN from stream 0, then its refill.
    if (lane == 0u) {
        let bits = s_lo[0];
        g_nlit = 257u + (bits & 31u);
        g_ndist = 1u + ((bits >> 5u) & 31u);
        g_npre = 4u + ((bits >> 10u) & 15u);
    }
    if (!refill_step(d, lane, 0u, select(0u, 14u, lane == 0u))) {
        return false;
    }

    // The precode lengths: 3 bits from each of streams 0 .. npre-1.
    let npre = workgroupUniformLoad(&g_npre);
    if (lane < 19u) {
        lens[PRECODE_ORDER[lane]] = select(0u, s_lo[lane] & 7u, lane < npre);
    }
    if (!refill_step(d, lane, 0u, select(0u, 3u, lane < npre))) {
        return false;
    }
    if (!build_code(lane, CODE_PRE, 0u, 19u, 7u)) {
        if (lane == 0u) {
            fail(STATUS_BAD_HUFFMAN_CODE);
        }
        return false;
    }

    // The code lengths, one precode symbol per stream and round.
    let nlit = workgroupUniformLoad(&g_nlit);
    let ndist = workgroupUniformLoad(&g_ndist);
    let total = nlit + ndist;
    if (lane == 0u) {
        g_done = 0u;
    }
    var done = 0u;
    loop {
        if (done >= total) {
            break;
        }
        if (*budget == 0u) {
            if (lane == 0u) {
                fail(STATUS_TRUNCATED);
            }
            return false;
        }
        *budget -= 1u;
        code_length_decode(lane);
        workgroupBarrier();
        if (lane == 0u) {
            plan_code_lengths(d, total);
        }
        if (workgroupUniformLoad(&g_err) != 0u) {
            return false;
        }
        apply_refills(d, lane);
        done = workgroupUniformLoad(&g_done);
    }
    return build_tables(lane, nlit, ndist);
}

// ---- stored blocks --------------------------------------------------------

fn stored_block(d: BlockDesc, dst: Layout, lane: u32, budget: ptr<function, u32>) -> bool {
    if (lane == 0u) {
        g_len = s_lo[0] & 0xffffu;
        consume(0u, 16u);
        if (g_len > d.dst_size - g_out) {
            fail(STATUS_OUTPUT_OVERRUN);
        }
    }
    if (workgroupUniformLoad(&g_err) != 0u) {
        return false;
    }
    let len = workgroupUniformLoad(&g_len);
    let out = workgroupUniformLoad(&g_out);
    for (var base = 0u; base < len; base += LANES) {
        if (*budget == 0u) {
            if (lane == 0u) {
                fail(STATUS_TRUNCATED);
            }
            return false;
        }
        *budget -= 1u;
        let m = min(len - base, LANES);
        var byte = 0u;
        var used = 0u;
        if (lane < m) {
            byte = s_lo[lane] & 0xffu;
            used = 8u;
        }
        if (!refill_step(d, lane, 0u, used)) {
            return false;
        }
        if (lane < m) {
            write_byte(dst, out + base + lane, byte);
        }
    }
    if (lane == 0u) {
        g_out = out + len;
    }
    return refill_all(d, lane, len % LANES);
}

// ---- Huffman blocks: the main rounds --------------------------------------

// Every lane l < end: a distance if it has a pending copy, otherwise (main
// rounds only: end == LANES) one literal/length symbol and its extra bits.
// Returns (kind, value, bits used); nothing is consumed yet.
fn decode_round(lane: u32, end: u32) -> vec3<u32> {
    if (lane >= end) {
        return vec3<u32>(KIND_NONE, 0u, 0u);
    }
    let bits = s_lo[lane];
    if (p_len[lane] != 0u) {
        let sn = decode_symbol(CODE_DIST, bits);
        let e = DIST_EXTRA[sn.x];
        return vec3<u32>(KIND_COPY, DIST_BASE[sn.x] + ((bits >> sn.y) & ((1u << e) - 1u)), sn.y + e);
    }
    if (end != LANES) {
        return vec3<u32>(KIND_NONE, 0u, 0u);
    }
    let sn = decode_symbol(CODE_LITLEN, bits);
    if (sn.x < 256u) {
        return vec3<u32>(KIND_LIT, sn.x, sn.y);
    }
    if (sn.x == 256u) {
        return vec3<u32>(KIND_EOB, 0u, sn.y);
    }
    let k = sn.x - 257u;
    let e = LEN_EXTRA[k];
    return vec3<u32>(KIND_LEN, LEN_BASE[k] + ((bits >> sn.y) & ((1u << e) - 1u)), sn.y + e);
}

// Every lane: inclusive prefix sums over lanes of two values (unrolled
// Hillis-Steele steps: no loop, see decode_symbol).
fn scan2(lane: u32, v: vec2<u32>) -> vec2<u32> {
    var x = v;
    w_scan[lane] = x;
    workgroupBarrier();
    if (lane >= 1u) {
        x += w_scan[lane - 1u];
    }
    workgroupBarrier();
    w_scan[lane] = x;
    workgroupBarrier();
    if (lane >= 2u) {
        x += w_scan[lane - 2u];
    }
    workgroupBarrier();
    w_scan[lane] = x;
    workgroupBarrier();
    if (lane >= 4u) {
        x += w_scan[lane - 4u];
    }
    workgroupBarrier();
    w_scan[lane] = x;
    workgroupBarrier();
    if (lane >= 8u) {
        x += w_scan[lane - 8u];
    }
    workgroupBarrier();
    w_scan[lane] = x;
    workgroupBarrier();
    if (lane >= 16u) {
        x += w_scan[lane - 16u];
    }
    workgroupBarrier();
    w_scan[lane] = x;
    workgroupBarrier();
    return x;
}

fn copy_start(i: u32, by_off: bool) -> u32 {
    if (by_off) {
        return c_off[i];
    }
    return c_dst[i];
}

// One step of the binary search below.
fn search_step(j: u32, step: u32, at: u32, count: u32, by_off: bool) -> u32 {
    if (j + step < count && copy_start(j + step, by_off) <= at) {
        return j + step;
    }
    return j;
}

// The last of copies 0 .. count-1 whose start (destination, or first byte
// in the flattened copy space) is at or before `at`; 0 if none. Copies are
// sorted; an unrolled binary search (no loop, see decode_symbol).
fn last_copy_at_or_before(at: u32, count: u32, by_off: bool) -> u32 {
    var j = search_step(0u, 16u, at, count, by_off);
    j = search_step(j, 8u, at, count, by_off);
    j = search_step(j, 4u, at, count, by_off);
    j = search_step(j, 2u, at, count, by_off);
    return search_step(j, 1u, at, count, by_off);
}

fn copy_source(j: u32, b: u32) -> u32 {
    return c_dst[j] - c_dist[j] + b % c_dist[j];
}

// Whether output position q lies in copy i of this round.
fn in_copy(i: u32, q: u32) -> bool {
    return q >= c_dst[i] && q < c_dst[i] + c_len[i];
}

// Where byte b of copy j reads from, followed back through the earlier
// copies of the same round (sorted, disjoint) to a byte written before it:
// at most one hop per earlier copy, as each hop goes to an earlier copy.
fn resolve_source(j0: u32, b0: u32) -> u32 {
    var q = copy_source(j0, b0);
    if (j0 == 0u) {
        return q;
    }
    var i = last_copy_at_or_before(q, j0, false);
    if (in_copy(i, q)) {
        loop {
            q = copy_source(i, q - c_dst[i]);
            if (i == 0u) {
                break;
            }
            let next = last_copy_at_or_before(q, i, false);
            if (!in_copy(next, q)) {
                break;
            }
            i = next;
        }
    }
    return q;
}

// Every lane: bytes lane, lane + 32, ... of the round's copies end to end.
fn copy_round(dst: Layout, lane: u32) {
    let total = c_total;
    let count = c_count;
    if (total == 0u) {
        return;
    }
    for (var f = lane; f < total; f += LANES) {
        let j = last_copy_at_or_before(f, count, true);
        let b = f - c_off[j];
        let q = resolve_source(j, b);
        write_byte(dst, c_dst[j] + b, read_byte(dst, q));
    }
}

// One round: every lane l < end as decode_round says, then in stream order
// (prefix sums and popcounts): output positions, the first end-of-block
// (later lanes keep only their copies), refill positions, the first error,
// the copy table; then the bytes. False on error.
fn run_round(d: BlockDesc, dst: Layout, lane: u32, end: u32) -> bool {
    if (lane == 0u) {
        atomicStore(&w_eob, LANES);
        atomicStore(&w_mask, 0u);
        atomicStore(&w_cmask, 0u);
        atomicStore(&w_order, NO_ORDER);
    }
    workgroupBarrier();
    let r = decode_round(lane, end);
    if (r.x == KIND_EOB) {
        atomicMin(&w_eob, lane);
    }
    workgroupBarrier();
    let eob = atomicLoad(&w_eob);
    var kind = r.x;
    var used = r.z;
    if (lane > eob && kind != KIND_COPY) {
        kind = KIND_NONE;
        used = 0u;
    }
    let val = r.y;
    var size = 0u;
    var clen = 0u;
    if (kind == KIND_LIT) {
        size = 1u;
    } else if (kind == KIND_LEN) {
        size = val;
    } else if (kind == KIND_COPY) {
        clen = p_len[lane];
        atomicOr(&w_cmask, 1u << lane);
    }
    let need = s_left[lane] - used < 32u;
    if (need) {
        atomicOr(&w_mask, 1u << lane);
    }
    let incl = scan2(lane, vec2<u32>(size, clen));
    let excl = incl - vec2<u32>(size, clen);
    let total = w_scan[LANES - 1u];
    let lower = (1u << lane) - 1u;
    let mask = atomicLoad(&w_mask);
    let cmask = atomicLoad(&w_cmask);
    let pos = g_out + excl.x;
    let at = g_cursor + 4u * countOneBits(mask & lower);
    var code = 0u;
    var order = 2u * lane;
    let overrun = (kind == KIND_LIT && pos >= d.dst_size)
        || (kind == KIND_LEN && (pos > d.dst_size || val > d.dst_size - pos));
    if (overrun) {
        code = STATUS_OUTPUT_OVERRUN;
    } else if (kind == KIND_COPY && val > p_dst[lane]) {
        code = STATUS_OFFSET_OUT_OF_RANGE;
    } else if (need && at + 4u > d.src_size) {
        code = STATUS_TRUNCATED;
        order += 1u;
    }
    if (code != 0u) {
        atomicMin(&w_order, order);
    }
    workgroupBarrier();
    if (code != 0u && atomicLoad(&w_order) == order) {
        g_err = code | (at << 8u);
    }
    if (kind == KIND_COPY) {
        let ci = countOneBits(cmask & lower);
        c_dst[ci] = p_dst[lane];
        c_len[ci] = clen;
        c_dist[ci] = val;
        c_off[ci] = excl.y;
    }
    if (lane == 0u) {
        g_out += total.x;
        g_cursor += 4u * countOneBits(mask);
        c_total = total.y;
        c_count = countOneBits(cmask);
        g_eob = eob;
    }
    if (workgroupUniformLoad(&g_err) != 0u) {
        return false;
    }
    consume(lane, used);
    if (kind == KIND_LIT) {
        write_byte(dst, pos, val);
    } else if (kind == KIND_LEN) {
        p_len[lane] = val;
        p_dst[lane] = pos;
    } else if (kind == KIND_COPY) {
        p_len[lane] = 0u;
    }
    if (need) {
        refill(d, lane, at);
    }
    // The round's literals (and the earlier rounds' bytes) before its copies.
    storageBarrier();
    copy_round(dst, lane);
    storageBarrier();
    return true;
}

fn huffman_block(d: BlockDesc, dst: Layout, lane: u32, budget: ptr<function, u32>) -> bool {
    loop {
        if (*budget == 0u) {
            if (lane == 0u) {
                fail(STATUS_TRUNCATED);
            }
            return false;
        }
        *budget -= 1u;
        if (!run_round(d, dst, lane, LANES)) {
            return false;
        }
        if (workgroupUniformLoad(&g_eob) < LANES) {
            break;
        }
    }
    // The tail of the block-done turn: lanes before the end-of-block lane
    // run the copies they reserved in the last round.
    if (*budget == 0u) {
        if (lane == 0u) {
            fail(STATUS_TRUNCATED);
        }
        return false;
    }
    *budget -= 1u;
    let end = workgroupUniformLoad(&g_eob);
    return run_round(d, dst, lane, end);
}

// ---- the page -------------------------------------------------------------

// Rounds a page may take: every round but one per block consumes at least
// one bit, and every bit was read from the page; this only bounds the loops
// against a bug.
fn round_budget(src_size: u32) -> u32 {
    return 4u * (8u * src_size + 1024u);
}

fn decode_page(d: BlockDesc, dst: Layout, lane: u32) {
    var budget = round_budget(d.src_size);
    if (!refill_all(d, lane, 0u)) {
        return;
    }
    loop {
        if (budget == 0u) {
            if (lane == 0u) {
                fail(STATUS_TRUNCATED);
            }
            return;
        }
        budget -= 1u;
        // Block header: BFINAL and BTYPE from stream 0, then its refill.
        if (lane == 0u) {
            let bits = s_lo[0];
            g_last = bits & 1u;
            g_btype = (bits >> 1u) & 3u;
        }
        if (!refill_step(d, lane, 0u, select(0u, 3u, lane == 0u))) {
            return;
        }
        let btype = workgroupUniformLoad(&g_btype);
        var ok = true;
        if (btype == 0u) {
            ok = stored_block(d, dst, lane, &budget);
        } else if (btype == 1u) {
            ok = fixed_codes(lane) && huffman_block(d, dst, lane, &budget);
        } else if (btype == 2u) {
            ok = dynamic_codes(d, lane, &budget) && huffman_block(d, dst, lane, &budget);
        } else {
            if (lane == 0u) {
                fail(STATUS_BAD_BLOCK_TYPE);
            }
            return;
        }
        if (!ok) {
            return;
        }
        if (workgroupUniformLoad(&g_last) != 0u) {
            break;
        }
    }
    if (lane == 0u && g_out != d.dst_size) {
        fail(STATUS_SHORT_OUTPUT);
    }
}

@compute @workgroup_size(WG)
fn gdeflate_decode(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let block = wg.y * params.grid_stride + wg.x;
    if (block >= params.block_count) {
        return;
    }
    let d = descs[block];
    let dst = block_layout(d);
    if (dst.word0 == BAD_LAYOUT) {
        if (lane == 0u) {
            status[block] = STATUS_BAD_DESCRIPTOR;
        }
        return;
    }
    clear_output(lane, dst, d.dst_size);
    s_lo[lane] = 0u;
    s_hi[lane] = 0u;
    s_left[lane] = 0u;
    p_len[lane] = 0u;
    if (lane == 0u) {
        g_err = 0u;
        g_cursor = 0u;
        g_out = 0u;
    }
    storageBarrier();
    decode_page(d, dst, lane);
    workgroupBarrier();
    if (lane == 0u) {
        var word = g_err;
        if (word == 0u) {
            word = STATUS_OK;
        }
        status[block] = word;
    }
}
