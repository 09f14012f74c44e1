#!/bin/bash
# hmemreg_bench's one argument parser and JSON writer: a bad value names the
# flag and the value (exit 2), --help is stdout and exit 0, sizes take the
# same suffixes as the environment, zero and negative counts are refused, and
# every --json row is valid JSON (never inf or nan).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
bench=$HMEMREG_BUILD/tools/hmemreg_bench
bad=0
fail() { echo "FAIL: $*"; bad=1; }

# refused SUBCOMMAND-ARGS... -- PATTERN: exit 2, PATTERN on stderr, nothing on stdout.
refused() {
	local args=() pat out err rc
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	pat=$2
	out=$("$bench" "${args[@]}" 2>/tmp/bench-cli.$$)
	rc=$?
	err=$(cat /tmp/bench-cli.$$)
	if [ $rc = 2 ] && [ -z "$out" ] && grep -qF -- "$pat" <<<"$err"; then
		echo "ok   ${args[*]}: $pat"
	else
		fail "${args[*]}: exit $rc, stdout '${out:0:80}', stderr '$err' (wanted '$pat')"
	fi
}
refused xfer --min abc -- "--min: 'abc' is not a size"
refused xfer --rails 0 -- "--rails: '0' is not a count"
refused xfer --chunks -1 -- "--chunks: '-1' is not a count"
refused xfer --seconds abc -- "--seconds: 'abc' is not a number of seconds"
refused xfer --notify loud -- "--notify: loud not in"
refused nccl --sizes 64k,1q -- "--sizes: '1q' is not a size"
refused nccl --window 0 -- "--window: '0' is not a count"
refused reg --iters abc --json -- "--iters: 'abc' is not a count"
refused reg --prov tcp -- "--prov"
refused cache --threads 1,x -- "--threads: 'x' is not a count"
refused cache --bogus -- "--bogus"
refused cache --cpus x-1 -- "--cpus: 'x-1' is not a CPU list"
refused cache --cpus 0-1,8x -- "--cpus: '0-1,8x' is not a CPU list"
# A CPU this process may not use is named, with the ones it may.
err=$(taskset -c 0 "$bench" cache --cpus 1 --entries 16 2>&1 >/dev/null)
rc=$?
[ $rc = 2 ] && grep -qF -- "--cpus: CPU 1 is not one this process may run on (0)" <<<"$err" &&
	echo "ok   cache --cpus 1 under taskset -c 0: $err" || fail "cache --cpus outside the process's CPUs: exit $rc, '$err'"
# The runs' CPUs: auto is the process's own set, in the header.
head=$(taskset -c 0 "$bench" cache --entries 16 --threads 1 --iters 1000 --miss-iters 100 --reps 1 --no-ucx | grep -m1 '^# cache')
grep -qE "threads on CPUs 0$" <<<"$head" && echo "ok   cache --cpus auto under taskset -c 0: ${head##*; }" ||
	fail "cache --cpus auto header: '$head'"
# UCX's child runs on the same list (it is spawned before the main thread
# binds, and binds its own): every case has its UCX row.
ucx=$("$bench" cache --entries 16 --threads 1,2 --iters 1000 --miss-iters 100 --reps 1 --no-ceiling --json |
	jq -r 'select(.impl == "ucx") | "\(.case)/\(.threads)"' | tr '\n' ' ')
[ "$ucx" = "hit/1 hit/2 miss/1 " ] && echo "ok   cache --cpus auto: UCX rows $ucx" || fail "cache UCX rows under --cpus auto: '$ucx'"
rm -f /tmp/bench-cli.$$

for sub in xfer nccl reg cache; do
	out=$("$bench" $sub --help 2>/dev/null) && grep -q -- "--json" <<<"$out" &&
		echo "ok   $sub --help: stdout, exit 0" || fail "$sub --help"
done

# Sizes as the environment writes them, counts as lists, valid JSON rows.
rows=$("$bench" reg --provider tcp --sizes 64KiB,1m --iters 3 --json) || fail "reg run: exit $?"
sizes=$(jq -r 'select(.case == "hit") | .bytes' <<<"$rows" | tr '\n' ' ')
[ "$sizes" = "65536 1048576 " ] && echo "ok   reg --sizes 64KiB,1m: $sizes" || fail "reg sizes: '$sizes'"
jq -e 'select(.provider != "tcp")' <<<"$rows" >/dev/null && fail "reg rows name another provider"
# A provider that cannot be opened: the call that failed, with its code; the
# other providers are still measured, and the exit says it failed.
rows=$("$bench" reg --provider nosuch,tcp --sizes 64k --iters 3 --json 2>/tmp/bench-cli.$$)
rc=$?
err=$(cat /tmp/bench-cli.$$)
rm -f /tmp/bench-cli.$$
if [ $rc = 1 ] && grep -qF "provider nosuch: fi_getinfo: " <<<"$err" && grep -qE '\(-[0-9]+\)$' <<<"$err" &&
	[ "$(jq -r 'select(.case == "hit") | .provider' <<<"$rows")" = tcp ]; then
	echo "ok   reg --provider nosuch,tcp: $err; tcp measured, exit 1"
else
	fail "reg --provider nosuch,tcp: exit $rc, stderr '$err', rows '${rows:0:200}'"
fi
rows=$("$bench" cache --entries 16,64 --threads 1,2 --iters 1000 --miss-iters 100 --reps 2 --no-ucx --json) ||
	fail "cache run: exit $?"
threads=$(jq -r 'select(.case == "hit" and .impl == "hmemreg") | .threads' <<<"$rows" | tr '\n' ' ')
[ "$threads" = "1 2 1 2 " ] && echo "ok   cache --threads 1,2: $threads" || fail "cache threads: '$threads'"
# The ratios come from the run's own rows: scaling is threads x ns(1 thread) /
# ns, vs_smallest ns / ns(first --entries, same threads); misses have neither.
bad_ratio=$(jq -s -r '[.[] | select(.impl == "hmemreg")] as $r | $r[] | select(.case == "hit") |
	. as $x | ($r[] | select(.case == "hit" and .entries == $x.entries and .threads == 1) | .ns_per_op) as $one |
	($r[] | select(.case == "hit" and .entries == 16 and .threads == $x.threads) | .ns_per_op) as $small |
	select(((.scaling - .threads * $one / .ns_per_op) | fabs) > 0.02 or ((.vs_smallest - .ns_per_op / $small) | fabs) > 0.02) |
	"\(.entries)/\(.threads)"' <<<"$rows")
misses=$(jq -r 'select(.case == "miss") | "\(.scaling) \(.vs_smallest)"' <<<"$rows" | sort -u)
if [ -z "$bad_ratio" ] && [ "$misses" = "-1 -1" ] &&
	[ "$(jq -r 'select(.case == "hit" and .impl == "hmemreg" and .entries == 16 and .threads == 1) | "\(.scaling) \(.vs_smallest)"' <<<"$rows")" = "1 1" ]; then
	echo "ok   cache scaling and vs_smallest follow the rows' ns_per_op"
else
	fail "cache ratios: off at '$bad_ratio', misses '$misses'"
fi
# No reference (--no-ucx): the ratio is a JSON number or null, never inf/nan text.
jq -e . <<<"$rows" >/dev/null && ! grep -qiE 'inf|nan' <<<"$rows" && echo "ok   cache rows are JSON" ||
	fail "cache rows are not JSON: $rows"
# UCX's child cannot load libucs (an empty stand-in first on the path): the
# run says so and measures hmemreg alone; our next request to the ended
# child must not kill us (SIGPIPE).
fake=$(mktemp -d)
: >"$fake/libucs.so.0"
rows=$(LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$bench" cache --entries 16 --threads 1 --iters 1000 \
	--miss-iters 100 --reps 2 --json 2>"$fake/err")
rc=$?
cases=$(jq -r 'select(.impl == "hmemreg") | .case' <<<"$rows" | tr '\n' ' ')
if [ $rc = 0 ] && grep -qF "no UCX reference: cannot load libucs.so.0" "$fake/err" &&
	! jq -e 'select(.impl == "ucx")' <<<"$rows" >/dev/null && [ "$cases" = "hit miss " ]; then
	echo "ok   cache without libucs: $(cat "$fake/err"); hmemreg rows: $cases"
else
	fail "cache without libucs: exit $rc, stderr '$(cat "$fake/err")', rows '${rows:0:300}'"
fi
rm -rf "$fake"
exit $bad
