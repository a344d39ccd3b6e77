#!/usr/bin/env bash
# Installs the Python package `loom` the way a user does (pip install --no-build-isolation ., README:
# Python), first installing what that and the Python tests need where it is missing: the build's system
# packages (scripts/install-deps.sh), pip and Python's headers, meson-python, torch from PyPI, numpy,
# pytest, expecttest (torch's own distributed test suite), tqdm and matplotlib (the training example).
# The build folder is kept (build-python/), so a reinstall recompiles only what changed. Arguments go to
# meson setup (scripts/test.sh passes -Dcuda=disabled where no GPU would run the package's CUDA part).
# With --deps-only it installs what the package and the tests need and stops there: before build/ is
# configured, so that its configuration finds torch's NCCL wheel (the compat tests against NVIDIA's
# 2.30 header are defined only where it is).
#
#   LOOM_PYTHON           interpreter to install for (default: python3)
#   LOOM_TORCH_VERSION    torch to install when none is present (default: 2.15.0)
#   LOOM_TORCH_INDEX_URL  another index for torch, e.g. one serving PyTorch's CPU-only wheels (~200 MB
#                         instead of the default CUDA wheel and its ~2.3 GB of nvidia-* wheels)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py="${LOOM_PYTHON:-python3}"
deps_only=0
if [ "${1:-}" = --deps-only ]; then deps_only=1; shift; fi
torch_version="${LOOM_TORCH_VERSION:-2.15.0}"

bash scripts/install-deps.sh
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
apt_install() {
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$@"
}

# pip and Python headers (Debian's python3 ships neither by default).
if ! "$py" -m pip --version >/dev/null 2>&1; then apt_install python3-pip; fi
if [ ! -f "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
  apt_install python3-dev
fi

pip_args=(--disable-pip-version-check)
[ "$(id -u)" -eq 0 ] && pip_args+=(--root-user-action=ignore)
# Debian marks its python3 as externally managed (PEP 668); this machine-wide install is deliberate.
if "$py" -c 'import sys, sysconfig, os; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")) else 1)'; then
  pip_args+=(--break-system-packages)
fi

has() { "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"; }
if ! has torch; then
  echo "installing torch==$torch_version"
  index=()
  [ -n "${LOOM_TORCH_INDEX_URL:-}" ] && index=(--index-url "$LOOM_TORCH_INDEX_URL")
  "$py" -m pip install "${pip_args[@]}" "${index[@]}" "torch==$torch_version"
fi
missing=()
for m in numpy pytest tqdm matplotlib expecttest; do has "$m" || missing+=("$m"); done
if ((${#missing[@]})); then "$py" -m pip install "${pip_args[@]}" "${missing[@]}"; fi
# meson-python drives the build with the meson and ninja install-deps.sh installed (its own
# dependencies on meson's and ninja's PyPI packages are left out for that reason).
if ! has mesonpy; then "$py" -m pip install "${pip_args[@]}" --no-deps "meson-python>=0.15" "pyproject-metadata>=0.8"; fi
has packaging || "$py" -m pip install "${pip_args[@]}" packaging
[ "$deps_only" = 1 ] && exit 0

# A checkout installed before the package existed put itself on the path with a .pth file.
rm -f "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/loom-collectives.pth"

setup_args=()
for arg in "$@"; do setup_args+=("-Csetup-args=$arg"); done
"$py" -m pip install "${pip_args[@]}" --no-build-isolation --no-deps -Cbuild-dir="$root/build-python" "${setup_args[@]}" "$root"
(cd / && "$py" -c 'import loom.torch, loom.capi; print("loom.torch ready:", loom.torch.__file__)')
