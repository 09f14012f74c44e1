#!/bin/bash
# NCCL net plugin (plugins/nccl): its tables driven as NCCL drives them, two
# ranks as two processes over tcp;ofi_rxm on loopback. Run once with the
# defaults (rails and progress threads follow the CPUs: one rail and one
# thread on two), then the data-path tests on four rails (writes striped
# and spread over them, whatever the CPUs) with caller-driven progress,
# with Done-message notification (HMEMREG_NCCL_NOTIFY=message; the default
# is immediate data) and with every send a write.
set -e
. "$(dirname "$0")/../lib.sh"
bin="$HMEMREG_BUILD/tests/nccl/test_nccl_plugin"
[ -x "$bin" ] || { echo "missing $bin (run make)"; exit 1; }
export HMEMREG_NCCL_PROVIDER="tcp;ofi_rxm" HMEMREG_NCCL_NODE=127.0.0.1
echo "---- test_nccl_protocol (control messages)"
"$HMEMREG_BUILD/tests/nccl/test_nccl_protocol"
echo "---- test_nccl_pointer_policy (which buffers NCCL may hand over)"
"$HMEMREG_BUILD/tests/nccl/test_nccl_pointer_policy"
echo "---- test_nccl_port_speed (the speed NCCL is told)"
"$HMEMREG_BUILD/tests/nccl/test_nccl_port_speed"
echo "---- test_nccl_plugin (the defaults)"
"$bin" --jobs 2
# (eager_slots_come_back needs the receiver to make progress while it
# waits on the harness, which only a progress thread does.)
echo "---- test_nccl_plugin (four rails, progress driven by the calls)"
HMEMREG_NCCL_RAILS=4 HMEMREG_NCCL_PROGRESS_THREADS=0 "$bin" --jobs 2 --filter 'nccl_plugin/@(sizes*|many*|close*|sends_before*)'
echo "---- test_nccl_plugin (four rails, receives notified by Done messages instead of immediate data)"
HMEMREG_NCCL_RAILS=4 HMEMREG_NCCL_NOTIFY=message "$bin" --jobs 2 --filter 'nccl_plugin/@(sizes*|many*|close*|sends_before*|eager_slots*)'
echo "---- test_nccl_plugin (four rails, every send a write: HMEMREG_NCCL_INLINE_MAX=0)"
HMEMREG_NCCL_RAILS=4 HMEMREG_NCCL_INLINE_MAX=0 "$bin" --jobs 2 --filter 'nccl_plugin/@(sizes*|many*|close*)'
# Heap allocations per message (a count, not a time): hmemreg_bench nccl
# under tests/nccl/malloc_count.so, twice, with 10000 messages between the
# runs; both ranks together. The engine recycles its transfers and the
# plugin's sends need no std::function or handle: 5 at 4 KiB (Inline) and
# 8 at 256 KiB (write + Cts) here, where it was 18 and 48. The gate is what
# was measured (4k: 5-6, 256k: 8; 2026-12-01, two runs each) plus one or two
# for run-to-run noise (a rehash, a vector growing): a new allocation per
# message fails it, where the old bound of 12 let 4 KiB double unnoticed.
bench=$HMEMREG_BUILD/tools/hmemreg_bench
count=$HMEMREG_BUILD/tests/nccl/malloc_count.so
allocs() { # SIZE ITERS
	LD_PRELOAD=$count "$bench" nccl --no-ref --no-lat --sizes "$1" --iters "$2" --repeat 1 2>&1 |
		awk '/^malloc_count/ { n += $4; k++ } END { if (k == 3) print n; else print "none" }'
}
for gate in 4k:7 256k:10; do
	size=${gate%:*} max=${gate#*:}
	a=$(allocs $size 2000) b=$(allocs $size 12000)
	[ "$a" != none ] && [ "$b" != none ] || { echo "FAIL: no allocation counts at $size (bench failed?)"; exit 1; }
	per=$(( (b - a) / 10000 ))
	echo "$size: $per heap allocations per message (both ranks; at most $max)"
	[ "$per" -le "$max" ] || { echo "FAIL: $per allocations per $size message (at most $max)"; exit 1; }
done
# HMEMREG_NCCL_TIMELINE: each rank writes its requests' marks into the
# folder (made if missing), and hmemreg_bench timeline joins the two sides
# per message. Every 64 KiB message is a write with all its pieces seen,
# none negative (a missing mark, a wrong join or an unwritten file fails
# it); with one side's file gone, nothing joins and the tool says so.
echo "---- HMEMREG_NCCL_TIMELINE and hmemreg_bench timeline"
top_tl=$(mktemp -d)
trap 'rm -rf "$top_tl"' EXIT
tl=$top_tl/not-yet-made
HMEMREG_NCCL_TIMELINE=$tl "$bench" nccl --no-ref --no-lat --sizes 64k --iters 300 --repeat 1 >/dev/null
[ "$(find "$tl" -name 'timeline.*.txt' | wc -l)" = 2 ] || { echo "FAIL: expected two timeline files in $tl"; ls -l "$top_tl" "$tl"; exit 1; }
row=$("$bench" timeline "$tl" --json | jq -c 'select(.route == "write" and .bytes == 65536)')
echo "$row"
jq -e '.messages >= 300 and ([.cts_to_sender, .post_to_land, .land_to_test, .recv_to_done] |
	all(. != null and . >= 0))' <<<"$row" >/dev/null || { echo "FAIL: 64 KiB writes not all joined whole"; exit 1; }
rm "$(find "$tl" -name 'timeline.*.txt' | head -1)"
if "$bench" timeline "$tl" 2>"$top_tl/err"; then
	echo "FAIL: one side's file joined into rows"; exit 1
fi
grep -q 'no message .* has both sides' "$top_tl/err" || { echo "FAIL: no clear error:"; cat "$top_tl/err"; exit 1; }
# A folder that cannot be made is named at init; the run itself goes on.
HMEMREG_NCCL_TIMELINE=/dev/null/x "$bench" nccl --no-ref --no-lat --sizes 4k --iters 10 --repeat 1 >/dev/null 2>"$top_tl/err" ||
	{ echo "FAIL: a bad timeline folder failed the run"; cat "$top_tl/err"; exit 1; }
grep -q 'HMEMREG_NCCL_TIMELINE: cannot make folder /dev/null/x' "$top_tl/err" || { echo "FAIL: no clear warning:"; cat "$top_tl/err"; exit 1; }
