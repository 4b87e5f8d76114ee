#!/usr/bin/env bash
# The library's public API as an engine building it alone sees it
# (no features): every public item, one per line as
# "kind path", from the item list rustdoc writes (all.html; stable
# rustdoc has no JSON output). Methods and fields are not listed: adding a
# type, function, constant or trait is what this makes visible.
#
#   scripts/public-api.sh           rewrite docs/public-api.txt
#   scripts/public-api.sh --check   compare with it; exit 1 on a difference
#
# CI runs --check, so a change to the public API shows up in review as a
# change to docs/public-api.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

# Warnings are errors: a doc link to an item public only with `internals`
# would be a dead link in the library's own documentation.
RUSTDOCFLAGS=-Dwarnings cargo doc --release -p gpustream --no-deps --lib --no-default-features --quiet
all=${CARGO_TARGET_DIR:-target}/doc/gpustream/all.html
# <a href="completion/struct.Fence.html">completion::Fence</a> -> struct completion::Fence
list=$(grep -o '<li><a href="[^"]*">[^<]*</a></li>' "$all" |
    sed -E 's#<li><a href="([^"]*/)?([a-z]+)\.[^"]*">([^<]*)</a></li>#\2 \3#' |
    LC_ALL=C sort)
if [ "$(printf '%s\n' "$list" | wc -l)" -lt 50 ]; then
    echo "public-api: found too few items in $all; has rustdoc's page changed?" >&2
    exit 2
fi
if [ "${1:-}" = "--check" ]; then
    if ! diff -u docs/public-api.txt <(printf '%s\n' "$list"); then
        echo "public-api: the public API differs from docs/public-api.txt (above)." >&2
        echo "If the change is intended, run scripts/public-api.sh and commit the list." >&2
        exit 1
    fi
    echo "public-api: $(printf '%s\n' "$list" | wc -l) items, as docs/public-api.txt lists"
else
    printf '%s\n' "$list" >docs/public-api.txt
    echo "public-api: wrote $(printf '%s\n' "$list" | wc -l) items to docs/public-api.txt"
fi
