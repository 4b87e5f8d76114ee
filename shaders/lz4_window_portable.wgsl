// The header window of lz4_decode_v2, portable path (no subgroups): header
// bytes are read from the input binding directly, at the same address in
// every lane (a broadcast load). The window bookkeeping still runs, so both
// paths share one loop and one twin.

override WIN: u32 = 32u;

fn window_load(win_word: u32, sg_lane: u32) -> u32 {
    return 0u;
}

fn window_byte(win: u32, win_word: u32, addr: u32) -> u32 {
    return input_byte(addr);
}

// lz4_decode_v2_pair's slot of an invocation: (slot, lane in it, lanes in
// it): WG invocations in a run. The portable entry point has no subgroup
// builtins; these stand in for them.
const sg_id: u32 = 0u;
const sg_size: u32 = 0u;

fn block_slot(index: u32, sg_id: u32, sg_lane: u32, sg_size: u32) -> vec3<u32> {
    return vec3<u32>(index / WG, index % WG, WG);
}
