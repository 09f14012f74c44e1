#!/bin/bash
# A peer that dies or a network that splits, with hmemreg_bench xfer's server
# and client in two network namespaces over veth, built with ASan+UBSan
# (build-asan, as in 15-sanitize.sh): kill -9 of the client mid-transfer,
# kill -9 of the server mid-transfer, a partition (the link set down and
# left down), and netem loss/delay/reordering (where the kernel has netem).
# Each side must end within a bound with a clear error and exit 1 (a clean run
# 0 and 0), and is judged by what it printed as well as by its status: a
# sanitizer report, a segfault, or PSM's crash handler (which libfabric's
# libpsm2/libinfinipath install; it prints a backtrace and exits 1) fails it.
# Needs root and ip netns (skipped otherwise). HMEMREG_PEER_DEATH_CASES picks
# cases (default "clean kill-client kill-server partition netem");
# HMEMREG_PEER_DEATH_BENCH a bench binary instead of building the ASan one
# (tests/vm.d/40-netem.sh runs the netem case in the VM, whose kernel has it).
set -u
. "$(dirname "$0")/../lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
	echo "SKIP: needs root and iproute2 (ip netns)"
	exit 77
fi
jobs=${HMEMREG_JOBS:-2}
asan=$HMEMREG_TOP/build-asan
bench=${HMEMREG_PEER_DEATH_BENCH:-}
if [ -z "$bench" ]; then
	echo "---- building hmemreg_bench with address,undefined in build-asan"
	cmake -S "$HMEMREG_TOP" -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DHMEMREG_SANITIZE=address,undefined >/dev/null &&
		cmake --build "$asan" -j "$jobs" --target hmemreg_bench >/dev/null || { echo "FAIL: cannot build it"; exit 1; }
	bench=$asan/tools/hmemreg_bench
fi
# Leaks are not what this lane looks for (libfabric keeps some until exit).
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Short engine peer timeout: the partition's client notices the dead peer in
# 3 s (and says so: the environment setting is in force).
# HMEMREG_PEER_DEATH_TIMEOUT_MS overrides it for the netem case alone (the
# debug kernel's vm.d/40-netem: slower than 3 s per lost segment there).
export HMEMREG_PEER_TIMEOUT_MS=${HMEMREG_PEER_DEATH_TIMEOUT_MS:-3000}

tag=$$
nsa=hpd-a-$tag nsb=hpd-b-$tag va=hpda$tag vb=hpdb$tag
work=$(mktemp -d)
cleanup() {
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
netns_pair "$nsa" "$nsb" "$va" "$vb" 10.215.0 || {
	echo "FAIL: cannot set up network namespaces"
	exit 1
}
# PSM's handler also writes NAME-PID,HOST.btr into the working directory.
cd "$work" || exit 1
bad=0
cases=${HMEMREG_PEER_DEATH_CASES:-clean kill-client kill-server partition netem}
want() { [[ " $cases " == *" $1 "* ]]; }

# What no run may print: a crash, however it was reported.
crashed() {
	grep -E -m1 'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|LeakSanitizer|Segmentation|terminated with signal|Backtrace:|double free|corrupted|std::system_error|terminate called' "$1"
}

# check WHAT LOG RC WANT_RC SECONDS BOUND [TEXT]: the exit status, the time
# taken, the error text expected, and nothing crashed.
check() {
	local what=$1 log=$2 rc=$3 want=$4 took=$5 bound=$6 text=${7:-} c
	c=$(crashed "$log")
	if [ -n "$c" ]; then
		echo "FAIL $what: crashed ($c)"
		tail -30 "$log"
		bad=1
	elif [ "$rc" != "$want" ]; then
		echo "FAIL $what: exit $rc, want $want"
		tail -20 "$log"
		bad=1
	elif [ "$took" -gt "$bound" ]; then
		echo "FAIL $what: took ${took} s, bound ${bound} s"
		bad=1
	elif [ -n "$text" ] && ! grep -q -- "$text" "$log"; then
		echo "FAIL $what: no '$text' in its output"
		tail -20 "$log"
		bad=1
	else
		echo "ok   $what: exit $rc after ${took} s (bound ${bound} s)"
	fi
}

# start_pair SECONDS [CLIENT ARGS]: a server in nsb and a client in nsa
# running transfers for SECONDS; sets $server $client $slog $clog.
n=0
# The client's transfer sizes (a case may set its own before start_pair).
pair_shape=(--min 1m --max 1m --chunks 16)
start_pair() {
	local secs=$1
	shift
	n=$((n + 1))
	slog=$work/server$n.log clog=$work/client$n.log
	if ! bench_serve "$slog" ip netns exec "$nsb" "$bench" xfer --serve 10.215.0.2:0 --node 10.215.0.2; then
		echo "FAIL: the bench server did not listen"
		cat "$slog"
		bad=1
		return 1
	fi
	ip netns exec "$nsa" "$bench" xfer --connect "$served" --node 10.215.0.1 --provider 'tcp;ofi_rxm' \
		"${pair_shape[@]}" --repeat 1 --seconds "$secs" "$@" >"$clog" 2>&1 &
	client=$!
}

# until_transferring: until the client's engines are up and writing (the
# server has made its target engine and the client asked for notes).
until_transferring() {
	local i
	for i in $(seq 600); do
		# Both ends of the fabric connection exist once data flows.
		[ "$(ip netns exec "$nsb" ss -Htn state established 2>/dev/null | wc -l)" -ge 2 ] && { sleep 1; return 0; }
		kill -0 "$client" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# wait_bounded PID BOUND: waits, in this shell (a subshell cannot wait for
# it); sets wrc (124 when it was still running at BOUND and got killed) and
# wt (seconds).
wait_bounded() {
	local pid=$1 bound=$2 t0=$SECONDS
	while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$bound" ]; do sleep 0.2; done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		wrc=124
	else
		wait "$pid"
		wrc=$?
	fi
	wt=$((SECONDS - t0))
}

# wait_both BOUND: both at once; sets crc ct src st.
wait_both() {
	local bound=$1 t0=$SECONDS
	ct="" st=""
	while [ $((SECONDS - t0)) -lt "$bound" ]; do
		[ -z "$ct" ] && ! kill -0 "$client" 2>/dev/null && ct=$((SECONDS - t0))
		[ -z "$st" ] && ! kill -0 "$server" 2>/dev/null && st=$((SECONDS - t0))
		[ -n "$ct" ] && [ -n "$st" ] && break
		sleep 0.2
	done
	wait_bounded "$client" 0
	crc=$wrc ct=${ct:-$bound}
	wait_bounded "$server" 0
	src=$wrc st=${st:-$bound}
}

# ip netns exec puts the process in the namespace and execs it: the pid is
# the bench's own, so kill -9 hits it and no shell in between.
want clean && echo "---- a clean run (both exit 0)"
if want clean && start_pair 0.5 --verify; then
	wait_bounded "$client" 120
	check "client, clean run" "$clog" "$wrc" 0 "$wt" 120
	wait_bounded "$server" 30
	check "server, clean run" "$slog" "$wrc" 0 "$wt" 30
fi

# kill_case CASE VICTIM: kill -9 of one side mid-transfer, three times; the
# other side must fail its transfer within its bound and say why.
kill_case() {
	local case=$1 victim=$2 run pid other olog bound why
	want "$case" || return 0
	echo "---- kill -9 of the $victim mid-transfer"
	for run in 1 2 3; do
		start_pair 60 || continue
		if ! until_transferring; then
			echo "FAIL: no transfer started"; cat "$clog"; bad=1; kill -9 "$client" "$server" 2>/dev/null; continue
		fi
		if [ "$victim" = client ]; then
			pid=$client other=$server olog=$slog bound=20 why="without its goodbye"
		else
			pid=$server other=$client olog=$clog bound=30 why="transfer failed"
		fi
		kill -9 "$pid"
		wait "$pid" 2>/dev/null
		wait_bounded "$other" $bound
		check "$([ "$victim" = client ] && echo server || echo client) after its $victim's kill -9 ($run)" \
			"$olog" "$wrc" 1 "$wt" $bound "$why"
	done
}
kill_case kill-client client
kill_case kill-server server

# The link goes down and stays down: no FIN, no RST, nothing arrives. The
# client's engine declares the server dead after HMEMREG_PEER_TIMEOUT_MS,
# its control connection fails on TCP_USER_TIMEOUT (10 s); the server's
# control connection on keepalive (5 s idle + 5 probes) or TCP_USER_TIMEOUT.
want partition && echo "---- a partition (link down, left down), immediate and message notification"
for mode in auto message; do
	want partition || break
	start_pair 60 --notify "$mode" || continue
	if until_transferring; then
		ip -n "$nsa" link set "$va" down
		wait_both 45
		check "client cut off ($mode)" "$clog" "$crc" 1 "$ct" 45 "made no progress for 3000 ms"
		check "server cut off ($mode)" "$slog" "$src" 1 "$st" 45 "gone, or the network split"
		ip -n "$nsa" link set "$va" up
	else
		echo "FAIL: no transfer started"; cat "$clog"; bad=1; kill -9 "$client" "$server" 2>/dev/null
	fi
done

# Loss 2%, 5 ms delay, 25% reordering each way: slower, but every row
# completes and verifies, and both exit 0.
want netem && echo "---- netem: loss 2%, delay 5 ms, reordering 25%"
if ! want netem; then
	:
elif ! ip netns exec "$nsa" tc qdisc add dev "$va" root netem loss 2% delay 5ms reorder 25% 50% 2>"$work/tc.err"; then
	echo "SKIP netem: $(head -1 "$work/tc.err") (this kernel has no sch_netem)"
else
	ip netns exec "$nsb" tc qdisc add dev "$vb" root netem loss 2% delay 5ms reorder 25% 50%
	pair_shape=(--min 64k --max 256k --chunks 1,16)
	if start_pair 0.5 --verify --json; then
		wait_bounded "$client" 240
		check "client under netem" "$clog" "$wrc" 0 "$wt" 240
		wait_bounded "$server" 30
		check "server under netem" "$slog" "$wrc" 0 "$wt" 30
		rows=$(grep '^{' "$clog" | jq -c 'select(.bench == "xfer" and .verified == "yes")' | wc -l)
		[ "$rows" = 4 ] || { echo "FAIL netem: $rows of 4 rows verified"; bad=1; }
	fi
fi
exit $bad
