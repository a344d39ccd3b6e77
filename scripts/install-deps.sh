#!/usr/bin/env bash
# Installs what building and testing Loom needs, skipping what is already there (Debian/Ubuntu).
set -euo pipefail

packages=(g++ meson ninja-build ccache pkg-config libhwloc-dev hwloc libfmt-dev nlohmann-json3-dev libcli11-dev
          libgtest-dev libgmock-dev libpugixml-dev python3 python3-pip
          universal-ctags  # scripts/unity_check.py reads the unity batches
          libucx-dev mpich libmpich-dev iproute2 util-linux  # ucx provider, MPI example, multi-host test bed
          libibverbs-dev)  # ib provider's header (libibverbs itself is loaded at run time)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The SASS check (tests/gpu/check_sass.py) disassembles the CUDA kernels: NVIDIA's cuobjdump and
# nvdisasm, from their wheels, when the CUDA toolkit here has nvcc but not them.
if command -v nvcc >/dev/null && ! command -v cuobjdump >/dev/null && [ ! -x "$(dirname "$(command -v nvcc)")/cuobjdump" ]; then
  if ! python3 -c 'import sysconfig, os, sys; d = os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "cu13", "bin");
sys.exit(0 if os.path.exists(os.path.join(d, "cuobjdump")) and os.path.exists(os.path.join(d, "nvdisasm")) else 1)'; then
    pip_args=(--disable-pip-version-check -q)
    [ "$(id -u)" -eq 0 ] && pip_args+=(--root-user-action=ignore)
    python3 -m pip install --help 2>/dev/null | grep break-system-packages >/dev/null && pip_args+=(--break-system-packages)
    python3 -m pip install "${pip_args[@]}" nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37 ||
      echo "install-deps: cuobjdump/nvdisasm not installed: the SASS check will skip" >&2
  fi
fi
