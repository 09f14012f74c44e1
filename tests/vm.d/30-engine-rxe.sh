#!/bin/bash
# The transfer engine over Soft-RoCE: rdma_rxe on a veth pair, provider
# verbs;ofi_rxm (real pinned registrations through the kernel's RDMA stack).
# FI_UNIVERSE_SIZE is left unset on purpose: the engine must size ofi_rxm's
# resources from the device's limits by itself.
set -eu
. "$(dirname "$0")/../lib.sh"
require_vm
# It does not load hmemreg.ko, and under the debug kernel (make test-debug)
# Debian 6.1's rdma_rxe itself trips KASAN on these transfers (an 8-byte read
# past its page map in rxe_mr_copy when a copy ends on the map's last
# buffer; rewritten upstream in 6.2): nothing of hmemreg's to judge there.
if [ "${HMEMREG_DEBUG_KERNEL:-0}" = 1 ]; then
	echo "SKIP: no hmemreg.ko here, and the debug kernel's rdma_rxe has a KASAN finding of its own (rxe_mr_copy)"
	exit 77
fi
soft_roce rxe0 hmrv 10.216.0
rdma link show
unset FI_UNIVERSE_SIZE
HMEMREG_RXE_NODE=10.216.0.1 run_suites "$HMEMREG_BUILD/tests/fabric/test_fabric_rxe"
