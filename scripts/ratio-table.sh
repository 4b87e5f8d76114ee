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
#
# The game-texture sets of docs/results.md (BC1, BC3 and BC7; about 2 GB of
# Debian downloads, warzone2100-data from trixie with a private apt state):
#     apt-get download cube2-data=1.3-1 flightgear-data-base=1:2020.3.16+dfsg-1
#     T=$PWD/apt-trixie; mkdir -p $T/lists/partial $T/cache/archives/partial; touch $T/status
#     echo 'deb http://deb.debian.org/debian trixie main' > $T/sources.list
#     A="-o Dir::Etc::SourceList=$T/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$T/lists -o Dir::Cache=$T/cache -o Dir::State::Status=$T/status"
#     apt-get $A update && apt-get $A download warzone2100-data=4.5.5deb-1
#     dpkg -x cube2-data_1.3-1_all.deb x/cube2; dpkg -x flightgear-data-base_*_all.deb x/fg
#     dpkg -x warzone2100-data_4.5.5deb-1_all.deb x/wz
#     unzip -q x/wz/usr/share/games/warzone2100/base.wz '*.ktx2' -d x/wz-base
# then into gamedata/bc1, bc3 and ktx2: every DDS of cube2-data and
# flightgear-data-base whose FourCC is DXT1 (or, from cube2-data, DXT5 with
# the long side at least 512, leaving out the gk/dds/*_128/_256/_512.dds
# copies of the 1024 files), with a full mip chain and both sides at least
# 256 and multiples of 4; every KTX2 of base.wz at least 256 a side;
# byte-identical duplicates dropped.
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
