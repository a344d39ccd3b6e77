#!/usr/bin/env bash
# Installs what the Python package and its tests need (torch from PyPI, numpy, pytest, expecttest for
# torch's own distributed test suite; tqdm and matplotlib for the training example), builds libloom if
# missing, then builds loom._C in place and makes `import loom` work for python3
# (a .pth file pointing at bindings/python). Skips whatever is already there.
#
#   LOOM_PYTHON           interpreter to install for (default: python3)
#   LOOM_TORCH_VERSION    torch to install when none is present (default: 2.15.0)
#   LOOM_TORCH_INDEX_URL  another index for torch, e.g. one serving PyTorch's CPU-only wheels (~200 MB
#                         instead of the default CUDA wheel and its ~2.3 GB of nvidia-* wheels)
#   LOOM_BUILD_DIR        libloom build directory (default: ./build, made by scripts/build.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py="${LOOM_PYTHON:-python3}"
torch_version="${LOOM_TORCH_VERSION:-2.15.0}"
export LOOM_BUILD_DIR="${LOOM_BUILD_DIR:-$root/build}"

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
for m in numpy pytest setuptools tqdm matplotlib expecttest; do has "$m" || missing+=("$m"); done
if ((${#missing[@]})); then "$py" -m pip install "${pip_args[@]}" "${missing[@]}"; fi

[ -f "$LOOM_BUILD_DIR/libloom.so" ] || bash scripts/build.sh

# loom._C, in place; ninja recompiles only what changed. Skipped when nothing it depends on is
# newer than it and it links the same build directory. The planner's cost model is linked from the
# library's static archive, so a rebuilt library relinks the extension (its sources are not recompiled).
pkg=bindings/python
so="$(ls "$pkg"/loom/_C*.so 2>/dev/null | head -n1 || true)"
if [ -z "$so" ] || ! grep -qF "'$LOOM_BUILD_DIR/libloom.so'" "$pkg/loom/_build_info.py" 2>/dev/null ||
   [ -n "$(find "$pkg/csrc" "$pkg/setup.py" include/loom.h "$LOOM_BUILD_DIR/libloom_internal.a" -newer "$so" 2>/dev/null | head -n1)" ]; then
  (cd "$pkg" && MAX_JOBS="${MAX_JOBS:-$(nproc)}" "$py" setup.py -q build_ext --inplace)
fi

# `import loom` from this checkout: a .pth file in site-packages (or the user's, if not writable).
pth_dir="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
[ -w "$pth_dir" ] || pth_dir="$("$py" -c 'import site; print(site.getusersitepackages())')"
mkdir -p "$pth_dir"
echo "$root/bindings/python" >"$pth_dir/loom-collectives.pth"

(cd / && "$py" -c 'import loom.torch, loom.capi; print("loom.torch ready:", loom.torch.__file__)')
