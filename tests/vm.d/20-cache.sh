#!/bin/bash
# Registration cache in the VM, one boot: the kmod monitor against
# hmemreg.ko (small limits so overflow and watch-limit paths run), the uffd
# suite on the guest kernel, and the libfabric registrar with the verbs
# provider over Soft-RoCE (rxe on a veth pair), where registrations really
# pin pages (checked through VmPin), and every kind of memory change under
# the kmod and the uffd monitor, with page numbers (test_cache_changes) and
# with real RDMA writes over rxe checking the bytes. Ends with the module's
# ledger idle.
set -e
. "$(dirname "$0")/../lib.sh"
require_vm
bad=0
kmod_load max_watches=256 ring_events=32 devmem_mb=8
for s in test_cache_kmod test_cache_uffd test_cache_changes test_cache_concurrency test_dmabuf_wrap; do
	echo "---- $s"
	HMEMREG_TEST_EXPECT_MONITORS="kmod uffd" "$HMEMREG_BUILD/tests/unit/$s" --jobs 1 || bad=$((bad + 1))
done
echo "---- ledger (watches must all be gone)"
"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle || bad=$((bad + 1))

echo "---- verbs over Soft-RoCE"
soft_roce hrxe0 hrv 10.77.0 || echo "Soft-RoCE setup failed"
if fi_info -p verbs >/dev/null 2>&1; then
	# Registrations go through the cache only: providers must not cache.
	HMEMREG_TEST_PROV=verbs HMEMREG_TEST_EXPECT_PIN=1 FI_VERBS_IFACE=hrv0 \
		"$HMEMREG_BUILD/tests/unit/test_cache_fabric" --jobs 1 || bad=$((bad + 1))
	for mon in kmod uffd; do
		echo "---- memory changes over rxe, monitor $mon"
		HMEMREG_MR_CACHE_MONITOR=$mon HMEMREG_RXE_NODE=10.77.0.1 FI_VERBS_IFACE=hrv0 \
			"$HMEMREG_BUILD/tests/fabric/test_fabric_rxe" --jobs 1 --filter 'rxe/changes_*' || bad=$((bad + 1))
	done
else
	echo "FAIL: libfabric sees no verbs device over rxe"; fi_info -p verbs || true; bad=$((bad + 1))
fi
rdma link delete hrxe0
ip link delete hrv0
kmod_unload
exit $bad
