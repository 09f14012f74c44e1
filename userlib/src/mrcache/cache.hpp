// SPDX-License-Identifier: MIT
// hmemreg::mr::Cache: the registration cache core (C++ interface used by the
// transfer engine and wrapped by the C API in hmemreg/cache.h).
//
// Usage (engine):
//   auto reg = std::make_unique<mr::FabricRegistrar>(domain);   // fid_domain*
//   hmemreg_cache_config cfg; hmemreg_cache_config_init(&cfg);   // env defaults
//   std::unique_ptr<mr::Cache> cache;
//   int rc = mr::Cache::create(std::move(reg), cfg, cache);
//   mr::Request rq; rq.addr = buf; rq.len = n;                   // host memory
//   mr::Entry *e; rc = cache->get(rq, e);                        // 0 or -HMEMREG_E*
//   ... use e->reg.desc / e->reg.key / e->reg.handle (struct fid_mr *) ...
//   cache->put(e);                                               // after completion
// or with RAII: mr::Ref ref; rc = cache->get(rq, ref); ref.desc() ...
//
// Index: per (memory kind, device) an ordered set of registered ranges that
// are pairwise non-nested (libfabric's invariant). Sorted by start they are
// also sorted by end, so "who covers [s, e)" is one search: the last entry
// starting at or before s. A miss that covers smaller entries replaces them
// (they leave the index at once; in-use ones are released at their last
// put). Ranges are never merged across allocations.
//
// Hit path, no lock: a 2-way memo of recent lookups, hashed by the
// request's page (memo.hpp); each slot (one cache line, written under a
// seqlock) holds a covering entry, the life it had when memoised, and
// copies of its range and registration. A hit reads that line, adds one to
// the calling thread's shard counter of the entry, then loads the entry's
// state: still cached in the same life, or the increment is undone and the
// get falls back (entry.hpp has the handshake with invalidation). Then one
// load of its generation word (kmod). The whole hit (try_hit) and put
// (try_put) are forced inline into the C API's functions, with every
// slow step out of line: a hit is about 140 instructions, a put 50
// (they live in cache_hit.inl, which only the C API and cache.cpp include).
// Neither get nor put writes a line that another thread writes. Memo misses
// search the index under a read lock that writes only the thread's own
// cache line, and refill the memo (when a slot is filled: memo.hpp).
// The LRU is ordered by the cache clock at release (puts store it when it
// moved; the evictor fixes positions lazily), so neither get nor put
// touches a shared list.
//
// Locking rule: nothing that can allocate, free, unmap, register or block on
// a monitor runs under lock_ (uffd holds an unmapping thread until its event
// is read; a monitor callback needs lock_). Entries come from the pool
// before taking it and go back after releasing it; the index and the lists
// are intrusive (entry_index.hpp), so moving an entry allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hmemreg/cache.h"
#include "mrcache/cache_state.hpp"
#include "mrcache/entry.hpp"
#include "mrcache/monitor.hpp"
#include "mrcache/registrar.hpp"

namespace hmemreg::mr {

class Cache;

// RAII reference: puts on destruction.
class Ref {
public:
	Ref() = default;
	Ref(Cache *c, Entry *e, unsigned shard = 0) : c_(c), e_(e), shard_(shard) {}
	Ref(Ref &&o) noexcept : c_(o.c_), e_(o.e_), shard_(o.shard_) { o.e_ = nullptr; }
	Ref &operator=(Ref &&o) noexcept;
	Ref(const Ref &) = delete;
	Ref &operator=(const Ref &) = delete;
	~Ref() { reset(); }
	void reset();
	explicit operator bool() const { return e_ != nullptr; }
	Entry *entry() const { return e_; }
	void *desc() const { return e_->reg.desc; }
	uint64_t key() const { return e_->reg.key; }
	void *handle() const { return e_->reg.handle; }
	Range range() const { return e_->range; }

private:
	Cache *c_ = nullptr;
	Entry *e_ = nullptr;
	unsigned shard_ = 0; // counter shard the get used (put takes it back there)
};

class Cache final : public MonitorSink, private CacheState {
public:
	// cfg as filled by hmemreg_cache_config_init(). The monitor is chosen
	// from cfg.monitor. 0, -HMEMREG_EINVAL, -HMEMREG_ENOTSUP, -HMEMREG_ENOMEM.
	static int create(std::unique_ptr<Registrar> registrar, const hmemreg_cache_config &cfg,
			  std::unique_ptr<Cache> &out);
	// Same with a monitor supplied by the caller (tests).
	static int create(std::unique_ptr<Registrar> registrar, const hmemreg_cache_config &cfg,
			  std::shared_ptr<Monitor> monitor, std::unique_ptr<Cache> &out);
	// Deregisters everything, in use or not (a held Entry* is then invalid).
	~Cache();
	Cache(const Cache &) = delete;
	Cache &operator=(const Cache &) = delete;

	// A registration covering the request, referenced. 0 or -HMEMREG_E*.
	// The RawRef form also returns copies of range and registration (what
	// the C API hands out) without touching the entry's second line.
	int get(const Request &req, RawRef &out);
	int get(const Request &req, Entry *&out);
	int get(const Request &req, Ref &out);
	// Release one reference. 0; -HMEMREG_EINVAL (null, not ours, count
	// already 0); -HMEMREG_ESTALE (taken in the parent before fork).
	// With the RawRef's shard, a put from another thread than the get's
	// takes the count back where it was added (one line, not a search).
	int put(Entry *e);
	int put(Entry *e, unsigned shard);
	// put()'s fast step, for the C API (see try_put below).
	enum PutStep { kPutDone, kPutSlow, kPutOrphan };
	PutStep try_put(Entry *e, unsigned shard);
	// After kPutOrphan: the last reference may be gone; release if so.
	void release_orphan(Entry *e);

	// The two halves of get() (for the C API, which keeps the hit's RawRef
	// in registers). try_hit: the lock-free hit, inline; true with out
	// filled and a reference counted, false with nothing counted. get_slow:
	// everything else (request validated; probes the memo again).
	template <typename Out>
	bool try_hit(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Out &out);
	int get_slow(const Request &req, RawRef &out);

	// Drop entries of iface overlapping [start, end) (all devices).
	// Returns how many left the index.
	int invalidate(Iface iface, uintptr_t start, uintptr_t end, Cause cause = Cause::explicit_call);
	// Deregister all unused entries now; returns how many.
	int flush();
	// References held right now (cached or not).
	uint64_t in_use() const;

	void stats(hmemreg_cache_stats &out) const { stats_->snapshot(out); }
	StatsSlot &stats_slot() { return *stats_; } // export_table.cpp: its rows of exports held
	hmemreg_monitor monitor_kind() const { return monitor_->kind(); }
	Registrar &registrar() { return *registrar_; }
	const hmemreg_cache_config &config() const { return cfg_; }
	// The name its stats slot shows (the engine: "rail0 tcp;ofi_rxm lo");
	// call before the cache is used.
	void set_name(const std::string &name);


	// ---- for monitors (MonitorSink) ----
	// Called from monitor context (a monitor thread, or sync()): unlinks
	// overlapping entries; deregistration waits for the next cache call.
	void notify(Iface iface, uintptr_t start, uintptr_t end, Cause cause) override;
	// Find the cached entry a watch was armed for and drop it.
	void notify_entry(Iface iface, uint64_t device, uintptr_t start, uint64_t serial, Cause cause) override;
	// Drop every entry whose generation word moved (lost events).
	void revalidate(Cause cause) override;
	// Drop every entry of (iface, device); how many are still held.
	uint64_t drop_device(Iface iface, uint64_t device, Cause cause) override;
	void count_events(uint64_t n) override
	{
		StatsSlot::add(stats_->raw()->monitor_events, static_cast<int64_t>(n));
	}
	// Every entry of iface goes (as for lost events); a miss that raced
	// with it sees the invalidation (notify_seq_), a later one a refusing
	// subscribe(). Counted after the drop: a reader who sees the count
	// sees the entries gone.
	void monitor_stopped(Iface iface) override
	{
		notify(iface, 0, ~uintptr_t{0}, Cause::overflow);
		StatsSlot::add(stats_->raw()->monitor_failures, 1);
	}

	// fork(): see hmemreg/cache.h.
	void before_fork();
	void after_fork_parent();
	void after_fork_child();

private:
	Cache(std::unique_ptr<Registrar> r, const hmemreg_cache_config &cfg, std::shared_ptr<Monitor> m);

	template <typename Out>
	bool memo_hit(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Out &out, const ThreadState &ts,
		      uint64_t &st);
	bool hit_checked(Entry *c, unsigned shard);
	bool entry_ok(Entry *c);
	void drop_stale(Entry *c, unsigned shard);
	int put_slow(Entry *e, unsigned shard);
	static bool uncount(Entry *e, unsigned hint, uint32_t now, const ThreadState &ts);
	// Where a failed lookup's search ended (miss() starts there if the
	// index did not change since).
	struct MissHint {
		uint64_t changes = 0;
		Entry *before = nullptr;
		bool valid = false;
	};
	Entry *lookup(const Request &req, uintptr_t s, uintptr_t e, RawRef &out, const ThreadState &ts, MissHint &hint);
	void prefetch_victim(const Entry *v, const ThreadState &ts);
	void prefetch_eviction_locked();
	void prefetch_next_miss(const Request &req);
	static Entry *first_starting_at(Entry *e);
	static void raw_ref_of(Entry *c, RawRef &out);
	Entry *find_cover_locked(Iface iface, uint64_t device, uintptr_t s, uintptr_t e);
	int miss(const Request &req, RawRef &out, uint64_t clock0, const MissHint &hint);
	// miss() in steps (cache.cpp).
	struct Watch {
		uint64_t seq0 = 0; // notify_seq_ before the watch
		int rc = 0;        // Monitor::subscribe()'s answer
	};
	struct Placement {
		bool cache_it = false;
		bool settle_now = false;       // entries were replaced
		hmemreg_uncached_reason why{}; // when not cached
		Entry *successor = nullptr;    // where it goes in the index
	};
	struct RegTally;
	int watch_and_register(const Request &req, Monitor *mon, Entry &e, RegTally &tally, Watch &w);
	Entry *racer_locked(const Request &req, Range r, uint64_t clock0, const ThreadState &ts);
	Placement place_locked(const Request &req, Range r, const Entry &e, const Watch &w, const MissHint &hint);
	bool replace_locked(const Request &req, Range r, const MissHint &hint, Entry *&successor);
	void evict_locked(Range r, Entry *&successor);
	bool fits_locked(Range r) const;
	void insert_locked(EntryPtr owned, Entry *successor, uint64_t tick, const ThreadState &ts);
	void hand_out_uncached_locked(EntryPtr owned, hmemreg_uncached_reason why, const ThreadState &ts);
	void list_orphan_locked(Entry *e);
	void take_dead_locked(EntryList &out);
	int register_uncached(const Request &req, RawRef &out, hmemreg_uncached_reason why);
	int register_uncached(const Request &req, RawRef &out, hmemreg_uncached_reason why, RegTally t);
	void count_uncached_locked(hmemreg_uncached_reason why);
	// What registering cost, counted in the stats under lock_ by the caller
	// (record_locked), or by record() on a path that does not take it.
	struct RegTally {
		uint64_t ns = 0;
		uint32_t ok = 0, failed = 0, misses = 0;
		unsigned buckets[2] = {};
		unsigned timed = 0;
	};
	int do_register(const Request &req, Range r, Registration &out, RegTally &t);
	void record_locked(const RegTally &t);
	void record(const RegTally &t);
	EntryPtr make_entry(const Request &req, Range r);
	void unlink_locked(Entry *e, Cause cause);
	void settle_locked();
	int unlink_overlapping_locked(Iface iface, uintptr_t s, uintptr_t e, Cause cause);
	int unlink_nested_locked(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Entry *&successor, Entry *before);
	Entry *lru_pick_locked();
	void lru_remove_locked(Entry *e);
	void lru_append_locked(Entry *e, uint64_t stamp);
	void reap();
	void release_entries(EntryList &list);
	void take_all_locked(EntryList &all);
	void sync_monitor();
	void publish_gauges_locked();
	uint64_t in_use_locked() const;
	Monitor *monitor_for(Iface iface) const;
	void attach_memory_kinds();
	Range extent_of(const Request &req) const;

	void note_invalidation_locked(Iface iface, uintptr_t s, uintptr_t e);
	// Ticks the clock: only lock_'s holder writes it, so a load and a
	// store (a locked add waited for every store the miss had made).
	uint64_t tick_locked()
	{
		const uint64_t t = clock_.load(std::memory_order_relaxed) + 1;
		clock_.store(t, std::memory_order_relaxed);
		return t;
	}
	bool raced_locked(uint64_t seq0, Iface iface, Range r) const;
};

} // namespace hmemreg::mr
