#!/usr/bin/env bash
# Runs every test suite (installing and building what is missing): the GoogleTest suites through
# meson, then the Python/torch suite through pytest. Ends with one line "N passed, M failed, K skipped".
#   LOOM_SKIP_PYTHON=1   leave out the Python suite (it needs torch from PyPI, ~2.8 GB the first time)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# Python's packages first where the Python suite runs: build/'s configuration looks for torch's NCCL
# wheel (tests/compat), which a fresh machine gets with torch.
if [ "${LOOM_SKIP_PYTHON:-0}" != 1 ] && [ ! -f build/build.ninja ]; then
  bash scripts/install-python.sh --deps-only || { echo "0 passed, 1 failed"; exit 1; }
fi
bash scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }
meson test -C build --print-errorlogs --num-processes "${LOOM_TEST_JOBS:-2}" "$@"
status=$?
junit=""
if [ "${LOOM_SKIP_PYTHON:-0}" != 1 ]; then
  # Without a GPU the Python suite runs on host memory: the package is built without CUDA (minutes less;
  # its CUDA tests skip either way) and at -Og (393 CPU-s against 664 at -O3 on 2 cores: the suite's
  # time is torch's and its processes', not Loom's loops). On a GPU machine it is built as a user's pip
  # install builds it.
  python_setup=()
  nvidia-smi -L >/dev/null 2>&1 || python_setup=(-Dcuda=disabled -Doptimization=g)
  if bash scripts/install-python.sh "${python_setup[@]}"; then
    junit="build/pytest-junit.xml"
    python3 -m pytest -q tests/python --junitxml="$junit" || status=1
  else
    echo "install-python.sh failed"
    status=1
    junit="missing"
  fi
fi
python3 scripts/test_summary.py build/meson-logs/testlog.json ${junit:+"$junit"}
exit $status
