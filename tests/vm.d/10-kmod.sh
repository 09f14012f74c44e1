#!/bin/bash
# hmemreg.ko under Debian's kernel, one boot: load (small limits so the limit
# and overflow tests are quick), the in-kernel test importer, every kmod ABI
# suite, then the ledger must read zero and both modules unload cleanly.
set -e
. "$(dirname "$0")/../lib.sh"
require_vm
# Huge pages for test_kmod_segments' physically contiguous buffers.
echo 8 > /proc/sys/vm/nr_hugepages
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
rmmod hmemreg_importer
kmod_unload
[ ! -e /dev/hmemreg ] || { echo "/dev/hmemreg still present after rmmod"; exit 1; }
exit $bad
