#!/bin/bash
# Transfer engine over real libfabric providers: tcp;ofi_rxm and shm on
# loopback (writes, immediate notification with 8- and 4-byte keys, control
# messages, peers, queue pressure, bad input, C API, out of memory,
# a peer process killed mid-transfer), then two network namespaces joined by a
# veth pair: the netns suite, and hmemreg_bench xfer's server and client
# (needs root and ip netns; skipped otherwise, with the reason).
set -u
. "$(dirname "$0")/../lib.sh"
b="$HMEMREG_BUILD/tests/fabric"
bad=0
run_suites "$b/test_fabric_write" "$b/test_fabric_notify" "$b/test_fabric_control" "$b/test_fabric_badinput" \
	"$b/test_fabric_capi" "$b/test_fabric_process" "$b/test_fabric_oom" || bad=1

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
	echo "SKIP netns suite: needs root and iproute2 (ip netns)"
	exit $bad
fi
tag=$$
nsa=hmr-a-$tag nsb=hmr-b-$tag
cleanup() {
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
}
trap cleanup EXIT
netns_pair "$nsa" "$nsb" "hmra$tag" "hmrb$tag" 10.213.0 || {
	echo "cannot set up network namespaces"
	exit 1
}
echo "---- test_fabric_netns ($nsa 10.213.0.1 <-> $nsb 10.213.0.2 over veth)"
HMEMREG_NETNS_PEER=$nsb HMEMREG_NETNS_ADDR=10.213.0.1 HMEMREG_NETNS_PEER_ADDR=10.213.0.2 \
	ip netns exec "$nsa" "$b/test_fabric_netns" --jobs 1 || bad=1

# The benchmark the way two hosts run it: a bench server in one namespace, a
# client in the other, engines on the veth addresses, iperf3 across the veth
# as the reference, every row verified by the server.
echo "---- hmemreg_bench xfer --serve ($nsb) / --connect ($nsa)"
bench=$HMEMREG_BUILD/tools/hmemreg_bench
log=$(mktemp)
out="" rc=1
if bench_serve "$log" ip netns exec "$nsb" "$bench" xfer --serve 10.213.0.2:7470 --node 10.213.0.2; then
	out=$(ip netns exec "$nsa" "$bench" xfer --connect "$served" --node 10.213.0.1 --provider 'tcp;ofi_rxm' \
		--json --min 64k --max 1m --chunks 1,16 --repeat 1 --seconds 0.1 --verify 2>&1)
	rc=$?
fi
rows=$(grep '^{' <<<"$out" | jq -c 'select(.bench == "xfer" and .target == "remote" and .verified == "yes"
	and .ref == "iperf3" and .ref_gbps > 0)' | wc -l)
if [ $rc != 0 ] || [ "$rows" != 6 ]; then
	echo "FAIL: exit $rc, $rows of 6 rows verified against iperf3 across the veth"
	echo "$out" | tail -10
	bad=1
else
	echo "ok   6 rows verified across the veth"
fi
bench_serve_end "$log" || { echo "FAIL: the bench server exited with $?"; bad=1; }
rm -f "$log"
exit $bad
