// The pending tail of a sequence, portable path (appended to
// lz4_decode.wgsl by the pipeline): every lane computes the up to three
// bytes of the partly filled last word itself.
fn sequence_tail(dst: Layout, seq: Sequence, sg_lane: u32) -> u32 {
    // Unrolled rather than a loop: lavapipe caps the loop iterations of an
    // invocation, and a block can have 16384 sequences.
    let base = seq.end & ~3u;
    let n = seq.end & 3u;
    var tail = 0u;
    if (n > 0u) {
        tail = sequence_byte(dst, seq, base);
    }
    if (n > 1u) {
        tail = tail | (sequence_byte(dst, seq, base + 1u) << 8u);
    }
    if (n > 2u) {
        tail = tail | (sequence_byte(dst, seq, base + 2u) << 16u);
    }
    return tail;
}

// The portable entry point has no subgroup_invocation_id parameter.
const sg_lane: u32 = 0u;
