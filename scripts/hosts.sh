#!/usr/bin/env bash
# A test bed of simulated hosts on this machine, for the multi-host tests and benchmarks (root only).
# Each host is a network namespace with its own interface eth0 (a veth pair to a bridge that lives in
# a namespace of its own), and every command run on it also gets its own UTS namespace (the host's
# name) and mount namespace (the host's own /dev/shm, and a /sys that shows its interfaces), so that
# nothing tells the hosts apart from real ones but speed. Addresses exist only inside the bed.
#
#   hosts.sh check                      exit 0 when namespaces can be made here; else print why, exit 2
#   hosts.sh up N [--bed B] [--netem "ARGS"]   make hosts B-h1..B-hN (B: loombed), 192.168.77.I/24
#   hosts.sh down [--bed B]             kill what runs on them and remove everything
#   hosts.sh exec HOST CMD...           run CMD on HOST (B-hI), as that host
#   hosts.sh ssh [-x] HOST CMD...       the same, shaped like ssh (Hydra's -launcher-exec)
#   hosts.sh netem HOST ARGS|none       tc netem on HOST's link ("delay 1ms loss 0.1%")
#   hosts.sh link HOST up|down          take HOST's link down or up
#   hosts.sh addr HOST                  HOST's address
#   hosts.sh gc                         remove beds whose owner process (--owner PID at up) is gone
# `up` cleans up after itself when it fails; tests call `down` when they end, and `gc` at start for
# beds left by a test that was killed.
set -euo pipefail

shm_root=/dev/shm/loom-beds
subnet=192.168.77

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
  ip netns del "$probe"
  if ! err="$(unshare --uts --mount --propagation private true 2>&1)"; then
    echo "cannot make UTS and mount namespaces: $err"; exit 2
  fi
  if ! err="$(ip link add loomprobe0 type veth peer name loomprobe1 2>&1)"; then echo "cannot make veth pairs: $err"; exit 2; fi
  ip link del loomprobe0
}

down() {
  local bed=$1 ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${bed}-(h[0-9]+|sw)$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "${shm_root:?}/$bed"
}

up() {
  local n=$1 bed=$2 netem=$3 owner=$4 i
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "host count must be 1..200"
  [[ "$bed" =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "bed name must be 1-10 lowercase letters and digits"
  down "$bed"
  trap 'down "$bed"' ERR
  mkdir -p "$shm_root/$bed"
  echo "$owner" > "$shm_root/$bed/owner"
  ip netns add "$bed-sw"
  ip -n "$bed-sw" link add br0 type bridge
  ip -n "$bed-sw" link set br0 up
  for ((i = 1; i <= n; i++)); do
    local host="$bed-h$i"
    ip netns add "$host"
    ip link add eth0 netns "$host" type veth peer name "h$i" netns "$bed-sw"
    ip -n "$bed-sw" link set "h$i" master br0 up
    ip -n "$host" addr add "$subnet.$i/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
    [ -z "$netem" ] || tc -n "$host" qdisc replace dev eth0 root netem $netem
    mkdir -p "$shm_root/$bed/h$i"
    chmod 1777 "$shm_root/$bed/h$i"
  done
  trap - ERR
}

run_on() {  # run_on HOST CMD...: enters the host's network namespace, then new UTS and mount namespaces
  local host=$1; shift
  local i bed
  i="$(host_index "$host")"
  bed="$(host_bed "$host")"
  [ -e "/run/netns/$host" ] || die "no host $host (is the bed up?)"
  exec nsenter --net="/run/netns/$host" -- unshare --uts --mount --propagation private -- \
    sh -c 'hostname "$1" && mount --bind "$2" /dev/shm && mount -t sysfs sysfs /sys && shift 2 && exec "$@"' \
    hosts.sh "$host" "$shm_root/$bed/h$i" "$@"
}

gc() {
  local dir bed owner
  for dir in "$shm_root"/*/; do
    [ -d "$dir" ] || continue
    bed="$(basename "$dir")"
    owner="$(cat "$dir/owner" 2>/dev/null || echo 0)"
    if [ "$owner" -gt 0 ] 2>/dev/null && ! kill -0 "$owner" 2>/dev/null; then down "$bed"; fi
  done
}

cmd=${1:-}
[ -n "$cmd" ] || die "usage: hosts.sh check|up|down|exec|ssh|netem|link|addr|gc ..."
shift
case "$cmd" in
  check) check ;;
  up)
    n=${1:-}; shift || true
    bed=loombed netem="" owner=$PPID
    while [ $# -gt 0 ]; do
      case "$1" in
        --bed) bed=$2; shift 2 ;;
        --netem) netem=$2; shift 2 ;;
        --owner) owner=$2; shift 2 ;;
        *) die "unknown argument $1" ;;
      esac
    done
    up "$n" "$bed" "$netem" "$owner" ;;
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
  *) die "unknown command $cmd" ;;
esac
