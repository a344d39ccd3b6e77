#!/usr/bin/env bash
# Runs every test suite (installing and building what is missing) and ends with "N passed, M failed".
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }
meson test -C build --print-errorlogs --num-processes "${LOOM_TEST_JOBS:-2}" "$@"
status=$?
python3 scripts/test_summary.py build/meson-logs/testlog.json
exit $status
