#!/bin/busybox sh
# PID 1 of the Soft-RoCE VM (scripts/rxe-vm.sh): mounts the kernel's file systems, loads the modules
# in the order /rxe/modules lists them, brings the virtual NIC up, runs /rxe/checks.sh and powers
# off. A PID 1 that exits panics the kernel, so whatever happens the checks are followed by poweroff.
/bin/busybox mkdir -p /proc /sys /dev /tmp /run
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t devpts devpts /dev/pts
export PATH=/usr/bin:/usr/sbin:/bin:/sbin HOME=/root

hostname rxe-vm
dmesg -n 4  # the boot's messages are in the console log; from here on only warnings and errors
echo "rxe: Linux $(uname -r) up after $(cut -d' ' -f1 /proc/uptime) s"
while read -r ko; do
  insmod "/lib/modules/$ko" || echo "rxe: insmod $ko failed"
done < /rxe/modules

# QEMU's user network: 10.0.2.0/24. Nothing leaves the VM (restrict=on); rxe needs an Ethernet device
# with an address, and its queue pairs between two GIDs of one device loop back inside the kernel.
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 || echo "rxe: no eth0 (virtio_net)"

. /rxe/config
RXE_CHECKS="$RXE_CHECKS" RXE_VERBOSE="$RXE_VERBOSE" RXE_NETDEV=eth0 sh /rxe/checks.sh
sync
poweroff -f
