#!/usr/bin/env bash
# The Python package `loom` against a libloom built earlier: only loom._C is compiled, against the torch
# python3 imports (meson -Dprebuilt_libloom, meson.build), then installed with that libloom into
# BUILD/stage; the last line printed is the folder to put on PYTHONPATH. The GPU machine's way
# (scripts/gpu_steps.sh: its kit brings the library prebuilt); scripts/gpu-kit.sh --check runs it here.
# Everywhere else the package is installed with pip (scripts/install-python.sh).
#   bash scripts/package-prebuilt.sh PREBUILT BUILD     PREBUILT holds libloom.so
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prebuilt="$(cd "$1" && pwd)"
build="$2"
if [ ! -f "$build/build.ninja" ]; then
  # The Python to build for is the one `python3` runs here (the one with torch), not meson's own.
  # (A native file in the build folder: meson reads it again whenever it reconfigures.)
  mkdir -p "$build"
  native="$(cd "$build" && pwd)/python-native.ini"
  printf "[binaries]\npython = '%s'\n" "$(python3 -c 'import sys; print(sys.executable)')" >"$native"
  meson setup "$build" "$root" --native-file "$native" --buildtype=release -Dprebuilt_libloom="$prebuilt" \
    -Dcuda=disabled -Dtests=false >&2
else
  # The same folder against another copy of the library (the kit's check, then the dry run in CI):
  # only the link and the installed copy change.
  meson configure "$build" -Dprebuilt_libloom="$prebuilt" >&2
fi
ninja -C "$build" >&2
stage="$(cd "$build" && pwd)/stage"
rm -rf "$stage"
meson install -C "$build" --no-rebuild --destdir "$stage" >/dev/null
package="$(find "$stage" -type d -name loom -path '*-packages/loom' | head -n 1)"
[ -n "$package" ] || { echo "package-prebuilt: no loom package under $stage" >&2; exit 1; }
dirname "$package"
