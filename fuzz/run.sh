#!/usr/bin/env bash
# Builds every fuzz target with libfuzzer-sys on the stable toolchain (no
# cargo-fuzz, no nightly) and runs each for SECONDS (default 60), one after
# the other.
#
#   fuzz/run.sh [SECONDS]            every target
#   FUZZ_TARGETS="pack_reader lz4_twin" fuzz/run.sh 300
#   FUZZ_NO_BUILD=1 fuzz/run.sh 60    reuse the last build
#   FUZZ_BUILD_DIR=/var/cache/x fuzz/run.sh 20   build there (CI's cache)
#
# Seeds: fuzz/seeds/<target>/ (checked in), plus tests/regressions/ for the
# importers when it exists. Each run works on a copy in
# target/fuzz/corpus/<target>/, so the checked-in seeds never change; crashes
# land in target/fuzz/artifacts/<target>/. Exits non-zero if any target
# crashed, after running them all. A summary (executions, coverage, crashes)
# is printed per target and kept in target/fuzz/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
triple=x86_64-unknown-linux-gnu
out=target/fuzz
build="${FUZZ_BUILD_DIR:-$out}"

# Coverage instrumentation for libFuzzer, as cargo-fuzz sets it, plus Rust's
# own checks: there is no AddressSanitizer on stable, so debug assertions and
# overflow checks are what turn a bug into a crash. The explicit --target
# keeps these flags off build scripts, which would not link with them.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cdebug-assertions -Coverflow-checks"
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  cargo build --release --manifest-path fuzz/Cargo.toml --target "$triple" --target-dir "$build" --bins
fi

targets="${FUZZ_TARGETS:-$(ls fuzz/fuzz_targets | sed -n 's/\.rs$//p')}"
summary="$out/summary.txt"
mkdir -p "$out"
: > "$summary"
failed=()
for t in $targets; do
  bin="$build/$triple/release/$t"
  corpus="$out/corpus/$t"
  artifacts="$out/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds+=("fuzz/seeds/$t")
  case "$t" in
    ktx2_reader | image_import)
      [ -d tests/regressions ] && seeds+=(tests/regressions) ;;
  esac
  log="$out/$t.log"
  echo "== $t: ${seconds}s, seeds: ${seeds[*]:-none}"
  before=$(find "$artifacts" -type f | wc -l)
  status=0
  # The first directory receives new inputs; the seed directories are read only.
  "$bin" "$corpus" "${seeds[@]}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$artifacts/" -print_final_stats=1 \
    > "$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  crashes=$(( $(find "$artifacts" -type f | wc -l) - before ))
  line="$t: ${seconds}s, ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, corpus $(ls "$corpus" | wc -l), crashes $crashes, exit $status"
  echo "$line" | tee -a "$summary"
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed+=("$t")
    grep -E -m 5 'panicked|ERROR|SUMMARY|Test unit written' "$log" || tail -20 "$log"
  fi
done
if [ "${#failed[@]}" -ne 0 ]; then
  echo "fuzz targets that crashed: ${failed[*]} (inputs under $out/artifacts/)" >&2
  exit 1
fi
