#!/bin/bash
# NCCL net plugin (plugins/nccl): its tables driven as NCCL drives them, two
# ranks as two processes over tcp;ofi_rxm on loopback. Run once with an
# engine progress thread (the default) and the data-path tests again with
# caller-driven progress, and once more with Done-message notification
# (HMEMREG_NCCL_NOTIFY=message; the default is immediate data).
set -e
. "$(dirname "$0")/../lib.sh"
bin="$HMEMREG_BUILD/tests/nccl/test_nccl_plugin"
[ -x "$bin" ] || { echo "missing $bin (run make)"; exit 1; }
export HMEMREG_NCCL_PROVIDER="tcp;ofi_rxm" HMEMREG_NCCL_NODE=127.0.0.1
echo "---- test_nccl_protocol (control messages)"
"$HMEMREG_BUILD/tests/nccl/test_nccl_protocol"
echo "---- test_nccl_plugin (engine progress thread)"
"$bin" --jobs 2
# (eager_slots_come_back needs the receiver to make progress while it
# waits on the harness, which only a progress thread does.)
echo "---- test_nccl_plugin (progress driven by the calls)"
HMEMREG_NCCL_PROGRESS_THREADS=0 "$bin" --jobs 2 --filter 'nccl_plugin/@(sizes*|many*|close*|sends_before*)'
echo "---- test_nccl_plugin (receives notified by Done messages instead of immediate data)"
HMEMREG_NCCL_NOTIFY=message "$bin" --jobs 2 --filter 'nccl_plugin/@(sizes*|many*|close*|sends_before*|eager_slots*)'
echo "---- test_nccl_plugin (every send a write: HMEMREG_NCCL_INLINE_MAX=0)"
HMEMREG_NCCL_INLINE_MAX=0 "$bin" --jobs 2 --filter 'nccl_plugin/@(sizes*|many*|close*)'
