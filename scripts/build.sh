#!/usr/bin/env bash
# Configures (once) and builds Loom into ./build. Extra arguments go to `meson setup`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release "$@"
fi
ninja -C build
