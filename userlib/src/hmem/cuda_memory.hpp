// SPDX-License-Identifier: MIT
// What a pointer is, for CUDA: kind, device, allocation, buffer ID; and the
// DMA-BUF export of device memory. All calls return 0 or -HMEMREG_E*.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "unique_fd.hpp"

namespace hmemreg::cuda {

enum class MemKind {
	host,             // not known to CUDA: ordinary host memory
	device,           // cuMemAlloc/cudaMalloc or VMM (cuMemCreate + cuMemMap)
	host_pinned,      // cuMemAllocHost / cuMemHostRegister: host memory, registered as host
	managed,          // cuMemAllocManaged: refused (pages migrate; no stable DMA target)
};

const char *kind_name(MemKind k);

struct PointerInfo {
	MemKind kind = MemKind::host;
	int device = -1;        // ordinal for device memory
	uint64_t base = 0;      // allocation (or VMM mapping) start
	uint64_t size = 0;      // allocation (or VMM mapping) length
	uint64_t buffer_id = 0; // process-unique ID of the allocation; changes on free + alloc
	bool rdma_capable = false;
};

// True when a CUDA driver is loaded and initialised here.
bool available();
// Why not (empty when available).
const std::string &unavailable_reason();

// Classify [addr, addr+len). Errors: -HMEMREG_EINVAL (null/zero/overflow, a
// range crossing the end of its allocation, managed memory, freed device
// memory that CUDA reports as unmapped), -HMEMREG_ENOTSUP (no driver: then
// every pointer is reported as host memory by classify_or_host()).
int classify(const void *addr, size_t len, PointerInfo &out, std::string *why = nullptr);

// Current buffer ID of addr (one driver call): the cache's validity check on
// every hit for CUDA memory. 0 means "not a live CUDA allocation".
uint64_t buffer_id(const void *addr);

// Export [base, base+size rounded up to a page) of device memory as a DMA-BUF
// fd; base must be page aligned (the driver requires it). The caller passes
// the whole allocation. Costs tens of microseconds: cache the result.
int export_dmabuf(const PointerInfo &info, UniqueFd &fd, std::string *why = nullptr);

// A small device allocation for probes (cuMemAlloc on `device`, freed with
// the object): e.g. whether a provider registers CUDA memory at all.
class ProbeAllocation {
public:
	ProbeAllocation() = default;
	~ProbeAllocation();
	ProbeAllocation(const ProbeAllocation &) = delete;
	ProbeAllocation &operator=(const ProbeAllocation &) = delete;
	int alloc(int device, size_t len, std::string *why = nullptr);
	void *ptr() const { return reinterpret_cast<void *>(p_); }
	size_t size() const { return len_; }

private:
	uint64_t p_ = 0;
	size_t len_ = 0;
	int device_ = 0;
};

} // namespace hmemreg::cuda
