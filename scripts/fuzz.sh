#!/usr/bin/env bash
# Builds the bootstrap fuzz target with clang's libFuzzer and runs it for a bounded time
# (FUZZ_SECONDS of wall time, default 60) in one worker per core (libFuzzer's fork mode, the workers
# sharing one corpus). Exit status is non-zero when the fuzzer finds a crash.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh >/dev/null  # fmt, for the sources linked in
# clang and libFuzzer: on Debian 12 libFuzzer is in libclang-rt-14-dev, which clang only recommends.
have_fuzzer() { [ -f "$(clang++ -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a" ]; }
if ! command -v clang++ >/dev/null || ! have_fuzzer; then
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq clang
  have_fuzzer || DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq libclang-rt-dev
fi
out="build-fuzz"
mkdir -p "$out/corpus" "$out/obj"
# Each source compiled on its own, as many at once as there are cores (one clang run over all of them
# took 44 s on 2 cores, one core idle), then linked.
sources=(tests/fuzz/bootstrap_fuzz.cc src/bootstrap/wire.cc src/bootstrap/unique_id.cc src/bootstrap/root.cc
         src/bootstrap/rank_table.cc src/bootstrap/bootstrap_tree.cc
         src/base/socket.cc src/base/env.cc src/base/log.cc src/base/settings.cc src/base/settings_files.cc
         src/base/conf_file.cc src/base/nccl_values.cc)
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc)
printf '%s\n' "${sources[@]}" |
  xargs -P "$(nproc)" -I{} sh -c 'clang++ "$@" -c {} -o "$0/obj/$(echo {} | tr / _).o"' "$out" "${flags[@]}"
objects=()
for s in "${sources[@]}"; do objects+=("$out/obj/$(echo "$s" | tr / _).o"); done
clang++ "${flags[@]}" "${objects[@]}" -lfmt -lpthread -o "$out/bootstrap_fuzz"
"$out/bootstrap_fuzz" -fork="$(nproc)" -max_total_time="${FUZZ_SECONDS:-60}" -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" 2>&1 | tail -n 12
