// The pending tail of a sequence, subgroup path (appended to
// lz4_decode.wgsl by the pipeline on devices with Features::SUBGROUP):
// lane j of each subgroup fetches byte j of the partly filled last word
// (lookups that may each be an output load) and one subgroupOr gives
// every lane the whole word. Subgroups have at least 4 lanes.
fn sequence_tail(dst: Layout, seq: Sequence, sg_lane: u32) -> u32 {
    let pos = (seq.end & ~3u) + sg_lane;
    var mine = 0u;
    if (sg_lane < 4u && pos < seq.end) {
        mine = sequence_byte(dst, seq, pos) << (sg_lane * 8u);
    }
    return subgroupOr(mine);
}
