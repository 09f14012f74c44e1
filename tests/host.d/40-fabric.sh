#!/bin/bash
# Transfer engine over real libfabric providers: tcp;ofi_rxm and shm on
# loopback (writes, immediate notification with 8- and 4-byte keys, control
# messages, peers, queue pressure, bad input, C API,
# a peer process killed mid-transfer), then two network namespaces joined by a
# veth pair (needs root and ip netns; skipped otherwise, with the reason).
set -u
. "$(dirname "$0")/../lib.sh"
b="$HMEMREG_BUILD/tests/fabric"
bad=0
run_suites "$b/test_fabric_write" "$b/test_fabric_notify" "$b/test_fabric_control" "$b/test_fabric_badinput" \
	"$b/test_fabric_capi" "$b/test_fabric_process" || bad=1

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
ip netns add "$nsa" && ip netns add "$nsb" &&
	ip link add "hmra$tag" netns "$nsa" type veth peer name "hmrb$tag" netns "$nsb" &&
	ip -n "$nsa" addr add 10.213.0.1/24 dev "hmra$tag" && ip -n "$nsb" addr add 10.213.0.2/24 dev "hmrb$tag" &&
	ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
	ip -n "$nsa" link set "hmra$tag" up && ip -n "$nsb" link set "hmrb$tag" up || {
	echo "cannot set up network namespaces"
	exit 1
}
echo "---- test_fabric_netns ($nsa 10.213.0.1 <-> $nsb 10.213.0.2 over veth)"
HMEMREG_NETNS_PEER=$nsb HMEMREG_NETNS_ADDR=10.213.0.1 HMEMREG_NETNS_PEER_ADDR=10.213.0.2 \
	ip netns exec "$nsa" "$b/test_fabric_netns" --jobs 1 || bad=1
exit $bad
