// SPDX-License-Identifier: MIT
// CUDA device memory as a cache memory kind. The monitor: a registration
// stays valid while the allocation's buffer ID is the one it was
// registered with. CUDA hands out a new ID for every allocation, so
// cudaFree + cudaMalloc at the same address is seen on the next hit,
// before a stale key can be used. Cost: one cuPointerGetAttribute per hit
// on CUDA memory (measured by `hmemreg_bench reg --mem cuda`), made outside
// every cache lock. The extent: the whole allocation (one registration
// serves every buffer carved from it, and a DMA-BUF export needs
// page-aligned allocation bounds anyway).
#pragma once

#include "mrcache/memory_kind.hpp"
#include "mrcache/monitor.hpp"

namespace hmemreg::cuda {

class BufferIdMonitor final : public mr::Monitor {
public:
	hmemreg_monitor kind() const override { return HMEMREG_MONITOR_NONE; }
	const char *name() const override { return "cuda-buffer-id"; }
	// Records the allocation's buffer ID and asks for valid() on each hit.
	int subscribe(mr::Entry &e) override;
	bool valid(const mr::Entry &e) override;
};

// The kind the cache's monitor factory lists for Iface::cuda: without a
// CUDA driver here it gives no monitor (CUDA entries are never cached).
const mr::MemoryKind &memory_kind();

} // namespace hmemreg::cuda
