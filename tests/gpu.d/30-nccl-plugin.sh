#!/bin/bash
# NCCL loads libnccl-net-hmemreg.so (NCCL_NET_PLUGIN=hmemreg, its log says
# so) and the plugin's init/devices/getProperties/regMr behave on CUDA
# memory. Needs an NVIDIA GPU (libcuda.so.1) and NCCL (libnccl.so.2).
# Twice: on the system libfabric (tcp: ptrSupport HOST), then on libfabric
# 2.6.0 over shm with the staged device path asked for (ptrSupport
# HOST|CUDA|DMABUF, regMr of CUDA memory must work); see 10-cuda.sh for
# HMEMREG_LIBFABRIC2. 40-nccl-torch.sh runs NCCL itself.
set -e
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../libfabric2.sh"
bin="$HMEMREG_BUILD/tests/nccl/test_gpu_nccl_plugin"
plugin="$HMEMREG_BUILD/plugins/nccl/libnccl-net-hmemreg.so"
[ -x "$bin" ] && [ -f "$plugin" ] || { echo "missing $bin or $plugin (run make)"; exit 1; }
if ! ldconfig -p | grep -q 'libcuda\.so\.1' && ! [ -e /dev/nvidiactl ]; then
	echo "SKIP: needs an NVIDIA GPU (no libcuda.so.1)"; exit 77
fi
if ! ldconfig -p | grep -q 'libnccl\.so\.2'; then
	echo "SKIP: needs NCCL (no libnccl.so.2)"; exit 77
fi
missing=$(ldd "$plugin" | grep 'not found' || true)
[ -z "$missing" ] || { echo "the plugin's libraries are missing here:"; echo "$missing"; exit 1; }
# NCCL looks for libnccl-net-${NCCL_NET_PLUGIN}.so on the library path.
export LD_LIBRARY_PATH="$(dirname "$plugin")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NET_PLUGIN=hmemreg HMEMREG_NCCL_PLUGIN_PATH="$plugin"
# No network there: loopback tcp (override for a real NIC).
export HMEMREG_NCCL_PROVIDER="${HMEMREG_NCCL_PROVIDER:-tcp;ofi_rxm}" HMEMREG_NCCL_NODE="${HMEMREG_NCCL_NODE:-127.0.0.1}"
echo "---- $(basename "$bin") (system libfabric $(libfabric_version), $HMEMREG_NCCL_PROVIDER)"
"$bin"
if libfabric2_env; then
	echo "---- $(basename "$bin") (libfabric $(libfabric_version), shm)"
	# No NCCL kernels here: the opt-in staged device path is safe to drive
	# (the plugin takes it only where CUDA loads kernels eagerly).
	HMEMREG_NCCL_PROVIDER=shm HMEMREG_NCCL_DEVICE_MEMORY=staged CUDA_MODULE_LOADING=EAGER HMEMREG_GPU_DIRECT=shm "$bin"
elif [ "${HMEMREG_LIBFABRIC2:-}" != none ]; then
	echo "FAIL: no libfabric 2.6.0 for the second pass"; exit 1
fi
