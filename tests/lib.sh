# Helpers shared by the lane scripts (sourced).
HMEMREG_TOP=${HMEMREG_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
HMEMREG_BUILD=${HMEMREG_BUILD:-$HMEMREG_TOP/build}
# Where hmemreg.ko is loaded from: kmod/ (stock kernel) or the debug lane's
# copy built against its kernel (tests/debug/run sets it).
HMEMREG_KMOD_DIR=${HMEMREG_KMOD_DIR:-$HMEMREG_TOP/kmod}
export HMEMREG_TOP HMEMREG_BUILD HMEMREG_KMOD_DIR

# run_suites BIN...: run each Criterion binary; fail at the end if any failed.
run_suites() {
	local bad=0 b
	for b in "$@"; do
		[ -x "$b" ] || { echo "missing test binary $b (run make)"; return 1; }
		echo "---- $(basename "$b")"
		"$b" --jobs 2 || bad=$((bad + 1))
	done
	return $bad
}

require_vm() {
	[ "${HMEMREG_IN_VM:-0}" = 1 ] || { echo "SKIP: needs the VM (tests/vm/run $0)"; exit 77; }
}

kmod_load() {
	insmod "$HMEMREG_KMOD_DIR/hmemreg.ko" "$@"
	# devtmpfs creates the node; the mode comes from the misc device (0660).
	for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e /dev/hmemreg ] && return 0; sleep 0.1; done
	echo "/dev/hmemreg did not appear"; return 1
}

kmod_unload() {
	rmmod hmemreg
}

# The in-kernel test importer (tests/kmod/importer), or the debug lane's build
# of it (HMEMREG_IMPORTER_DIR).
importer_load() {
	insmod "${HMEMREG_IMPORTER_DIR:-$HMEMREG_TOP/tests/kmod/importer}/hmemreg_importer.ko" "$@"
}

# rxe_dir: the folder of hmemreg's rdma_rxe.ko (softroce/build-rxe) for the
# running kernel: HMEMREG_RXE_DIR where the lane built it against a kernel
# tree (the debug lane), else the build for this kernel's headers; fails if none.
rxe_dir() {
	if [ -n "${HMEMREG_RXE_DIR:-}" ]; then
		[ -f "$HMEMREG_RXE_DIR/rdma_rxe.ko" ] && echo "$HMEMREG_RXE_DIR"
	else
		KVER=$(uname -r) "$HMEMREG_TOP/softroce/build-rxe" --built 2>/dev/null
	fi
}

# rxe_load: rdma_rxe with dma-buf MRs (rxe_dir) when it is built for the
# running kernel, else (or with HMEMREG_STOCK_RXE=1, or rxe already there)
# the kernel's own; says which.
rxe_load() {
	local dir
	if [ "${HMEMREG_STOCK_RXE:-0}" != 1 ] && [ ! -d /sys/module/rdma_rxe ] && dir=$(rxe_dir); then
		echo "rdma_rxe: hmemreg's, with dma-buf MRs ($dir)"
		modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel && insmod "$dir/rdma_rxe.ko"
	else
		echo "rdma_rxe: the kernel's own"
		modprobe rdma_rxe
	fi
}

# soft_roce RXE VETH NET: a veth pair ${VETH}0 (NET.1/24) <-> ${VETH}1
# (NET.2/24) and the Soft-RoCE device RXE on ${VETH}0, with the modules
# libfabric's verbs provider needs. Non-zero when rxe is unavailable here.
soft_roce() {
	local rxe=$1 veth=$2 net=$3
	# rxe computes its ICRC with the crypto API's crc32 (not autoloaded)
	# where the kernel has those modules; 6.18's rxe calls lib/crc32 (built
	# in) and there they are gone. ib_uverbs gives userspace
	# /dev/infiniband, rdma_ucm serves librdmacm.
	modprobe -q crc32_generic || modprobe -q crc32_pclmul ||
		echo "soft_roce: no crc32_generic or crc32_pclmul module (rxe uses lib/crc32 here)"
	modprobe ib_uverbs && modprobe rdma_ucm && rxe_load && modprobe veth || return 1
	ip link add "${veth}0" type veth peer name "${veth}1" &&
		ip addr add "$net.1/24" dev "${veth}0" && ip addr add "$net.2/24" dev "${veth}1" &&
		ip link set "${veth}0" up && ip link set "${veth}1" up &&
		rdma link add "$rxe" type rxe netdev "${veth}0"
}

# netns_pair NSA NSB DEVA DEVB NET: network namespaces NSA and NSB joined by
# a veth pair, DEVA (NET.1/24) in NSA and DEVB (NET.2/24) in NSB, both and
# loopback up. Non-zero when a step fails (the caller deletes NSA and NSB).
netns_pair() {
	local nsa=$1 nsb=$2 va=$3 vb=$4 net=$5
	ip netns add "$nsa" && ip netns add "$nsb" &&
		ip link add "$va" netns "$nsa" type veth peer name "$vb" netns "$nsb" &&
		ip -n "$nsa" addr add "$net.1/24" dev "$va" && ip -n "$nsb" addr add "$net.2/24" dev "$vb" &&
		ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
		ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up
}

# bench_serve LOG CMD...: starts CMD (an `hmemreg_bench xfer --serve`, maybe
# under ip netns exec) in the background, output to LOG, and waits until it
# listens: sets $server (its pid) and $served (the HOST:PORT it bound, port 0
# resolved); $served stays empty if it exited first or took over 30 s.
bench_serve() {
	local log=$1 i
	shift
	"$@" >"$log" 2>&1 &
	server=$! served=""
	for i in $(seq 300); do
		served=$(sed -n 's/^xfer: serving target engines on \([^ ,]*\).*/\1/p' "$log")
		[ -n "$served" ] && return 0
		kill -0 "$server" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# bench_serve_end LOG: the server's exit status, once it exited; a server
# still running 30 s on (no client reached it, or one hung) is killed and
# fails, rather than hang the lane. Prints LOG when not 0.
bench_serve_end() {
	local i rc
	for i in $(seq 300); do
		kill -0 "$server" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$server" 2>/dev/null; then
		kill "$server"
		wait "$server"
		echo "the bench server was still running 30 s after its client; killed"
		cat "$1"
		return 124
	fi
	wait "$server"
	rc=$?
	[ $rc = 0 ] || cat "$1"
	return $rc
}
