#!/bin/bash
# The transfer engine over Soft-RoCE: rdma_rxe on a veth pair, provider
# verbs;ofi_rxm (real pinned registrations through the kernel's RDMA stack).
# FI_UNIVERSE_SIZE is left unset on purpose: the engine must size ofi_rxm's
# resources from the device's limits by itself.
set -eu
. "$(dirname "$0")/../lib.sh"
require_vm
soft_roce rxe0 hmrv 10.216.0
rdma link show
unset FI_UNIVERSE_SIZE
HMEMREG_RXE_NODE=10.216.0.1 run_suites "$HMEMREG_BUILD/tests/fabric/test_fabric_rxe"
