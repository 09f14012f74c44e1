// SPDX-License-Identifier: MIT
#include "hmem/cuda_copy.hpp"

#include <utility>

#include "hmem/cuda_driver.hpp"
#include "hmemreg/common.h"

namespace hmemreg::cuda {

namespace {

int failed(CUresult r, const char *what, std::string *why)
{
	if (why)
		*why = std::string(what) + ": " + error_text(r);
	return r == CUDA_ERROR_OUT_OF_MEMORY ? -HMEMREG_ENOMEM : -HMEMREG_EFABRIC;
}

// The driver, loaded, with a context of `device` current on this thread.
int enter(int device, std::string *why)
{
	int rc = use_device(device);
	if (rc < 0 && why)
		*why = Driver::get().loaded ? "no CUDA context for device " + std::to_string(device)
					    : Driver::get().why_not;
	return rc;
}

} // namespace

PinnedBuffer::~PinnedBuffer()
{
	if (p_)
		Driver::get().cuMemFreeHost(p_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer &&o) noexcept
	: p_(std::exchange(o.p_, nullptr)), len_(std::exchange(o.len_, 0))
{
}

PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&o) noexcept
{
	if (this != &o) {
		PinnedBuffer old(std::move(*this));
		p_ = std::exchange(o.p_, nullptr);
		len_ = std::exchange(o.len_, 0);
	}
	return *this;
}

int PinnedBuffer::alloc(int device, size_t len, PinnedBuffer &out, std::string *why)
{
	int rc = enter(device, why);
	if (rc < 0)
		return rc;
	void *p = nullptr;
	CUresult r = Driver::get().cuMemHostAlloc(&p, len, CU_MEMHOSTALLOC_PORTABLE);
	if (r != CUDA_SUCCESS)
		return failed(r, "cuMemHostAlloc", why);
	out = PinnedBuffer();
	out.p_ = static_cast<uint8_t *>(p);
	out.len_ = len;
	return 0;
}

Fence::~Fence()
{
	if (ev_)
		Driver::get().cuEventDestroy(static_cast<CUevent>(ev_));
}

Fence::Fence(Fence &&o) noexcept : ev_(std::exchange(o.ev_, nullptr)), ok_(o.ok_) {}

Fence &Fence::operator=(Fence &&o) noexcept
{
	if (this != &o) {
		Fence old(std::move(*this));
		ev_ = std::exchange(o.ev_, nullptr);
		ok_ = o.ok_;
	}
	return *this;
}

bool Fence::done()
{
	if (!ev_)
		return true;
	CUresult r = Driver::get().cuEventQuery(static_cast<CUevent>(ev_));
	if (r == CUDA_ERROR_NOT_READY)
		return false;
	ok_ = r == CUDA_SUCCESS;
	Driver::get().cuEventDestroy(static_cast<CUevent>(ev_));
	ev_ = nullptr;
	return true;
}

void Fence::wait()
{
	if (ev_)
		Driver::get().cuEventSynchronize(static_cast<CUevent>(ev_));
	done();
}

CopyStream::~CopyStream()
{
	if (stream_ && use_device(device_) == 0) {
		Driver::get().cuStreamSynchronize(static_cast<CUstream>(stream_));
		Driver::get().cuStreamDestroy(static_cast<CUstream>(stream_));
	}
}

int CopyStream::create(int device, std::unique_ptr<CopyStream> &out, std::string *why)
{
	int rc = enter(device, why);
	if (rc < 0)
		return rc;
	std::unique_ptr<CopyStream> s(new CopyStream(device));
	CUstream st = nullptr;
	CUresult r = Driver::get().cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
	if (r != CUDA_SUCCESS)
		return failed(r, "cuStreamCreate", why);
	s->stream_ = st;
	out = std::move(s);
	return 0;
}

int CopyStream::to_host(void *dst, const void *src, size_t len, std::string *why)
{
	int rc = enter(device_, why);
	if (rc < 0)
		return rc;
	CUresult r = Driver::get().cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), len,
						     static_cast<CUstream>(stream_));
	return r == CUDA_SUCCESS ? 0 : failed(r, "cuMemcpyDtoHAsync", why);
}

int CopyStream::to_device(void *dst, const void *src, size_t len, std::string *why)
{
	int rc = enter(device_, why);
	if (rc < 0)
		return rc;
	CUresult r = Driver::get().cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, len,
						     static_cast<CUstream>(stream_));
	return r == CUDA_SUCCESS ? 0 : failed(r, "cuMemcpyHtoDAsync", why);
}

int CopyStream::fence(Fence &out, std::string *why)
{
	int rc = enter(device_, why);
	if (rc < 0)
		return rc;
	const Driver &d = Driver::get();
	CUevent ev = nullptr;
	CUresult r = d.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS)
		return failed(r, "cuEventCreate", why);
	r = d.cuEventRecord(ev, static_cast<CUstream>(stream_));
	if (r != CUDA_SUCCESS) {
		d.cuEventDestroy(ev);
		return failed(r, "cuEventRecord", why);
	}
	out = Fence();
	out.ev_ = ev;
	return 0;
}

int finish_legacy_copies(int device, std::string *why)
{
	int rc = enter(device, why);
	if (rc < 0)
		return rc;
	CUresult r = Driver::get().cuStreamSynchronize(CU_STREAM_LEGACY);
	return r == CUDA_SUCCESS ? 0 : failed(r, "cuStreamSynchronize(CU_STREAM_LEGACY)", why);
}

} // namespace hmemreg::cuda
