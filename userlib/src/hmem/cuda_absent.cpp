// SPDX-License-Identifier: MIT
// Built instead of cuda_driver.cpp/cuda_memory.cpp when cuda.h was not found:
// every pointer is host memory and CUDA is reported as unsupported.
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

} // namespace hmemreg::cuda
