#!/bin/bash
# hmemreg.ko's error paths under the kernel's own fault injection (debug kernel,
# make test-debug), on top of the module's own fail_every knob that the kmod
# suites use: (1) load once per allocation point of loading and init, with
# exactly that allocation failing (fail-nth), slab then page allocations;
# (2) the kmod suites with one allocation failing inside 1 in 3 of their
# ioctls to /dev/hmemreg* (fail-nth, through tests/debug/fail_nth_preload.c),
# then the ledger must be idle and a smoke set of the suites' tests (each
# object kind once, without faults) must pass on the module that went through
# it; (3) the task filter checked, then the module's life cycle in a loop with
# failslab and fail_page_alloc failing 1 in 20 of that one process's
# allocations (tests/debug/fault_task_loop.c), the ledger idle again, and both
# modules unload. KASAN, kmemleak and lockdep, judged by tests/vm/run, catch
# what the unwinding breaks.
#
# Bounded: the whole suites run twice here before (under faults and again
# without) took 37 min under TCG on a loaded 2-core host, past the lane's 30;
# nearly all of it outside the tests' own time (Criterion reports 0.1-2.5 s
# a test): a process per test, under emulation. The clean pass is now the smoke set (below):
# the full suites without faults are vm.d/10-kmod's, in the same lane.
# The task-filter loop runs last because failing DMA-API debugging's own
# allocation (its cacheline radix tree, GFP_ATOMIC) switches DMA-API debugging
# off for the rest of the boot; the suite says when that happened.
set -e
. "$(dirname "$0")/../lib.sh"
require_vm
D=/sys/kernel/debug
[ -d $D/failslab ] && [ -d $D/fail_page_alloc ] ||
	{ echo "SKIP: needs the debug kernel's fault injection (make test-debug)"; exit 77; }
ko=$HMEMREG_KMOD_DIR/hmemreg.ko
# Huge pages for test_kmod_segments, as 10-kmod.sh reserves them.
echo 8 > /proc/sys/vm/nr_hugepages
# The limits 10-kmod.sh loads with, so limit and overflow tests stay quick.
params=${HMEMREG_KMOD_PARAMS-max_watches=1024 ring_events=256 devmem_mb=32}
importer=${HMEMREG_IMPORTER_DIR:-$HMEMREG_TOP/tests/kmod/importer}/hmemreg_importer.ko
# suites [WRAPPER...]: every kmod suite, each started through WRAPPER.
suites() {
	local b bad=0 rc
	for b in "$HMEMREG_BUILD"/tests/kmod/${HMEMREG_KMOD_SUITES:-test_kmod_*}; do
		[ -x "$b" ] || continue
		echo "---- $(basename "$b")"
		rc=0
		"$@" "$b" --jobs 1 || rc=$?
		[ $rc != 124 ] || echo "---- $(basename "$b") still running after its bound, killed"
		[ $rc = 0 ] || bad=$((bad + 1))
	done
	return $bad
}
# After the faults: one test per object kind and per piece of module-wide state
# (export ids, the devmem pool, pins and maps, the ledger, watch slots and the
# event ring), so state the error paths left wrong shows, in minutes.
smoke=(
	"test_kmod_abi=version/library_handshake"
	"test_kmod_export=export/@(devmem_alloc_export_mmap_free|host_writable_mmap_roundtrip)"
	"test_kmod_importer=importer/@(dynamic_pin_map_unmap_unpin|static_attach_is_pinned_and_mapped)"
	"test_kmod_ledger=ledger/counts_follow_an_export_through_its_life"
	"test_kmod_segments=segments/scattered_pages_and_devmem"
	"test_kmod_watch=watch/@(munmap_fires_before_returning|per_fd_limit|overflow_is_sticky_until_ack)"
)
smoke_suites() {
	local e b bad=0
	for e in "${smoke[@]}"; do
		b=$HMEMREG_BUILD/tests/kmod/${e%%=*}
		echo "---- $(basename "$b") --filter '${e#*=}'"
		"$b" --jobs 1 --filter "${e#*=}" || bad=$((bad + 1))
	done
	return $bad
}
ledger_idle() { # WHEN
	"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle >/dev/null ||
		{ "$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump"; echo "$1 left something in the ledger"; exit 1; }
}
dma_debug_state() { # PHASE
	[ "$(cat $D/dma-api/disabled 2>/dev/null)" != Y ] ||
		echo "note: DMA-API debugging is off since $1 (an injected failure hit its own allocation)"
}
# Under injected faults a suite's own error handling may wait forever (a
# child that failed before answering); hung kernel tasks are the hung-task
# detector's. Each suite gets this bound there.
bounded=(timeout -k 5 "${HMEMREG_FAULT_SUITE_TIMEOUT:-300}")
# Injected failures are expected here: no stack dump per failure, and the page
# allocator's own "page allocation failure" / "vmalloc error" reports are not
# findings.
for a in failslab fail_page_alloc; do echo 0 > $D/$a/verbose; done
printf '%s\n' "page allocation failure" "vmalloc error" >> /run/job/expected-reports

echo "---- load/init with each slab allocation failing in turn"
echo N > $D/failslab/ignore-gfp-wait
echo 100 > $D/fail_page_alloc/min-order   # the page allocator is not asked
"$HMEMREG_BUILD/tests/debug/fail_nth_load" "$ko" hmemreg "${HMEMREG_FAIL_NTH_MAX:-300}" "$params"

echo "---- load/init with each page allocation failing in turn"
echo Y > $D/failslab/ignore-gfp-wait
echo 0 > $D/fail_page_alloc/min-order
echo N > $D/fail_page_alloc/ignore-gfp-wait
echo N > $D/fail_page_alloc/ignore-gfp-highmem
"$HMEMREG_BUILD/tests/debug/fail_nth_load" "$ko" hmemreg "${HMEMREG_FAIL_NTH_MAX:-300}" "$params"

# shellcheck disable=SC2086
kmod_load $params
[ ! -f "$importer" ] || importer_load
echo "---- kmod suites with an allocation failing inside 1 in 3 of their hmemreg ioctls"
# fail-nth counts every slab and page allocation that may sleep (the module's
# are GFP_KERNEL); user pages (highmem-capable) are left alone.
echo N > $D/failslab/ignore-gfp-wait
echo N > $D/fail_page_alloc/ignore-gfp-wait
echo Y > $D/fail_page_alloc/ignore-gfp-highmem
echo 0 > $D/fail_page_alloc/min-order
log=/tmp/failnth.log
: > $log
(export LD_PRELOAD=$HMEMREG_BUILD/tests/debug/libhmemreg_failnth.so HMEMREG_FAILNTH_LOG=$log
 suites "${bounded[@]}") ||
	echo "(suites failed under injected faults, as they may)"
awk '{ a += $2; i += $4 } END { printf "fail-nth: %d ioctls armed, %d failed inside\n", a, i; exit !(i > 0) }' $log ||
	{ echo "no failure was injected into an hmemreg ioctl: the injection setup is broken"; exit 1; }
dma_debug_state "the fail-nth suites"
echo "---- ledger after the fail-nth suites (must be idle)"
ledger_idle "the fail-nth suites"
echo "---- smoke set of the kmod suites, no faults"
smoke_suites || { echo "the module fails the smoke set after the fail-nth suites"; exit 1; }

# The task filter itself: with every allocation failing, an unflagged task
# gets none, a flagged one (make-it-fail) gets some.
echo "---- task filter"
for a in failslab fail_page_alloc; do
	echo 1 > $D/$a/task-filter
	echo 1 > $D/$a/interval
	echo N > $D/$a/ignore-gfp-wait
	echo 100 > $D/$a/times
	echo 100 > $D/$a/probability
	/bin/true && ls /sys/module >/dev/null
	n=$(cat $D/$a/times)
	(echo 1 > /proc/self/make-it-fail; /bin/true; ls /sys/module) >/dev/null 2>&1 || true
	m=$(cat $D/$a/times)
	echo 0 > $D/$a/probability
	echo "$a: unflagged task $((100 - n)) failure(s), flagged $((n - m))"
	[ "$n" = 100 ] && [ "$m" -lt 100 ] || { echo "$a: task filter does not hold"; exit 1; }
done

times=1000000
# x86_64 has no FAULT_INJECTION_STACKTRACE_FILTER, so failures cannot be kept
# to the module's own allocations; the task filter keeps them to one process
# that runs the module's whole life cycle in a loop (tests/debug/fault_task_loop.c):
# 1 in 20 of its slab and of its kernel page allocations fail (the module's,
# and the kernel's on its behalf). Whole suites under the filter do not work
# here: their processes' failures in exec, mmap and 9p reads break the VM's
# 9p root for everyone (exec then fails with EINVAL).
echo "---- module life cycle with 1 in 20 slab and page allocations failing (task filter)"
attrs="failslab fail_page_alloc"
for a in $attrs; do
	echo 1 > $D/$a/task-filter
	echo $times > $D/$a/times
	echo 1 > $D/$a/interval
	echo N > $D/$a/ignore-gfp-wait
	echo 5 > $D/$a/probability
done
rc=0
"$HMEMREG_BUILD/tests/debug/fault_task_loop" "${HMEMREG_FAULT_LOOPS:-300}" || rc=$?
for a in $attrs; do
	echo 0 > $D/$a/probability
	n=$((times - $(cat $D/$a/times)))
	echo "$a: $n failure(s) injected"
	[ $n -gt 0 ] || { echo "$a: no failure was injected: the injection setup is broken"; exit 1; }
done
[ $rc = 0 ] || { echo "fault_task_loop: an error allocation failure cannot explain (above)"; exit 1; }
dma_debug_state "the task-filter loop"
echo "---- ledger after the loop (must be idle)"
ledger_idle "the loop"
[ ! -f "$importer" ] || rmmod hmemreg_importer
kmod_unload
[ ! -e /dev/hmemreg ] || { echo "/dev/hmemreg still present after rmmod"; exit 1; }
