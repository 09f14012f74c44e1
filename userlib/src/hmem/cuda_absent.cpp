// SPDX-License-Identifier: MIT
// Built instead of cuda_driver.cpp, cuda_memory.cpp and cuda_copy.cpp when
// cuda.h was not found: every pointer is host memory and CUDA is reported as
// unsupported.
#include "hmem/cuda_copy.hpp"
#include "hmem/cuda_memory.hpp"

#include "hmemreg/common.h"

namespace hmemreg::cuda {

const char *kind_name(MemKind k)
{
	return k == MemKind::host ? "host" : "cuda";
}

bool available()
{
	return false;
}

const std::string &unavailable_reason()
{
	static const std::string why = "libhmemreg was built without CUDA headers";
	return why;
}

int classify(const void *addr, size_t len, PointerInfo &out, std::string *why)
{
	if (!addr || !len || reinterpret_cast<uintptr_t>(addr) + len < len)
		return -HMEMREG_EINVAL;
	out = PointerInfo{};
	if (why)
		*why = unavailable_reason();
	return -HMEMREG_ENOTSUP;
}

uint64_t buffer_id(const void *)
{
	return 0;
}

int export_dmabuf(const PointerInfo &, UniqueFd &, std::string *why)
{
	if (why)
		*why = unavailable_reason();
	return -HMEMREG_ENOTSUP;
}

PinnedBuffer::~PinnedBuffer() = default;
PinnedBuffer::PinnedBuffer(PinnedBuffer &&) noexcept {}
PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&) noexcept
{
	return *this;
}

int PinnedBuffer::alloc(int, size_t, PinnedBuffer &, std::string *why)
{
	if (why)
		*why = unavailable_reason();
	return -HMEMREG_ENOTSUP;
}

Fence::~Fence() = default;
Fence::Fence(Fence &&) noexcept {}
Fence &Fence::operator=(Fence &&) noexcept
{
	return *this;
}

bool Fence::done()
{
	return true;
}

void Fence::wait() {}

CopyStream::~CopyStream() = default;

int CopyStream::create(int, std::unique_ptr<CopyStream> &, std::string *why)
{
	if (why)
		*why = unavailable_reason();
	return -HMEMREG_ENOTSUP;
}

int CopyStream::to_host(void *, const void *, size_t, std::string *)
{
	return -HMEMREG_ENOTSUP;
}

int CopyStream::to_device(void *, const void *, size_t, std::string *)
{
	return -HMEMREG_ENOTSUP;
}

int CopyStream::fence(Fence &, std::string *)
{
	return -HMEMREG_ENOTSUP;
}

int finish_legacy_copies(int, std::string *why)
{
	if (why)
		*why = unavailable_reason();
	return -HMEMREG_ENOTSUP;
}

ProbeAllocation::~ProbeAllocation() = default;

int ProbeAllocation::alloc(int, size_t, std::string *why)
{
	if (why)
		*why = unavailable_reason();
	return -HMEMREG_ENOTSUP;
}

} // namespace hmemreg::cuda
