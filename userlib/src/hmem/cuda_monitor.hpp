// SPDX-License-Identifier: MIT
// The cache's monitor for CUDA device memory: a registration stays valid
// while the allocation's buffer ID is the one it was registered with. CUDA
// hands out a new ID for every allocation, so cudaFree + cudaMalloc at the
// same address is seen on the next hit, before a stale key can be used.
// Cost: one cuPointerGetAttribute per hit on CUDA memory (measured by
// `hmemreg_bench reg --mem cuda`), made outside every cache lock.
#pragma once

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

// Called by every cache at creation: installs the monitor for CUDA memory
// when a CUDA driver is loaded here (else CUDA entries are never cached).
void attach_device_monitors(mr::Cache &cache);

} // namespace hmemreg::cuda
