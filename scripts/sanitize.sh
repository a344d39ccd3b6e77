#!/usr/bin/env bash
# Sanitizer runs for CI, about 15 min on 2 cores with the builds:
#   build-asan  AddressSanitizer + UndefinedBehaviorSanitizer (leak checks on) over the GoogleTest suites
#               (gpu is not built without CUDA), less what ASAN_LEFT_OUT names below.
#   build-tsan  ThreadSanitizer over the tests whose ranks or callers are threads of one process and,
#               where the CUDA toolkit is (the build then has CUDA), over the CUDA plan interpreter's
#               host emulation (its lanes are threads handing slots, direct posts and counters to each
#               other as GPU blocks will) and the device layer on FakeCuda (tests/fakecuda: plan
#               kernels and stream-ordered staging, 2 ranks; about 1 min). Those run in test_fakecuda,
#               which holds no nvcc object; the host tests link the library's kernels, which nothing
#               runs here: compiled only to PTX at low optimization (-Dgpu_arch=check: plan_kernel.cu
#               12 s against 119 for sm_90 machine code).
# Both keep assertions and compile with -g1 (line tables are enough for reports); ASan at -Og, TSan at
# -O1. GCC's -O1 with ASan and UBSan together takes twice -Og's time (a library batch: 84 s against 45;
# the ASan build 955 s against 553 on 2 cores) for a sixth less test time (242 s against 288); TSan's
# -O1 build is only 7% slower than -Og's while its tests run a quarter faster (238 s against 326). Ends with "N passed, M failed, K skipped" over every run; a build that fails counts as one
# failure. Logs: build-asan/meson-logs, build-tsan/meson-logs.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh >/dev/null || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
jobs="${LOOM_TEST_JOBS:-2}"

# Left out of the ASan run: the exhaustive verifier sweep (Builders/Sweep: every builder x ranks 1..64,
# 4 min under ASan); the other algorithms tests and every API test run the same builders.
# The rank-count matrices (api_*_threads) run 1, 2, 3, 5 and 8 ranks under ASan (LOOM_TEST_RANKS,
# tests/api/launch_config.h): the counts between run the same code (the main run has 4 too), and the
# three took 6 of ASan's 14 min.
asan_matrices=(api_threads api_transports_threads api_socket_threads)
# Left out of ASan: the communicator on fixture machines compared with loom-sim (api_topology*,
# algorithms-tuning; 5 min of ASan's build and run with loom-sim): they run the communicator and
# builders the API tests run, and `topology` keeps the fixture parsers under ASan.
# Left out too: the process-rank runs of the thread-rank API tests (the same cases with
# LOOM_TEST_LAUNCH=processes, a minute of ASan's run): api_processes keeps process ranks, and so shared
# memory between processes, under ASan.
asan_skipped=(api_topology api_topology_processes algorithms-tuning
              api_socket_processes api_split_group_processes api_algorithms_processes api_errors_processes)
ASAN_LEFT_OUT="^($(IFS='|'; echo "${asan_matrices[*]} ${asan_skipped[*]}" | tr ' ' '|'))\$"
export GTEST_FILTER='-Builders/Sweep.*'
# Under TSan every API matrix is 6-9 min; core_* and these cover the threads that share a process:
# async progress threads, abort from another thread, groups over several comms, each transport.
tsan_tests=(core_async core_gates core_observability core_bootstrap_junk core_faults core_lazy_connections api_split_group api_errors net_providers)
tsan_matrices=(api_threads api_transports_threads api_socket_threads)  # 3 ranks only (LOOM_TEST_RANKS)

export ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# UCX patches malloc and mmap to track memory (its registration cache); the patches collide with the
# sanitizers' own interceptors (a crash in ucp_init). The ucx provider needs neither here.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# hwloc's PCI plugin loads libpciaccess, whose allocations LeakSanitizer reports once hwloc unloads the
# plugin at topology destroy (a bare hwloc init/load/destroy does it too). Live discovery then lists no
# PCI devices; the topology tests read PCI trees from fixture files.
export HWLOC_COMPONENTS=-pci

passed=0 failed=0 skipped=0
setup() {  # setup DIR SANITIZERS OPTIMIZATION [CUDA]; also brings an existing DIR to these options (CUDA: disabled)
  local opts=(-Db_sanitize="$2" -Db_lundef=false -Doptimization="$3" -Dcuda="${4:-disabled}" -Dgpu_arch=check -Ddebug=false
              -Db_ndebug=false -Dcpp_args=-g1 -Dc_args=-g1)
  if [ -f "$1/build.ninja" ]; then meson configure "$1" "${opts[@]}" >/dev/null
  else meson setup "$1" "${opts[@]}" >/dev/null; fi
}
build() {  # build DIR TEST...: builds what those tests need (DIR is set up); quiet unless it fails
  local dir=$1 targets; shift
  targets="$(python3 scripts/test_targets.py "$dir" "$@")" &&
    ninja -C "$dir" -j "$jobs" $targets >"$dir/sanitize-build.log" 2>&1 && return 0
  tail -n 40 "$dir/sanitize-build.log"; echo "FAIL $dir build"; failed=$((failed + 1)); return 1
}
run_tests() {  # run_tests DIR MESON-TEST-ARGS...: runs them and adds the results to the totals
  local dir=$1; shift
  rm -f "$dir/meson-logs/testlog.json"  # a missing log counts as a failure
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes "$jobs" --timeout-multiplier 3 "$@"
  local p f s
  read -r p _ f _ s _ < <(python3 scripts/test_summary.py "$dir/meson-logs/testlog.json")
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
}

SECONDS=0
setup build-asan address,undefined g
mapfile -t asan_tests < <(meson test -C build-asan --no-rebuild --list --suite api --suite core --suite net \
  --suite algorithms --suite device --suite kernels --suite topology 2>/dev/null | sed 's|.* / ||' | grep -Ev "$ASAN_LEFT_OUT")
if build build-asan "${asan_tests[@]}" "${asan_matrices[@]}"; then
  echo "asan build: ${SECONDS}s"
  run_tests build-asan "${asan_tests[@]}"
  export LOOM_TEST_RANKS=1,2,3,5,8
  run_tests build-asan "${asan_matrices[@]}"
  unset LOOM_TEST_RANKS
fi
echo "asan: ${SECONDS}s"

SECONDS=0
# One ThreadSanitizer build, with CUDA where the toolkit is here (the host tests run in it as in any
# CUDA build without a GPU): the library is compiled once for both sets of tests.
setup build-tsan thread 1 auto
tsan_cuda_tests=()
if meson test -C build-tsan --list 2>/dev/null | grep gpu_plan_interpreter_emulated >/dev/null; then
  tsan_cuda_tests=(gpu_plan_interpreter_emulated fakecuda_collectives_plans fakecuda_collectives_processes
                   fakecuda_device_flight_record fakecuda_collectives_peer fakecuda_collectives_process_plans
                   fakecuda_windows_processes)
else
  echo "SKIP TSan over the CUDA plan interpreter and FakeCuda: no CUDA toolkit found"
  skipped=$((skipped + 1))
fi
if build build-tsan "${tsan_tests[@]}" "${tsan_matrices[@]}" "${tsan_cuda_tests[@]}"; then
  echo "tsan build: ${SECONDS}s"
  run_tests build-tsan "${tsan_tests[@]}"
  export LOOM_TEST_RANKS=3
  run_tests build-tsan "${tsan_matrices[@]}"
  unset LOOM_TEST_RANKS
  if ((${#tsan_cuda_tests[@]})); then
    # The matrix of whole collectives (3.5 min under TSan) runs the same code as the cases kept.
    # (A filter given here replaces the meson test's own: each names the part of test_fakecuda it runs.)
    run_tests build-tsan gpu_plan_interpreter_emulated \
      --test-args='--gtest_filter=PlanInterpreter.*:PlanSequence.*:DirectMode.*:LowLatency.*:PeerMemory.*'
    run_tests build-tsan fakecuda_collectives_plans fakecuda_collectives_processes \
      --test-args='--gtest_filter=Ranks/DeviceCollectives.*/n2'
    # Peer-memory plans: ranks reading and writing each other's buffers, ordered by their Meets alone.
    run_tests build-tsan fakecuda_collectives_peer \
      --test-args='--gtest_filter=Ranks/DeviceCollectives.AllReduce/n2:Ranks/DeviceCollectives.AllGather/n3:Ranks/DeviceCollectives.ReduceScatter/n2:Ranks/DeviceCollectives.Broadcast/n2'
    # Rank processes' plan kernels through FIFOs mapped by CUDA IPC (each process's side: TSan sees no
    # other process's threads), and the watch that sees a peer process exit raising the abort word.
    run_tests build-tsan fakecuda_collectives_process_plans \
      --test-args='--gtest_filter=Ranks/DeviceCollectives.AllReduce/n2:Ranks/DeviceCollectives.AllGather/n2:Ranks/DeviceCollectives.APeerThatDiesIsNamedBeforeTheTimeout/n2'
    # Windows: registration, the device table's copy and the kernels' translation of peers' buffers.
    run_tests build-tsan fakecuda_windows_processes
    # The lanes' notes of whom they wait on, read by another thread while they run (the flight record).
    run_tests build-tsan fakecuda_device_flight_record
  fi
fi
echo "tsan: ${SECONDS}s"

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
