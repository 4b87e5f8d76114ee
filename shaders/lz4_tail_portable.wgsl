// The pending tail of a sequence, portable path (appended to
// lz4_decode.wgsl by the pipeline): every lane computes the up to three
// bytes of the partly filled last word itself.
fn sequence_tail(dst: Layout, seq: Sequence, sg_lane: u32) -> u32 {
    let base = seq.end & ~3u;
    var tail = 0u;
    for (var pos = base; pos < seq.end; pos = pos + 1u) {
        tail = tail | (sequence_byte(dst, seq, pos) << ((pos & 3u) * 8u));
    }
    return tail;
}

// The portable entry point has no subgroup_invocation_id parameter.
const sg_lane: u32 = 0u;
