/* SPDX-License-Identifier: MIT */
/*
 * The few NVML declarations libfabric's CUDA code (src/hmem_cuda.c) names,
 * for CUDA toolkits that ship no nvml.h (CUDA 13 here). libfabric is built
 * with --enable-cuda-dlopen, so nothing links against libnvidia-ml: these
 * only give the function-pointer types their return type. Written from the
 * NVML API reference (nvmlReturn_t, nvmlInit_v2, nvmlDeviceGetCount_v2,
 * nvmlShutdown); not a copy of NVIDIA's header.
 */
#ifndef HMEMREG_VENDOR_NVML_H
#define HMEMREG_VENDOR_NVML_H

#ifdef __cplusplus
extern "C" {
#endif

/* Only success is compared against; 0 is NVML_SUCCESS in the reference. */
typedef enum hmemreg_nvml_return {
	NVML_SUCCESS = 0,
} nvmlReturn_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlShutdown(void);

#ifdef __cplusplus
}
#endif

#endif
