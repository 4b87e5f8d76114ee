#!/usr/bin/env bash
# Packs the same inputs at each LZ4 level and BCn conditioning setting (and
# zstd and GDeflate beside them) and prints one Markdown row per setting: stored bytes,
# ratio, ratio against LZ4's fast compressor without conditioning (what
# `gpustream pack --level 0 --no-condition` writes), pack time, and the
# median LZ4 sequences per block (`gpustream info`).
#
#   scripts/ratio-table.sh INPUT... [-- EXTRA PACK ARGS]
#   scripts/ratio-table.sh /data/textures/bc3
#   scripts/ratio-table.sh assets -- --texture-format bc1
#
# Needs a release build (`cargo build --release`); packs go to a temporary
# directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/gpustream
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
inputs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do inputs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
extra=("$@")
[ ${#inputs[@]} -gt 0 ] || { echo "usage: $0 INPUT... [-- PACK ARGS]" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

settings=(
  "lz4 fast|--codec lz4 --level 0 --no-condition"
  "lz4 HC 9|--codec lz4 --level 9 --no-condition"
  "lz4 HC 12|--codec lz4 --level 12 --no-condition"
  "lz4 fast + conditioning|--codec lz4 --level 0"
  "lz4 HC 9 + conditioning (default)|--codec lz4 --level 9"
  "lz4 HC 12 + conditioning|--codec lz4 --level 12"
  "zstd 19|--codec zstd --level 19 --no-condition"
  "zstd 19 + conditioning|--codec zstd --level 19"
  "gdeflate 12|--codec gdeflate --level 12 --no-condition"
  "gdeflate 12 + conditioning (gdeflate default)|--codec gdeflate --level 12"
)
echo "| setting | stored bytes | ratio | vs lz4 fast | conditioned blocks | pack s | LZ4 seq/block (median) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
base=""
for s in "${settings[@]}"; do
  name=${s%%|*}
  read -r -a args <<< "${s#*|}"
  line=$("$bin" pack "${inputs[@]}" -o "$tmp/p.gspk" "${args[@]}" "${extra[@]}" | tail -1)
  # "...: N assets, N blocks, U -> S bytes (R:1) in T s"
  stored=$(sed -E 's/.* -> ([0-9]+) bytes.*/\1/' <<< "$line")
  uncompressed=$(sed -E 's/.* ([0-9]+) -> .*/\1/' <<< "$line")
  secs=$(sed -E 's/.* in ([0-9.]+) s$/\1/' <<< "$line")
  [ -n "$base" ] || base=$stored
  info=$("$bin" info "$tmp/p.gspk")
  seq=$(awk '$1 == "overall" { print ($8 == "" ? "-" : $8) }' <<< "$info")
  conditioned=$(awk '/^texture blocks by conditioning/ { on = 1; next }
    on && $1 == "overall" { on = 0 }
    on && $1 != "none" { n += $2 }
    on && $1 == "none" { t += $2 }
    END { printf "%d of %d", n, n + t }' <<< "$info")
  awk -v n="$name" -v u="$uncompressed" -v s="$stored" -v b="$base" -v t="$secs" -v q="$seq" -v c="$conditioned" \
    'BEGIN { printf "| %s | %d | %.3f | %.3f | %s | %.2f | %s |\n", n, s, u / s, b / s, c, t, q }'
done
