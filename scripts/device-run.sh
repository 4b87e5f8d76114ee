#!/bin/bash
# The one-shot GPU-machine run (docs/gpu-decode.md, "H200").
#
# Here (the build machine), stage the binaries:
#     scripts/device-run.sh --stage KIT      (or DEVICE_KIT=KIT)
# builds the release binaries, the gpu_lz4 bench and two examples, and hands
# them to the device kit's stage.sh (KIT/stage.sh, which adds the Vulkan
# loader and copies them into .gpu/).
# Then, on the H200 host, from a copy of the tree that includes .gpu/
# (about 35 MiB; give the run 10 minutes):
#     bash scripts/device-run.sh
# and, in a second call, 2 minutes of the soak on the GPU:
#     bash scripts/device-run.sh --soak
# It needs no cargo there. It runs, each step under its own time limit so the
# whole run ends within 9.5 minutes, and writes everything as JSON under $OUT
# (default target/device-out):
#   1. staging-memory.json   which Vulkan memory type wgpu's mappable buffers
#                            land in, which memory the runtime's staging got,
#                            and memcpy rates into and out of each
#                            (examples/staging_memory_probe.rs)
#   2. gpu_lz4.json          the decoder bench, every variant, 1k, 4k and 16k
#                            blocks of the demo pack, its BC7 tiles, mixed
#                            binaries and the demo pack in 16 KiB sub-blocks
#   2b. gpu_lz4-hc.json      the same BC7 tiles with LZ4 HC, and with HC
#                            after BCn conditioning, 16k blocks, and the pass
#                            that puts conditioned blocks back in order
#   3. bench-verify.json     gpustream bench --buffered, gpu-lz4 (and on the
#      bench-noverify.json   16 KiB sub-block pack, gpu-lz4-sub; on the HC
#                            and conditioned pack, gpu-lz4-hc), cpu-lz4,
#                            none, staging 64/256/1024 MiB, checksums on, off
#   3b. bench-best.json      gpu-lz4 end to end at the largest staging size
#                            with the decoder variant step 2 found fastest on
#                            the demo pack, when that is not the default
#   3c. bench-sustained.json gpu-lz4 end to end at the largest staging size
#                            with the queue kept full (--sustained), as a
#                            streaming application keeps it
#   3d. bench-direct.json    the default bench: gpu-lz4, cpu-lz4 and none
#                            with O_DIRECT reads from the disk (fio.json
#                            beside it: the disk's own rate for the pack)
#   3e. bench-batch-N.json   gpu-lz4 --buffered at 256 MiB staging with GPU
#                            batches of 8 and 128 MiB (32, the default, is
#                            in bench-verify), for the batch-size choice
#   5. vulkan-decompression.txt  whether the driver offers its own GDeflate
#                            decoder (VK_EXT/VK_NV_memory_decompression in
#                            vulkaninfo and in `gpustream adapters`) and
#                            which decoder the runtime picks
#   5b. gpu_gdeflate.json    the GDeflate decoders alone, 256, 1k and 4k
#                            pages: WGSL and, where the driver has one, the
#                            driver's, each checked against the blocks (GB/s
#                            of output; the target is nvCOMP's GDeflate on
#                            an H200, 68 GB/s)
#   5c. bench-gdeflate.json  gpu-gdeflate and cpu-gdeflate end to end on a
#                            64 MiB demo pack at GDeflate level 12, with the
#                            default (WGSL) decoder
#   5d. bench-gdeflate-driver.json  gpu-gdeflate end to end with the
#                            driver's decoder, where the driver has one
#   4. vt-bench.json         the virtual-texturing --benchmark summary
#   steps.json               each step's command, exit status and seconds
# and prints a short table last. Logs of every step sit beside the JSON,
# and everything is also packed into device-run.tar.gz (the device tool
# hands back only a few files a run, so one archive carries them all; with
# DEVICE_RUN_ARCHIVE_ONLY=1 the archive is all that stays in $OUT).
#
# Quick mode (tiny sizes; what this 2-core machine with lavapipe allows):
#     DEVICE_RUN_QUICK=1 WGPU_BACKEND=vulkan bash scripts/device-run.sh
# Binaries come from $DEVICE_RUN_BIN (default .gpu/, else target/release).
set -u

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

if [ "${1:-}" = "--stage" ]; then
    set -e
    cargo build --release --bins --examples
    bench=$(cargo bench --bench gpu_lz4 --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*gpu_lz4-[^"]*"' | tail -1 | cut -d'"' -f4)
    gdbench=$(cargo bench --bench gpu_gdeflate --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*gpu_gdeflate-[^"]*"' | tail -1 | cut -d'"' -f4)
    kit=${2:-${DEVICE_KIT:-}}
    if [ -z "$kit" ] || [ ! -x "$kit/stage.sh" ]; then
        echo "device-run: name the device kit (a directory with stage.sh):" >&2
        echo "    scripts/device-run.sh --stage KIT   or   DEVICE_KIT=KIT ..." >&2
        exit 2
    fi
    rel=${CARGO_TARGET_DIR:-target}/release
    cp "$bench" "$rel/gpu_lz4_bench"
    cp "$gdbench" "$rel/gpu_gdeflate_bench"
    files=("$rel/gpustream" "$rel/gpu_lz4_bench" "$rel/gpu_gdeflate_bench"
        "$rel/examples/virtual_texturing" "$rel/examples/staging_memory_probe")
    if [ -d .git ]; then
        "$kit/stage.sh" "${files[@]}"
    else
        # A git worktree: .git is a file, which stage.sh's exclude step
        # cannot write through; the same staging, with git's own path.
        exclude=$(git rev-parse --git-path info/exclude)
        mkdir -p "$(dirname "$exclude")"
        grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
        rm -rf .gpu && mkdir -p .gpu/gl
        cp "$kit"/gl/*.deb .gpu/gl/ && cp "$kit/prelude.sh" .gpu/ && cp "${files[@]}" .gpu/
    fi
    # Release builds carry debug info (about 300 MiB in all); stripped, the
    # staged copies stay under 64 MiB, small enough to copy to the host.
    for f in "${files[@]}"; do strip ".gpu/$(basename "$f")"; done
    du -sh .gpu
    exit 0
fi

OUT=${OUT:-target/device-out}
mkdir -p "$OUT"
quick=${DEVICE_RUN_QUICK:-0}
bin=${DEVICE_RUN_BIN:-}
if [ -z "$bin" ]; then
    if [ -x .gpu/gpustream ]; then bin=.gpu; else bin=${CARGO_TARGET_DIR:-target}/release; fi
fi
if [ -f "$bin/prelude.sh" ] && [ -z "${DEVICE_RUN_NO_PRELUDE:-}" ]; then
    # shellcheck disable=SC1091
    source "$bin/prelude.sh"
fi
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}

# The soak on the GPU: a call of its own (the steps below fill one 600 s
# call), 2 minutes of every queue, pack and fault at once with the device
# lost and the runtimes rebuilt (docs/soak.md):
#     bash scripts/device-run.sh --soak
if [ "${1:-}" = "--soak" ]; then
    timeout --kill-after=10 300 "$bin/gpustream" soak --seconds 120 --seed "${SOAK_SEED:-20261209}" \
        --dir "${CARGO_TARGET_DIR:-target}/soak-gpu" --json "$OUT/soak.json" --plot "$OUT/soak.png" \
        >"$OUT/soak.log" 2>&1
    rc=$?
    tail -n 40 "$OUT/soak.log"
    exit "$rc"
fi
# Staged binaries sit flat in .gpu/; in target/release examples have their
# own folder.
example() { if [ -x "$bin/$1" ]; then echo "$bin/$1"; else echo "$bin/examples/$1"; fi; }
lz4bench=$bin/gpu_lz4_bench
if [ ! -x "$lz4bench" ]; then
    # Unstaged: the newest build of benches/gpu_lz4.rs (tests/gpu_lz4.rs
    # builds a binary of the same name; its .d file tells them apart).
    lz4bench=
    for d in $(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/gpu_lz4-*.d 2>/dev/null); do
        if grep -q 'benches/gpu_lz4.rs' "$d" && [ -x "${d%.d}" ]; then
            lz4bench=${d%.d}
            break
        fi
    done
fi
gdbench=$bin/gpu_gdeflate_bench
if [ ! -x "$gdbench" ]; then
    gdbench=
    for d in $(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/gpu_gdeflate-*.d 2>/dev/null); do
        if grep -q 'benches/gpu_gdeflate.rs' "$d" && [ -x "${d%.d}" ]; then
            gdbench=${d%.d}
            break
        fi
    done
fi
work=${DEVICE_RUN_WORK:-target/device-work}
mkdir -p "$work"

if [ "$quick" = 1 ]; then
    lz4_args=(--batches 16,32 --runs 1 --demo-size 4MiB)
    hc_args=(--batches 16 --runs 1 --demo-size 4MiB)
    bench_args=(--staging 64 --demo-mib 16 --iters 1)
    # Four terrain patches: with two, the camera path sees only what the
    # packed mips hold and no tile streams (0 tiles, seen 2026-12-02/03);
    # with four, 13 tiles (0.8 MiB) stream in 30 frames, about 13 s here.
    vt_args=(--textures 4 --size 1024 --format bc7 --pool 64 --frames 30)
    probe_sizes=64,256
    gd_args=(--batch 16 --runs 1 --quick)
    gd_bench_args=(--staging 64 --demo-mib 8 --iters 1)
    limits=(60 240 120 120 120 60 60 60 300 300 300 120 120)
else
    # Every variant (eight with subgroups: v2 with word stores, with
    # 16-byte stores and two blocks per workgroup, each on the subgroup and
    # the portable path, and v1 on both), four corpora (the 16 KiB
    # sub-block one since 2026-12-02), two batch sizes, 4k and 16k blocks,
    # and three timed runs each. On an H100 with a 1.5 GiB demo corpus and
    # a 1k batch besides, the step ran past 170 s before its last corpus;
    # a 512 MiB corpus still fills 16k blocks of 64 KiB (1 GiB out).
    lz4_args=(--batches 16384 --runs 3 --demo-size 512MiB)
    # LZ4 HC and BCn-conditioned BC7 blocks beside plain ones, and the pass
    # that puts conditioned blocks back in order, at the largest batch.
    hc_args=(--batches 16384 --runs 3 --demo-size 512MiB)
    bench_args=(--staging 256,1024 --demo-mib 512)
    vt_args=()
    probe_sizes=64,256,1024
    # Seconds per step, in the order of `limits` below: the staging probe,
    # the LZ4 decoder bench, bench with and without checksums, the
    # virtual-texturing run, the best LZ4 variant end to end, sustained end
    # to end, the HC and conditioned decoder corpora, the GDeflate decoders
    # alone, GDeflate end to end with the default (WGSL) decoder, and GPU
    # GDeflate end to end with the driver's (run only where the driver has
    # one), the default bench with O_DIRECT and the batch-size pair. Sum
    # 590 s, inside one 600 s device call; the first bench step
    # builds the 512 MiB demo pack and its variants (with a 1 GiB pack and
    # three staging sizes it ran past 125 s on an H100 host).
    gd_args=(--batch 1024,4096,16384 --runs 3)
    gd_bench_args=(--staging 256 --demo-mib 64 --iters 3)
    limits=(30 100 120 50 25 30 30 40 30 30 20 45 40)
fi

json_str() {
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/ }
    printf '"%s"' "$s"
}

steps=()
# step NAME LIMIT COMMAND...: runs it under `timeout`, logs to $OUT/NAME.log.
step() {
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*" >&2
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    local dt=$((SECONDS - t0))
    echo "== $name: exit $rc after ${dt} s" >&2
    steps+=("{\"step\": $(json_str "$name"), \"command\": $(json_str "$*"), \"exit\": $rc, \"seconds\": $dt, \"timed_out\": $([ $rc = 124 ] || [ $rc = 137 ] && echo true || echo false)}")
    return $rc
}

step staging-memory "${limits[0]}" "$(example staging_memory_probe)" "$probe_sizes" --json "$OUT/staging-memory.json"
step gpu_lz4 "${limits[1]}" "$lz4bench" "${lz4_args[@]}" --corpora demo,bc7,binary,demo-16k \
    --demo-pack "$work/demo-lz4.gspk" --json "$OUT/gpu_lz4.json"
step gpu_lz4-hc "${limits[7]}" "$lz4bench" "${hc_args[@]}" --corpora bc7,bc7-hc,bc7-hc-cond \
    --demo-pack "$work/demo-lz4.gspk" --json "$OUT/gpu_lz4-hc.json"
bench=("$bin/gpustream" bench --buffered --cases gpu-lz4,gpu-lz4-sub,gpu-lz4-hc,cpu-lz4,none "${bench_args[@]}")
step bench-verify "${limits[2]}" "${bench[@]}" --json "$OUT/bench-verify.json"
if "$bin/gpustream" bench --help 2>/dev/null | grep -q -- --no-verify; then
    step bench-noverify "${limits[3]}" "${bench[@]}" --no-verify --json "$OUT/bench-noverify.json"
else
    echo '{"skipped": "this gpustream has no bench --no-verify flag yet"}' >"$OUT/bench-noverify.json"
    steps+=('{"step": "bench-noverify", "skipped": "no --no-verify flag in this gpustream"}')
fi
# The variant the decoder bench found fastest on the demo pack at its
# largest batch (GPU GB/s, wall GB/s where the adapter has no timestamps),
# end to end, where the runtime's default is another one.
best=$(awk -F'|' '$2 == " demo " && $3 != " - " && $5 + 0 > 0 {
        gbps = ($13 ~ /[0-9]/) ? $13 + 0 : $14 + 0
        if ($5 + 0 > n || ($5 + 0 == n && gbps > top)) { n = $5 + 0; top = gbps; name = $3 }
    } END { gsub(/ /, "", name); print name }' "$OUT/gpu_lz4.log" 2>/dev/null)
default=$(sed -n 's/^GPU LZ4 decoder: //p' "$OUT/bench-verify.log" 2>/dev/null | head -1)
largest=${bench_args[1]##*,}
if [ -n "$best" ] && [ "$best" != "$default" ]; then
    step bench-best "${limits[5]}" "$bin/gpustream" bench --buffered --cases gpu-lz4 \
        --staging "$largest" --demo-mib "${bench_args[3]}" --lz4-path "$best" --json "$OUT/bench-best.json"
else
    printf '{"skipped": "the fastest decoder (%s) is the default (%s)"}\n' "$best" "$default" >"$OUT/bench-best.json"
    steps+=("{\"step\": \"bench-best\", \"skipped\": $(json_str "fastest decoder '$best' is the default '$default'")}")
fi
# The queue kept full: batches span passes, up to the staging size each.
step bench-sustained "${limits[6]}" "$bin/gpustream" bench --buffered --cases gpu-lz4 \
    --staging "$largest" --demo-mib "${bench_args[3]}" --sustained --iters 3 \
    --json "$OUT/bench-sustained.json"
# The default bench: O_DIRECT from the disk, which the kernel cannot do
# into write-combined BAR memory (the reads would fail with EFAULT and go
# through a bounce buffer, counted), beside fio reading the same pack.
step bench-direct "${limits[11]}" "$bin/gpustream" bench --cases gpu-lz4,cpu-lz4,none \
    --staging 256 --demo-mib "${bench_args[3]}" --iters 2 --json "$OUT/bench-direct.json"
if command -v fio >/dev/null; then
    pack=$(ls -S target/gpustream-demo-*MiB.gspk 2>/dev/null | head -1)
    [ -n "$pack" ] && timeout 30 fio --name=pack --filename="$pack" --rw=read --bs=1M --direct=1 \
        --ioengine=io_uring --iodepth=32 --readonly --output-format=json >"$OUT/fio.json" 2>&1
fi
# The GPU batch size (a few tens of MiB by default): smaller batches
# overlap reads with decoding sooner, larger ones fill the GPU more.
for b in 8 128; do
    step "bench-batch-$b" "$((${limits[12]} / 2))" "$bin/gpustream" bench --buffered --cases gpu-lz4 \
        --staging 256 --demo-mib "${bench_args[3]}" --iters 2 --batch-mib "$b" \
        --json "$OUT/bench-batch-$b.json"
done
# The driver's own GDeflate decoder, if it has one (NVIDIA's drivers
# offer VK_NV/VK_EXT_memory_decompression), and the decoder the runtime
# picks; then both decoders alone and end to end.
{
    vulkaninfo 2>/dev/null | grep -i 'memory_decompression' || echo "vulkaninfo: no memory_decompression extension listed"
    "$bin/gpustream" adapters 2>/dev/null | grep -i 'GDeflate decoder'
} >"$OUT/vulkan-decompression.txt" 2>&1
step gpu_gdeflate "${limits[8]}" "$gdbench" "$work/demo-lz4.gspk" "${gd_args[@]}" --json "$OUT/gpu_gdeflate.json"
step bench-gdeflate "${limits[9]}" "$bin/gpustream" bench --buffered --cases gpu-gdeflate,cpu-gdeflate \
    "${gd_bench_args[@]}" --json "$OUT/bench-gdeflate.json"
if grep -q "driver GDeflate decoder: VK_" "$OUT/vulkan-decompression.txt"; then
    step bench-gdeflate-driver "${limits[10]}" env GPUSTREAM_GDEFLATE_DECODER=driver "$bin/gpustream" bench \
        --buffered --cases gpu-gdeflate "${gd_bench_args[@]}" --json "$OUT/bench-gdeflate-driver.json"
fi
step vt-bench "${limits[4]}" "$(example virtual_texturing)" --benchmark "${vt_args[@]}" --stats "$OUT/vt-bench.csv"
vt_rc=$?
{
    printf '{"exit": %s, "csv": "vt-bench.csv", "summary": [' "$vt_rc"
    sep=
    while IFS= read -r line; do
        printf '%s%s' "$sep" "$(json_str "$line")"
        sep=', '
    done < <(tail -n 25 "$OUT/vt-bench.log")
    printf ']}\n'
} >"$OUT/vt-bench.json"

{
    printf '{"quick": %s, "adapter_line": %s, "steps": [' "$([ "$quick" = 1 ] && echo true || echo false)" \
        "$(json_str "$(grep -m1 '^# gpu_lz4 on' "$OUT/gpu_lz4.log" 2>/dev/null)")"
    sep=
    for s in "${steps[@]}"; do
        printf '%s%s' "$sep" "$s"
        sep=', '
    done
    printf ']}\n'
} >"$OUT/steps.json"

# The short table, last.
echo
echo "## staging memory"
grep '^staging' "$OUT/staging-memory.log" || tail -n 3 "$OUT/staging-memory.log"
echo
echo "## decoder (gpu_lz4), largest batch per corpus and variant"
grep '^| corpus\|^| ---' "$OUT/gpu_lz4.log" | head -2
for log in gpu_lz4 gpu_lz4-hc; do
    for c in demo bc7 binary demo-16k bc7-hc bc7-hc-cond; do
        last=$(awk -F'|' -v c=" $c " '$2 == c && $3 != " - " {print $5 + 0}' "$OUT/$log.log" | sort -n | tail -1)
        [ -n "$last" ] && awk -F'|' -v c=" $c " -v n="$last" '$2 == c && $3 != " - " && $5 + 0 == n' "$OUT/$log.log"
    done
    grep -m3 'panicked' "$OUT/$log.log"
done
echo
echo "## end to end (gpustream bench), checksums on / off, fastest decoder, sustained"
for f in bench-verify bench-noverify bench-best bench-sustained bench-direct bench-batch-8 bench-batch-128; do
    [ -f "$OUT/$f.log" ] || continue
    echo "### $f"
    grep -A5 '^case ' "$OUT/$f.log" | grep -v '^where' || tail -n 5 "$OUT/$f.log"
done
echo
echo "## GDeflate: the decoders offered and picked, each alone (gpu_gdeflate), end to end"
cat "$OUT/vulkan-decompression.txt"
grep '^[|#] ' "$OUT/gpu_gdeflate.log" || tail -n 5 "$OUT/gpu_gdeflate.log"
grep -A3 '^case ' "$OUT/bench-gdeflate.log" || tail -n 5 "$OUT/bench-gdeflate.log"
if [ -f "$OUT/bench-gdeflate-driver.log" ]; then
    echo "### with the driver's decoder"
    grep -A3 '^case ' "$OUT/bench-gdeflate-driver.log" || tail -n 5 "$OUT/bench-gdeflate-driver.log"
fi
echo
echo "## virtual texturing --benchmark"
tail -n 8 "$OUT/vt-bench.log"
echo
echo "## steps"
cat "$OUT/steps.json"
# One archive of everything, for a device tool that hands back only a few
# files a run; DEVICE_RUN_ARCHIVE_ONLY=1 leaves the archive alone in $OUT.
if tar czf "$OUT.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")" 2>/dev/null; then
    [ "${DEVICE_RUN_ARCHIVE_ONLY:-0}" = 1 ] && find "$OUT" -mindepth 1 -delete
    mv "$OUT.tar.gz" "$OUT/device-run.tar.gz"
fi
