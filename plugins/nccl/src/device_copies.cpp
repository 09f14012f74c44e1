// SPDX-License-Identifier: MIT
#include "device_copies.hpp"

#include "cuda_driver.hpp"

namespace hmemreg::nccl {

void DeviceCopies::EventFree::operator()(void *ev) const
{
	if (ev)
		cuda::Driver::get().cuEventDestroy(static_cast<CUevent>(ev));
}

DeviceCopies::~DeviceCopies()
{
	const cuda::Driver &d = cuda::Driver::get();
	for (size_t dev = 0; dev < streams_.size(); dev++) {
		if (!streams_[dev] || cuda::use_device(static_cast<int>(dev)) < 0)
			continue;
		// Our own stream only: the copies NCCL never waited for.
		d.cuStreamSynchronize(static_cast<CUstream>(streams_[dev]));
		d.cuStreamDestroy(static_cast<CUstream>(streams_[dev]));
	}
}

void *DeviceCopies::stream_of(int device, std::string &why)
{
	const cuda::Driver &d = cuda::Driver::get();
	if (!d.loaded) {
		why = d.why_not;
		return nullptr;
	}
	if (device < 0 || cuda::use_device(device) < 0) {
		why = "no CUDA context for device " + std::to_string(device);
		return nullptr;
	}
	std::lock_guard l(mu_);
	if (static_cast<size_t>(device) >= streams_.size())
		streams_.resize(device + 1, nullptr);
	if (!streams_[device]) {
		CUstream s = nullptr;
		const CUresult r = d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
		if (r != CUDA_SUCCESS) {
			why = "cuStreamCreate on device " + std::to_string(device) + ": " + cuda::error_text(r);
			return nullptr;
		}
		streams_[device] = s;
	}
	return streams_[device];
}

DeviceCopies::Event DeviceCopies::start(uint8_t *dst, int device, const uint8_t *src, size_t n, std::string &why)
{
	void *s = stream_of(device, why);
	if (!s)
		return nullptr;
	const cuda::Driver &d = cuda::Driver::get();
	auto st = static_cast<CUstream>(s);
	CUresult r = d.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst)), src, n, st);
	if (r != CUDA_SUCCESS) {
		why = "cuMemcpyHtoDAsync of " + std::to_string(n) + " bytes: " + cuda::error_text(r);
		return nullptr;
	}
	CUevent ev = nullptr;
	r = d.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS) {
		why = "cuEventCreate: " + cuda::error_text(r);
		return nullptr;
	}
	Event out(ev);
	r = d.cuEventRecord(ev, st);
	if (r != CUDA_SUCCESS) {
		why = "cuEventRecord: " + cuda::error_text(r);
		return nullptr;
	}
	return out;
}

int DeviceCopies::poll(const Event &ev, std::string &why)
{
	const CUresult r = cuda::Driver::get().cuEventQuery(static_cast<CUevent>(ev.get()));
	if (r == CUDA_SUCCESS)
		return 1;
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	why = "copy into device memory: " + cuda::error_text(r);
	return -1;
}

} // namespace hmemreg::nccl
