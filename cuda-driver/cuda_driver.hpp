// SPDX-License-Identifier: MIT
// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1), so that
// nothing of hmemreg has a link-time dependency on CUDA: libhmemreg reports
// CUDA memory as unsupported where no driver is installed, the NCCL plugin
// and the tools say so. One loader, built into each of them (a static
// library: libhmemreg keeps its copy hidden), from CUDA's own cuda.h.
#pragma once

#include <cuda.h>

#include <string>

namespace hmemreg::cuda {

// Function pointers resolved through cuGetProcAddress for the ABI of the
// cuda.h we compiled against (decltype keeps the exact signatures).
struct Driver {
#define HMEMREG_CUDA_FNS(X)                                                                        \
	X(cuInit)                                                                                      \
	X(cuGetErrorString)                                                                            \
	X(cuDriverGetVersion)                                                                          \
	X(cuDeviceGet)                                                                                 \
	X(cuDeviceGetCount)                                                                            \
	X(cuDeviceGetAttribute)                                                                        \
	X(cuDeviceGetName)                                                                             \
	X(cuDevicePrimaryCtxRetain)                                                                    \
	X(cuCtxGetCurrent)                                                                             \
	X(cuCtxSetCurrent)                                                                             \
	X(cuCtxGetDevice)                                                                              \
	X(cuCtxSynchronize)                                                                            \
	X(cuPointerGetAttribute)                                                                       \
	X(cuPointerGetAttributes)                                                                      \
	X(cuMemGetAddressRange)                                                                        \
	X(cuMemGetHandleForAddressRange)                                                               \
	X(cuMemAlloc)                                                                                  \
	X(cuMemFree)                                                                                   \
	X(cuMemAllocHost)                                                                              \
	X(cuMemHostAlloc)                                                                              \
	X(cuMemFreeHost)                                                                               \
	X(cuMemHostRegister)                                                                           \
	X(cuMemHostUnregister)                                                                         \
	X(cuMemAllocManaged)                                                                           \
	X(cuMemcpyHtoD)                                                                                \
	X(cuMemcpyDtoH)                                                                                \
	X(cuMemcpyDtoD)                                                                                \
	X(cuMemcpyPeer)                                                                                \
	X(cuMemcpyHtoDAsync)                                                                           \
	X(cuMemcpyDtoHAsync)                                                                           \
	X(cuMemcpyDtoDAsync)                                                                           \
	X(cuMemsetD8)                                                                                  \
	X(cuStreamCreate)                                                                              \
	X(cuStreamDestroy)                                                                             \
	X(cuStreamSynchronize)                                                                         \
	X(cuEventCreate)                                                                               \
	X(cuEventDestroy)                                                                              \
	X(cuEventRecord)                                                                               \
	X(cuEventQuery)                                                                                \
	X(cuEventSynchronize)                                                                          \
	X(cuEventElapsedTime)                                                                          \
	X(cuMemCreate)                                                                                 \
	X(cuMemRelease)                                                                                \
	X(cuMemAddressReserve)                                                                         \
	X(cuMemAddressFree)                                                                            \
	X(cuMemMap)                                                                                    \
	X(cuMemUnmap)                                                                                  \
	X(cuMemSetAccess)                                                                              \
	X(cuMemGetAllocationGranularity)                                                              \
	X(cuModuleGetLoadingMode)

#define HMEMREG_CUDA_DECLARE(fn) decltype(&::fn) fn = nullptr;
	HMEMREG_CUDA_FNS(HMEMREG_CUDA_DECLARE)
#undef HMEMREG_CUDA_DECLARE

	bool loaded = false;
	std::string why_not; // set when !loaded: what is missing, for the user
	int driver_version = 0;

	// The process-wide driver, loaded and initialised on first use.
	static const Driver &get();
};

// Text of a CUresult ("CUDA_ERROR_...: message").
std::string error_text(CUresult r);

// Make a context current on this thread for work on @device (its primary
// context, retained once for the life of the process). 0 or -HMEMREG_E*.
int use_device(int device);

} // namespace hmemreg::cuda
