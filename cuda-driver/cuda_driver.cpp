// SPDX-License-Identifier: MIT
// Run-time loading of libcuda.so.1.
#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <array>
#include <mutex>

#include "hmemreg/common.h"

namespace hmemreg::cuda {

namespace {

// Stringify after macro expansion: cuda.h maps e.g. cuMemAlloc to
// cuMemAlloc_v2, and that exact symbol is the ABI decltype() gave us.
// (cuGetProcAddress with CUDA_VERSION is not used: it returns the newest
// variant, whose signature can differ from the header's unversioned one,
// e.g. cuCtxGetDevice vs cuCtxGetDevice_v2.)
#define HMEMREG_STR(x) #x
#define HMEMREG_XSTR(x) HMEMREG_STR(x)

Driver load()
{
	Driver d;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		d.why_not = std::string("no CUDA driver (dlopen libcuda.so.1: ") + dlerror() + ")";
		return d;
	}
	// The library stays loaded for the life of the process, like the driver's own state.
	bool all = true;
#define HMEMREG_CUDA_RESOLVE(fn)                                                                   \
	{                                                                                          \
		void *p = dlsym(lib, HMEMREG_XSTR(fn));                                            \
		if (!p) {                                                                          \
			all = false;                                                               \
			d.why_not += d.why_not.empty() ? "CUDA driver lacks " : ", ";              \
			d.why_not += HMEMREG_XSTR(fn);                                             \
		}                                                                                  \
		d.fn = reinterpret_cast<decltype(d.fn)>(p);                                        \
	}
	HMEMREG_CUDA_FNS(HMEMREG_CUDA_RESOLVE)
#undef HMEMREG_CUDA_RESOLVE
	if (!all)
		return d;
	CUresult r = d.cuInit(0);
	if (r != CUDA_SUCCESS) {
		d.why_not = "cuInit failed: " + error_text(r);
		return d;
	}
	d.cuDriverGetVersion(&d.driver_version);
	d.loaded = true;
	return d;
}

} // namespace

const Driver &Driver::get()
{
	static const Driver driver = load();
	return driver;
}

std::string error_text(CUresult r)
{
	const Driver &d = Driver::get();
	const char *s = nullptr;
	if (d.cuGetErrorString)
		d.cuGetErrorString(r, &s);
	return "CUresult " + std::to_string(static_cast<int>(r)) + (s ? std::string(" (") + s + ")" : "");
}

int use_device(int device)
{
	const Driver &d = Driver::get();
	if (!d.loaded)
		return -HMEMREG_ENOTSUP;
	constexpr int kMaxDevices = 64;
	static std::array<CUcontext, kMaxDevices> primary{};
	static std::mutex lock;
	if (device < 0 || device >= kMaxDevices)
		return -HMEMREG_EINVAL;
	// A context the caller made current for this device is kept as it is.
	CUcontext cur = nullptr;
	CUdevice cur_dev = -1;
	if (d.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur && d.cuCtxGetDevice(&cur_dev) == CUDA_SUCCESS &&
	    cur_dev == device)
		return 0;
	CUcontext ctx;
	{
		std::lock_guard g(lock);
		if (!primary[device]) {
			CUdevice dev;
			if (d.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
			    d.cuDevicePrimaryCtxRetain(&primary[device], dev) != CUDA_SUCCESS)
				return -HMEMREG_ENODEV;
		}
		ctx = primary[device];
	}
	return d.cuCtxSetCurrent(ctx) == CUDA_SUCCESS ? 0 : -HMEMREG_ENODEV;
}

} // namespace hmemreg::cuda
