// The header window of lz4_decode_v2, subgroup path: lane j of every
// subgroup holds input word win_word + j (one coalesced load for the whole
// window), and a header byte is taken out of its lane with one
// subgroupShuffle. The shuffle index is the same in every lane, so every
// lane gets the same byte and the loop stays uniform.

// Words in the window: the adapter's smallest subgroup size (every
// subgroup of the workgroup holds the same words, so their decisions agree).
override WIN: u32 = 8u;

fn window_load(win_word: u32, sg_lane: u32) -> u32 {
    let i = win_word + sg_lane;
    if (sg_lane < WIN && i < arrayLength(&input)) {
        return input[i];
    }
    return 0u;
}

// The byte at input address addr; window_cover made its word one of the
// window's.
fn window_byte(win: u32, win_word: u32, addr: u32) -> u32 {
    let w = subgroupShuffle(win, (addr >> 2u) - win_word);
    return (w >> ((addr & 3u) * 8u)) & 0xffu;
}

// lz4_decode_v2_pair's slot of an invocation: (slot, lane in it, lanes in
// it). A slot is a subgroup, so its window and shuffles stay inside it
// whatever the driver's mapping of invocations to subgroups. The pipeline
// builds the pair only where the subgroup size is fixed (WG), so the
// workgroup is exactly BLOCKS full subgroups.
fn block_slot(index: u32, sg_id: u32, sg_lane: u32, sg_size: u32) -> vec3<u32> {
    return vec3<u32>(sg_id, sg_lane, sg_size);
}
