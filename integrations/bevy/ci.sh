#!/usr/bin/env bash
# CI step for the Bevy plugin: installs what it needs if missing (the
# pinned toolchain with clippy, lavapipe, Xvfb), builds the plugin, its
# example and its tests, runs them, and holds clippy and rustdoc to no
# warnings. The window test starts its own Xvfb; GPU checks fail
# rather than skip (GPUSTREAM_REQUIRE_GPU=1). Measured from clean on 2 cores:
# about 18 minutes of build (most of it Bevy) and 2.5 minutes of tests
# (README.md, "Measured").
set -euxo pipefail
cd "$(dirname "$0")"

export DEBIAN_FRONTEND=noninteractive
need_apt=()
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
command -v Xvfb >/dev/null || need_apt+=(xvfb)
# winit's X11 backend loads these at run time.
dpkg -s libxkbcommon-x11-0 >/dev/null 2>&1 || need_apt+=(libxkbcommon-x11-0)
dpkg -s libxcursor1 >/dev/null 2>&1 || need_apt+=(libxcursor1)
dpkg -s libxi6 >/dev/null 2>&1 || need_apt+=(libxi6)
dpkg -s libxrandr2 >/dev/null 2>&1 || need_apt+=(libxrandr2)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}"
fi

# rust-toolchain.toml pins the toolchain Bevy 0.20 needs.
toolchain=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
rustup toolchain list | grep -q "^$toolchain" ||
  rustup toolchain install "$toolchain" --profile minimal
rustup component list --toolchain "$toolchain" --installed | grep -q '^clippy' ||
  rustup component add clippy --toolchain "$toolchain"

export GPUSTREAM_REQUIRE_GPU=1
export WGPU_BACKEND=vulkan
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

# The demo pack is made by the main crate's packer (sRGB BC7): GPUSTREAM_BIN
# where the caller names it (the main CI step has built it), else the main
# crate's own release build, built here if missing.
if [ -z "${GPUSTREAM_BIN:-}" ]; then
  export GPUSTREAM_BIN=$PWD/../../target/release/gpustream
  if [ ! -x "$GPUSTREAM_BIN" ]; then
    (cd ../.. && env -u CARGO_TARGET_DIR cargo build --release --bin gpustream)
  fi
fi

cargo build --locked --tests --examples
cargo test --locked
# Lints and docs check dependencies in their own (metadata-only) build:
# about 2.5 minutes more from clean on 2 cores.
cargo clippy --locked --all-targets -- -D warnings
RUSTDOCFLAGS=-Dwarnings cargo doc --locked --no-deps
