#!/bin/bash
# The cache's unit suites and the engine's 4-byte immediate key suite under
# ASan+UBSan (build-asan), and the cache's concurrency
# scenario under TSan (build-tsan; as the plain program cache_stress, since
# Criterion's runner does not start under TSan). Builds only those targets,
# unoptimised (-O0 -g) to keep the build short on 2 cores.
set -e
. "$(dirname "$0")/../lib.sh"
jobs=${HMEMREG_JOBS:-2}
bad=0
configure() { # DIR SANITIZERS TARGETS...
	local dir=$1 san=$2; shift 2
	cmake -S "$HMEMREG_TOP" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DHMEMREG_SANITIZE="$san" >/dev/null
	cmake --build "$dir" -j "$jobs" --target "$@" >/dev/null
}
# run_checked NAME CMD...: runs CMD, and fails it on its status or on any
# sanitizer report in its output. Criterion counts a test passed once the
# test body returned: a report printed when its worker exits (LeakSanitizer
# runs at exit; abort_on_error then kills the worker) leaves the verdict
# "Passing", so the output is what tells.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run_checked() {
	local name=$1 rc=0 found
	shift
	echo "---- $name"
	# Shown as it runs (a hung suite shows how far it got), kept for the check.
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	found=$(grep -E -m1 'ERROR: (Address|Leak|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error:|terminated with signal' "$log") || true
	if [ -n "$found" ]; then
		echo "FAIL $name: sanitizer report ($found)"
		bad=$((bad + 1))
	elif [ "$rc" != 0 ]; then
		echo "FAIL $name: exit $rc"
		bad=$((bad + 1))
	fi
}
asan="test_api test_transfer_pool test_write_plan test_cache_core test_cache_index test_cache_api test_cache_uffd test_cache_uffd_wide test_cache_uffd_faults test_cache_changes test_cache_concurrency test_cache_memo test_cache_fence"
# shellcheck disable=SC2086
configure "$HMEMREG_TOP/build-asan" address,undefined $asan
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for s in $asan; do
	run_checked "$s (address,undefined)" "$HMEMREG_TOP/build-asan/tests/unit/$s" --jobs 1
done
# The engine's writer-index handshake and 4-byte key counting (tcp loopback;
# the library is built above already, so this costs one test file), and the
# C API (drain: a callback's argument freed right after it returns).
configure "$HMEMREG_TOP/build-asan" address,undefined test_fabric_notify test_fabric_capi
for s in test_fabric_notify test_fabric_capi; do
	run_checked "$s (address,undefined)" "$HMEMREG_TOP/build-asan/tests/fabric/$s" --jobs 1
done
configure "$HMEMREG_TOP/build-tsan" thread cache_stress
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
run_checked "cache_stress (thread)" "$HMEMREG_TOP/build-tsan/tests/unit/cache_stress" 100
run_checked "cache_stress (thread, seq_cst counts: HMEMREG_MR_CACHE_MEMBARRIER=0)" \
	env HMEMREG_MR_CACHE_MEMBARRIER=0 "$HMEMREG_TOP/build-tsan/tests/unit/cache_stress" 30
exit $bad
