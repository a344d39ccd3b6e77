#!/usr/bin/env bash
# Prints one hash of the source that the GPU kit's prebuilt binaries are built from (the library, its
# tools and the GPU tests, and the build files), so that scripts/gpu-run.sh uses them only for that
# very source. Works without git (the GPU machine gets a copy of the work tree).
set -euo pipefail
cd "$(dirname "$0")/.."
find src include tools tests/gpu tests/api tests/unit/device meson.build meson_options.txt tests/meson.build -type f \
     \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.c' -o -name '*.py' \
        -o -name '*.def' -o -name '*.map' -o -name 'meson.build' -o -name 'meson_options.txt' -o -name '*.in' \) -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
