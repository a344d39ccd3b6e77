#!/usr/bin/env bash
# Makes, on a Debian machine that reaches Debian's package registry and has the CUDA toolkit (nvcc 13.0,
# the GPU machine's), the kit that the GPU machine needs (it has the CUDA toolkit, g++, python3 with
# torch, meson and ninja, but reaches no registry), in .gpu-kit (ignored by git, carried with the tree):
#   root/, env.sh   the dev packages Loom builds against, extracted, with relocatable pkg-config files,
#                   and env.sh, which points a build (and the linker, LIBRARY_PATH) at them;
#   prebuilt.tar.xz the CUDA binaries, stripped: libloom.so (which the torch extension links), loom-perf,
#                   the GPU tests and the copy-bandwidth tool, taken from the ordinary build (build/, or
#                   LOOM_KIT_BUILD_DIR: the same Debian packages as the kit's, so the same binaries), with
#                   prebuilt.SOURCE, the hash of the source they were built from
#                   (scripts/gpu-source-hash.sh); scripts/gpu-run.sh unpacks them into prebuilt/
#                   (scripts/gpu-unpack-kit.sh) and uses them when the hash matches;
#   nccl-tests.tar.xz NVIDIA's nccl-tests, built here unmodified against Loom's libnccl.so.2 (MPI build,
#                   sm_90), with MPICH's launcher and libraries (scripts/nccl-tests-kit.sh); unpacked
#                   beside prebuilt/ whatever the source (they load libnccl.so.2 at run time).
# So the GPU machine compiles nothing but the torch extension, against its own torch.
#
#   bash scripts/gpu-kit.sh            gather (again) and pack the binaries, into .gpu-kit; the build's
#                                      kernels must be compiled for every GPU of a release (-Dgpu_arch=all)
#   bash scripts/gpu-kit.sh --check    and prove it, in a mount namespace where the system's copies of the
#                                      packages are hidden: Loom configures against the kit alone and
#                                      compiles, for each of the kit's packages, a source that includes
#                                      its headers (what a build from source on the GPU machine needs);
#                                      the binaries' host-visible tests run on the kit's libraries; the
#                                      torch extension builds against the kit (needs torch here); the
#                                      kit stays under 40 MiB. Any -Dgpu_arch will do (CI's build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
kit="$root/.gpu-kit"
arch_lib=usr/lib/x86_64-linux-gnu

# What the build finds through pkg-config (meson.build, tests/meson.build), what those need at run time,
# and pkg-config itself. libudev1 is hwloc's run-time dependency; most systems have it, and env.sh uses
# the kit's copy only where the system has none.
packages=(libhwloc-dev libhwloc15 libfmt-dev libfmt9 nlohmann-json3-dev libpugixml-dev libpugixml1v5
          libgtest-dev libgmock-dev libcli11-dev pkgconf pkgconf-bin libpkgconf3 libudev1)

gather() {
  rm -rf "$kit"
  mkdir -p "$kit/debs" "$kit/root" "$kit/fallback"
  # A machine that never ran `apt-get update` has no package lists to download from.
  (cd "$kit/debs" && { apt-get download -q "${packages[@]}" >/dev/null 2>&1 ||
                       { apt-get update -qq && apt-get download -q "${packages[@]}" >/dev/null; }; })
  for deb in "$kit"/debs/*.deb; do dpkg-deb -x "$deb" "$kit/root"; done
  rm -rf "$kit/debs" "$kit/root/usr/share/doc" "$kit/root/usr/share/man" "$kit/root/usr/share/lintian" \
         "$kit/root/usr/src" "$kit/root/usr/share/aclocal"
  mv "$kit/root/$arch_lib"/libudev.so.1* "$kit/fallback/"
  # .pc files name /usr; relative to the file itself, the kit's usr/ is three folders up from
  # lib/<triplet>/pkgconfig and two up from share/pkgconfig.
  for pc in "$kit/root/$arch_lib"/pkgconfig/*.pc; do sed -i -E 's#^([A-Za-z_]+)=/usr#\1=${pcfiledir}/../../..#' "$pc"; done
  for pc in "$kit/root/usr/share/pkgconfig"/*.pc; do sed -i -E 's#^([A-Za-z_]+)=/usr#\1=${pcfiledir}/../..#' "$pc"; done
  # Debian puts hwloc's generated config.h in the multiarch include folder, which the system compiler
  # searches by itself; the kit's must be named.
  sed -i -E 's#^(Cflags:.*)$#\1 -I${includedir}/x86_64-linux-gnu#' "$kit/root/$arch_lib/pkgconfig/hwloc.pc"
  if grep -l '=/usr' "$kit/root/$arch_lib"/pkgconfig/*.pc "$kit/root/usr/share/pkgconfig"/*.pc; then
    echo "gpu-kit: a pkg-config file above still names /usr" >&2
    exit 1
  fi
  cat >"$kit/env.sh" <<'EOF'
# Points a build at the kit (source it; scripts/gpu-run.sh does). Made by scripts/gpu-kit.sh.
loom_kit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PKG_CONFIG="$loom_kit/root/usr/bin/pkgconf"
export PKG_CONFIG_LIBDIR="$loom_kit/root/usr/lib/x86_64-linux-gnu/pkgconfig:$loom_kit/root/usr/share/pkgconfig"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
export LD_LIBRARY_PATH="$loom_kit/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The linker's own search path: what links with -l outside pkg-config (the torch extension's -lhwloc ...).
export LIBRARY_PATH="$loom_kit/root/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
if ! ldconfig -p 2>/dev/null | grep 'libudev\.so\.1 ' >/dev/null; then LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$loom_kit/fallback"; fi
# CMake (meson's fallback finder) looks here too.
export CMAKE_PREFIX_PATH="$loom_kit/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
EOF
  printf '%s\n' "${packages[@]}" >"$kit/PACKAGES"
  echo "gpu-kit: $(du -sh "$kit" | cut -f1) in .gpu-kit ($(wc -l <"$kit/PACKAGES") packages)"
}

# The binaries scripts/gpu-run.sh runs on the GPU machine (and what the torch extension links), as
# paths in a build folder; they keep that layout in prebuilt/, where their $ORIGIN run paths still hold.
prebuilt_targets=(libloom.so tools/perf/loom-perf tests/unit/device/test_device_rules tests/gpu/test_gpu
                  tests/gpu/loom-gpu-copy-bw perf/launch_cost/launch-cost src/compat/libnccl.so.2.30.0)
kit_limit_mib=40
build="${LOOM_KIT_BUILD_DIR:-build}"
# Where each of the kit's packages puts its headers (what a source that uses it includes).
declare -A package_headers=([hwloc]=/usr/include/hwloc.h [fmt]=/usr/include/fmt/ [nlohmann_json]=/usr/include/nlohmann/
                            [pugixml]=/usr/include/pugixml.hpp [CLI11]=/usr/include/CLI/ [gtest]=/usr/include/gtest/)

# The ordinary build's binaries, brought up to date (ninja: nothing to do after the tests ran them),
# stripped and packed.
pack() {
  local check=$1
  [ -f "$build/build.ninja" ] || { echo "gpu-kit: no build in $build (bash scripts/build.sh makes it)" >&2; return 1; }
  if ! ninja -C "$build" -t targets all | grep '^src/kernels/cuda/plan_kernel.o:' >/dev/null; then
    echo "gpu-kit: $build was configured without CUDA (nvcc and libcudart_static were not found)" >&2
    return 1
  fi
  local arch
  arch="$(meson introspect "$build" --buildoptions | python3 -c 'import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "gpu_arch"))')"
  if [ "$check" = 0 ] && [ "$arch" != all ]; then
    echo "gpu-kit: $build compiles the kernels for gpu_arch=$arch; a kit carries them for every GPU of a release:" >&2
    echo "  meson configure $build -Dgpu_arch=all   (then run this again: only the kernels are recompiled)" >&2
    return 1
  fi
  ninja -C "$build" "${prebuilt_targets[@]}" >"$kit/build.log" 2>&1 || { tail -30 "$kit/build.log"; return 1; }
  local out="$kit/prebuilt" t
  rm -rf "$out"
  for t in "${prebuilt_targets[@]}"; do
    mkdir -p "$out/$(dirname "$t")"
    cp "$build/$t" "$out/$t"
    strip --strip-unneeded "$out/$t"
  done
  # The drop-in by its soname, as programs linked with -lnccl (nccl-tests) load it.
  local compat="$out/src/compat" soname
  soname="$(readelf -d "$compat"/libnccl.so.2.* | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')"
  ln -sf "$(basename "$compat"/libnccl.so.2.*)" "$compat/$soname"
  bash scripts/gpu-source-hash.sh >"$out/SOURCE"
  cp "$out/SOURCE" "$kit/prebuilt.SOURCE"
  # One xz stream: the GPU tests hold the library's kernels as libloom.so does, which it stores once.
  tar -C "$kit" -cf - prebuilt | xz -9 -T1 >"$kit/prebuilt.tar.xz"
  echo "gpu-kit: ${#prebuilt_targets[@]} binaries of $build (gpu_arch=$arch) packed ($(du -sh "$out" | cut -f1), $(du -sh "$kit/prebuilt.tar.xz" | cut -f1) packed), source $(cut -c1-12 "$out/SOURCE")"
  rm -rf "$out"
  # NVIDIA's nccl-tests (MPI build, sm_90) on this build's libnccl.so.2, with what mpiexec needs.
  bash scripts/nccl-tests-kit.sh "$build" "$kit/nccl-tests" || return 1
}

# Objects of $build that together include the headers of each of the kit's packages with headers: a
# few (each covers as many packages as it can, the one with the fewest headers of those), from ninja's
# record of each object's headers.
objects_using_the_kit() {
  local p roots=()
  for p in "${!package_headers[@]}"; do roots+=("$p=${package_headers[$p]}"); done
  ninja -C "$build" -t deps | python3 -c '
import sys
where = dict(item.split("=", 1) for item in sys.argv[1:])
uses, count, obj = {}, {}, None
for line in sys.stdin:
    if not line.startswith(" ") and ": #deps" in line:
        obj = line.split(":")[0]
        count[obj] = int(line.split("#deps")[1].split(",")[0])
        uses[obj] = set()
    elif obj and line.startswith("    "):
        uses[obj].update(p for p, root in where.items() if line.strip().startswith(root))
left, chosen = set(where), []
while left:
    best = max(uses, key=lambda o: (len(uses[o] & left), -count[o]), default=None)
    if best is None or not uses[best] & left:
        sys.exit("gpu-kit: no object of the build includes the headers of " + " ".join(sorted(left)) +
                 " (build its tests: ninja -C the build)")
    chosen.append(best)
    left -= uses[best]
print(" ".join(chosen))' "${roots[@]}"
}

# The system's copies of the kit's packages (and every other pkg-config file) are hidden by mounting
# empty files and folders over them, in a private mount namespace, so the build can only use the kit.
hide_system_packages() {
  local empty_dir empty_file path arch
  empty_dir="$(mktemp -d)"
  empty_file="$(mktemp)"
  arch="$(dpkg --print-architecture)"
  for p in "${packages[@]}"; do
    [ "$p" = libudev1 ] && continue  # the system's own run-time library, present on the GPU machine too
    # The native package: with another architecture's copy installed too (scripts/cross-aarch64.sh), a
    # bare name is ambiguous to dpkg; packages for all architectures have no qualified name.
    { dpkg -L "$p:$arch" 2>/dev/null || dpkg -L "$p" 2>/dev/null || true; } | while read -r path; do
      case "$path" in
        /usr/include/*|/usr/lib/x86_64-linux-gnu/lib*|/usr/bin/*pkg*) [ -f "$path" ] && ! [ -L "$path" ] && mount --bind "$empty_file" "$path" ;;
      esac
      true
    done
  done
  for dir in /usr/include/hwloc /usr/include/fmt /usr/include/nlohmann /usr/include/gtest /usr/include/gmock \
             /usr/include/CLI /usr/lib/x86_64-linux-gnu/pkgconfig /usr/share/pkgconfig /usr/lib/pkgconfig; do
    [ -d "$dir" ] && mount --bind "$empty_dir" "$dir"
  done
  if pkg-config --exists hwloc 2>/dev/null || [ -s /usr/include/hwloc.h ] || [ -s /usr/lib/x86_64-linux-gnu/libhwloc.so.15 ]; then
    echo "gpu-kit: the system's hwloc is still visible" >&2
    return 1
  fi
}

# In the namespace: Loom configured and its sources that use each package compiled from the kit alone;
# the packed binaries run on the kit's libraries; the torch extension built against the kit.
check_inside() {
  local objects
  objects="$(objects_using_the_kit)" || return 1
  hide_system_packages
  # shellcheck disable=SC1091
  source "$kit/env.sh"
  local kit_build=build-gpu-kit unity
  # Configured as $build is where object names depend on it (sources batched or not).
  unity="$(meson introspect "$build" --buildoptions | python3 -c 'import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "unity"))')"
  rm -rf "$kit_build"
  meson setup "$kit_build" --buildtype=release -Dcuda=enabled -Dunity="$unity" >"$kit/build-setup.log" 2>&1 ||
    { tail -30 "$kit/build-setup.log"; return 1; }
  grep -iE 'Run-time dependency (hwloc|fmt|nlohmann_json|pugixml|CLI11|gtest).*(YES|NO)' "$kit/build-setup.log"
  # shellcheck disable=SC2086
  ninja -C "$kit_build" $objects >"$kit/build.log" 2>&1 || { tail -30 "$kit/build.log"; return 1; }
  echo "gpu-kit --check: compiled from the kit alone:" $objects
  rm -rf "$kit_build"

  # Unpacked as scripts/gpu-run.sh unpacks it on the GPU machine.
  bash scripts/gpu-unpack-kit.sh || return 1
  local out="$kit/prebuilt"
  # The binaries as the GPU machine will run them: from prebuilt/, the libraries from the kit.
  ldd "$out/libloom.so" | grep -E 'hwloc|fmt|pugixml'
  if ldd "$out/libloom.so" "$out/tools/perf/loom-perf" | grep 'not found' >/dev/null; then
    echo "gpu-kit --check: a library the binaries need is neither in the kit nor on the system" >&2
    return 1
  fi
  "$out/tests/unit/device/test_device_rules" --gtest_brief=1
  "$out/tests/gpu/test_gpu" --gtest_brief=1 --gtest_filter='HostOnly.*:WithGpu.*'
  "$out/tools/perf/loom-perf" --help >/dev/null
  # nccl-tests as the GPU run launches them: the kit's Hydra starts two processes, which load Loom's
  # libnccl.so.2 and the kit's MPICH (nothing of them from the system), and print their usage.
  local nt="$kit/nccl-tests"
  rm -rf "$nt"
  tar -C "$kit" -xJf "$kit/nccl-tests.tar.xz"
  local nt_env=(LD_LIBRARY_PATH="$out/src/compat:$nt/mpich/lib:$LD_LIBRARY_PATH" PATH="$nt/mpich/bin:$PATH")
  if env "${nt_env[@]}" ldd "$nt/bin/all_reduce_perf_mpi" | grep -E 'not found|libnccl.so.2 => /usr|libmpich.so.12 => /usr'; then
    echo "gpu-kit --check: nccl-tests would load a library from outside the kit (above)" >&2
    return 1
  fi
  env "${nt_env[@]}" timeout 60 mpiexec.hydra -n 2 "$nt/bin/all_reduce_perf_mpi" -h 2>&1 | grep -c '^USAGE' | grep -qx 2 ||
    { echo "gpu-kit --check: the kit's mpiexec did not start nccl-tests' all_reduce_perf_mpi twice" >&2; return 1; }
  echo "gpu-kit --check: nccl-tests ($(ls "$nt"/bin/*_perf_mpi | wc -l) binaries) start under the kit's mpiexec on Loom's libnccl.so.2"
  rm -rf "$nt"
  # The Python package against the kit's prebuilt library, as scripts/gpu-run.sh's torch step makes it
  # there (scripts/package-prebuilt.sh), in a build folder of its own.
  if ! python3 -c 'import torch' 2>/dev/null; then
    echo "gpu-kit --check: no torch here (scripts/install-python.sh installs it): the extension is not checked" >&2
    return 1
  fi
  # (In build-torch/, scripts/gpu-run.sh's folder for it: its dry run then relinks, not recompiles.)
  local site
  site="$(bash scripts/package-prebuilt.sh "$out" "$root/build-torch" 2>"$kit/torch-build.log" | tail -n 1)" ||
    { tail -30 "$kit/torch-build.log"; return 1; }
  ldd "$site"/loom/_C*.so | grep -E 'libloom|hwloc'
  (cd / && PYTHONPATH="$site" python3 -c 'import torch, loom._C, loom.torch, loom.capi
assert loom.capi.lib._name.startswith("'"$site"'"), loom.capi.lib._name
print("gpu-kit --check: the torch extension loads, with the prebuilt libloom beside it")') || return 1
  rm -rf "$out"  # what travels is the packed copy
}

kit_size_ok() {
  local mib
  mib=$(du -sm "$kit" | cut -f1)
  echo "gpu-kit: .gpu-kit is ${mib} MiB (limit ${kit_limit_mib} MiB)"
  [ "$mib" -lt "$kit_limit_mib" ] || { echo "gpu-kit: the kit is over ${kit_limit_mib} MiB" >&2; return 1; }
}

case "${1:-}" in
  "")
    gather
    pack 0
    kit_size_ok
    ;;
  --check)
    gather
    pack 1
    unshare --mount --propagation private bash "$0" --check-inside
    kit_size_ok
    echo "gpu-kit --check: Loom configured and compiled from the kit alone, its binaries ran on it, the torch extension built"
    ;;
  --check-inside) check_inside ;;
  *) echo "usage: scripts/gpu-kit.sh [--check]" >&2; exit 2 ;;
esac
