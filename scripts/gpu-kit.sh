#!/usr/bin/env bash
# Gathers, on a Debian machine that reaches Debian's package registry, everything a Loom build needs
# that the GPU machine lacks (it has the CUDA toolkit, g++, python3 with torch, and meson, ninja and
# cmake from pip, but reaches no registry): the dev packages, extracted into .gpu-kit/root (ignored by
# git, a few MiB), with pkg-config files made relocatable, and .gpu-kit/env.sh, which points a build
# at them. scripts/gpu-run.sh uses it there; src/device/README.md says how to carry it.
#
#   bash scripts/gpu-kit.sh            gather (again), into .gpu-kit
#   bash scripts/gpu-kit.sh --check    and prove it: configure and build Loom (libloom.so, loom-perf and
#                                      a GoogleTest suite, which it runs) in a mount namespace where the
#                                      system's copies of these packages are hidden, from the kit alone
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
if ! ldconfig -p 2>/dev/null | grep -q 'libudev\.so\.1 '; then LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$loom_kit/fallback"; fi
# CMake (meson's fallback finder) looks here too.
export CMAKE_PREFIX_PATH="$loom_kit/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
EOF
  printf '%s\n' "${packages[@]}" >"$kit/PACKAGES"
  echo "gpu-kit: $(du -sh "$kit" | cut -f1) in .gpu-kit ($(wc -l <"$kit/PACKAGES") packages)"
}

# The system's copies of the kit's packages (and every other pkg-config file) are hidden by mounting
# empty files and folders over them, in a private mount namespace, so the build can only use the kit.
check_inside() {
  local empty_dir empty_file path
  empty_dir="$(mktemp -d)"
  empty_file="$(mktemp)"
  local arch
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
  if pkg-config --exists hwloc 2>/dev/null || [ -s /usr/include/hwloc.h ]; then
    echo "gpu-kit --check: the system's hwloc is still visible" >&2
    return 1
  fi
  # shellcheck disable=SC1091
  source "$kit/env.sh"
  local build=build-kit-check
  rm -rf "$build"
  meson setup "$build" --buildtype=release -Dcuda=enabled >"$kit/check-setup.log" 2>&1 || { tail -30 "$kit/check-setup.log"; return 1; }
  grep -iE 'Run-time dependency (hwloc|fmt|nlohmann_json|pugixml|CLI11|gtest).*(YES|NO)' "$kit/check-setup.log"
  ninja -C "$build" libloom.so tools/perf/loom-perf tests/unit/device/test_device_rules tests/gpu/gpu_host_only \
    >"$kit/check-build.log" 2>&1 || { tail -30 "$kit/check-build.log"; return 1; }
  "$build/tests/unit/device/test_device_rules" --gtest_brief=1
  "$build/tests/gpu/gpu_host_only" --gtest_brief=1
  ldd "$build/libloom.so" | grep -E 'hwloc|fmt|pugixml'
  rm -rf "$build"
}

case "${1:-}" in
  "") gather ;;
  --check)
    gather
    unshare --mount --propagation private bash "$0" --check-inside
    echo "gpu-kit --check: Loom built and its tests ran from the kit alone"
    ;;
  --check-inside) check_inside ;;
  *) echo "usage: scripts/gpu-kit.sh [--check]" >&2; exit 2 ;;
esac
