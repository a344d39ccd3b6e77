#!/usr/bin/env bash
# Quick start: installs what is missing, builds what the main job needs (the library, libnccl.so.2 and
# loom-perf: not the test tree, which scripts/test.sh builds) and runs it: an allreduce benchmark over
# host memory between 2 local rank processes, with every result checked.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/build.sh" libloom.so src/compat/libnccl.so.2.30.0 tools/perf/loom-perf
exec "$root/build/tools/perf/loom-perf" all_reduce -b 8 -e 64M -f 2 -np 2 "$@"
