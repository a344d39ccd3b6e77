#!/usr/bin/env bash
# Issue 8's GPU measurements, for a machine with a GPU (written on a machine without one: unrun).
#
#   perf/gpu_bench.sh [step ...]      steps: build test copy perf latency   (default: all, in order)
#
#   build    meson setup $BUILD -Dcuda=enabled (once) and ninja
#   test     meson test --suite gpu (device kernels vs CPU kernels, every collective on device memory,
#            2-4 ranks on GPU 0 as threads and as processes, cubin check)
#   copy     loom-gpu-copy-bw: device-to-device copy bandwidth (the limit), and pinned host<->device
#            bandwidth (the limit of today's staging path), 8 B .. 1 GiB
#   perf     loom-perf -G cuda all_reduce / all_gather / reduce_scatter, 8 B .. 1 GiB (x2), JSON rows
#            per collective: 2 rank threads on one GPU as plan kernels over the p2p transport
#            (LOOM_DEVICE_PLANS=1: ranks sharing a GPU are otherwise staged; all_reduce and all_gather
#            also with LOOM_P2P_DIRECT=0, every message through the FIFO slots), 2 rank processes on one
#            GPU (staged through pinned host memory), and host memory for comparison
#   latency  8 B allreduce on device buffers, 2 ranks as processes and as threads (staged, and as
#            plan kernels), 1000 iterations
#
# Results go to $OUT (default perf/results/gpu-<UTC time>/), with summary.txt holding the date, the
# machine, the commit and every command line. Each step stays well under 10 minutes on an H200 host.
# Environment: BUILD (default build-gpu), OUT, MAXBYTES (default 1G), ITERS (default 10), NP (2).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build-gpu}
OUT=${OUT:-perf/results/gpu-$(date -u +%Y%m%dT%H%M%SZ)}
MAXBYTES=${MAXBYTES:-1G}
ITERS=${ITERS:-10}
NP=${NP:-2}
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(build test copy perf latency)
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"

run() {  # run CMD...: log the command line, run it, keep its output
  local name=$1
  shift
  echo "\$ $*" | tee -a "$SUMMARY"
  "$@" 2>&1 | tee "$OUT/$name.txt"
  local rc=${PIPESTATUS[0]}
  echo "# exit $rc" | tee -a "$SUMMARY"
  return 0
}

if [ ! -s "$SUMMARY" ]; then
  {
    echo "# loom GPU benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "# host $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
    nvcc --version 2>&1 | tail -1 | sed 's/^/# nvcc: /'
  } >"$SUMMARY"
fi

PERF="$BUILD/tools/perf/loom-perf"
for step in "${STEPS[@]}"; do
  case "$step" in
    build)
      [ -f "$BUILD/build.ninja" ] || run setup meson setup "$BUILD" -Dcuda=enabled -Dbuildtype=release
      run build ninja -C "$BUILD"
      ;;
    test)
      run gpu-tests meson test -C "$BUILD" --suite gpu --print-errorlogs --num-processes 1
      ;;
    copy)
      run copy-bw "$BUILD/tests/gpu/loom-gpu-copy-bw" $((1 << 30)) 20
      ;;
    perf)
      for coll in all_reduce all_gather reduce_scatter; do
        run "$coll-plans" env LOOM_DEVICE_PLANS=1 "$PERF" "$coll" -G cuda -t "$NP" -b 8 -e "$MAXBYTES" -f 2 \
          -n "$ITERS" -w 2 -c 1 -T 540 -J "$OUT/$coll-plans.json"
        [ "$coll" = reduce_scatter ] ||  # its receivers reduce: direct mode plays no part
          run "$coll-plans-slots" env LOOM_DEVICE_PLANS=1 LOOM_P2P_DIRECT=0 "$PERF" "$coll" -G cuda -t "$NP" -b 8 \
            -e "$MAXBYTES" -f 2 -n "$ITERS" -w 2 -c 1 -T 540 -J "$OUT/$coll-plans-slots.json"
        run "$coll-device" "$PERF" "$coll" -G cuda -np "$NP" -b 8 -e "$MAXBYTES" -f 2 -n "$ITERS" -w 2 -c 1 \
          -T 540 -J "$OUT/$coll-device.json"
        run "$coll-host" "$PERF" "$coll" -np "$NP" -b 8 -e "$MAXBYTES" -f 2 -n "$ITERS" -w 2 -c 1 \
          -T 540 -J "$OUT/$coll-host.json"
      done
      ;;
    latency)
      run latency-processes "$PERF" all_reduce -G cuda -np "$NP" -b 8 -e 8 -n 1000 -w 100 -c 1 -T 300
      run latency-threads "$PERF" all_reduce -G cuda -t "$NP" -b 8 -e 8 -n 1000 -w 100 -c 1 -T 300
      run latency-plans env LOOM_DEVICE_PLANS=1 "$PERF" all_reduce -G cuda -t "$NP" -b 8 -e 8 -n 1000 -w 100 -c 1 \
        -T 300
      run latency-host "$PERF" all_reduce -np "$NP" -b 8 -e 8 -n 1000 -w 100 -c 1 -T 300
      ;;
    *)
      echo "unknown step '$step' (build test copy perf latency)" >&2
      exit 2
      ;;
  esac
done
echo "results in $OUT"
