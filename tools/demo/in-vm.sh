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

step "two hosts: veth pair 10.216.0.1 <-> 10.216.0.2, Soft-RoCE rxe0/rxe1 on it"
modprobe veth
ip link add hmd0 type veth peer name hmd1
ip addr add 10.216.0.1/24 dev hmd0
ip addr add 10.216.0.2/24 dev hmd1
ip link set hmd0 up
ip link set hmd1 up
provider="tcp;ofi_rxm" dom_a="" dom_b=""
if { modprobe crc32_generic 2>/dev/null || modprobe crc32_pclmul; } && modprobe rdma_rxe && modprobe rdma_ucm &&
	rdma link add rxe0 type rxe netdev hmd0 && rdma link add rxe1 type rxe netdev hmd1; then
	rdma link show
	provider="verbs;ofi_rxm" dom_a=rxe0 dom_b=rxe1
else
	echo "Soft-RoCE unavailable here: using tcp over the veth pair"
fi

step "transfer: host memory (A) -> emulated device memory (B), $provider"
rc=0
"$B/tools/hmemreg_demo" --provider "$provider" --node-a 10.216.0.1 --node-b 10.216.0.2 \
	${dom_a:+--domain-a $dom_a --domain-b $dom_b} --mib "${HMEMREG_DEMO_MIB:-64}" --chunk-kib 64 \
	--iters "${HMEMREG_DEMO_ITERS:-8}" --stat "$B/tools/mr_cache_stat" || rc=$?

step "after both hosts exited: the kernel ledger must be back to zero"
"$B/tools/mr_cache_stat" --kernel --check || rc=$?
live=$("$B/tools/mr_cache_stat" --kernel --json | grep -o '"exports_live":[0-9]*\|"pins_live":[0-9]*\|"host_pages_pinned":[0-9]*\|"watches_live":[0-9]*')
echo "$live"
if echo "$live" | grep -qv ':0$'; then echo "demo: something is still exported or pinned"; rc=1; fi
kmod_unload
[ $rc = 0 ] && step "done: bytes verified, ledger at zero" || step "FAILED (status $rc)"
exit $rc
