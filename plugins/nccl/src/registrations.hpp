// SPDX-License-Identifier: MIT
// regMr's registrations: one engine region per page-rounded range, shared by
// every memory handle whose buffer it covers and released with the last of
// them. NCCL pairs regMr/deregMr and registers the same buffers on several
// comms (and again per connection); sharing turns those repeats into hits
// without ever keeping a registration after its last deregMr, so freed
// memory cannot be hit later (no invalidation needed at this level).
// Long-lived reuse across deregMr/regMr cycles, with kernel-assisted
// invalidation, belongs to the engine's registrar (the registration cache).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/engine.hpp"

namespace hmemreg::nccl {

class Registrations {
public:
	explicit Registrations(engine::Engine &e) : engine_(e) {}
	// A region covering [addr, addr + len); throws hmemreg::Error.
	engine::RegionRef get(void *addr, size_t len);
	uint64_t live();
	uint64_t hits() const { return hits_.load(); }
	uint64_t misses() const { return misses_.load(); }

private:
	struct Entry {
		uintptr_t start, end;
		std::weak_ptr<engine::Region> region;
	};
	void prune_locked();

	engine::Engine &engine_;
	std::mutex mu_;
	std::vector<Entry> entries_;
	std::atomic<uint64_t> hits_{0}, misses_{0};
};

} // namespace hmemreg::nccl
