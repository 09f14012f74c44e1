#!/bin/bash
# CUDA memory kinds, buffer IDs, DMA-BUF export, the cache and the engine on
# CUDA memory: needs an NVIDIA GPU. Every suite runs twice: on the system
# libfabric (1.17: no CUDA HMEM, device memory is staged), then on libfabric
# 2.6.0 built with CUDA (HMEMREG_GPU_DIRECT=shm: the engine must register
# device memory directly over shm). The 2.6.0 build: HMEMREG_LIBFABRIC2=PREFIX
# (the GPU bundle carries one), else tools/vendor/build-libfabric (cached);
# HMEMREG_LIBFABRIC2=none runs the first pass only.
set -u
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../libfabric2.sh"
bad=0
suites() {
	for t in "$HMEMREG_BUILD"/tests/gpu/test_gpu_*; do
		echo "---- $(basename "$t") ($1)"
		timeout "${HMEMREG_GPU_SUITE_TIMEOUT:-240}" "$t" || { echo "FAIL: $(basename "$t") exit $?"; bad=$((bad + 1)); }
	done
}
suites "system libfabric $(libfabric_version), staged"
if libfabric2_env; then
	HMEMREG_GPU_DIRECT=shm suites "libfabric $(libfabric_version) from $HMEMREG_LIBFABRIC2, direct over shm"
	libfabric2_env_end
elif [ "${HMEMREG_LIBFABRIC2:-}" != none ]; then
	echo "FAIL: no libfabric 2.6.0 for the second pass"; bad=$((bad + 1))
fi
exit $bad
