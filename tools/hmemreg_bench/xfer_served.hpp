// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: the target engines of one process and the buffers
// their regions are (in the writer's process, the child, or a bench server).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <hmemreg/engine.hpp>

#include "xfer_target.hpp"

namespace hmemreg::bench {

struct FreeDeleter {
	void operator()(void *p) const { std::free(p); }
};

// Engines and regions of one process's targets. Counters first: they
// outlive the engines' notification callbacks.
class Served {
public:
	explicit Served(std::atomic<size_t> *counters, size_t ncounters) : counters_(counters), ncounters_(ncounters) {}
	~Served() { clear(); }

	// A region whose address is null is allocated here (page-aligned, zeroed).
	TargetEngine make(const EngineConfig &cfg, std::span<const Targets::Span> regions);

	void add_peer(unsigned slot, const Bytes &writer) { engine(slot).add_peer(writer); }
	size_t notes(unsigned slot)
	{
		engine(slot);
		return counters_ ? counters_[slot].load() : own_[slot].load();
	}
	std::span<uint8_t> region(unsigned slot, unsigned i)
	{
		engine(slot);
		if (i >= spans_[slot].size())
			throw Error(HMEMREG_EINVAL, "xfer: target engine " + std::to_string(slot) + " has no region " +
							    std::to_string(i));
		return {static_cast<uint8_t *>(spans_[slot][i].first), spans_[slot][i].second};
	}
	void clear() noexcept
	{
		regions_.clear(); // registrations go before their engines, buffers after
		engines_.clear();
		spans_.clear();
		mem_.clear();
		own_.clear();
		owned_ = 0;
	}

private:
	Engine &engine(unsigned slot)
	{
		if (slot >= engines_.size())
			throw Error(HMEMREG_EINVAL, "xfer: no target engine " + std::to_string(slot));
		return *engines_[slot];
	}

	static constexpr size_t kMaxEngines = 256;
	static size_t max_owned(); // half this host's memory


	std::atomic<size_t> *counters_;
	size_t ncounters_;
	size_t owned_ = 0; // bytes of mem_
	std::deque<std::atomic<size_t>> own_;
	std::vector<std::unique_ptr<void, FreeDeleter>> mem_;
	std::vector<std::unique_ptr<Engine>> engines_;
	std::vector<std::vector<Targets::Span>> spans_; // per engine
	std::vector<RegionRef> regions_;
};

} // namespace hmemreg::bench
