// SPDX-License-Identifier: MIT
// Pointer classification and DMA-BUF export for CUDA memory.
#include "hmem/cuda_memory.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include "hmem/cuda_driver.hpp"
#include "hmemreg/common.h"

namespace hmemreg::cuda {

const char *kind_name(MemKind k)
{
	switch (k) {
	case MemKind::host: return "host";
	case MemKind::device: return "cuda";
	case MemKind::host_pinned: return "cuda-host";
	case MemKind::managed: return "cuda-managed";
	}
	return "?";
}

bool available()
{
	return Driver::get().loaded;
}

const std::string &unavailable_reason()
{
	return Driver::get().why_not;
}

static void set_why(std::string *why, std::string text)
{
	if (why)
		*why = std::move(text);
}

// True when the first and last byte of the range are readable host memory.
// CUDA reports a freed device pointer like host memory it never saw, but the
// address still lies in CUDA's PROT_NONE reservation: reading it faults.
static bool host_readable(uint64_t a, size_t len)
{
	for (uint64_t at : {a, a + len - 1}) {
		char byte;
		iovec local{&byte, 1}, remote{reinterpret_cast<void *>(at), 1};
		if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != 1)
			return false;
	}
	return true;
}

int classify(const void *addr, size_t len, PointerInfo &out, std::string *why)
{
	const Driver &d = Driver::get();
	const uint64_t a = reinterpret_cast<uintptr_t>(addr);
	if (!addr || !len || a + len < a) {
		set_why(why, "null pointer, zero length or overflowing range");
		return -HMEMREG_EINVAL;
	}
	out = PointerInfo{};
	if (!d.loaded) {
		set_why(why, d.why_not);
		return -HMEMREG_ENOTSUP;
	}

	unsigned int mem_type = 0, is_managed = 0, rdma = 0;
	int ordinal = -1;
	unsigned long long id = 0;
	CUdeviceptr base = 0;
	size_t size = 0;
	// The allocation's range from the pointer's own attributes: unlike
	// cuMemGetAddressRange, they do not need the owning device's context
	// current (memory of another GPU than the caller's).
	std::array<CUpointer_attribute, 7> attrs = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	};
	std::array<void *, 7> data = {&mem_type, &is_managed, &ordinal, &id, &rdma, &base, &size};
	CUresult r = d.cuPointerGetAttributes(attrs.size(), attrs.data(), data.data(),
					      static_cast<CUdeviceptr>(a));
	// Host memory CUDA never saw: success with memory type 0 on current drivers.
	if (r == CUDA_ERROR_INVALID_VALUE || (r == CUDA_SUCCESS && mem_type == 0)) {
		if (!host_readable(a, len)) {
			set_why(why, "address not mapped in this process (a freed CUDA allocation?)");
			return -HMEMREG_EINVAL;
		}
		out.kind = MemKind::host;
		return 0;
	}
	if (r != CUDA_SUCCESS) {
		set_why(why, "cuPointerGetAttributes: " + error_text(r));
		return -HMEMREG_EINVAL;
	}
	if (is_managed) {
		out.kind = MemKind::managed;
		set_why(why, "CUDA managed memory is not supported: its pages migrate between host and "
			     "device, so no NIC registration can stay valid; use cudaMalloc or cuMemCreate");
		return -HMEMREG_EINVAL;
	}
	if (mem_type == CU_MEMORYTYPE_HOST) {
		out.kind = MemKind::host_pinned;
		return 0;
	}
	if (mem_type != CU_MEMORYTYPE_DEVICE) {
		set_why(why, "unsupported CUDA memory type " + std::to_string(mem_type));
		return -HMEMREG_ENOTSUP;
	}

	if (!size || a < base) {
		set_why(why, "CUDA reports no allocation range for this device pointer (freed or unmapped?)");
		return -HMEMREG_EINVAL;
	}
	if (a + len > base + size) {
		char text[96];
		std::snprintf(text, sizeof(text), "range crosses the end of its CUDA allocation [%#llx, +%zu)",
			      static_cast<unsigned long long>(base), size);
		set_why(why, text);
		return -HMEMREG_EINVAL;
	}
	out.kind = MemKind::device;
	out.device = ordinal;
	out.base = base;
	out.size = size;
	out.buffer_id = id;
	out.rdma_capable = rdma != 0;
	return 0;
}

uint64_t buffer_id(const void *addr)
{
	const Driver &d = Driver::get();
	unsigned long long id = 0;
	if (!d.loaded ||
	    d.cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
				    static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(addr))) != CUDA_SUCCESS)
		return 0;
	return id;
}

int export_dmabuf(const PointerInfo &info, UniqueFd &fd, std::string *why)
{
	const Driver &d = Driver::get();
	if (!d.loaded) {
		set_why(why, d.why_not);
		return -HMEMREG_ENOTSUP;
	}
	const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
	if (info.kind != MemKind::device || info.base & (page - 1)) {
		set_why(why, "DMA-BUF export needs device memory that starts on a page");
		return -HMEMREG_EINVAL;
	}
	// The driver exports whole pages; an allocation's size need not be one
	// (NCCL rounds the same way). Registrations still cover the allocation only.
	const uint64_t len = (info.size + page - 1) & ~(page - 1);
	int rc = use_device(info.device);
	if (rc) {
		set_why(why, "cannot make a context current on CUDA device " + std::to_string(info.device));
		return rc;
	}
	int raw = -1;
	CUresult r = d.cuMemGetHandleForAddressRange(&raw, static_cast<CUdeviceptr>(info.base), len,
						     CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r != CUDA_SUCCESS) {
		set_why(why, "cuMemGetHandleForAddressRange(DMA_BUF_FD): " + error_text(r) +
				     (r == CUDA_ERROR_NOT_SUPPORTED
					      ? " (kernel or driver without DMA-BUF support; VMM memory needs "
						"CUmemAllocationProp.allocFlags.gpuDirectRDMACapable)"
					      : ""));
		return r == CUDA_ERROR_NOT_SUPPORTED ? -HMEMREG_ENOTSUP : -HMEMREG_EINVAL;
	}
	fd.reset(raw);
	return 0;
}

int ProbeAllocation::alloc(int device, size_t len, std::string *why)
{
	int rc = use_device(device);
	if (rc) {
		set_why(why, Driver::get().loaded ? "no CUDA context for device " + std::to_string(device) : Driver::get().why_not);
		return rc;
	}
	CUdeviceptr p = 0;
	CUresult r = Driver::get().cuMemAlloc(&p, len);
	if (r != CUDA_SUCCESS) {
		set_why(why, "cuMemAlloc: " + error_text(r));
		return -HMEMREG_ENOMEM;
	}
	p_ = p;
	len_ = len;
	device_ = device;
	return 0;
}

ProbeAllocation::~ProbeAllocation()
{
	if (p_ && use_device(device_) == 0)
		Driver::get().cuMemFree(static_cast<CUdeviceptr>(p_));
}

} // namespace hmemreg::cuda
