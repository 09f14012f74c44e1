// SPDX-License-Identifier: MIT
// The per-process shared-memory stats block (layout: hmemreg/stats.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "hmemreg/stats.h"

namespace hmemreg::mr {

// A cache's counters. Lives in the shared block when one is published,
// else in private memory; either way updated the same way.
class StatsSlot {
public:
	explicit StatsSlot(hmemreg_stats_cache *s, bool shared) : s_(s), shared_(shared) {}
	~StatsSlot();
	StatsSlot(const StatsSlot &) = delete;
	StatsSlot &operator=(const StatsSlot &) = delete;

	static std::unique_ptr<StatsSlot> acquire(bool publish, const char *name);

	hmemreg_stats_cache *raw() { return s_; }
	static void add(uint64_t &field, int64_t v)
	{
		std::atomic_ref<uint64_t>(field).fetch_add(static_cast<uint64_t>(v), std::memory_order_relaxed);
	}
	// add() for a field every writer of which holds the cache's lock: a
	// plain load and store, no locked instruction (a miss made six).
	static void add_locked(uint64_t &field, int64_t v)
	{
		std::atomic_ref<uint64_t> a(field);
		a.store(a.load(std::memory_order_relaxed) + static_cast<uint64_t>(v), std::memory_order_relaxed);
	}
	static void set(uint64_t &field, uint64_t v) { std::atomic_ref<uint64_t>(field).store(v, std::memory_order_relaxed); }
	// owned: the calling thread is the shard's only writer.
	void hit(uint32_t shard, bool owned) { hit(s_->hits, shard, owned); }
	static void hit(uint64_t *hits, uint32_t shard, bool owned)
	{
		std::atomic_ref<uint64_t> a(hits[8 * (shard % HMEMREG_STATS_HIT_SHARDS)]);
		if (owned)
			a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
		else
			a.fetch_add(1, std::memory_order_relaxed);
	}
	void set_label(char *dst, size_t n, const char *src);
	void snapshot(hmemreg_cache_stats &out) const { hmemreg_stats_sum(s_, &out); }
	uint32_t id() const { return s_->id; }
	// The cache holds `entries` more (or fewer) registrations of hmemreg.ko
	// export `export_id`, covering `bytes` more: its row in the block's
	// exports[] (export_table.cpp calls it on subscribe and unsubscribe,
	// never on a hit). Private slots have none.
	void export_held(uint64_t export_id, int64_t entries, int64_t bytes);

private:
	void drop_export_rows() noexcept;
	hmemreg_stats_cache *s_;
	bool shared_;
};

} // namespace hmemreg::mr
