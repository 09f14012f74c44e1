#!/bin/bash
# The transfer engine over Soft-RoCE: rdma_rxe on a veth pair, provider
# verbs;ofi_rxm (real pinned registrations through the kernel's RDMA stack).
# FI_UNIVERSE_SIZE is left unset on purpose: the engine must size ofi_rxm's
# resources from the device's limits by itself.
set -eu
. "$(dirname "$0")/../lib.sh"
require_vm
# rxe computes its ICRC with the crypto API crc32, a separate module.
modprobe crc32_generic 2>/dev/null || modprobe crc32_pclmul
modprobe rdma_rxe
modprobe rdma_ucm # librdmacm (ofi_rxm connects verbs endpoints through it)
modprobe veth
ip link add hmrv0 type veth peer name hmrv1
ip addr add 10.216.0.1/24 dev hmrv0
ip addr add 10.216.0.2/24 dev hmrv1
ip link set hmrv0 up
ip link set hmrv1 up
rdma link add rxe0 type rxe netdev hmrv0
rdma link show
unset FI_UNIVERSE_SIZE
HMEMREG_RXE_NODE=10.216.0.1 run_suites "$HMEMREG_BUILD/tests/fabric/test_fabric_rxe"
