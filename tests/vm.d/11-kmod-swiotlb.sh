#!/bin/bash
# hmemreg.ko's DMA segments when every DMA-direct mapping bounces through
# swiotlb (as in SEV/TDX guests or for devices that cannot reach all memory):
# large huge-page exports must map in segments that fit the bounce buffer's
# slots (dma_max_mapping_size()), for devices with 1 MiB and 2 GiB max
# segments; test_kmod_segments checks that, and the limits, under it.
# vm-append: swiotlb=force
set -e
. "$(dirname "$0")/../lib.sh"
require_vm
grep -qw swiotlb=force /proc/cmdline ||
	{ echo "guest booted without swiotlb=force (tests/run adds it from this script's vm-append line)"; exit 1; }
echo 8 > /proc/sys/vm/nr_hugepages
kmod_load devmem_mb=32
importer_load
bad=0
echo "---- test_kmod_segments (swiotlb=force)"
HMEMREG_EXPECT_BOUNCE=1 "$HMEMREG_BUILD/tests/kmod/test_kmod_segments" --jobs 1 || bad=$((bad + 1))
echo "---- ledger (netlink; must be idle)"
"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle || bad=$((bad + 1))
rmmod hmemreg_importer
kmod_unload
exit $bad
