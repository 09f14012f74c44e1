#!/bin/bash
# The transfer engine over Soft-RoCE: rdma_rxe on a veth pair, provider
# verbs;ofi_rxm (real pinned registrations through the kernel's RDMA stack).
# FI_UNIVERSE_SIZE is left unset on purpose: the engine must size ofi_rxm's
# resources from the device's limits by itself.
set -eu
. "$(dirname "$0")/../lib.sh"
require_vm
# Under the debug kernel (make test-debug) rxe_load loads the project's
# rdma_rxe (softroce/), whose rxe-mr-copy-end.patch fixes the KASAN finding
# of Debian 6.1's own rxe on these transfers (rxe_mr_copy read one map
# pointer past the map array when a copy ended on a map's last buffer).
soft_roce rxe0 hmrv 10.216.0
rdma link show
unset FI_UNIVERSE_SIZE
HMEMREG_RXE_NODE=10.216.0.1 run_suites "$HMEMREG_BUILD/tests/fabric/test_fabric_rxe"
