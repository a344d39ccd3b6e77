#!/usr/bin/env bash
# Quick start: installs what is missing, builds, and runs the main job: an allreduce benchmark over
# host memory between 2 local rank processes, with every result checked.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/build.sh"
exec "$root/build/tools/perf/loom-perf" all_reduce -b 8 -e 64M -f 2 -np 2 "$@"
