#!/usr/bin/env bash
# Real verbs in a VM: boots Debian's stock kernel under QEMU (TCG: software emulation, no KVM needed)
# from an initramfs made of Debian packages only, brings up Soft-RoCE (rdma_rxe) on the VM's virtual
# NIC and runs tests/rxe/checks.sh there: the rxe device and its RoCE v2 GID, ibv_rc_pingpong and
# ib_write_bw over loopback queue pairs, Loom's ib provider conformance tests on the real libibverbs,
# and 2- and 3-rank collectives over LOOM_NET=ib with a different host id per rank. What this proves
# and what it does not: tests/rxe/README.md. Ends with the VM's line "N passed, M failed"; exit 0 only
# when nothing failed. A VM that does not boot or does not finish in time is a failure, never a skip.
#
#   scripts/rxe-vm.sh [--verbs-only]
#   --verbs-only, LOOM_RXE_CHECKS=verbs   only the verbs checks (device, pingpong, write_bw), no Loom
#   LOOM_RXE_BUILD_DIR   the Loom build whose binaries run in the VM (default build-host)
#   LOOM_RXE_CACHE       downloaded packages, kernel, initramfs, console log (default build-rxe)
#   LOOM_RXE_TIMEOUT     seconds the VM may run before it counts as failed (default 300)
#   LOOM_RXE_SMP, LOOM_RXE_MEM   virtual CPUs (default 2) and memory in MiB (default 1536)
#   LOOM_RXE_VERBOSE=1   every check's logs go to the console log, not only a failed one's
# Installs qemu-system-x86 when missing (root or sudo). Packages are fetched with `apt-get download`
# into the cache once (remove its debs/ to fetch the release's newer ones); a later run rebuilds only
# the part with Loom's binaries (seconds).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

checks="${LOOM_RXE_CHECKS:-all}"
case "${1:-}" in
  --verbs-only) checks=verbs ;;
  "") ;;
  *) echo "usage: scripts/rxe-vm.sh [--verbs-only]"; exit 2 ;;
esac
case "$checks" in all | verbs) ;; *) echo "rxe-vm: LOOM_RXE_CHECKS must be all or verbs"; exit 2 ;; esac
build="${LOOM_RXE_BUILD_DIR:-build-host}"
cache="${LOOM_RXE_CACHE:-build-rxe}"
vm_timeout="${LOOM_RXE_TIMEOUT:-300}"
smp="${LOOM_RXE_SMP:-2}"
mem="${LOOM_RXE_MEM:-1536}"
multiarch=x86_64-linux-gnu

# The VM's contents. Library packages are listed so that the VM's tools do not depend on what the
# machine running this script happens to have installed.
tool_packages=(busybox-static libibverbs1 ibverbs-providers ibverbs-utils perftest iproute2)
library_packages=(libnl-3-200 libnl-route-3-200 librdmacm1 libibumad3 libpci3 libudev1 zlib1g
                  libmnl0 libbsd0 libmd0 libcap2)
# Soft-RoCE and the NIC. crc32_generic is not a dependency the kernel knows of, but without it
# `rdma link add` fails ("rdma_rxe: failed to add ...: No such file or directory").
modules=(crc32_generic rdma_rxe ib_uverbs virtio_pci virtio_net)
tools=(usr/bin/ibv_devinfo usr/bin/ibv_devices usr/bin/ibv_rc_pingpong usr/bin/ib_write_bw
       usr/bin/ib_write_lat usr/bin/rdma "usr/lib/$multiarch/libibverbs.so.1"
       "usr/lib/$multiarch/libibverbs/librxe-rdmav*.so")  # a pattern: the provider ABI is in the name
loom_binaries=(tests/net/test_net_providers tools/perf/loom-perf)
base_layout=1  # bump when the base initramfs is laid out differently

die() { echo "rxe-vm: $*" >&2; echo "0 passed, 1 failed"; exit 1; }
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"

if ! command -v qemu-system-x86_64 >/dev/null; then
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
fi
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing and could not be installed"

mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"
debs="$cache/debs"
pkgroot="$cache/packages"

# --- 1. Packages: the running release's stock kernel (linux-image-amd64's target), tools, libraries.
fetch_packages() {
  local wanted=("$@") kernel
  apt-cache show linux-image-amd64 >/dev/null 2>&1 || $sudo_cmd apt-get update -qq
  kernel="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
  [ -n "$kernel" ] || { $sudo_cmd apt-get update -qq
    kernel="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"; }
  [ -n "$kernel" ] || die "apt-cache names no kernel for linux-image-amd64"
  rm -rf "$debs" && mkdir -p "$debs"
  (cd "$debs" && apt-get -q -o APT::Sandbox::User=root download "$kernel" "${wanted[@]}" >/dev/null) ||
    die "apt-get download failed"
  printf '%s\n' "$kernel" "${wanted[@]}" > "$debs/.wanted"
}
wanted=("${tool_packages[@]}" "${library_packages[@]}")
if [ ! -f "$debs/.wanted" ] || [ "$(tail -n +2 "$debs/.wanted")" != "$(printf '%s\n' "${wanted[@]}")" ]; then
  echo "rxe-vm: downloading the kernel and ${#wanted[@]} packages"
  fetch_packages "${wanted[@]}"
  rm -rf "$pkgroot"
fi
if [ ! -f "$pkgroot/.done" ]; then
  rm -rf "$pkgroot" && mkdir -p "$pkgroot"
  for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$pkgroot"; done
  touch "$pkgroot/.done"
fi
busybox="$pkgroot/bin/busybox"
kver="$(basename "$(ls -d "$pkgroot"/lib/modules/*/ | head -n 1)")"
vmlinuz="$pkgroot/boot/vmlinuz-$kver"
[ -x "$busybox" ] && [ -f "$vmlinuz" ] || die "the packages in $debs lack busybox or the kernel"

# copy_with_libs STAGE FILE DEST: FILE to STAGE/DEST, then every library ldd names for it; those of
# the Loom build go to STAGE/opt/loom/lib, the rest where Debian keeps them.
copy_with_libs() {
  local stage=$1 file=$2 dest=$3 line name path
  install -D -m 0755 "$file" "$stage/$dest"
  while read -r line; do
    case "$line" in
      *"not found"*) die "$file needs a library found nowhere: $line" ;;
      *" => "/*) name="${line%% =>*}"; path="${line#* => }"; path="${path% (*}" ;;
      /*) path="${line% (*}"; name="" ;;
      *) continue ;;
    esac
    if [ -z "$name" ]; then  # the dynamic loader, at the path it was linked with
      [ -e "$stage/$path" ] || install -D -m 0755 "$(readlink -f "$path")" "$stage/$path"
    elif [[ "$(readlink -f "$path")" == "$loom_build"/* ]]; then
      [ -e "$stage/opt/loom/lib/$name" ] || install -D -m 0755 "$(readlink -f "$path")" "$stage/opt/loom/lib/$name"
    else
      [ -e "$stage/usr/lib/$multiarch/$name" ] || install -D -m 0755 "$(readlink -f "$path")" "$stage/usr/lib/$multiarch/$name"
    fi
  done < <(LD_LIBRARY_PATH="$pkgroot/usr/lib/$multiarch:$pkgroot/lib/$multiarch" ldd "$file" 2>&1)
}
loom_build=/nonexistent

make_cpio() {  # make_cpio STAGE OUT: a gzip'd newc archive, as the kernel unpacks it
  (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -1 > "$2.tmp"
  mv "$2.tmp" "$2"
}

# --- 2. The base initramfs (cached): busybox, the verbs tools and libraries, the kernel modules.
base_key="$(printf '%s\n' "$base_layout" "$kver" "${wanted[@]}" "${modules[@]}" "${tools[@]}" | sha256sum | cut -c1-16)"
base="$cache/base-$base_key.cpio.gz"
if [ ! -f "$base" ]; then
  echo "rxe-vm: building the base initramfs (kernel $kver)"
  stage="$cache/stage-base"
  rm -rf "$stage" "$cache"/base-*.cpio.gz
  mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,"usr/lib/$multiarch",usr/lib64,etc,proc,sys,dev,tmp,run,root,rxe}
  ln -s usr/lib "$stage/lib"
  ln -s usr/lib64 "$stage/lib64"
  install -m 0755 "$busybox" "$stage/bin/busybox"
  for t in "${tools[@]}"; do
    found=0
    for src in "$pkgroot"/$t; do
      [ -e "$src" ] || continue
      copy_with_libs "$stage" "$src" "${src#"$pkgroot"/}"
      found=1
    done
    [ "$found" = 1 ] || die "no $t in the packages"
  done
  install -D -m 0644 "$pkgroot/etc/libibverbs.d/rxe.driver" "$stage/etc/libibverbs.d/rxe.driver"
  echo "root:x:0:0:root:/root:/bin/sh" > "$stage/etc/passwd"
  echo "root:x:0:" > "$stage/etc/group"
  echo "127.0.0.1 localhost" > "$stage/etc/hosts"
  # Kernel modules in load order: each after the modules its .modinfo names as dependencies.
  moddir="$pkgroot/lib/modules/$kver"
  declare -A module_file=() loaded=()
  while read -r f; do n="$(basename "$f" .ko)"; module_file["${n//-/_}"]="$f"; done < <(find "$moddir" -name '*.ko')
  order=()
  add_module() {
    local m=$1 dep
    [ -n "${loaded[$m]:-}" ] && return
    [ -n "${module_file[$m]:-}" ] || die "kernel $kver has no module $m"
    loaded[$m]=1
    for dep in $(tr '\0' '\n' < "${module_file[$m]}" | sed -n 's/^depends=//p' | tr ',' ' '); do add_module "$dep"; done
    order+=("$m")
  }
  for m in "${modules[@]}"; do add_module "$m"; done
  for m in "${order[@]}"; do
    install -D -m 0644 "${module_file[$m]}" "$stage/lib/modules/$m.ko"
    echo "$m.ko" >> "$stage/rxe/modules"
  done
  make_cpio "$stage" "$base"
  rm -rf "$stage"
fi

# --- 3. The payload (every run): PID 1, the checks, Loom's binaries and their libraries.
stage="$cache/stage-payload"
rm -rf "$stage" && mkdir -p "$stage/rxe" "$stage/opt/loom/bin"
install -m 0755 tests/rxe/vm-init.sh "$stage/init"
install -m 0755 tests/rxe/checks.sh "$stage/rxe/checks.sh"
printf 'RXE_CHECKS=%s\nRXE_VERBOSE=%s\n' "$checks" "${LOOM_RXE_VERBOSE:-0}" > "$stage/rxe/config"
if [ "$checks" = all ]; then
  loom_build="$(cd "$build" 2>/dev/null && pwd || echo /nonexistent)"
  for b in "${loom_binaries[@]}"; do
    if [ -x "$build/$b" ]; then
      copy_with_libs "$stage" "$build/$b" "opt/loom/bin/$(basename "$b")"
    else
      echo "rxe-vm: $build/$b is missing (build it: ninja -C $build); its checks will fail" >&2
    fi
  done
fi
payload="$cache/payload.cpio.gz"
make_cpio "$stage" "$payload"
rm -rf "$stage"
cat "$base" "$payload" > "$cache/initrd.img"

# --- 4. Boot. The serial console is the VM's only output; PID 1 powers off when the checks end.
# TCG, not KVM: it needs nothing from the machine (KVM hung at boot where this was first tried), and
# the whole run takes seconds. `-cpu max` gives TCG's full instruction set (AVX2 since QEMU 7.2), so
# Loom's kernels take the paths they take on real machines.
console="$cache/console.log"
echo "rxe-vm: booting Linux $kver under QEMU (TCG, $smp CPUs, at most $vm_timeout s), checks: $checks"
start=$SECONDS
set +e
timeout -k 10 "$vm_timeout" qemu-system-x86_64 -accel tcg -cpu max -smp "$smp" -m "$mem" \
  -nodefaults -display none -serial stdio -monitor none -no-reboot \
  -kernel "$vmlinuz" -initrd "$cache/initrd.img" \
  -append "console=ttyS0 panic=-1 rdinit=/init" \
  -netdev user,id=net0,restrict=on -device virtio-net-pci,netdev=net0 \
  < /dev/null 2>&1 | tr -d '\r' | tee "$console" | grep --line-buffered -E '^(PASS|FAIL|rxe:)'
qemu_status=${PIPESTATUS[0]}
set -e
elapsed=$((SECONDS - start))
summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$console" | tail -n 1 || true)"
if [ -z "$summary" ]; then
  if [ "$qemu_status" -eq 124 ] || [ "$qemu_status" -eq 137 ]; then
    echo "rxe-vm: the VM did not finish within $vm_timeout s; its last console lines:"
  else
    echo "rxe-vm: the VM stopped (qemu status $qemu_status) before the checks ended; its last console lines:"
  fi
  if [ -s "$console" ]; then tail -n 40 "$console" | sed 's/^/  | /'; else echo "  (none: the kernel printed nothing)"; fi
  echo "rxe-vm: whole console log: $console"
  echo "0 passed, 1 failed"
  exit 1
fi
echo "rxe-vm: VM ran $elapsed s; console log: $console"
[ "$checks" = all ] || echo "rxe-vm: --verbs-only: Loom's own checks (ib conformance, collectives) were not run"
echo "$summary"
[[ "$summary" =~ \ 0\ failed$ ]]
