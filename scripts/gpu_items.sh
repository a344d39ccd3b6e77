# Items of scripts/gpu-run.sh (sourced): one command, GoogleTest binary or benchmark at a time, each under
# its own time limit inside the command's shared budget, its output written into the results folder as
# it runs, its outcome one line of items.tsv: name, PASS/FAIL/TIMEOUT/SKIP, seconds, detail.
# The steps themselves are scripts/gpu_steps.sh; the summary is scripts/gpu_summary.py.

# items_init RESULTS DEADLINE: where results go, and when (in $SECONDS) the command's budget ends.
items_init() {
  results=$1
  items_deadline=$2
  items_log="$results/log.txt"
  items_tsv="$results/items.tsv"
  rows="$results/rows.jsonl"
  items_work="$(mktemp -d)"  # each item's own output, for parsing (not a result file: at most 8 come back)
  touch "$items_log" "$items_tsv" "$rows"
  trap 'rm -rf "$items_work"' EXIT
}

# Where an item's output is kept (names may hold '/': gtest's parameter suffixes).
item_out() { echo "$items_work/${1//\//_}.out"; }

note() { echo "$*" | tee -a "$items_log"; }
items_left() { echo $((items_deadline - SECONDS)); }

# item_record NAME STATUS SECONDS DETAIL
item_record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$items_tsv"
  note "# $1: $2 (${3} s) $4"
}
item_skip() { item_record "$1" SKIP 0 "$2"; }
item_passed() { grep -q "^$1	PASS	" "$items_tsv"; }
item_status() { awk -F'\t' -v n="$1" '$1 == n { s = $2 } END { print s }' "$items_tsv"; }

# item_exec NAME NEED LIMIT CMD...: runs CMD under `timeout -k 5 LIMIT` (less when the budget has less
# left) when at least NEED seconds are left; its output goes to stdout, the log and $items_work/NAME.out.
# Sets item_rc (124: timed out; 3: not run) and item_secs; records nothing.
item_exec() {
  local name=$1 need=$2 limit=$3
  shift 3
  local left
  left=$(items_left)
  item_secs=0
  if ((left < need)); then
    item_rc=3
    item_why="the budget has ${left} s left, this needs ~${need} s"
    return 3
  fi
  ((limit > left - 3)) && limit=$((left - 3))
  note "\$ $*    [limit ${limit} s]"
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$items_log" >"$(item_out "$name")"
  item_rc=${PIPESTATUS[0]}
  [ "$item_rc" -eq 137 ] && item_rc=124
  item_secs=$((SECONDS - start))
  tail -n 15 "$(item_out "$name")"
  return "$item_rc"
}

# item_run NAME NEED LIMIT CMD...: a command whose exit status is its verdict.
item_run() {
  local name=$1
  item_exec "$@"
  case $item_rc in
    0) item_record "$name" PASS "$item_secs" "" ;;
    3) item_record "$name" SKIP 0 "$item_why" ;;
    124) item_record "$name" TIMEOUT "$item_secs" "killed after ${item_secs} s: $(tail -n 1 "$(item_out "$name")" | cut -c1-120)" ;;
    *) item_record "$name" FAIL "$item_secs" "exit $item_rc: $(grep -v '^\s*$' "$(item_out "$name")" | tail -n 1 | cut -c1-140)" ;;
  esac
  return "$item_rc"
}

# gtest_item NAME NEED LIMIT LANE_TIMEOUT_S BINARY FILTER [VAR=VALUE...]: one GoogleTest binary, run
# directly with a filter. Fails when the filter selects no test, when the binary skips for want of a GPU
# on a GPU run, or when any test fails; a timeout names the test that was running.
gtest_item() {
  local name=$1 need=$2 limit=$3 lane=$4 binary=$5 filter=$6
  shift 6
  if [ ! -x "$binary" ]; then item_record "$name" FAIL 0 "no binary $binary"; return 1; fi
  item_exec "$name" "$need" "$limit" env LOOM_TIMEOUT_MS=$((lane * 1000)) "$@" "$binary" \
    --gtest_filter="$filter" --gtest_color=no
  [ "$item_rc" -eq 3 ] && { item_skip "$name" "$item_why"; return 3; }
  out="$(item_out "$name")"
  local out="$(item_out "$name")" ran passed failed skipped running
  ran=$(sed -nE 's/^\[==========\] Running ([0-9]+) tests?.*/\1/p' "$out" | head -n 1)
  passed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?.*/\1/p' "$out" | head -n 1)
  skipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?.*/\1/p' "$out" | head -n 1)
  failed=$(grep -E '^\[  FAILED  \] [^ ]+\.[^ ]+' "$out" | sed -E 's/^\[  FAILED  \] ([^ ,]+).*/\1/' | sort -u | paste -sd' ')
  local counts="${ran:-0} selected, ${passed:-0} passed${skipped:+, $skipped skipped}"
  if [ "$item_rc" -eq 124 ]; then
    running=$(awk '/^\[ RUN      \]/ { t = $4 } /^\[       OK \]|^\[  FAILED  \]|^\[  SKIPPED \]/ { t = "" } END { print t }' "$out")
    item_record "$name" TIMEOUT "$item_secs" "killed after ${item_secs} s${running:+ in $running}; $counts"
  elif [ "${ran:-0}" -eq 0 ]; then
    item_record "$name" FAIL "$item_secs" "the filter '$filter' selected no test (exit $item_rc)"
  elif [ "$item_rc" -eq 77 ]; then
    item_record "$name" FAIL "$item_secs" "no GPU seen: $(grep -m1 '^SKIP' "$out")"
  elif [ "$item_rc" -ne 0 ] || [ -n "$failed" ]; then
    item_record "$name" FAIL "$item_secs" "$counts; failed: ${failed:-exit $item_rc}; first: $(grep -m1 -E 'Failure|error|Error' "$out" | cut -c1-160)"
  else
    item_record "$name" PASS "$item_secs" "$counts"
    return 0
  fi
  return 1
}

# gtest_suite NAME BINARY FIXTURE [VAR=VALUE...]: every test of FIXTURE one gtest_item at a time (all
# its parameters in one), so that a hang costs one item's limit and a lane timeout LOOM_TIMEOUT_MS of
# 10 s; three tests in a row that do not pass stop the suite (a systematic failure would go on).
gtest_suite() {
  local name=$1 binary=$2 fixture=$3
  shift 3
  if [ ! -x "$binary" ]; then item_record "$name" FAIL 0 "no binary $binary"; return 1; fi
  local tests
  tests=$("$binary" --gtest_list_tests 2>/dev/null | awk -v f="$fixture" '
    /^[^ ]/ { s = $1; sub(/\.$/, "", s); keep = (s == f || s ~ ("/" f "$")); prefix = s; next }
    keep && /^  / { t = $1; if (prefix ~ /\//) sub(/\/[^\/]*$/, "", t); if (!(t in seen)) { seen[t] = 1; print prefix "." t } }')
  if [ -z "$tests" ]; then item_record "$name" FAIL 0 "no test of $fixture in $binary"; return 1; fi
  local test bad=0
  for test in $tests; do
    if ((bad >= 3)); then
      item_skip "$name.${test##*.}" "three tests of $name in a row did not pass: not run"
      continue
    fi
    gtest_item "$name.${test##*.}" 10 120 10 "$binary" "$test/*:$test" "$@"
    case "$(item_status "$name.${test##*.}")" in
      PASS) bad=0 ;;
      SKIP) ;;
      *) bad=$((bad + 1)) ;;
    esac
  done
}

items_summary() {
  python3 "$root/scripts/gpu_summary.py" "$results" | tee "$results/summary.txt"
  ! grep -qE '	(FAIL|TIMEOUT)	' "$items_tsv"
}
