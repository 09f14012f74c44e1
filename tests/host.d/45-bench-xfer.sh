#!/bin/bash
# hmemreg_bench xfer end to end, briefly (figures come from longer runs, not
# from here): both providers, the target in this process, in a child process,
# and in a bench server (--serve) that a client reaches over TCP (--connect);
# every row verified byte for byte, with its fields and a measured reference.
# tests/host.d/40-fabric.sh runs a server and a client in two network
# namespaces.
set -u
. "$(dirname "$0")/../lib.sh"
bench=$HMEMREG_BUILD/tools/hmemreg_bench
[ -x "$bench" ] || { echo "missing $bench (run make)"; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 missing (make deps): it is tcp's reference"; exit 1; }
bad=0
args=(--json --min 64k --max 256k --chunks 1,16 --repeat 1 --seconds 0.05 --verify)

# check NAME TARGET OUT RC: 2 providers x 2 sizes x 2 chunk counts, all whole.
check() {
	local rows good
	rows=$(grep '^{' <<<"$3" | jq -c 'select(.bench == "xfer")' | wc -l)
	good=$(grep '^{' <<<"$3" | jq -c --arg t "$2" 'select(.bench == "xfer" and .verified == "yes" and
		.target == $t and .gbps > 0 and .ref_gbps > 0 and has("pct_ref"))' | wc -l)
	if [ "$4" != 0 ] || [ "$rows" != 8 ] || [ "$good" != 8 ]; then
		echo "FAIL xfer $1: exit $4, $rows rows, $good complete"
		echo "$3" | tail -20
		bad=1
	else
		echo "ok   xfer $1: $rows rows verified"
	fi
}

for procs in 1 2; do
	out=$("$bench" xfer --procs $procs "${args[@]}" 2>&1)
	check "--procs $procs" "$([ $procs = 1 ] && echo in-process || echo child)" "$out" $?
done
# Both ceilings measured on this host, the same-write one at the engine's
# write size: 64k in 16 chunks goes as one write of 4 chunks (tcp's and
# shm's iov limit), 4 KiB each; one chunk as one write.
ops=$(grep '^{' <<<"$out" | jq -r 'select(.bench == "xfer" and .ceiling_gbps > 0 and .op_ceil_gbps > 0) |
	"\(.bytes)/\(.chunks):\(.op_bytes)x\(.op_pieces)"' | LC_ALL=C sort -u | tr '\n' ' ')
if [ "$ops" = "262144/16:65536x4 262144/1:262144x1 65536/16:16384x4 65536/1:65536x1 " ]; then
	echo "ok   xfer ceilings in the engine's writes: $ops"
else
	echo "FAIL xfer same-write ceilings: got '$ops'"
	bad=1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# A server on a port it picks (one chosen here may be taken on a shared
# machine), then one client.
if ! bench_serve "$log" "$bench" xfer --serve 127.0.0.1:0; then
	echo "FAIL the bench server did not listen"
	cat "$log"
	bad=1
else
	out=$("$bench" xfer --connect "$served" "${args[@]}" 2>&1)
	check "--serve/--connect" remote "$out" $?
	bench_serve_end "$log" || { echo "FAIL the bench server exited with $?"; bad=1; }
fi

# A hostile client: the server refuses what it must not do (register memory
# at an address the client chose; allocate 4 EiB) and a request with bytes
# left over (a client framing it differently), replies with the reason,
# and leaves with a clear error and exit 1 (no crash) at a frame whose length
# is garbage.
# le N BYTES: N little-endian, as printf %b escapes.
le() {
	local i s=""
	for ((i = 0; i < $2; i++)); do s+=$(printf '\\x%02x' $((($1 >> (8 * i)) & 255))); done
	printf '%s' "$s"
}
# make_request ADDR SIZE: an 'M' request (81 bytes, framed) for one target
# region: provider "tcp", node "", 1 rail, 1 thread, notify auto, imm 0,
# write_iov 0, max_write 0, post_more 0.
make_request() {
	printf '%s' "$(le 81 4)M$(le 3 8)tcp$(le 0 8)$(le 1 4)$(le 1 4)$(le 0 4)$(le 0 8)$(le 0 8)$(le 0 8)$(le 0 1)"
	printf '%s' "$(le 1 8)$(le $1 8)$(le $2 8)"
}
# This server listens on any host (IPv6's, which takes IPv4 too): the client
# comes over ::1 where loopback has it.
client=127.0.0.1
ip -6 addr show dev lo 2>/dev/null | grep -q 'inet6 ::1/' && client=::1
if ! bench_serve "$log" "$bench" xfer --serve 0; then
	echo "FAIL the bench server did not listen"
	cat "$log"
	bad=1
else
	reply=$(
		exec 3<>"/dev/tcp/$client/${served##*:}" || exit 1
		printf '%b' "$(make_request 4096 4096)$(make_request 0 $((1 << 62)))$(le 2 4)C$(le 0 1)GET " >&3
		timeout 30 cat <&3 | tr -d '\0'
	)
	bench_serve_end "$log" >/dev/null
	rc=$?
	if [ $rc != 1 ] || ! grep -q "a region at an address a remote writer chose" <<<"$reply" ||
		! grep -q "a target buffer of 4611686018427387904 bytes" <<<"$reply" ||
		! grep -q "1 bytes too many in a message" <<<"$reply" ||
		! grep -q "^xfer: a message of 542393671 bytes between bench processes (1 to 65536)$" "$log"; then
		echo "FAIL a hostile client (from $client): server exit $rc, replies:"
		echo "$reply"
		cat "$log"
		bad=1
	else
		echo "ok   xfer --serve: a hostile client is refused, the server exits 1"
	fi
fi

# Bad input: a clear message and a non-zero exit.
if "$bench" xfer --procs 2 --mem cuda 2>/dev/null; then
	echo "FAIL xfer --procs 2 --mem cuda was accepted"
	bad=1
fi
if ! "$bench" xfer --procs 3 2>&1 | grep -q -- "--procs: 3 not in {1,2}"; then
	echo "FAIL xfer --procs 3 did not name the flag and the value"
	bad=1
fi
if ! "$bench" xfer --connect 127.0.0.1:1 2>&1 | grep -q "cannot connect to 127.0.0.1:1"; then
	echo "FAIL xfer --connect to a closed port did not say so"
	bad=1
fi
exit $bad
