#!/usr/bin/env bash
# Configures (once) and builds Loom into ./build: everything (the library, its tools and the test tree),
# or only the ninja targets named, e.g. `bash scripts/build.sh libloom.so tools/perf/loom-perf`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release
fi
ninja -C build "$@"
