#!/usr/bin/env bash
# Cross-compiles libloom for 64-bit Arm (NVIDIA Grace) and checks the result is an aarch64 library:
# the guard against x86-only code (intrinsics, inline assembly) creeping into the library. Installs
# Debian's cross compiler and the arm64 builds of libloom's dependencies when missing (root or sudo).
#
#   LOOM_CROSS_BUILD_DIR   build directory (default: build-aarch64)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${LOOM_CROSS_BUILD_DIR:-build-aarch64}"

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
packages=(g++-aarch64-linux-gnu libhwloc-dev:arm64 libfmt-dev:arm64 nlohmann-json3-dev libpugixml-dev:arm64)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  dpkg --print-foreign-architectures | grep -x arm64 >/dev/null || $sudo_cmd dpkg --add-architecture arm64
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The library alone: CUDA, UCX, verbs, MPI and torch are features of their own, built where they exist.
# One object per source and no precompiled header (-Dunity=off -Db_pch=false): every source must then
# include what it uses, which the other builds (batched sources, src/pch/library.h) would not notice.
# -O1: x86-only code fails to compile or assemble at any level; -O2's passes would only cost time.
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --cross-file scripts/cross/aarch64-linux-gnu.ini -Doptimization=1 -Ddebug=false -Db_ndebug=true \
    -Dunity=off -Db_pch=false \
    -Dcuda=disabled -Ducx=disabled -Dibverbs=disabled -Dmpi=disabled -Dtorch=disabled -Dtests=false >/dev/null
fi
ninja -C "$build" libloom.so
lib="$(find "$build" -maxdepth 1 -name 'libloom.so*' -type f | head -n 1)"
[ -n "$lib" ] || { echo "cross-aarch64: no libloom.so in $build"; exit 1; }
machine="$(readelf -h "$lib" | sed -n 's/^ *Machine: *//p')"
echo "cross-aarch64: $lib is built for: $machine"
[ "$machine" = "AArch64" ] || { echo "cross-aarch64: expected an AArch64 library"; exit 1; }
