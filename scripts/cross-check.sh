#!/usr/bin/env bash
# The library as an engine on Windows or macOS builds it
# (no features): `cargo clippy -D warnings` (which type-checks all `cargo check` does)
# for x86_64-pc-windows-gnu, aarch64-apple-darwin and x86_64-apple-darwin,
# from this Linux machine. They hold the I/O engine's `cfg`s together: only
# Linux has io_uring, O_DIRECT, statx, FIEMAP, /proc/self/fd and the mapped
# path with its SIGBUS handler; other systems get the positioned-read
# thread pool (docs/io.md, "Per OS").
#
#   scripts/cross-check.sh      installs what is missing, then checks
#
# Installs the Rust targets (rustup) and, for Windows, MinGW's C compiler
# (apt-get, as root), which zstd-sys needs to build zstd's C.
#
# macOS: zstd's C cannot be compiled here, since it needs the macOS SDK's
# libc headers (clang targets Darwin, but /usr/include is glibc's, whose
# bits/ headers clang does not look for on a Darwin target), and the SDK
# may not be copied onto a non-Apple machine. A check compiles no C and
# links nothing, so zstd-sys is pointed at an installed libzstd instead
# (its ZSTD_SYS_USE_PKG_CONFIG switch) through a pkg-config file written
# under target/cross that names `-lzstd` and nothing else. The Rust code of
# zstd, zstd-safe and zstd-sys is checked all the same; only zstd's own C,
# built on every Mac that builds the crate, is left out.
#
# Everything goes to target/cross, or to CARGO_TARGET_DIR where the caller
# sets one (CI points it at its build cache), so the native build's
# artefacts and fingerprints are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/cross}
targets=(x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin)

installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
    if ! grep -qx "$t" <<<"$installed"; then
        rustup target add "$t"
    fi
done
if ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq gcc-mingw-w64-x86-64
fi
if ! command -v pkg-config >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq pkg-config
fi

pc_dir=$(mkdir -p "$CARGO_TARGET_DIR" && cd "$CARGO_TARGET_DIR" && pwd)/pkgconfig-darwin
mkdir -p "$pc_dir"
cat >"$pc_dir/libzstd.pc" <<'EOF'
Name: libzstd
Description: stands in for macOS's libzstd in a cross check, which links nothing
Version: 1.5.7
Libs: -lzstd
Cflags:
EOF

for t in "${targets[@]}"; do
    vars=()
    case "$t" in
    *-apple-darwin)
        # Target-scoped: pkg-config for any other target is untouched.
        tv=${t//-/_}
        vars=(ZSTD_SYS_USE_PKG_CONFIG=1
            "PKG_CONFIG_ALLOW_CROSS_$tv=1"
            "PKG_CONFIG_PATH_$tv=$pc_dir"
            "PKG_CONFIG_LIBDIR_$tv=$pc_dir")
        ;;
    esac
    echo "cross-check: $t"
    # Clippy checks everything `cargo check` does, and more.
    env "${vars[@]}" cargo clippy -p gpustream --lib --no-default-features --target "$t" --quiet -- -D warnings
done
echo "cross-check: the library checks and passes clippy for ${targets[*]}"
