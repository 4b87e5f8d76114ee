#!/usr/bin/env bash
# Keeps CI's build cache (.ci/run, GPUSTREAM_CI_CACHE) bounded.
#
#   scripts/ci-cache-sweep.sh CACHE_ROOT
#
# 1. This project's own builds (gpustream, its tests, benches, examples, the
#    plugin, the fuzz targets) that no build has written for
#    GPUSTREAM_CI_CACHE_DAYS days (default 7) are removed: each is one cargo
#    unit, found by its .fingerprint/<package>-<hash> directory, with every
#    file in deps/, build/, examples/ and incremental/ carrying that hash.
#    A clean clone rebuilds every one of them on each run, so the ones in
#    use are always fresh; the stale ones are those a changed feature set,
#    profile or dependency left behind.
# 2. Dependencies are rebuilt only when Cargo.lock changes, so they grow
#    slowly; a cache directory (main, cross, bevy, fuzz) whose size passes
#    GPUSTREAM_CI_CACHE_MAX_GIB (default 40, for the whole root) is removed
#    whole, largest first, until the root fits, and the next run builds it
#    again from cold.
set -euo pipefail
root=${1:?usage: ci-cache-sweep.sh CACHE_ROOT}
days=${GPUSTREAM_CI_CACHE_DAYS:-7}
max_gib=${GPUSTREAM_CI_CACHE_MAX_GIB:-40}
[ -d "$root" ] || exit 0

removed=0
# Profile directories hold a .fingerprint directory: main/release,
# fuzz/x86_64-unknown-linux-gnu/release, cross/<triple>/debug, ...
while IFS= read -r -d '' fp; do
  profile=$(dirname "$fp")
  for unit in "$fp"/gpustream-*; do
    [ -d "$unit" ] || continue
    # Newest write to any file of the unit's fingerprint.
    if [ -n "$(find "$unit" -newermt "-$days days" -print -quit)" ]; then
      continue
    fi
    hash=${unit##*-}
    for d in deps build examples incremental; do
      [ -d "$profile/$d" ] || continue
      find "$profile/$d" -maxdepth 1 -name "*-$hash*" -exec rm -rf {} +
    done
    rm -rf "$unit"
    removed=$((removed + 1))
  done
done < <(find "$root" -maxdepth 4 -type d -name .fingerprint -print0)

kib() { du -sk "$1" 2>/dev/null | cut -f1; }
total=$(kib "$root")
cap=$((max_gib * 1024 * 1024))
while [ "$total" -gt "$cap" ]; do
  largest=$(for d in "$root"/*/; do printf '%s\t%s\n' "$(kib "$d")" "$d"; done | sort -rn | head -1 | cut -f2)
  [ -n "$largest" ] || break
  echo "ci-cache-sweep: $root is past ${max_gib} GiB; removing $largest"
  rm -rf "$largest"
  total=$(kib "$root")
done
echo "ci-cache-sweep: removed $removed stale units of this project; $root holds $((total / 1024)) MiB"
for d in "$root"/*/; do
  printf '  %6d MiB  %s\n' $(($(kib "$d") / 1024)) "$(basename "$d")"
done
