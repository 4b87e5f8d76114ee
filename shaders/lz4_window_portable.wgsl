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
