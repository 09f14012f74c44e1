#!/bin/bash
# The demo, inside the VM (make demo boots it): hmemreg.ko with an emulated
# device-memory pool, two "hosts" on Soft-RoCE over a veth pair (tcp over the
# same veth where rxe cannot serve), a scattered transfer from host memory
# into exported device memory, mr_cache_stat during and after.
set -eu
. "$(dirname "$0")/../../tests/lib.sh"
require_vm
B=$HMEMREG_BUILD
step() { printf '\n==== demo: %s\n' "$*"; }

step "load hmemreg.ko (256 MiB emulated device memory)"
kmod_load devmem_mb=256
"$B/tools/mr_cache_stat" --kernel

# rxe in 6.1 receives RoCE only on its root-namespace UDP socket and matches
# packets to the device by the netdev they arrive on, so two rxe devices on
# the two ends of one veth pair in one namespace never hear each other (the
# kernel routes between local addresses over lo). Both hosts therefore share
# rxe0; each is still its own process with its own engine, cache and memory.
step "two hosts (two processes) on Soft-RoCE rxe0 over a veth pair"
provider="tcp;ofi_rxm" dom_a="" dom_b="" node_b=10.216.0.2
if soft_roce rxe0 hmd 10.216.0; then
	rdma link show
	provider="verbs;ofi_rxm" dom_a=rxe0 dom_b=rxe0 node_b=10.216.0.1
else
	echo "Soft-RoCE unavailable here: using tcp over the veth pair"
fi

step "transfer: host memory (A) -> emulated device memory (B), $provider"
rc=0
"$B/tools/hmemreg_demo" --provider "$provider" --node-a 10.216.0.1 --node-b "$node_b" \
	${dom_a:+--domain-a $dom_a --domain-b $dom_b} --mib "${HMEMREG_DEMO_MIB:-64}" --chunk-kib 64 \
	--iters "${HMEMREG_DEMO_ITERS:-8}" --stat "$B/tools/mr_cache_stat" || rc=$?

# The DMA-BUF path: device memory registered by its dma-buf fd
# (FI_MR_DMABUF needs libfabric >= 1.20: the vendored 2.6.0 when built, and
# hmemreg's rdma_rxe.ko, which imports dma-bufs).
lf2=${HMEMREG_LIBFABRIC2:-}
if [ -z "$lf2" ]; then
	for d in /var/cache/hmemreg/libfabric-2.6.0-*/.done; do [ -e "$d" ] && lf2=$(dirname "$d"); done
fi
verbs=$("$HMEMREG_TOP/softroce/build-rdma-core" --built 2>/dev/null) || verbs=""
if [ "$provider" = "verbs;ofi_rxm" ] && [ -n "$lf2" ] && [ -n "$verbs" ] &&
	"$HMEMREG_TOP/softroce/build-rxe" --built >/dev/null 2>&1; then
	step "transfer: emulated device memory -> emulated device memory, registered by dma-buf (FI_MR_DMABUF), $provider"
	LD_LIBRARY_PATH=$lf2/lib:$verbs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FI_LOG_LEVEL=error \
		"$B/tools/hmemreg_demo" --exports "$provider" 10.216.0.1 "${HMEMREG_DEMO_MIB:-64}" "$B/tools/mr_cache_stat" ||
		rc=$?
else
	step "dma-buf path skipped: needs Soft-RoCE with hmemreg's rdma_rxe.ko (make softroce) and libfabric 2.6.0 (tools/vendor/build-libfabric)"
fi

step "after both hosts exited: the kernel ledger must be back to zero"
"$B/tools/mr_cache_stat" --kernel --check || rc=$?
live=$("$B/tools/mr_cache_stat" --kernel --json | grep -o '"exports_live":[0-9]*\|"pins_live":[0-9]*\|"host_pages_pinned":[0-9]*\|"watches_live":[0-9]*')
echo "$live"
if echo "$live" | grep -qv ':0$'; then echo "demo: something is still exported or pinned"; rc=1; fi
kmod_unload
[ $rc = 0 ] && step "done: bytes verified, ledger at zero" || step "FAILED (status $rc)"
exit $rc
