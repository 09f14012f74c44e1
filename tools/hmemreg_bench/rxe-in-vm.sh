#!/bin/bash
# hmemreg_bench xfer over Soft-RoCE inside the test VM: rdma_rxe on a veth
# pair, provider verbs;ofi_rxm (registrations really pin pages), against
# perftest's ib_write_bw on the same rxe device and sizes in the same run.
#   tests/vm/run -t 900 tools/hmemreg_bench/rxe-in-vm.sh [xfer options]
# Under qemu's software emulation (tcg) both sides are slow: read the ratio.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib.sh"
require_vm
soft_roce rxe0 hmrb 10.217.0 || { echo "rxe-in-vm: no Soft-RoCE in this kernel" >&2; exit 77; }
exec "$HMEMREG_BUILD/tools/hmemreg_bench" xfer --provider "verbs;ofi_rxm" --node 10.217.0.1 "$@"
