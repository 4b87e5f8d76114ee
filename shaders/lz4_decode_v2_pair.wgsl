// LZ4 block decoder, v2 with several blocks per workgroup
// (`lz4_decode_v2_pair`; twin: src/decode/cpu_twin/lz4_decode_v2.rs,
// `lz4_decode_v2_group`). The pipeline appends this file after
// lz4_decode_v2.wgsl, whose parse, barrier rule and copy pass it shares, and
// before the header window (which defines `block_slot`).
//
// Why: v2 runs one block per workgroup of one subgroup, and a GPU keeps a
// fixed number of workgroups resident per multiprocessor (Hopper: 32, half
// its 64 warp slots). Here a workgroup holds BLOCKS slots of WG lanes, one
// block per slot: a subgroup on the subgroup path (the slot is the
// subgroup_id, whatever the driver's mapping of lanes to subgroups), a
// run of WG invocations on the portable path.
//
// The barrier: a slot's pass must wait for the stores of earlier passes
// only where v2's rule says so (fence_needed), but storageBarrier() is a
// workgroup-wide control barrier, so every invocation must reach it
// together. The slots therefore run in turns, one sequence each per turn:
// each slot parses its next sequence, raises ACTIVE (and FENCE when its
// pass needs the barrier) in the turn's flag word, and after one
// workgroupBarrier every invocation reads the same flags: none live ends
// the loop, FENCE makes every invocation take the storage barrier (which
// orders every slot's stores, so every slot's `dirty` resets), then the
// live slots run their passes. A slot whose block ended (or failed, or
// whose descriptor was bad, or that has no block) stays in the loop,
// inactive, so the barriers are reached by the whole workgroup.
//
// Flag words rotate over three: in turn t a slot raises flags[t % 3] and
// invocation 0 clears flags[(t + 1) % 3], both before turn t's barrier.
// flags[(t + 1) % 3] was last read in turn t - 2, before the barrier of
// turn t - 1, and is next raised in turn t + 1, after turn t's barrier; so
// one barrier per turn keeps every read consistent. Workgroup memory is
// not zeroed for these pipelines (kernel.rs), so flags[0] is cleared
// before the loop, behind a barrier of its own.
//
// On the subgroup path a slot is one subgroup, so the pipeline builds this
// variant only where every subgroup has the same size, at most 64
// (`Lz4PipelineError::SubgroupSizeNotFixed`): WG is that size, and each
// workgroup is exactly BLOCKS subgroups.

// Blocks per workgroup (set by the pipeline).
override BLOCKS: u32 = 2u;

const TURN_ACTIVE: u32 = 1u;
const TURN_FENCE: u32 = 2u;

var<workgroup> turn_flags: array<atomic<u32>, 3>;

// One dimension: naga takes subgroup builtins only in 1-D workgroups.
@compute @workgroup_size(WG * BLOCKS)
fn lz4_decode_v2_pair(
    @builtin(workgroup_id) wg_id: vec3<u32>,
    @builtin(local_invocation_index) index: u32,
    /*@SUBGROUP_SLOT_PARAMS@*/
) {
    // (slot, lane in the slot, lanes in the slot).
    let slot = block_slot(index, sg_id, sg_lane, sg_size);
    let lane = slot.y;
    let width = slot.z;
    let block = (wg_id.y * params.grid_stride + wg_id.x) * BLOCKS + slot.x;
    var live = slot.x < BLOCKS && block < params.block_count;

    var dst = Layout(0u, 0u, 0u);
    var src_start = 0u;
    var src_end = 0u;
    var dst_size = 0u;
    if (live) {
        let desc = descs[block];
        dst = block_layout(desc);
        if (dst.word0 == BAD_LAYOUT) {
            if (lane == 0u && block < arrayLength(&status)) {
                status[block] = STATUS_BAD_DESCRIPTOR;
            }
            live = false;
        } else {
            src_start = desc.src_offset;
            src_end = desc.src_offset + desc.src_size;
            dst_size = desc.dst_size;
        }
    }
    // Whether this slot reports a status when the loop ends.
    let decodes = live;

    var ip = src_start;
    var op = 0u;
    var pending = 0u;
    var code = STATUS_OK;
    var err_at = src_start;
    var win_word = ip >> 2u;
    var win = window_load(win_word, sg_lane);
    var dirty = NO_WORD;
    var turn = 0u;
    if (index == 0u) {
        atomicStore(&turn_flags[0], 0u);
    }
    workgroupBarrier();

    // Each turn consumes at least one token byte of every live slot, so
    // the loop runs at most as many turns as the longest block has
    // sequences.
    loop {
        var seq: Sequence;
        var last = false;
        var fence = false;
        if (live) {
            let c = parse_sequence(&ip, op, pending, src_end, dst_size, &win, &win_word, sg_lane, &seq, &last);
            if (c != STATUS_OK) {
                code = c;
                err_at = ip;
                live = false;
            } else {
                fence = fence_needed(seq, dirty);
            }
        }
        if (index == 0u) {
            atomicStore(&turn_flags[(turn + 1u) % 3u], 0u);
        }
        if (live && lane == 0u) {
            atomicOr(&turn_flags[turn % 3u], select(TURN_ACTIVE, TURN_ACTIVE | TURN_FENCE, fence));
        }
        workgroupBarrier();
        // The same word for every invocation: uniform across the workgroup.
        let flags = atomicLoad(&turn_flags[turn % 3u]);
        if (flags == 0u) {
            break;
        }
        if ((flags & TURN_FENCE) != 0u) {
            storageBarrier();
            dirty = NO_WORD;
        }
        if (live) {
            copy_pass(dst, seq, lane, width);
            dirty = dirty_after(seq, dirty);
            pending = sequence_tail(dst, seq, sg_lane);
            op = seq.end;
            if (last) {
                live = false;
            }
        }
        turn = turn + 1u;
    }

    if (decodes && lane == 0u) {
        if (code == STATUS_OK && op != dst_size) {
            code = STATUS_SHORT_OUTPUT;
            err_at = ip;
        }
        finish_block(block, dst, dst_size, code | ((err_at - src_start) << 8u), pending);
    }
}
