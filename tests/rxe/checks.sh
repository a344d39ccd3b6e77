#!/bin/sh
# The checks inside the Soft-RoCE VM (scripts/rxe-vm.sh boots it; README.md here says what they prove).
# Each prints "PASS name" or "FAIL name: why" (with the tail of its log); the last line is
# "N passed, M failed". RXE_CHECKS=verbs runs only the verbs checks, for work on the VM itself;
# RXE_VERBOSE=1 prints every check's logs before that line.

# The ib provider's cases on the real libibverbs (LOOM_TEST_REAL_VERBS=1 adds them) in
# tests/net/provider_test.cc's network conformance suite and fifo_proxy_test.cc, but for the idle
# proxy's CPU bound: under TCG two idle proxies took 0.13 s of CPU in 0.5 s (the bound is 0.125),
# five times what they take outside the VM over FakeVerbs or sockets (0.015-0.027 s), so there it
# measures the emulator; it runs on every CI run outside the VM.
IB_TEST_FILTER='*/ib_verbs:-*.AnIdleProxySleeps/*'
# Collectives across ranks with a host id each: rank counts and loom-perf collectives.
RANK_COUNTS='2 3'
COLLECTIVES='all_reduce all_gather sendrecv'
PERF_SIZES='-b 8 -e 2M -f 16'

NETDEV="${RXE_NETDEV:-eth0}"
RXE_CHECKS="${RXE_CHECKS:-all}"
LOOM_BIN=/opt/loom/bin
export LD_LIBRARY_PATH=/opt/loom/lib
unset LOOM_IBVERBS_LIB  # the real libibverbs, never a stand-in
logs=/tmp/rxe-logs
mkdir -p "$logs"
passed=0
failed=0

pass() { echo "PASS $1${2:+ ($2)}"; passed=$((passed + 1)); }
fail() {  # fail NAME WHY [LOG...]
  local name=$1 why=$2 log
  shift 2
  echo "FAIL $name: $why"
  for log in "$@"; do
    [ -s "$log" ] || continue
    echo "  --- last lines of $(basename "$log")"
    tail -n 25 "$log" | sed 's/^/  | /'
  done
  failed=$((failed + 1))
}

wait_listening() {  # wait_listening PORT: up to 10 s for a TCP listener (the tools' out-of-band exchange)
  local i=0
  while [ $i -lt 50 ]; do
    netstat -ltn 2>/dev/null | grep -q ":$1 " && return 0
    sleep 0.2
    i=$((i + 1))
  done
  return 1
}

# --- (a) the rxe device: ACTIVE, Ethernet link layer, a RoCE v2 GID for the NIC's IPv4 address.
DEV=rxe0
GID=""
check_device() {
  local log=$logs/device.log i=0
  if ! rdma link add $DEV type rxe netdev "$NETDEV" > "$log" 2>&1; then
    fail rxe_device "rdma link add $DEV type rxe netdev $NETDEV failed" "$log"
    return
  fi
  while [ $i -lt 50 ] && ! rdma link show $DEV/1 2>/dev/null | grep -q 'state ACTIVE'; do
    sleep 0.2
    i=$((i + 1))
  done
  { rdma link show; ibv_devinfo -d $DEV; } >> "$log" 2>&1
  if ! rdma link show $DEV/1 | grep -q 'state ACTIVE'; then
    fail rxe_device "$DEV/1 did not become ACTIVE" "$log"
  elif ! grep -q 'state:[[:space:]]*PORT_ACTIVE' "$log" || ! grep -q 'link_layer:[[:space:]]*Ethernet' "$log"; then
    fail rxe_device "ibv_devinfo does not show an ACTIVE Ethernet port" "$log"
  else
    pass rxe_device "$(rdma link show $DEV/1 | sed 's/^link //')"
  fi
}

check_gid() {
  local port=/sys/class/infiniband/$DEV/ports/1 i=0 f n
  if [ ! -d "$port" ]; then
    fail roce_v2_gid "no $port"
    return
  fi
  while [ $i -lt 50 ] && [ -z "$GID" ]; do
    for f in "$port"/gid_attrs/types/*; do
      n=$(basename "$f")
      if [ "$(cat "$f" 2>/dev/null)" = "RoCE v2" ] && grep -q '^0000:0000:0000:0000:0000:ffff:' "$port/gids/$n"; then
        GID=$n
        break
      fi
    done
    [ -n "$GID" ] || { sleep 0.2; i=$((i + 1)); }
  done
  if [ -n "$GID" ]; then
    pass roce_v2_gid "index $GID = $(cat "$port/gids/$GID")"
  else
    for f in "$port"/gids/*; do echo "$(basename "$f") $(cat "$f") $(cat "$port/gid_attrs/types/$(basename "$f")" 2>/dev/null)"; done > "$logs/gids.log"
    fail roce_v2_gid "no RoCE v2 GID with an IPv4-mapped address on $DEV" "$logs/gids.log"
  fi
}

# --- (b) the verbs tools over loopback queue pairs on the one device.
# run_pair NAME PORT CHECK_REGEX CMD...: server CMD, then client CMD 127.0.0.1; both must succeed and
# the client's output must match CHECK_REGEX.
run_pair() {
  local name=$1 port=$2 regex=$3 server_status client_status
  shift 3
  timeout 60 "$@" > "$logs/$name.server.log" 2>&1 &
  local server=$!
  if ! wait_listening "$port"; then
    kill $server 2>/dev/null
    wait $server
    fail "$name" "the server did not listen on port $port" "$logs/$name.server.log"
    return
  fi
  timeout 60 "$@" 127.0.0.1 > "$logs/$name.client.log" 2>&1
  client_status=$?
  wait $server
  server_status=$?
  if [ $client_status -ne 0 ] || [ $server_status -ne 0 ]; then
    fail "$name" "client exit $client_status, server exit $server_status (124: timed out)" \
      "$logs/$name.server.log" "$logs/$name.client.log"
  elif ! grep -Eq "$regex" "$logs/$name.client.log"; then
    fail "$name" "the client did not report a result" "$logs/$name.client.log"
  else
    pass "$name" "$(grep -E "$regex" "$logs/$name.client.log" | tail -n 1 | tr -s ' \t' ' ' | sed 's/^ //')"
  fi
}

# --- (c) Loom's ib provider against the real libibverbs: the network conformance suite's ib cases.
check_conformance() {
  local name=net_providers_ib log=$logs/net_providers_ib.log status ran
  if [ ! -x $LOOM_BIN/test_net_providers ]; then
    fail $name "test_net_providers is not in the VM: the Loom build has no tests/net/test_net_providers"
    return
  fi
  LOOM_TEST_REAL_VERBS=1 timeout 150 $LOOM_BIN/test_net_providers --gtest_filter="$IB_TEST_FILTER" > "$log" 2>&1
  status=$?
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$log" | tail -n 1)
  if [ "${ran:-0}" -eq 0 ] && [ $status -eq 0 ]; then
    fail $name "no test matches '$IB_TEST_FILTER': this build of Loom has no ib provider cases" "$log"
  elif [ $status -ne 0 ]; then
    fail $name "exit $status (124: timed out); $(grep -c '^\[  FAILED  \] .*\.' "$log") failed" "$log"
  else
    pass $name "$ran tests"
  fi
}

# --- (d) collectives across ranks that each claim a host of their own (LOOM_HOSTID), so that every
# peer is reached through the network layer, which must be the ib provider.
check_collective() {  # check_collective NRANKS COLLECTIVE
  local n=$1 coll=$2 name="ib_${2}_${1}ranks" r status bad="" why=""
  local id=/tmp/$name.id
  if [ ! -x $LOOM_BIN/loom-perf ]; then
    fail "$name" "loom-perf is not in the VM: the Loom build has no tools/perf/loom-perf"
    return
  fi
  rm -f "$id"
  r=0
  while [ $r -lt "$n" ]; do
    (PMI_RANK=$r PMI_SIZE=$n LOOM_PERF_ID_FILE=$id LOOM_HOSTID=rxe-host$r LOOM_NET=ib LOOM_DEBUG=INFO \
       timeout 75 $LOOM_BIN/loom-perf "$coll" $PERF_SIZES -n 2 -w 1 -c 1 -T 60 > "$logs/$name.rank$r.log" 2>&1
     echo $? > "$logs/$name.rank$r.status") &
    r=$((r + 1))
  done
  wait
  r=0
  while [ $r -lt "$n" ]; do
    status=$(cat "$logs/$name.rank$r.status" 2>/dev/null || echo "unknown")
    local log=$logs/$name.rank$r.log
    if [ "$status" != 0 ]; then
      why="rank $r exit $status (1 wrong results, 2 a Loom call failed, 3 or 124 timed out)"
    elif ! grep -q "network provider ib on device " "$log"; then
      why="rank $r: LOOM_DEBUG=INFO does not show the ib provider in use"
    elif [ $r -eq 0 ] && ! grep -q "$n host(s)" "$log"; then
      why="rank 0 does not see $n hosts"
    elif [ $r -eq 0 ] && ! grep -q "Out of bounds values : 0 OK" "$log"; then
      why="rank 0 does not report every result correct"
    elif grep -o 'transports .*' "$log" | tr ' ' '\n' | grep ':' | grep -Ev ':(self|net)$' | grep -q .; then
      why="rank $r reaches a peer without the network: $(grep -o 'transports .*' "$log")"
    fi
    if [ -n "$why" ]; then
      bad="$log"
      break
    fi
    r=$((r + 1))
  done
  if [ -n "$why" ]; then
    fail "$name" "$why" $bad
  else
    pass "$name" "$(grep -m 1 'network provider ib on device ' "$logs/$name.rank0.log" | sed 's/.*INFO //')"
  fi
}

echo "rxe: checks ($RXE_CHECKS) on $NETDEV"
check_device
check_gid
if [ -n "$GID" ]; then
  run_pair ibv_rc_pingpong 18515 'iters in' ibv_rc_pingpong -d $DEV -g "$GID" -n 200 -s 4096
  run_pair ib_write_bw 18515 '^ *65536 +200 ' ib_write_bw -d $DEV -x "$GID" -s 65536 -n 200 -F
else
  fail ibv_rc_pingpong "no RoCE v2 GID to use"
  fail ib_write_bw "no RoCE v2 GID to use"
fi
if [ "$RXE_CHECKS" = all ]; then
  check_conformance
  for n in $RANK_COUNTS; do
    for coll in $COLLECTIVES; do check_collective "$n" "$coll"; done
  done
fi
if [ "${RXE_VERBOSE:-0}" = 1 ]; then
  for f in "$logs"/*.log; do echo "=== $f"; cat "$f"; done
fi
echo "rxe: checks done after $(cut -d' ' -f1 /proc/uptime) s of uptime"
echo "$passed passed, $failed failed"
