#!/bin/bash
# Soft-RoCE importing hmemreg's dma-bufs, one boot: hmemreg.ko with a small
# devmem pool, hmemreg's rdma_rxe.ko (softroce/build-rxe: reg_user_mr_dmabuf)
# on a veth, rdma-core's libibverbs + rxe provider with reg_dmabuf_mr
# (softroce/build-rdma-core) through LD_LIBRARY_PATH; then
# tests/rxe/test_rxe_dmabuf, the ledger must be idle, and both modules unload.
set -eu
. "$(dirname "$0")/../lib.sh"
require_vm
if [ "${HMEMREG_STOCK_RXE:-0}" = 1 ]; then
	echo "SKIP: HMEMREG_STOCK_RXE=1: Debian's rdma_rxe imports no dma-bufs"
	exit 77
fi
rxe_dir >/dev/null || { echo "FAIL: no rdma_rxe.ko with dma-buf MRs for $(uname -r) (make softroce; the debug lane builds its own)"; exit 1; }
verbs=$("$HMEMREG_TOP/softroce/build-rdma-core" --built) || { echo "FAIL: run make softroce first"; exit 1; }
kmod_load devmem_mb=32
soft_roce rxe0 hmx 10.217.0
rdma link show
export LD_LIBRARY_PATH=$verbs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bad=0
echo "---- test_rxe_dmabuf"
# One test at a time: they read the ledger's global counters.
"$HMEMREG_BUILD/tests/rxe/test_rxe_dmabuf" --jobs 1 --verbose ${HMEMREG_RXE_FILTER:+--filter "$HMEMREG_RXE_FILTER"} ||
	bad=$((bad + 1))
echo "---- libfabric: verbs;ofi_rxm registers devmem by dma-buf fd (FI_MR_DMABUF), writes devmem -> devmem"
if [ -x "$HMEMREG_BUILD/tests/rxe/fi_dmabuf_write" ]; then
	FI_DMABUF_LEDGER="$HMEMREG_BUILD/tools/mr_cache_stat --kernel" \
		FI_LOG_LEVEL=warn "$HMEMREG_BUILD/tests/rxe/fi_dmabuf_write" rxe0 8 10.217.0.1 || bad=$((bad + 1))
else
	echo "not built: no libfabric >= 1.20 (HMEMREG_LIBFABRIC2_PREFIX, or build the vendored 2.6.0)"
fi
echo "---- ledger after the suite (must be idle)"
"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle || bad=$((bad + 1))
rdma link delete rxe0
ip link delete hmx0
rmmod rdma_rxe || bad=$((bad + 1))
kmod_unload || bad=$((bad + 1))
exit $bad
