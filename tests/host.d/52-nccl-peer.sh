#!/bin/bash
# hmemreg_bench nccl as a driver of any NCCL net plugin (not a timed test: no
# figure is judged): hmemreg's plugin and aws-ofi-nccl 1.21.1 (built once from
# ../shared/vendor by tools/vendor/build-aws-ofi-nccl into /var/cache/hmemreg,
# a few minutes the first time) run side by side over tcp;ofi_rxm on loopback,
# bandwidth and ping-pong latency, briefly. Both must run (a logger is passed,
# buffers are deregistered before their comm closes: aws-ofi-nccl refuses the
# other order) and every byte of the checked passes must have been verified.
# aws-ofi-nccl's init needs a CUDA runtime: on a host without a GPU, the
# stand-in build/tests/nccl/cudart-stub/libcudart.so (no device).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
bench=$HMEMREG_BUILD/tools/hmemreg_bench
stub=$HMEMREG_BUILD/tests/nccl/cudart-stub
[ -x "$bench" ] && [ -r "$stub/libcudart.so" ] || { echo "missing $bench or $stub/libcudart.so (run make)"; exit 1; }
[ -r /usr/local/cuda/include/cuda_runtime_api.h ] || [ -n "${CUDA_HOME:-}" ] ||
	{ echo "SKIP: aws-ofi-nccl builds only with CUDA toolkit headers (/usr/local/cuda or CUDA_HOME)"; exit 77; }
prefix=$("$HMEMREG_TOP/tools/vendor/build-aws-ofi-nccl") || { echo "FAIL: building aws-ofi-nccl"; exit 1; }
peer=$prefix/lib/libnccl-net-ofi.so
[ -r "$peer" ] || { echo "FAIL: no $peer"; exit 1; }
# The real runtime where a GPU driver is (it fails init without one), else the stand-in.
if [ ! -e /dev/nvidiactl ]; then
	export LD_LIBRARY_PATH=$stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

window=2 bw_sizes=4k,1m lat_sizes=8,64k
out=$("$bench" nccl --json --no-ref --peer-plugin "$peer" --window $window --sizes $bw_sizes \
	--lat-sizes $lat_sizes --seconds 0.05 --repeat 1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: hmemreg_bench nccl --peer-plugin exited $rc"; exit 1; }
bad=0
fail() { echo "FAIL: $*"; bad=1; }
# every row: both plugins measured, and verified every byte of its checked pass
# (bandwidth: 2 x window messages; latency: 4 ping-pongs, both directions).
check() { # MODE SIZES FIELD EXPECTED-MESSAGES
	local mode=$1 sizes=$2 field=$3 msgs=$4 rows wrong
	rows=$(jq -c --arg m "$mode" 'select(.mode == $m)' <<<"$out" | wc -l)
	[ "$rows" = "$(tr , '\n' <<<"$sizes" | wc -l)" ] || fail "$mode: $rows rows for sizes $sizes"
	wrong=$(jq -c --arg m "$mode" --arg f "$field" --argjson msgs "$msgs" 'select(.mode == $m) |
		select((.[$f] > 0 and .["peer_" + $f] > 0 and (.plugin | startswith("hmemreg")) and
			.checked_bytes == $msgs * .bytes and .peer_checked_bytes == $msgs * .bytes) | not)' <<<"$out")
	[ -z "$wrong" ] || fail "$mode: a plugin did not run or did not check every byte: $wrong"
}
check bw $bw_sizes gbps $((2 * window))
check lat $lat_sizes lat_us 8
[ $bad = 0 ] && echo "ok: both plugins ran every size, every byte checked"
exit $bad
