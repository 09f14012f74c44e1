#!/bin/bash
# udmabuf (the kernel's own memfd exporter) as the reference for hmemreg's HOST
# provider, seen through the test importer (tests/debug/test_debug_udmabuf.c).
# Debian's kernel has no udmabuf; the debug kernel (make test-debug) has.
set -e
. "$(dirname "$0")/../lib.sh"
require_vm
[ -e /dev/udmabuf ] || { echo "SKIP: needs /dev/udmabuf (CONFIG_UDMABUF: make test-debug)"; exit 77; }
# shellcheck disable=SC2086
kmod_load ${HMEMREG_KMOD_PARAMS-max_watches=1024 ring_events=256 devmem_mb=32}
importer_load
rc=0
"$HMEMREG_BUILD/tests/debug/test_debug_udmabuf" --jobs 1 || rc=$?
rmmod hmemreg_importer
kmod_unload
exit $rc
