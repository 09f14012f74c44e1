#!/bin/bash
# The same binaries on libfabric 2.6.0 (tools/vendor/build-libfabric: built
# once from ../shared/vendor into /var/cache/hmemreg, a few minutes the first
# time), loaded with LD_LIBRARY_PATH: libhmemreg negotiates API 2.0 with it
# (1.17 with Debian's) and must pass the fabric suites on tcp;ofi_rxm and
# shm, the cache's fabric suite, the engine's C API and the NCCL plugin.
# HMEMREG_LIBFABRIC2=PREFIX uses an existing build; no vendored tarball and
# no build: skipped with the reason. HMEMREG_LIBFABRIC2_HEADERS=1 also
# compiles libhmemreg against 2.6.0's headers (-Werror: 2.x marks FI_MR_BASIC
# and others deprecated with GCC warning pragmas) in build-lf2 (a few minutes). The netns half of 40-fabric (root,
# veths) and the fork-heavy process suite stay on the system libfabric
# (CI time); every other fabric suite runs here.
set -u
. "$(dirname "$0")/../lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
prefix=${HMEMREG_LIBFABRIC2:-}
if [ -z "$prefix" ]; then
	if ! prefix=$("$top/tools/vendor/build-libfabric"); then
		echo "SKIP: libfabric 2.6.0 could not be built here (tools/vendor/build-libfabric said why above)"
		exit 77
	fi
fi
lib=$prefix/lib
[ -e "$lib/libfabric.so.1" ] || { echo "FAIL: no $lib/libfabric.so.1"; exit 1; }
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FI_PROVIDER_PATH=$lib/libfabric
bad=0

# The binaries really load 2.6.0 and negotiate its API.
ver=$("$prefix/bin/fi_info" --version 2>/dev/null | sed -n 's/^libfabric: *//p')
echo "---- libfabric $ver from $prefix"
case "$ver" in 2.*) ;; *) echo "FAIL: fi_info reports libfabric '$ver', not 2.x"; exit 1 ;; esac
b="$HMEMREG_BUILD/tests/fabric"
run_suites "$b/test_fabric_write" "$b/test_fabric_notify" "$b/test_fabric_control" "$b/test_fabric_badinput" \
	"$b/test_fabric_capi" || bad=1
run_suites "$HMEMREG_BUILD/tests/unit/test_cache_fabric" "$HMEMREG_BUILD/tests/unit/test_cache_api" || bad=1

# describe() names the API version asked for: 2.0 here, 1.17 when capped.
desc=$("$HMEMREG_BUILD/tools/hmemreg_bench" xfer --provider 'tcp;ofi_rxm' --node 127.0.0.1 --min 64k --max 64k \
	--chunks 1 --repeat 1 --seconds 0.05 --verify 2>&1)
if grep -q "libfabric API 2.0 (runtime 2.6)" <<<"$desc"; then
	echo "ok   engine on libfabric API 2.0 (runtime 2.6)"
else
	echo "FAIL: the engine did not negotiate API 2.0 with libfabric $ver:"; echo "$desc" | head -20; bad=1
fi
desc=$(HMEMREG_FABRIC_API=1.17 "$HMEMREG_BUILD/tools/hmemreg_bench" xfer --provider 'tcp;ofi_rxm' --node 127.0.0.1 \
	--min 64k --max 64k --chunks 1 --repeat 1 --seconds 0.05 --verify 2>&1)
if grep -q "libfabric API 1.17 (runtime 2.6)" <<<"$desc"; then
	echo "ok   HMEMREG_FABRIC_API=1.17 caps it"
else
	echo "FAIL: HMEMREG_FABRIC_API=1.17 was not honoured:"; echo "$desc" | head -20; bad=1
fi

if [ "${HMEMREG_LIBFABRIC2_HEADERS:-0}" = 1 ]; then
	echo "---- libhmemreg against libfabric $ver's headers (-Werror)"
	if PKG_CONFIG_PATH=$lib/pkgconfig cmake -S "$top" -B "$top/build-lf2" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
		PKG_CONFIG_PATH=$lib/pkgconfig cmake --build "$top/build-lf2" -j "${HMEMREG_JOBS:-2}" --target hmemreg >/dev/null; then
		echo "ok   built against $(sed -n 's/^LIBFABRIC_VERSION:INTERNAL=//p' "$top/build-lf2/CMakeCache.txt") headers"
	else
		echo "FAIL: libhmemreg does not build against libfabric $ver's headers"; bad=1
	fi
fi

export HMEMREG_NCCL_PROVIDER="tcp;ofi_rxm" HMEMREG_NCCL_NODE=127.0.0.1
echo "---- test_nccl_plugin (libfabric $ver)"
"$HMEMREG_BUILD/tests/nccl/test_nccl_plugin" --jobs 2 || bad=1
exit $bad
