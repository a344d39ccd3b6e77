#!/usr/bin/env bash
# Makes, on a Debian machine that reaches Debian's package registry and has the CUDA toolkit (nvcc 13.0,
# the GPU machine's), the kit that the GPU machine needs (it has the CUDA toolkit, g++, python3 with
# torch, meson and ninja, but reaches no registry), in .gpu-kit (ignored by git, carried with the tree):
#   root/, env.sh   the dev packages Loom builds against, extracted, with relocatable pkg-config files,
#                   and env.sh, which points a build (and the linker, LIBRARY_PATH) at them;
#   prebuilt.tar.xz the CUDA binaries, built here from the kit alone and stripped: libloom.so (which the
#                   torch extension links), loom-perf, the GPU tests and the
#                   copy-bandwidth tool, with prebuilt.SOURCE, the hash of the source they were built from
#                   (scripts/gpu-source-hash.sh); scripts/gpu-run.sh unpacks them into prebuilt/
#                   (scripts/gpu-unpack-kit.sh) and uses them when the hash matches.
# So the GPU machine compiles nothing but the torch extension, against its own torch.
#
#   bash scripts/gpu-kit.sh            gather (again) and build the binaries, into .gpu-kit
#   bash scripts/gpu-kit.sh --check    and prove it, in a mount namespace where the system's copies of the
#                                      packages are hidden: the binaries' host-visible tests run, and the
#                                      torch extension builds against the kit (needs torch here); the
#                                      kit stays under 40 MiB
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
if ! ldconfig -p 2>/dev/null | grep -q 'libudev\.so\.1 '; then LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$loom_kit/fallback"; fi
# CMake (meson's fallback finder) looks here too.
export CMAKE_PREFIX_PATH="$loom_kit/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
EOF
  printf '%s\n' "${packages[@]}" >"$kit/PACKAGES"
  echo "gpu-kit: $(du -sh "$kit" | cut -f1) in .gpu-kit ($(wc -l <"$kit/PACKAGES") packages)"
}

# The binaries scripts/gpu-run.sh runs on the GPU machine (and what the torch extension links), as
# paths in a build folder; they keep that layout in prebuilt/, where their $ORIGIN run paths still hold.
prebuilt_targets=(libloom.so tools/perf/loom-perf tests/unit/device/test_device_rules
                  tests/gpu/gpu_host_only tests/gpu/gpu_kernels_device tests/gpu/gpu_dmabuf_device
                  tests/gpu/gpu_collectives_plans tests/gpu/gpu_collectives_threads
                  tests/gpu/gpu_collectives_processes tests/gpu/gpu_collectives_hosts tests/gpu/loom-gpu-copy-bw
                  src/compat/libnccl.so.2.30.0)
kit_limit_mib=40

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

# In the namespace: Loom built from the kit alone, its GPU binaries stripped into prebuilt/; with
# --check, their host-visible tests and the torch extension.
build_inside() {
  local check=$1
  hide_system_packages
  # shellcheck disable=SC1091
  source "$kit/env.sh"
  local build=build-gpu-kit
  if [ ! -f "$build/build.ninja" ]; then
    rm -rf "$build"
    meson setup "$build" --buildtype=release -Dcuda=enabled >"$kit/build-setup.log" 2>&1 ||
      { tail -30 "$kit/build-setup.log"; return 1; }
    grep -iE 'Run-time dependency (hwloc|fmt|nlohmann_json|pugixml|CLI11|gtest).*(YES|NO)' "$kit/build-setup.log"
  fi
  ninja -C "$build" "${prebuilt_targets[@]}" >"$kit/build.log" 2>&1 || { tail -30 "$kit/build.log"; return 1; }
  local out="$kit/prebuilt" t
  rm -rf "$out"
  for t in "${prebuilt_targets[@]}"; do
    mkdir -p "$out/$(dirname "$t")"
    case "$t" in
      *.a)  # meson's archives are thin (they name the build's object files): made whole to travel
        (cd "$build/$(dirname "$t")" && ar t "$(basename "$t")" | xargs ar rcs "$out/$t")
        strip --strip-debug "$out/$t" ;;
      *) cp "$build/$t" "$out/$t"
         strip --strip-unneeded "$out/$t" ;;
    esac
  done
  bash scripts/gpu-source-hash.sh >"$out/SOURCE"
  # One xz stream: the GPU tests each hold the library's kernels, which it stores once (~50 MiB -> ~4).
  cp "$out/SOURCE" "$kit/prebuilt.SOURCE"
  tar -C "$kit" -cf - prebuilt | xz -9 -T1 >"$kit/prebuilt.tar.xz"
  echo "gpu-kit: ${#prebuilt_targets[@]} binaries prebuilt ($(du -sh "$out" | cut -f1), $(du -sh "$kit/prebuilt.tar.xz" | cut -f1) packed), source $(cut -c1-12 "$out/SOURCE")"
  rm -rf "$out"
  [ "$check" = 1 ] || return 0

  # Unpacked as scripts/gpu-run.sh unpacks it on the GPU machine.
  bash scripts/gpu-unpack-kit.sh || return 1

  # The binaries as the GPU machine will run them: from prebuilt/, the libraries from the kit.
  ldd "$out/libloom.so" | grep -E 'hwloc|fmt|pugixml'
  if ldd "$out/libloom.so" "$out/tools/perf/loom-perf" | grep -q 'not found'; then
    echo "gpu-kit --check: a library the binaries need is neither in the kit nor on the system" >&2
    return 1
  fi
  "$out/tests/unit/device/test_device_rules" --gtest_brief=1
  "$out/tests/gpu/gpu_host_only" --gtest_brief=1
  "$out/tools/perf/loom-perf" --help >/dev/null
  # The Python package against the kit's prebuilt library, as scripts/gpu-run.sh's torch step makes it
  # there (scripts/package-prebuilt.sh), in a build folder of its own.
  if ! python3 -c 'import torch' 2>/dev/null; then
    echo "gpu-kit --check: no torch here (scripts/install-python.sh installs it): the extension is not checked" >&2
    return 1
  fi
  local ext site
  ext="$(mktemp -d)"
  site="$(bash scripts/package-prebuilt.sh "$out" "$ext/build" 2>"$kit/torch-build.log" | tail -n 1)" ||
    { tail -30 "$kit/torch-build.log"; rm -rf "$ext"; return 1; }
  ldd "$site"/loom/_C*.so | grep -E 'libloom|hwloc'
  (cd / && PYTHONPATH="$site" python3 -c 'import torch, loom._C, loom.torch, loom.capi
assert loom.capi.lib._name.startswith("'"$site"'"), loom.capi.lib._name
print("gpu-kit --check: the torch extension loads, with the prebuilt libloom beside it")') ||
    { rm -rf "$ext"; return 1; }
  rm -rf "$ext" "$out"  # what travels is the packed copy
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
    unshare --mount --propagation private bash "$0" --build-inside 0
    kit_size_ok
    ;;
  --check)
    gather
    unshare --mount --propagation private bash "$0" --build-inside 1
    kit_size_ok
    echo "gpu-kit --check: Loom built from the kit alone, its host-visible tests ran, the torch extension built"
    ;;
  --build-inside) build_inside "$2" ;;
  *) echo "usage: scripts/gpu-kit.sh [--check]" >&2; exit 2 ;;
esac
