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
asan="test_api test_cache_core test_cache_index test_cache_api test_cache_uffd test_cache_changes test_cache_concurrency test_cache_memo test_cache_fence"
# shellcheck disable=SC2086
configure "$HMEMREG_TOP/build-asan" address,undefined $asan
for s in $asan; do
	echo "---- $s (address,undefined)"
	ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		"$HMEMREG_TOP/build-asan/tests/unit/$s" --jobs 1 || bad=$((bad + 1))
done
# The engine's writer-index handshake and 4-byte key counting (tcp loopback;
# the library is built above already, so this costs one test file), and the
# C API (drain: a callback's argument freed right after it returns).
configure "$HMEMREG_TOP/build-asan" address,undefined test_fabric_notify test_fabric_capi
for s in test_fabric_notify test_fabric_capi; do
	echo "---- $s (address,undefined)"
	ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		"$HMEMREG_TOP/build-asan/tests/fabric/$s" --jobs 1 || bad=$((bad + 1))
done
configure "$HMEMREG_TOP/build-tsan" thread cache_stress
echo "---- cache_stress (thread)"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "$HMEMREG_TOP/build-tsan/tests/unit/cache_stress" 100 ||
	bad=$((bad + 1))
echo "---- cache_stress (thread, seq_cst counts: HMEMREG_MR_CACHE_MEMBARRIER=0)"
HMEMREG_MR_CACHE_MEMBARRIER=0 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	"$HMEMREG_TOP/build-tsan/tests/unit/cache_stress" 30 || bad=$((bad + 1))
exit $bad
