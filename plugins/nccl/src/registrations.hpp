// SPDX-License-Identifier: MIT
// regMr's registrations: one engine region per page-rounded range, shared by
// every memory handle whose buffer it covers and released with the last of
// them (NCCL registers the same buffers on several comms; those repeats cost
// a lookup here). Below this, the engine registers each region through
// libhmemreg's registration cache (one per rail domain: LRU, limits, and a
// memory monitor that drops entries whose memory was unmapped), so a
// deregMr/regMr cycle on the same buffer is a cache hit, not a new provider
// registration, and freed memory is never served a stale key.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include <hmemreg/engine.hpp>

namespace hmemreg::nccl {

class Registrations {
public:
	explicit Registrations(Engine &e) : engine_(e) {}
	// A region covering [addr, addr + len); throws hmemreg::Error.
	RegionRef get(void *addr, size_t len);
	uint64_t live();
	uint64_t hits() const { return hits_.load(); }
	uint64_t misses() const { return misses_.load(); }

private:
	struct Entry {
		uintptr_t start, end;
		std::weak_ptr<Region> region;
	};
	void prune_locked();

	Engine &engine_;
	std::mutex mu_;
	std::vector<Entry> entries_;
	std::atomic<uint64_t> hits_{0}, misses_{0};
};

} // namespace hmemreg::nccl
