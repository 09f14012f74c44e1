#!/bin/bash
# Issue 9, run 2, on a two-GPU machine: the collectives of nccl_collectives.py
# once over the hmemreg NCCL plugin and once over NCCL's own socket
# transport (the reference), NCCL forced onto the network path.
#   tests/gpu2/run-nccl-torch.sh PLUGIN_DIR OUTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
plugin_dir=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
# NVLink multicast stays off (it can take the shared host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Network path only: no P2P, no shared memory, no InfiniBand; loopback.
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET} PYTHONUNBUFFERED=1
export MASTER_ADDR=127.0.0.1
rc=0
run() { # label, port, extra env...
	local label=$1 port=$2
	shift 2
	env "$@" HMEMREG_RUN_LABEL="$label" MASTER_PORT="$port" \
		timeout 600 python3 -m torch.distributed.run --nproc_per_node=2 --master_port="$port" \
		"$here/nccl_collectives.py" >"$out/$label.jsonl" 2>"$out/$label.log" || rc=1
	echo "== $label: $(grep -c '"ok": true' "$out/$label.jsonl") results ok, $(grep -c '"ok": false' "$out/$label.jsonl") wrong"
	grep -m3 -E "Loaded net plugin|Using network|NET/hmemreg: using|NET/Socket : Using" "$out/$label.log" | sed 's/^/   /'
}
run hmemreg 29511 NCCL_NET_PLUGIN=hmemreg LD_LIBRARY_PATH="$plugin_dir:${LD_LIBRARY_PATH:-}" \
	HMEMREG_NCCL_PROVIDER="tcp;ofi_rxm" HMEMREG_NCCL_NODE=127.0.0.1
run socket 29512 NCCL_NET=Socket NCCL_NET_PLUGIN=none
exit $rc
