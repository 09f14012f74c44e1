#!/bin/bash
# CUDA memory kinds, buffer IDs, DMA-BUF export: needs an NVIDIA GPU.
set -e
. "$(dirname "$0")/../lib.sh"
bad=0
for t in "$HMEMREG_BUILD"/tests/gpu/test_gpu_*; do
	echo "---- $(basename "$t")"
	"$t" || bad=$((bad + 1))
done
exit $bad
