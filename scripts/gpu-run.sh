#!/usr/bin/env bash
# Loom's GPU work on a machine with an NVIDIA GPU that reaches no package registry, from the kit
# scripts/gpu-kit.sh made (.gpu-kit, carried with the work tree: the dependencies and the CUDA binaries,
# prebuilt, so that nothing but the torch extension is compiled there). src/device/README.md has the
# plan of record: two commands, the second issued right after the first.
#
#   bash scripts/gpu-run.sh check       (A) probe; smoke tests; the plan-kernel suite; the torch extension
#                                           built against the machine's torch (for B) while time is left
#   bash scripts/gpu-run.sh measure     (B) copy limit; the host's work per device call (perf/launch_cost,
#                                           1 rank and 2 rank threads); loom-perf sweeps (1 rank, 2 rank threads, 2 rank
#                                           processes) and 8 B latency; NVIDIA's nccl-tests on Loom's libnccl.so.2
#                                           (1 rank, graphs, 2 processes on GPU 0); torch CUDA tensors over the loom
#                                           backend, torch's NCCL at 1 rank as the reference row; torch's own
#                                           NCCL backend over Loom's libnccl.so.2 (1 and 2 processes) and over
#                                           NVIDIA's (1); while time is left, 2 threads' all_reduce over
#                                           channels, slots, chunks
#   bash scripts/gpu-run.sh STEP...     single steps: probe smoke plans extension staged hosts copy launch perf nccltests
#                                       torch sweep
#   bash scripts/gpu-run.sh --dry-run check measure
#                                       the same steps, selections and summary against FakeCuda (no GPU;
#                                       CI runs it), with the binaries of the ordinary build (LOOM_BUILD_DIR)
#
# Every test binary runs directly (not through meson) under its own `timeout -k 5` and a LOOM_TIMEOUT_MS
# of seconds, in escalating filters: a kernel smoke test, then one 2-rank collective, then the suite
# test by test; a filter that selects no test fails, and two timeouts in a row stop a suite. One command
# shares one time budget (GPU_RUN_SECONDS, default 280): an item that no longer fits is skipped, saying
# so. Everything is written into the results folder as it runs ($OUT when set, else gpu-results/<plans>):
# log.txt (all output), items.tsv (one line per item), rows.jsonl (measurements), summary.txt (the
# one-screen summary, also printed at the end). Exits non-zero when an item failed.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dry=0
if [ "${1:-}" = --dry-run ]; then dry=1; shift; fi
export LOOM_GPU_DRY_RUN=$dry
# shellcheck source=scripts/gpu_items.sh
source "$root/scripts/gpu_items.sh"
# shellcheck source=scripts/gpu_steps.sh
source "$root/scripts/gpu_steps.sh"
[ $# -gt 0 ] || { sed -n '2,22p' "$0"; exit 2; }

# The plans of record expand to steps; single steps are accepted as they are.
steps=()
for arg in "$@"; do
  case "$arg" in
    check) steps+=(probe smoke plans extension) ;;
    measure) steps+=(copy launch perf nccltests torch sweep) ;;
    probe|smoke|plans|extension|staged|hosts|copy|launch|perf|nccltests|torch|sweep) steps+=("$arg") ;;
    *) echo "gpu-run: unknown plan or step '$arg'" >&2; exit 2 ;;
  esac
done

budget=${GPU_RUN_SECONDS:-280}
deadline=$((SECONDS + budget))
if [ -n "${OUT:-}" ]; then results="$OUT"; else results="$root/gpu-results/$(IFS=-; echo "$*")"; rm -rf "$results"; fi
mkdir -p "$results"
items_init "$results" "$deadline"

if [ "$dry" = 1 ]; then
  # FakeCuda: the CUDA runtime and kernels on host threads (tests/fakecuda); the ordinary build has its
  # variants of the GPU binaries.
  bin="${LOOM_BUILD_DIR:-$root/build}"
  declare -A binary=([tests]=tests/gpu/test_fakecuda [perf]=tests/gpu/loom-perf-fakecuda
                     [copy]=tests/gpu/loom-gpu-copy-bw-fakecuda [launch]=perf/launch_cost/launch-cost-fakecuda)
  mode="dry run against FakeCuda, binaries of $bin"
else
  declare -A binary=([tests]=tests/gpu/test_gpu [perf]=tools/perf/loom-perf [copy]=tests/gpu/loom-gpu-copy-bw
                     [launch]=perf/launch_cost/launch-cost)
  if [ ! -f .gpu-kit/env.sh ]; then
    note "gpu-run: no .gpu-kit here: run scripts/gpu-kit.sh on a machine with Debian's registry and carry .gpu-kit"
    exit 2
  fi
  # shellcheck disable=SC1091
  source .gpu-kit/env.sh
  export PATH="/usr/local/cuda/bin:$PATH"
  # The kit's binaries when they were built from this very source; else a build here (minutes).
  if [ "${LOOM_GPU_PREBUILT:-1}" = 1 ] && bash scripts/gpu-unpack-kit.sh; then
    bin="$root/.gpu-kit/prebuilt"
    mode="prebuilt binaries of the kit (source $(cut -c1-12 .gpu-kit/prebuilt/SOURCE))"
  else
    bin="$root/${BUILD:-build-gpu}"
    mode="built here into $bin (the kit's binaries are missing or from other source)"
  fi
fi
# More hardware queues than rank streams (src/device/README.md). Module loading stays CUDA's default
# (lazy): Loom loads its kernels itself, and the tests check that it does.
export CUDA_DEVICE_MAX_CONNECTIONS=32

note "## gpu-run $*: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), ${budget} s budget; $mode"
note "## steps: ${steps[*]}"

# Source build (fallback): only the binaries the steps use.
ensure_binaries() {
  [ "$bin" = "$root/${BUILD:-build-gpu}" ] || return 0
  [ -n "${built:-}" ] && return "$built"
  local targets=(libloom.so)
  local role
  for role in "${!binary[@]}"; do targets+=("${binary[$role]}"); done
  if [ ! -f "$bin/build.ninja" ]; then
    item_run build-setup 60 240 meson setup --wipe "$bin" --buildtype=release -Dcuda=enabled ||
      item_run build-setup 60 240 meson setup "$bin" --buildtype=release -Dcuda=enabled
  fi
  item_run build 120 540 ninja -C "$bin" "${targets[@]}"
  built=$?
  return "$built"
}

for step in "${steps[@]}"; do
  note "## step $step ($(items_left) s left)"
  case "$step" in
    probe) step_probe ;;
    smoke)
      ensure_binaries || continue
      gtest_item smoke-host-only 15 60 20 "$bin/${binary[tests]}" 'HostOnly.*:WithGpu.*'
      gtest_item smoke-kernels 20 90 20 "$bin/${binary[tests]}" 'DeviceKernels.*'
      # One 2-rank collective as plan kernels: if this cannot pass, the suite would only time out.
      gtest_item smoke-collective 15 60 15 "$bin/${binary[tests]}" 'Ranks/DeviceCollectives.AllReduce/n2' \
        LOOM_TEST_GPU_MODE=plans LOOM_DEVICE_PLANS=require
      ;;
    plans)
      ensure_binaries || continue
      if ! item_passed smoke-collective; then
        item_skip plans "the 2-rank collective (smoke-collective) did not pass"
        continue
      fi
      gtest_suite plans "$bin/${binary[tests]}" 'DeviceCollectives' LOOM_TEST_GPU_MODE=plans LOOM_DEVICE_PLANS=require
      # A CUDA graph of 100 collectives replayed, and the kernels' profile read through the API.
      gtest_item plans-graph-loops 20 120 30 "$bin/${binary[tests]}" 'Ranks/GraphLoops.*' \
        LOOM_TEST_GPU_MODE=plans LOOM_DEVICE_PLANS=require
      gtest_item plans-profile 10 60 20 "$bin/${binary[tests]}" 'DeviceProfile.*' \
        LOOM_TEST_GPU_MODE=plans LOOM_DEVICE_PLANS=require
      # The suite above takes peer-memory plans where the tuner does; the FIFO plans they replace, again.
      gtest_item plans-fifo 20 150 30 "$bin/${binary[tests]}" \
        'Ranks/DeviceCollectives.AllReduce/*:Ranks/DeviceCollectives.AllGather/*:Ranks/DeviceCollectives.ReduceScatter/*:Ranks/DeviceCollectives.Broadcast/*' \
        LOOM_TEST_GPU_MODE=plans LOOM_DEVICE_PLANS=require LOOM_DEVICE_PEER_MEMORY=0
      # Rank processes on the GPU as plan kernels, their FIFOs mapped by CUDA IPC: their kernels run side
      # by side only under MPS (FakeCuda's always do, so the dry run runs it too).
      if [ "$dry" = 1 ] || mps_start; then
        gtest_item plans-processes 20 150 30 "$bin/${binary[tests]}" \
          'Ranks/DeviceCollectives.AllReduce/*:Ranks/DeviceCollectives.AllGather/*' \
          LOOM_TEST_GPU_MODE=process-plans LOOM_DEVICE_PLANS=require
        # The same processes with their buffers in windows: peer-memory plans through CUDA IPC mappings.
        gtest_item windows-processes 10 120 30 "$bin/${binary[tests]}" 'DeviceWindows.*' \
          LOOM_TEST_GPU_MODE=process-plans LOOM_DEVICE_PLANS=require
        [ "$dry" = 1 ] || mps_stop
      else
        item_skip plans-processes "no MPS here: kernels of two processes would take turns on the GPU"
        item_skip windows-processes "no MPS here: kernels of two processes would take turns on the GPU"
      fi
      ;;
    staged)
      ensure_binaries || continue
      gtest_suite staged-threads "$bin/${binary[tests]}" 'DeviceCollectives' LOOM_TEST_GPU_MODE=threads
      gtest_suite staged-processes "$bin/${binary[tests]}" 'DeviceCollectives' LOOM_TEST_GPU_MODE=processes
      ;;
    hosts)
      ensure_binaries || continue
      gtest_suite hosts "$bin/${binary[tests]}" 'DeviceCollectives' LOOM_TEST_GPU_MODE=hosts LOOM_DEVICE_PLANS=require
      ;;
    copy)
      ensure_binaries || continue
      step_copy "$bin/${binary[copy]}"
      ;;
    launch)
      ensure_binaries || continue
      step_launch "$bin/${binary[launch]}"
      ;;
    perf)
      ensure_binaries || continue
      step_perf "$bin/${binary[perf]}"
      ;;
    nccltests) step_nccltests ;;
    extension)
      ensure_binaries || continue
      step_extension "$bin"
      ;;
    torch)
      ensure_binaries || continue
      step_extension "$bin" && step_torch "$bin"
      ;;
    sweep)
      ensure_binaries || continue
      step_sweep "$bin/${binary[perf]}"
      ;;
  esac
done

items_summary
