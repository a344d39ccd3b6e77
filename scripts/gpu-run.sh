#!/usr/bin/env bash
# Builds and runs Loom's GPU work on a machine with an NVIDIA GPU that reaches no package registry, from
# the kit scripts/gpu-kit.sh gathered (.gpu-kit, carried along with the work tree). Each step is sized
# to finish well within 10 minutes on one H100/H200 with 16 cores; several steps may run in one call.
#
#   bash scripts/gpu-run.sh STEP...
#
#   probe     what the machine has: GPU, driver, nvcc, g++, python3/torch, meson, ninja (no build)
#   build     configure (once; again if a previous configure failed) and build $BUILD from the kit alone
#   test      the GPU tests that need a GPU, one at a time: device kernels against the CPU's bit for bit,
#             the memory kinds, every collective on device memory as plan kernels (2-4 rank threads on
#             GPU 0, LOOM_DEVICE_PLANS=require: a pass means plan kernels ran), the cubin check
#   staged    the same collectives staged through pinned memory: rank threads, then rank processes
#   copy      the device-to-device copy limit (and pinned host<->device), 8 B .. 1 GiB
#   perf      loom-perf -G cuda: all_reduce, all_gather, reduce_scatter 8 B .. 1 GiB, 1 rank and 2 rank
#             threads sharing the GPU as plan kernels, then 8 B all_reduce latency over 2000 iterations
#   torch     the Python binding built against this machine's torch, and tests/python/test_cuda.py
#
# Every step builds first if needed (a new machine has no build). Results: gpu-results/<step>/ (logs,
# JSON rows), summarized on stdout; when $OUT is set (the GPU machine's result folder), one tarball
# $OUT/loom-gpu-<steps>.tar.gz of this call's results. Exits non-zero when any step failed, and a GPU
# test that skips while nvidia-smi sees a GPU counts as failed.
# Environment: BUILD (default build-gpu), MAXBYTES (1G), ITERS (20).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
BUILD=${BUILD:-build-gpu}
MAXBYTES=${MAXBYTES:-1G}
ITERS=${ITERS:-20}
STEP_SECONDS=${STEP_SECONDS:-540}
results="$root/gpu-results"
failed=()

[ $# -gt 0 ] || { sed -n '2,25p' "$0"; exit 2; }
if [ ! -f .gpu-kit/env.sh ]; then
  echo "gpu-run: no .gpu-kit here: run scripts/gpu-kit.sh on a machine with Debian's registry and carry .gpu-kit" >&2
  exit 2
fi
# shellcheck disable=SC1091
source .gpu-kit/env.sh
export PATH="/usr/local/cuda/bin:$PATH"
# More hardware queues than rank streams (src/device/README.md). Module loading stays CUDA's default
# (lazy): Loom loads its kernels itself, and the run checks that it does.
export CUDA_DEVICE_MAX_CONNECTIONS=32

note() { echo "$*" | tee -a "$results/summary.txt"; }

# run NAME CMD...: one command under the step's time limit, its output kept in the step's folder.
run() {
  local name=$1
  shift
  note "\$ $*"
  timeout --kill-after=10 "$STEP_SECONDS" "$@" >"$dir/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$dir/$name.log"
  note "# $name: exit $rc$([ $rc -eq 124 ] && echo ' (timed out)')"
  [ $rc -eq 0 ] || failed+=("$name")
  return $rc
}

gpu_seen() { nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }

ensure_build() {
  if [ -x "$BUILD/tools/perf/loom-perf" ] && ninja -C "$BUILD" -n 2>/dev/null | grep -q 'no work to do'; then return 0; fi
  local opts=(--buildtype=release -Dcuda=enabled)
  if [ -f "$BUILD/build.ninja" ]; then
    true
  elif [ -d "$BUILD" ]; then
    meson setup --wipe "$BUILD" "${opts[@]}" >"$dir/setup.log" 2>&1 || { tail -40 "$dir/setup.log"; return 1; }
  else
    meson setup "$BUILD" "${opts[@]}" >"$dir/setup.log" 2>&1 || { tail -40 "$dir/setup.log"; return 1; }
  fi
  run build ninja -C "$BUILD"
}

# meson test, failing when a GPU test skips on a machine that has a GPU.
gpu_tests() {
  local name=$1
  shift
  run "$name" meson test -C "$BUILD" --no-rebuild --print-errorlogs --num-processes 1 "$@"
  local rc=$?
  if gpu_seen && grep -q 'SKIP' "$dir/$name.log"; then
    note "# $name: a GPU test skipped although nvidia-smi sees a GPU: counted as failed"
    failed+=("$name-skipped")
    return 1
  fi
  return $rc
}

perf() {  # perf NAME ARGS...: loom-perf on device buffers, its rows also as JSON
  local name=$1
  shift
  run "$name" "$BUILD/tools/perf/loom-perf" -G cuda -T "$((STEP_SECONDS - 30))" -J "$dir/$name.json" "$@"
}

mkdir -p "$results"
for step in "$@"; do
  dir="$results/$step"
  rm -rf "$dir"
  mkdir -p "$dir"
  note "## $step, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  SECONDS=0
  case "$step" in
    probe)
      {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
        for tool in nvcc g++ python3 meson ninja cmake; do printf '%s: ' "$tool"; "$tool" --version 2>&1 | tail -n 1; done
        python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
        "$PKG_CONFIG" --modversion hwloc fmt pugixml nlohmann_json gtest CLI11 | paste -sd' '
        nproc
      } 2>&1 | tee "$dir/probe.log"
      ;;
    build) ensure_build || failed+=(build) ;;
    test)
      ensure_build || { failed+=(build); continue; }
      gpu_tests gpu-unit --suite device gpu_host_only gpu_kernels_device gpu_cubins
      gpu_tests gpu-plans gpu_collectives_plans
      ;;
    staged)
      ensure_build || { failed+=(build); continue; }
      gpu_tests gpu-staged gpu_collectives_threads gpu_collectives_processes
      ;;
    copy)
      ensure_build || { failed+=(build); continue; }
      run copy-bw "$BUILD/tests/gpu/loom-gpu-copy-bw" "$(numfmt --from=iec "$MAXBYTES")" "$ITERS"
      ;;
    perf)
      ensure_build || { failed+=(build); continue; }
      for coll in all_reduce all_gather reduce_scatter; do
        perf "$coll-1rank" "$coll" -t 1 -b 8 -e "$MAXBYTES" -f 2 -n "$ITERS" -w 5 -c 1
        LOOM_DEVICE_PLANS=require perf "$coll-2threads" "$coll" -t 2 -b 8 -e "$MAXBYTES" -f 2 -n "$ITERS" -w 5 -c 1
      done
      LOOM_DEVICE_PLANS=require perf latency-2threads all_reduce -t 2 -b 8 -e 8 -n 2000 -w 200 -c 1
      perf latency-1rank all_reduce -t 1 -b 8 -e 8 -n 2000 -w 200 -c 1
      ;;
    torch)
      ensure_build || { failed+=(build); continue; }
      run torch-build env LOOM_BUILD_DIR="$root/$BUILD" bash -c \
        'cd bindings/python && MAX_JOBS=$(nproc) python3 setup.py -q build_ext --inplace'
      run torch-cuda env PYTHONPATH="$root/bindings/python" python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py
      ;;
    *)
      echo "gpu-run: unknown step '$step'" >&2
      failed+=("$step")
      ;;
  esac
  note "# $step took ${SECONDS}s"
done

if [ -n "${OUT:-}" ]; then
  tarball="$OUT/loom-gpu-$(IFS=-; echo "$*").tar.gz"
  tar -czf "$tarball" -C "$results" .
  echo "results: $tarball"
fi
if [ ${#failed[@]} -gt 0 ]; then
  note "FAILED: ${failed[*]}"
  exit 1
fi
note "all steps passed: $*"
