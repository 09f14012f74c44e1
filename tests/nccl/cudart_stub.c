// SPDX-License-Identifier: MIT
// A stand-in CUDA runtime for hosts without a GPU: aws-ofi-nccl (the peer
// plugin hmemreg_bench nccl --peer-plugin runs) dlopens libcudart.so in its
// init even for host memory, resolves its driver calls through the runtime's
// entry-point lookup and gives up if any is missing. This library has only
// what that needs: the runtime's version, the lookup (by version and the
// older one), and driver calls that report no device. Tests only.
#include <stddef.h>
#include <string.h>

enum { kSuccess = 0, kNotFound = 500, kNoDevice = 100, kVersion = 13000 };

static int driver_get_version(int *v)
{
	*v = kVersion;
	return kSuccess;
}

static int device_get_count(int *n)
{
	*n = 0;
	return kSuccess;
}

static int get_error_text(int err, const char **text)
{
	*text = err == kNoDevice ? "no CUDA device (stand-in runtime)" : "error (stand-in runtime)";
	return kSuccess;
}

static int ctx_get_current(void **ctx)
{
	*ctx = NULL; // no context: nothing is current
	return kSuccess;
}

// Every other driver call: no device. Called through the caller's own
// prototype; on x86-64 and aarch64 the extra arguments are simply ignored.
static int no_device(void)
{
	return kNoDevice;
}

static void *lookup(const char *symbol)
{
	if (!strcmp(symbol, "cuDriverGetVersion"))
		return (void *)driver_get_version;
	if (!strcmp(symbol, "cuDeviceGetCount"))
		return (void *)device_get_count;
	if (!strcmp(symbol, "cuGetErrorName") || !strcmp(symbol, "cuGetErrorString"))
		return (void *)get_error_text;
	if (!strcmp(symbol, "cuCtxGetCurrent"))
		return (void *)ctx_get_current;
	return (void *)no_device;
}

__attribute__((visibility("default"))) int cudaRuntimeGetVersion(int *v)
{
	*v = kVersion;
	return kSuccess;
}

__attribute__((visibility("default"))) int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
									     unsigned int version,
									     unsigned long long flags, int *status)
{
	(void)version;
	(void)flags;
	*fn = lookup(symbol);
	if (status)
		*status = 0; // cudaDriverEntryPointSuccess
	return kSuccess;
}

__attribute__((visibility("default"))) int cudaGetDriverEntryPoint(const char *symbol, void **fn,
								    unsigned long long flags, int *status)
{
	return cudaGetDriverEntryPointByVersion(symbol, fn, kVersion, flags, status);
}

__attribute__((visibility("default"))) int cudaGetDeviceCount(int *n)
{
	*n = 0;
	return kSuccess;
}

__attribute__((visibility("default"))) const char *cudaGetErrorString(int err)
{
	return err == kNoDevice ? "no CUDA device (stand-in runtime)" : "error (stand-in runtime)";
}
