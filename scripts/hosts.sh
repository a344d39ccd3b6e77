#!/usr/bin/env bash
# A test bed of simulated hosts on this machine, for the multi-host tests and benchmarks (root only).
# Each host is a network namespace with its own interface eth0 (a veth pair to a bridge that lives in
# a namespace of its own), and every command run on it also gets its own UTS namespace (the host's
# name), IPC namespace and mount namespace (the host's own /dev/shm, a /sys that shows its interfaces, and an
# /etc/hosts that names every host of the bed), so that nothing tells the hosts apart from real ones
# but speed. Addresses exist only inside the bed; /tmp stays shared (a shared file system).
#
#   hosts.sh check                      exit 0 when namespaces can be made here; else print why, exit 2
#   hosts.sh up N [--bed B] [--impair "delay 1ms loss 0.1%"]
#                                       make hosts B-h1..B-hN (B: loombed), 192.168.77.I/24; with
#                                       --impair every link delays and drops frames: tc netem where the
#                                       kernel has it, else Loom's user-space switch (tests/hosts/
#                                       link_emulator.cc; LOOM_LINK_EMULATOR, default build/tests/hosts/)
#   hosts.sh down [--bed B]             kill what runs on them and remove everything
#   hosts.sh exec HOST CMD...           run CMD on HOST (B-hI), as that host
#   hosts.sh ssh [-x] HOST CMD...       the same, shaped like ssh (Hydra's -launcher-exec)
#   hosts.sh netem HOST ARGS|none       tc netem on HOST's link ("delay 1ms loss 0.1%"; needs netem)
#   hosts.sh link HOST up|down          take HOST's link down or up
#   hosts.sh addr HOST                  HOST's address
#   hosts.sh gc                         remove beds whose owner process (--owner PID at up) is gone
#   hosts.sh down-owner PID             remove every bed of owner PID
# `up` cleans up after itself when it fails; tests call `down` when they end, and `gc` at start for
# beds left by a test that was killed.
set -euo pipefail

# The beds' files (each host's /dev/shm, the hosts file) live on a tmpfs of their own, outside
# /dev/shm, so that a command on one host can still reach another host's (mpiexec launching ranks).
shm_root=/run/loom-beds
subnet=192.168.77
root="$(cd "$(dirname "$0")/.." && pwd)"

die() { echo "hosts.sh: $*" >&2; exit 1; }

host_index() {  # host_index HOST -> I
  [[ "$1" =~ -h([0-9]+)$ ]] || die "not a host name: $1 (expected BED-hN)"
  echo "${BASH_REMATCH[1]}"
}
host_bed() { echo "${1%-h*}"; }

check() {
  [ "$(id -u)" -eq 0 ] || { echo "not root: network namespaces need CAP_SYS_ADMIN"; exit 2; }
  command -v ip >/dev/null || { echo "iproute2 (ip) is missing"; exit 2; }
  local probe="loomprobe$$"
  if ! err="$(ip netns add "$probe" 2>&1)"; then echo "cannot make a network namespace: $err"; exit 2; fi
  # The veth pair inside the probe's own namespace: fixed names there cannot collide with another
  # check running at the same time (two test suites starting together), which would read as "no
  # namespaces here" and skip a whole suite.
  local veth=0
  err="$(ip -n "$probe" link add name probe0 type veth peer name probe1 2>&1)" || veth=1
  ip netns del "$probe"
  [ $veth -eq 0 ] || { echo "cannot make veth pairs: $err"; exit 2; }
  if ! err="$(unshare --uts --mount --propagation private true 2>&1)"; then
    echo "cannot make UTS and mount namespaces: $err"; exit 2
  fi
}

down() {
  local bed=$1 ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${bed}-(h[0-9]+|sw)$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "${shm_root:?}/$bed"
}

netem_available() {
  local probe="loomnetem$$" ok=1
  ip netns add "$probe" 2>/dev/null || return 1
  # "name" spelled out: a bare "a" would be read as ip's "address".
  ip -n "$probe" link add name probe0 type veth peer name probe1 2>/dev/null &&
    tc -n "$probe" qdisc add dev probe0 root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$probe"
  return $ok
}

add_host() {  # add_host BED I: the host's namespace, its loopback and its /dev/shm
  ip netns add "$1-h$2"
  ip -n "$1-h$2" link set lo up
  mkdir -p "$shm_root/$1/h$2"
  chmod 1777 "$shm_root/$1/h$2"
}

configure_eth0() {  # configure_eth0 BED I
  ip -n "$1-h$2" addr add "$subnet.$2/24" dev eth0
  ip -n "$1-h$2" link set eth0 up
}

up_bridged() {  # up_bridged N BED NETEM
  local n=$1 bed=$2 netem=$3 i
  ip -n "$bed-sw" link add br0 type bridge
  ip -n "$bed-sw" link set br0 up
  for ((i = 1; i <= n; i++)); do
    add_host "$bed" "$i"
    ip link add eth0 netns "$bed-h$i" type veth peer name "h$i" netns "$bed-sw"
    ip -n "$bed-sw" link set "h$i" master br0 up
    configure_eth0 "$bed" "$i"
    [ -z "$netem" ] || tc -n "$bed-h$i" qdisc replace dev eth0 root netem $netem
  done
}

up_emulated() {  # up_emulated N BED IMPAIR: the hosts' eth0 are TAP ports of the user-space switch
  local n=$1 bed=$2 impair=$3 i delay_us=0 loss_ppm=0
  local emulator="${LOOM_LINK_EMULATOR:-$root/build/tests/hosts/loom-link-emulator}"
  [ -x "$emulator" ] || die "no sch_netem in this kernel and no $emulator (ninja -C build tests/hosts/loom-link-emulator)"
  if [[ "$impair" =~ delay\ ([0-9.]+)ms ]]; then delay_us=$(awk "BEGIN{print int(${BASH_REMATCH[1]} * 1000)}"); fi
  if [[ "$impair" =~ loss\ ([0-9.]+)% ]]; then loss_ppm=$(awk "BEGIN{print int(${BASH_REMATCH[1]} * 10000)}"); fi
  ip netns exec "$bed-sw" "$emulator" --ports "$n" --delay-us "$delay_us" --loss-ppm "$loss_ppm" \
    > "$shm_root/$bed/emulator.log" 2>&1 &
  for ((i = 0; i < 100; i++)); do
    grep -q ready "$shm_root/$bed/emulator.log" 2>/dev/null && break
    sleep 0.05
  done
  grep -q ready "$shm_root/$bed/emulator.log" || die "the link emulator did not start: $(cat "$shm_root/$bed/emulator.log")"
  echo "hosts.sh: no sch_netem in this kernel: links impaired by the user-space switch ($impair)" >&2
  for ((i = 1; i <= n; i++)); do
    add_host "$bed" "$i"
    ip -n "$bed-sw" link set "tap$i" netns "$bed-h$i"
    ip -n "$bed-h$i" link set "tap$i" name eth0
    configure_eth0 "$bed" "$i"
  done
}

up() {
  local n=$1 bed=$2 impair=$3 owner=$4 i
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "host count must be 1..200"
  [[ "$bed" =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "bed name must be 1-10 lowercase letters and digits"
  down "$bed"
  trap 'down "$bed"' EXIT  # whatever fails below (set -e, die) leaves nothing behind
  mkdir -p "$shm_root"
  mountpoint -q "$shm_root" || mount -t tmpfs -o mode=0755 loom-beds "$shm_root"
  mkdir -p "$shm_root/$bed"
  echo "$owner" > "$shm_root/$bed/owner"
  ip netns add "$bed-sw"
  {
    echo "127.0.0.1 localhost"
    for ((i = 1; i <= n; i++)); do echo "$subnet.$i $bed-h$i"; done
  } > "$shm_root/$bed/hosts"
  if [ -n "$impair" ] && ! netem_available; then
    up_emulated "$n" "$bed" "$impair"
  else
    up_bridged "$n" "$bed" "$impair"
  fi
  trap - EXIT
}

# run_on HOST CMD...: enters the host's network namespace, then new UTS, IPC and mount namespaces. The IPC
# namespace of its own is what tells UCX that processes on two hosts share no System V memory (it
# would reach them through shared memory otherwise); the processes one command starts share it.
run_on() {
  local host=$1; shift
  local i bed
  i="$(host_index "$host")"
  bed="$(host_bed "$host")"
  [ -e "/run/netns/$host" ] || die "no host $host (is the bed up?)"
  exec nsenter --net="/run/netns/$host" -- unshare --uts --ipc --mount --propagation private -- \
    sh -c 'hostname "$1" && mount --bind "$3" /etc/hosts && mount --bind "$2" /dev/shm && mount -t sysfs sysfs /sys &&
           shift 3 && exec "$@"' \
    hosts.sh "$host" "$shm_root/$bed/h$i" "$shm_root/$bed/hosts" "$@"
}

gc() {  # gc [PID]: beds of a dead owner, or of PID
  local dir bed owner
  for dir in "$shm_root"/*/; do
    [ -d "$dir" ] || continue
    bed="$(basename "$dir")"
    owner="$(cat "$dir/owner" 2>/dev/null || echo 0)"
    [ "$owner" -gt 0 ] 2>/dev/null || continue
    if [ "$owner" = "${1:-}" ] || ! kill -0 "$owner" 2>/dev/null; then down "$bed"; fi
  done
}

cmd=${1:-}
[ -n "$cmd" ] || die "usage: hosts.sh check|up|down|exec|ssh|netem|link|addr|gc ..."
shift
case "$cmd" in
  check) check ;;
  up)
    n=${1:-}; shift || true
    bed=loombed impair="" owner=$PPID
    while [ $# -gt 0 ]; do
      case "$1" in
        --bed) bed=$2; shift 2 ;;
        --impair) impair=$2; shift 2 ;;
        --owner) owner=$2; shift 2 ;;
        *) die "unknown argument $1" ;;
      esac
    done
    up "$n" "$bed" "$impair" "$owner" ;;
  down)
    bed=loombed
    [ "${1:-}" = --bed ] && bed=$2
    down "$bed" ;;
  exec) run_on "$@" ;;
  ssh)
    # Hydra calls LAUNCHER [-x] HOST COMMAND-STRING; options before the host are ignored.
    while [[ "${1:-}" == -* ]]; do shift; done
    host=$1; shift
    run_on "$host" sh -c "$*" ;;
  netem)
    host=$1; shift
    if [ "${1:-}" = none ]; then tc -n "$host" qdisc del dev eth0 root 2>/dev/null || true
    else tc -n "$host" qdisc replace dev eth0 root netem "$@"; fi ;;
  link) ip -n "$1" link set eth0 "$2" ;;
  addr) echo "$subnet.$(host_index "$1")" ;;
  gc) gc ;;
  down-owner) gc "${1:?down-owner needs a pid}" ;;
  *) die "unknown command $cmd" ;;
esac
