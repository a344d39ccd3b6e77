#!/usr/bin/env bash
# Installs what building and testing Loom needs, skipping what is already there (Debian/Ubuntu).
set -euo pipefail

packages=(g++ meson ninja-build pkg-config libhwloc-dev hwloc libfmt-dev nlohmann-json3-dev libcli11-dev
          libgtest-dev libgmock-dev libpugixml-dev python3
          libucx-dev mpich libmpich-dev iproute2 util-linux  # ucx provider, MPI example, multi-host test bed
          libibverbs-dev)  # ib provider's header (libibverbs itself is loaded at run time)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
