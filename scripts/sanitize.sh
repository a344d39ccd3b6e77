#!/usr/bin/env bash
# Sanitizer runs for CI: the core, transport and threaded API tests under AddressSanitizer +
# UndefinedBehaviorSanitizer, and the threaded tests under ThreadSanitizer. Only the targets run here
# are built, to keep CI within its time. Ends with "N passed, M failed".
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh >/dev/null
passed=0 failed=0
run() {  # run NAME BINARY [ARGS...]
  local name=$1; shift
  if "$@" >"build-san.$name.log" 2>&1; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name (log below)"; tail -n 40 "build-san.$name.log"; fi
}
configure() {  # configure DIR SANITIZERS
  [ -f "$1/build.ninja" ] || meson setup "$1" --buildtype=debugoptimized -Db_sanitize="$2" -Db_lundef=false \
    -Dcuda=disabled >/dev/null
}
threaded=(tests/core/test_core_async tests/core/test_core_observability tests/core/test_core_bootstrap_junk)

configure build-asan address,undefined
if ninja -C build-asan "${threaded[@]}" tests/core/test_core_faults tests/api/api_split_group >/dev/null; then
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  for t in "${threaded[@]}" tests/core/test_core_faults; do run "asan-$(basename "$t")" "build-asan/$t"; done
  run asan-api_split_group build-asan/tests/api/api_split_group
  unset ASAN_OPTIONS UBSAN_OPTIONS
else
  failed=$((failed + 1)); echo "FAIL asan build"
fi

configure build-tsan thread
if ninja -C build-tsan "${threaded[@]}" >/dev/null; then
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  for t in "${threaded[@]}"; do run "tsan-$(basename "$t")" "build-tsan/$t"; done
  unset TSAN_OPTIONS
else
  failed=$((failed + 1)); echo "FAIL tsan build"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
