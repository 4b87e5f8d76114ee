#!/usr/bin/env bash
# Several simulated disks on one machine, for measuring what the runtime
# does with more than one device: N loop devices over files (direct I/O, so
# reads reach the backing disk rather than the loop's own page cache), each
# with an ext4 file system mounted, and each device's reads limited to a
# bandwidth and an IOPS figure through the blkio cgroup (v1).
#
# Run as root.
#
#   scripts/loop-disks.sh up [N] [BPS] [IOPS]   create N disks (default 2,
#                                              150 MiB/s, 20000 IOPS each)
#   scripts/loop-disks.sh run CMD...            run CMD inside the throttled
#                                              cgroup (the limits apply only
#                                              to processes in it)
#   scripts/loop-disks.sh status                the disks, their limits and
#                                              what each has served
#   scripts/loop-disks.sh down                  unmount, detach, delete
#
# `up` prints the mount points, one per line (also in $STATE/mounts); put a
# pack on each and pass them to the runtime. A failed `up` cleans up what it
# made. The backing files live in $GPUSTREAM_DISKS_DIR (default
# /var/tmp/gpustream-disks), each 1 GiB unless $GPUSTREAM_DISK_SIZE says
# otherwise (truncate syntax, e.g. 4G).
set -euo pipefail

STATE=${GPUSTREAM_DISKS_DIR:-/var/tmp/gpustream-disks}
SIZE=${GPUSTREAM_DISK_SIZE:-1G}
# Tests name their own cgroup (GPUSTREAM_DISKS_CGROUP) and state directory,
# so they never touch disks a person brought up.
CGROUP=/sys/fs/cgroup/blkio/${GPUSTREAM_DISKS_CGROUP:-gpustream-disks}

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "loop-disks: run as root (loop devices, mounts and the blkio cgroup need it)" >&2
        exit 2
    fi
}

down() {
    if [ -f "$STATE/devices" ]; then
        while read -r dev mnt; do
            # A process that has just closed its files may still hold the
            # mount for a moment; past that, detach it lazily so the loop
            # device goes once the last file on it closes.
            umount "$mnt" 2>/dev/null || { sleep 1; umount "$mnt" 2>/dev/null; } ||
                umount -l "$mnt" 2>/dev/null || true
            rmdir "$mnt" 2>/dev/null || true
            losetup -d "$dev" 2>/dev/null || true
        done <"$STATE/devices"
    fi
    # Processes still in the cgroup keep it; move them out first.
    if [ -d "$CGROUP" ]; then
        while read -r pid; do
            echo "$pid" >/sys/fs/cgroup/blkio/cgroup.procs 2>/dev/null || true
        done <"$CGROUP/cgroup.procs"
        rmdir "$CGROUP" 2>/dev/null || true
    fi
    rm -rf "$STATE"
}

up() {
    local n=${1:-2} bps=${2:-$((150 << 20))} iops=${3:-20000}
    if [ -e "$STATE/devices" ]; then
        echo "loop-disks: already up ($STATE/devices); run 'down' first" >&2
        exit 2
    fi
    if [ ! -d /sys/fs/cgroup/blkio ]; then
        echo "loop-disks: no blkio cgroup (v1) at /sys/fs/cgroup/blkio" >&2
        exit 2
    fi
    mkdir -p "$STATE"
    : >"$STATE/devices"
    # Whatever fails from here on, or an interrupt, undoes what was made.
    trap 'echo "loop-disks: setup failed; cleaning up" >&2; down' ERR
    trap 'echo "loop-disks: interrupted; cleaning up" >&2; down; exit 130' INT TERM
    mkdir -p "$CGROUP"
    for i in $(seq 0 $((n - 1))); do
        local img="$STATE/disk$i.img" mnt="$STATE/mnt$i"
        truncate -s "$SIZE" "$img"
        local dev
        dev=$(losetup --find --show --direct-io=on "$img")
        echo "$dev $mnt" >>"$STATE/devices"
        mkfs.ext4 -q -F "$dev"
        mkdir -p "$mnt"
        mount "$dev" "$mnt"
        local majmin
        majmin=$(lsblk -dno MAJ:MIN "$dev" | tr -d ' ')
        echo "$majmin $bps" >"$CGROUP/blkio.throttle.read_bps_device"
        echo "$majmin $iops" >"$CGROUP/blkio.throttle.read_iops_device"
        echo "$mnt"
    done
    trap - ERR INT TERM
    cut -d' ' -f2 "$STATE/devices" >"$STATE/mounts"
}

status() {
    if [ ! -f "$STATE/devices" ]; then
        echo "loop-disks: down"
        return
    fi
    cat "$STATE/devices"
    echo "read limits (bytes/s, IOPS):"
    cat "$CGROUP/blkio.throttle.read_bps_device" "$CGROUP/blkio.throttle.read_iops_device"
    echo "served (bytes):"
    grep -i read "$CGROUP/blkio.throttle.io_service_bytes" || true
}

run() {
    if [ ! -d "$CGROUP" ]; then
        echo "loop-disks: not up" >&2
        exit 2
    fi
    echo $$ >"$CGROUP/cgroup.procs"
    exec "$@"
}

need_root
case "${1:-}" in
up) shift; up "$@" ;;
down) down ;;
status) status ;;
run) shift; run "$@" ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
