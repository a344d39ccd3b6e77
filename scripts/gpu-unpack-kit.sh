#!/usr/bin/env bash
# Unpacks the GPU kit's prebuilt binaries (.gpu-kit/prebuilt.tar.xz, made by scripts/gpu-kit.sh) into
# .gpu-kit/prebuilt when they were built from this very source (scripts/gpu-source-hash.sh), and says
# so; exits 1, saying why, when they were not (scripts/gpu-run.sh then builds from source).
set -euo pipefail
cd "$(dirname "$0")/.."
kit=.gpu-kit
# NVIDIA's nccl-tests (scripts/nccl-tests-kit.sh): Loom's libnccl.so.2 is bound at run time, so they
# serve whatever source the prebuilt binaries are of.
if [ -f "$kit/nccl-tests.tar.xz" ] && [ ! -x "$kit/nccl-tests/bin/all_reduce_perf_mpi" ]; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
    "$kit/nccl-tests.tar.xz" "$kit"
fi
if [ ! -f "$kit/prebuilt.tar.xz" ] || [ ! -f "$kit/prebuilt.SOURCE" ]; then
  echo "gpu-unpack-kit: the kit has no prebuilt binaries" >&2
  exit 1
fi
want="$(cat "$kit/prebuilt.SOURCE")"
here="$(bash scripts/gpu-source-hash.sh)"
if [ "$want" != "$here" ]; then
  echo "gpu-unpack-kit: the kit's binaries were built from other source (${want:0:12}, this tree ${here:0:12})" >&2
  exit 1
fi
if [ "$(cat "$kit/prebuilt/SOURCE" 2>/dev/null)" != "$want" ]; then
  rm -rf "$kit/prebuilt"
  # Python's tarfile: no xz program needed on the GPU machine.
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
    "$kit/prebuilt.tar.xz" "$kit"
fi
echo "gpu-unpack-kit: prebuilt binaries of source ${want:0:12} in $kit/prebuilt"
