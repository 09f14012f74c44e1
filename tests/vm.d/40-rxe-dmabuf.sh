#!/bin/bash
# Soft-RoCE importing hmemreg's dma-bufs, one boot: hmemreg.ko with a small
# devmem pool, hmemreg's rdma_rxe.ko (softroce/build-rxe: reg_user_mr_dmabuf)
# on a veth, rdma-core's libibverbs + rxe provider with reg_dmabuf_mr
# (softroce/build-rdma-core) through LD_LIBRARY_PATH; then
# tests/rxe/test_rxe_dmabuf, the NCCL plugin registering devmem exports
# through regMrDmaBuf with read-back flushes (hmemreg_bench nccl --mem
# export) and receiving host sends into them through the NIC (--mem
# export-recv), the ledger must be idle, and both modules unload.
# While a process holds export registrations, mr_cache_stat --exports joins
# its caches' rows to the ledger (rxe0 pins them); after it dies, nothing.
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
echo "---- libhmemreg: exports as a memory kind (engine on verbs;ofi_rxm, FI_MR_DMABUF), tests/rxe/test_rxe_export"
lf2=${HMEMREG_LIBFABRIC2:-}
if [ -z "$lf2" ]; then
	for d in /var/cache/hmemreg/libfabric-2.6.0-*/.done; do [ -e "$d" ] && lf2=$(dirname "$d"); done
fi
if [ -n "$lf2" ]; then
	# One export memory kind run (every check), then kill -9 of a process
	# holding registered exports: the ledger must drop to zero.
	LD_LIBRARY_PATH=$lf2/lib:$LD_LIBRARY_PATH FI_LOG_LEVEL=warn \
		"$HMEMREG_BUILD/tests/rxe/test_rxe_export" 10.217.0.1 || bad=$((bad + 1))
	echo "---- hmemreg_bench reg --mem export (verbs, rxe0): cold FI_MR_DMABUF import vs cache miss vs hit"
	LD_LIBRARY_PATH=$lf2/lib:$LD_LIBRARY_PATH "$HMEMREG_BUILD/tools/hmemreg_bench" reg --mem export \
		--provider verbs --sizes 64k,1m,8m --iters 50 || bad=$((bad + 1))
	echo "---- engine bandwidth, devmem exports vs host memory, same engines and sizes (alternating rounds)"
	LD_LIBRARY_PATH=$lf2/lib:$LD_LIBRARY_PATH "$HMEMREG_BUILD/tests/rxe/test_rxe_export" 10.217.0.1 bw ||
		bad=$((bad + 1))
	echo "---- reference in the same run: perftest's ib_write_bw on rxe0, 8 MiB writes"
	if command -v ib_write_bw >/dev/null; then
		ib_write_bw -d rxe0 -p 18600 -s 8388608 -n 50 -F --report_gbits >/tmp/ibwb-server.log 2>&1 &
		ibsrv=$!
		for i in $(seq 60); do
			sleep 0.5
			ib_write_bw -d rxe0 -p 18600 -s 8388608 -n 50 -F --report_gbits 127.0.0.1 >/tmp/ibwb.log 2>&1 && break
		done
		grep -A1 "#bytes" /tmp/ibwb.log || echo "ib_write_bw did not run"
		kill "$ibsrv" 2>/dev/null || true
		wait "$ibsrv" 2>/dev/null || true
	fi
	# The NCCL plugin as NCCL drives GPU buffers over a NIC (GPUDirect RDMA):
	# devmem exports handed to regMrDmaBuf by fd (rxe0 imports them), every
	# byte checked, each receive flushed by iflush with a read-back (an
	# fi_read from the rail's own endpoint) that must complete.
	echo "---- hmemreg_bench nccl --mem export (the plugin on verbs;ofi_rxm, rxe0): regMrDmaBuf + read-back flush"
	nlog=/tmp/nccl-export.log
	LD_LIBRARY_PATH=$lf2/lib:$LD_LIBRARY_PATH timeout 300 \
		"$HMEMREG_BUILD/tools/hmemreg_bench" nccl --mem export --provider "verbs;ofi_rxm" --node 10.217.0.1 \
		--sizes 4k,64k,1m --lat-sizes 8,64k --window 4 --repeat 1 --seconds 0.2 --no-ref --json >"$nlog" 2>&1 &&
		nrc=0 || nrc=$?
	cat "$nlog"
	flushed=$(sed -n 's/.*: \([0-9]*\) receives read back by iflush/\1/p' "$nlog")
	rows=$(grep -c '"checked_bytes":[1-9]' "$nlog" || true)
	if [ "$nrc" = 0 ] && [ "$(wc -w <<<"$flushed")" = 2 ] && ! grep -qw 0 <<<"$flushed" && [ "$rows" -ge 5 ]; then
		echo "ok nccl --mem export: $rows rows with every byte checked, read-backs per rank: $(echo $flushed)"
	else
		echo "FAIL: nccl --mem export (exit $nrc): read-backs per rank '$(echo $flushed)', $rows checked rows"
		bad=$((bad + 1))
	fi
	# NCCL_NET_GDR_READ=0's shape: host sends into device receives. Small
	# sends come inline or eager through host memory, and the NIC (an RDMA
	# READ from its own endpoint) copies them into the export: the plugin
	# neither touches device memory with the CPU nor calls CUDA.
	echo "---- hmemreg_bench nccl --mem export-recv: Inline and eager data copied into exports by the NIC"
	llog=/tmp/nccl-export-recv.log
	LD_LIBRARY_PATH=$lf2/lib:$LD_LIBRARY_PATH timeout 300 \
		"$HMEMREG_BUILD/tools/hmemreg_bench" nccl --mem export-recv --provider "verbs;ofi_rxm" --node 10.217.0.1 \
		--sizes 4k,64k,1m --lat-sizes 8,4k,64k --window 4 --repeat 1 --seconds 0.2 --no-ref --json --log info \
		>"$llog" 2>&1 && lrc=0 || lrc=$?
	grep -v '^{' "$llog" | grep -E 'NIC|FAIL|WARN|wrong' | head -20
	grep '^{' "$llog"
	landed=$(sed -n 's/.*: \([0-9]*\) Inline or eager receives copied into device memory by the NIC/\1/p' "$llog" |
		awk '{ s += $1 } END { print s + 0 }')
	lrows=$(grep -c '"checked_bytes":[1-9]' "$llog" || true)
	if [ "$lrc" = 0 ] && [ "$landed" -gt 0 ] && [ "$lrows" -ge 6 ]; then
		echo "ok nccl --mem export-recv: $lrows rows with every byte checked, $landed receives landed by the NIC"
	else
		echo "FAIL: nccl --mem export-recv (exit $lrc): $landed receives landed by the NIC, $lrows checked rows"
		bad=$((bad + 1))
	fi
	LD_LIBRARY_PATH=$lf2/lib:$LD_LIBRARY_PATH "$HMEMREG_BUILD/tests/rxe/test_rxe_export" 10.217.0.1 hold \
		>/tmp/export-hold.log 2>&1 &
	holder=$!
	for i in $(seq 300); do grep -q holding /tmp/export-hold.log && break; sleep 0.1; done
	cat /tmp/export-hold.log
	"$HMEMREG_BUILD/tools/mr_cache_stat" --kernel || true
	# One view of a registration: each of the holder's two caches (engines
	# a and b) holds one devmem export, joined to the ledger: rxe0 pins it.
	echo "---- mr_cache_stat --exports while the holder holds its registrations"
	"$HMEMREG_BUILD/tools/mr_cache_stat" --exports -p "$holder" || true
	xj=$("$HMEMREG_BUILD/tools/mr_cache_stat" --exports --json -p "$holder") && xrc=0 || xrc=$?
	echo "$xj"
	rows=$(grep -o '"pid":'"$holder"',"comm":"[^"]*","cache_id":[0-9]*,"cache":"[^"]*","export_id":[0-9]*,"entries":[1-9][0-9]*,"bytes":[1-9][0-9]*,"kernel":{"provider":"devmem","state":"[^"]*pinned[^"]*","owner_pid":'"$holder"',[^]]*"attachments":\[{"device":"rxe0","pid":'"$holder"',"comm":"[^"]*","pinned":[1-9]' <<<"$xj" | wc -l)
	all=$(grep -o '"export_id":' <<<"$xj" | wc -l)
	if [ "$xrc" = 0 ] && [ "$rows" -ge 2 ] && [ "$rows" = "$all" ] && grep -q '"missing_in_kernel":0,"unexplained":\[\]' <<<"$xj"; then
		echo "ok mr_cache_stat --exports: $rows cache rows, each export pinned by rxe0 (pid $holder), nothing unexplained"
	else
		echo "FAIL: mr_cache_stat --exports (exit $xrc): want >= 2 rows, all joined to rxe0 pins, got $rows of $all"; bad=$((bad + 1))
	fi
	kill -9 "$holder"; wait "$holder" 2>/dev/null || true
	for i in $(seq 50); do "$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle >/dev/null 2>&1 && break; sleep 0.1; done
	if "$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle >/dev/null; then
		echo "ok kill -9 of a process with registered exports: ledger idle"
	else
		echo "FAIL: ledger not idle after kill -9 of the holder"; bad=$((bad + 1))
	fi
	xj=$("$HMEMREG_BUILD/tools/mr_cache_stat" --exports --json) && xrc=0 || xrc=$?
	if [ "$xrc" = 0 ] && grep -q '"exports":\[\],"missing_in_kernel":0,"unexplained":\[\]' <<<"$xj"; then
		echo "ok mr_cache_stat --exports after the holder died: no rows, no pins"
	else
		echo "FAIL: mr_cache_stat --exports after the holder died (exit $xrc): $xj"; bad=$((bad + 1))
	fi
else
	echo "not run: no libfabric 2.6.0 build (tools/vendor/build-libfabric, or HMEMREG_LIBFABRIC2=PREFIX)"
fi
echo "---- ledger after the suite (must be idle)"
"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle || bad=$((bad + 1))
rdma link delete rxe0
ip link delete hmx0
rmmod rdma_rxe || bad=$((bad + 1))
kmod_unload || bad=$((bad + 1))
exit $bad
