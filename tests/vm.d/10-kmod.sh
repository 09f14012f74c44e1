#!/bin/bash
# hmemreg.ko under Debian's kernel, one boot: load (small limits so the limit
# and overflow tests are quick), the in-kernel test importer, every kmod ABI
# suite, then the ledger must read zero and both modules unload cleanly.
set -e
. "$(dirname "$0")/../lib.sh"
require_vm
# Huge pages for test_kmod_segments' physically contiguous buffers.
echo 8 > /proc/sys/vm/nr_hugepages
# A disk filesystem (the guest's /tmp is tmpfs, whose pages are never written
# back): ext4 on a loop device, for test_kmod_export's file-backed exports.
# The debug kernel (tests/debug/kernel.config) has neither: those tests then
# skip, saying why.
ext4=
modprobe -a loop ext4 2>/dev/null || true
if [ -d /sys/module/loop ] && grep -qw ext4 /proc/filesystems; then
	truncate -s 16M /run/hmemreg-ext4.img
	mkfs.ext4 -q -F /run/hmemreg-ext4.img
	mkdir -p /run/hmemreg-ext4
	mount -o loop /run/hmemreg-ext4.img /run/hmemreg-ext4
	export HMEMREG_EXT4_DIR=/run/hmemreg-ext4 ext4=1
else
	echo "no ext4 on a loop device in this kernel: the file-backed export tests skip"
fi
kmod_load max_watches=1024 ring_events=256 devmem_mb=32
importer_load
bad=0
# HMEMREG_KMOD_SUITES (a glob) narrows the run while developing.
for b in "$HMEMREG_BUILD"/tests/kmod/${HMEMREG_KMOD_SUITES:-test_kmod_*}; do
	[ -x "$b" ] || continue
	echo "---- $(basename "$b")"
	# One test at a time: some read global ledger counters.
	"$b" --jobs 1 || bad=$((bad + 1))
done
echo "---- ledger after all suites (netlink; must be idle)"
"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle || bad=$((bad + 1))
echo "---- debugfs summary"
cat /sys/kernel/debug/hmemreg/summary
[ -z "$ext4" ] || umount /run/hmemreg-ext4
rmmod hmemreg_importer
kmod_unload
[ ! -e /dev/hmemreg ] || { echo "/dev/hmemreg still present after rmmod"; exit 1; }
exit $bad
