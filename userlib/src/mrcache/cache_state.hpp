// SPDX-License-Identifier: MIT
// The registration cache's private state (what UCX keeps in rcache_int.h):
// the indexes, the LRU, the counters and the ring of recent invalidations.
// Only the cache (cache.hpp inherits it privately) and its inline hit path
// (cache_hit.inl) read it.
//
// Layout: the words every get reads (clock, pending flags, memo) come first
// on their own lines; everything lock_ guards follows on others, so a miss
// or an invalidation never writes a line that a hit reads, except the
// entry's own state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <sys/types.h>

#include "hmemreg/cache.h"
#include "mrcache/entry.hpp"
#include "mrcache/entry_index.hpp"
#include "mrcache/entry_pool.hpp"
#include "mrcache/memo.hpp"
#include "mrcache/memory_kind.hpp"
#include "mrcache/monitor.hpp"
#include "mrcache/reader_lock.hpp"
#include "mrcache/registrar.hpp"
#include "mrcache/stats_block.hpp"

namespace hmemreg::mr {

struct CacheState {
	hmemreg_cache_config cfg_;
	std::unique_ptr<Registrar> registrar_;
	std::shared_ptr<Monitor> monitor_; // host memory
	// Other memory kinds (memory_kind.hpp), by iface: entries of an iface
	// without a monitor are registered uncached.
	const MemoryKind *kinds_[HMEMREG_IFACE_MAX] = {};
	std::shared_ptr<Monitor> device_monitors_[HMEMREG_IFACE_MAX];
	std::unique_ptr<StatsSlot> stats_;
	const std::atomic<uint64_t> *pending_; // monitor's pending word, or a zero

	// Read-mostly words checked on every get.
	alignas(64) std::atomic<uint64_t> clock_{1};    // LRU clock, ticks on cache changes
	std::atomic<uint32_t> dead_pending_{0};          // dead_ has entries to deregister
	std::atomic<uint32_t> forked_{0};                // this is a fork child: cache nothing
	Memo memo_;

	EntryPool pool_; // owns every entry; the index and lists below only link them

	// Everything below is guarded by lock_ (write side) except where noted.
	alignas(64) ReaderLock lock_;
	EntryIndex index_;   // cached entries (read under the read side)
	EntryList lru_;      // the indexed entries, by release time (lru_stamp)
	EntryList orphans_;  // in use, not in the index; released at the last put
	EntryList dead_;     // unused, to be deregistered outside the lock
	EntryList unsettled_; // unlinked, held or not yet to be decided (settle_locked)
	EntryList parent_;   // after fork: the parent's entries, never touched again
	uint64_t count_ = 0, bytes_ = 0;
	uint64_t orphan_count_ = 0, orphan_bytes_ = 0, dead_count_ = 0, dead_bytes_ = 0;
	uint64_t unsettled_count_ = 0, unsettled_bytes_ = 0;
	uint64_t settle_batch_ = 1; // evictions unsettled at most (one heavy fence each)
	std::atomic<uint64_t> notify_seq_{0}; // bumped by every notify/invalidate
	// The last kRecent invalidated ranges, by notify sequence: a miss that
	// raced with an invalidation of its own range is not cached.
	static constexpr unsigned kRecent = 64;
	struct RecentRange {
		uint32_t iface;
		uintptr_t start, end;
	} recent_[kRecent] = {};
	pid_t pid_;
	uint32_t id_ = 0;                  // unique per process (ChunkHeader::owner)
	uint64_t header_word_ = 0;         // ChunkHeader{kEntryMagic, id_}.word()
	uint64_t *hit_counters_ = nullptr; // stats_->raw()->hits (try_hit: one load less)
};

} // namespace hmemreg::mr
