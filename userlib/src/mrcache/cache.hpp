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
// Index: per (memory kind, device) an ordered map of registered ranges that
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
// slow step out of line: a hit is about 140 instructions, a put 50.
// Neither get nor put writes a line that another thread writes. Memo misses search the index under a read
// lock that writes only the thread's own cache line, and refill the memo.
// The LRU is ordered by the cache clock at release (puts store it when it
// moved; the evictor fixes positions lazily), so neither get nor put
// touches a shared list.
//
// Locking rule: nothing that can allocate, free, unmap, register or block on
// a monitor runs under lock_ (uffd holds an unmapping thread until its event
// is read; a monitor callback needs lock_). Index nodes are allocated
// before taking it and destroyed after releasing it (std::map node handles).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hmemreg/cache.h"
#include "mrcache/entry.hpp"
#include "mrcache/entry_pool.hpp"
#include "mrcache/memo.hpp"
#include "mrcache/monitor.hpp"
#include "mrcache/reader_lock.hpp"
#include "mrcache/registrar.hpp"
#include "mrcache/stats_block.hpp"

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

class Cache {
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
	// The Lease form also returns copies of range and registration (what
	// the C API hands out) without touching the entry's second line.
	int get(const Request &req, Lease &out);
	int get(const Request &req, Entry *&out);
	int get(const Request &req, Ref &out);
	// Release one reference. 0; -HMEMREG_EINVAL (null, not ours, count
	// already 0); -HMEMREG_ESTALE (taken in the parent before fork).
	// With the Lease's shard, a put from another thread than the get's
	// takes the count back where it was added (one line, not a search).
	int put(Entry *e);
	int put(Entry *e, unsigned shard);
	// put()'s fast step, for the C API (see try_put below).
	enum PutStep { kPutDone, kPutSlow, kPutOrphan };
	PutStep try_put(Entry *e, unsigned shard);
	// After kPutOrphan: the last reference may be gone; release if so.
	void release_orphan(Entry *e);

	// The two halves of get() (for the C API, which keeps the hit's Lease
	// in registers). try_hit: the lock-free hit, inline; true with out
	// filled and a reference counted, false with nothing counted. get_slow:
	// everything else (request validated; probes the memo again).
	template <typename Out>
	bool try_hit(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Out &out);
	int get_slow(const Request &req, Lease &out);

	// Drop entries of iface overlapping [start, end) (all devices).
	// Returns how many left the index.
	int invalidate(Iface iface, uintptr_t start, uintptr_t end, Cause cause = Cause::explicit_call);
	// Drop every entry of (iface, device) now (an hmemreg.ko export that
	// goes away: export_table.cpp); unused ones are deregistered before it
	// returns. Returns how many are still held (released at their last put).
	uint64_t drop_device(Iface iface, uint64_t device, Cause cause);
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

	// Device memory kinds (CUDA issue): entries of `iface` are watched and
	// validated by this monitor; without one they are registered uncached.
	void set_device_monitor(Iface iface, std::shared_ptr<Monitor> m);

	// ---- for monitors ----
	// Called from monitor context (a monitor thread, or sync()): unlinks
	// overlapping entries; deregistration waits for the next cache call.
	void notify(Iface iface, uintptr_t start, uintptr_t end, Cause cause);
	// Find the cached entry a watch was armed for and drop it.
	void notify_entry(uintptr_t start, uint64_t serial, Cause cause);
	// Drop every entry whose generation word moved (lost events).
	void revalidate(Cause cause);
	void count_events(uint64_t n) { StatsSlot::add(stats_->raw()->monitor_events, static_cast<int64_t>(n)); }

	// fork(): see hmemreg/cache.h.
	void before_fork();
	void after_fork_parent();
	void after_fork_child();

private:
	struct Key {
		uint32_t iface;
		uint64_t device;
		uintptr_t start;
		uint64_t serial;
		auto operator<=>(const Key &) const = default;
	};
	using Index = std::map<Key, EntryPtr>;
	using Node = Index::node_type;

	Cache(std::unique_ptr<Registrar> r, const hmemreg_cache_config &cfg, std::shared_ptr<Monitor> m);

	template <typename Out>
	bool memo_hit(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Out &out, const ThreadState &ts,
		      uint64_t &st);
	bool hit_checked(Entry *c, unsigned shard);
	bool entry_ok(Entry *c);
	void drop_stale(Entry *c, unsigned shard);
	int put_slow(Entry *e, unsigned shard);
	static bool uncount(Entry *e, unsigned hint, uint32_t now, const ThreadState &ts);
	Entry *lookup(const Request &req, uintptr_t s, uintptr_t e, Lease &out, const ThreadState &ts);
	static void lease_of(Entry *c, Lease &out);
	Entry *find_cover_locked(Iface iface, uint64_t device, uintptr_t s, uintptr_t e);
	int miss(const Request &req, Lease &out);
	int register_uncached(const Request &req, Lease &out, hmemreg_uncached_reason why);
	void count_uncached(hmemreg_uncached_reason why);
	int do_register(const Request &req, Range r, Registration &out);
	Node make_node(const Request &req, Range r);
	void unlink_locked(Index::iterator it, Cause cause);
	void settle_locked();
	int unlink_overlapping_locked(Iface iface, uintptr_t s, uintptr_t e, Cause cause, bool nested_only);
	Entry *lru_pick_locked();
	void lru_remove_locked(Entry *e);
	void lru_append_locked(Entry *e, uint64_t stamp);
	void reap();
	void release_nodes(Index &nodes);
	void sync_monitor();
	void publish_gauges_locked();
	uint64_t in_use_locked() const;
	Monitor *monitor_for(Iface iface) const;

	hmemreg_cache_config cfg_;
	std::unique_ptr<Registrar> registrar_;
	std::shared_ptr<Monitor> monitor_;
	std::shared_ptr<Monitor> device_monitors_[HMEMREG_IFACE_MAX];
	std::unique_ptr<StatsSlot> stats_;
	const std::atomic<uint64_t> *pending_; // monitor's pending word, or a zero

	// Read-mostly words checked on every get.
	alignas(64) std::atomic<uint64_t> clock_{1};                    // LRU clock, ticks on cache changes
	std::atomic<uint32_t> dead_pending_{0};          // dead_ has entries to deregister
	std::atomic<uint32_t> forked_{0};                // this is a fork child: cache nothing
	Memo memo_;

	EntryPool pool_; // declared before the indexes: destroyed after them

	// Everything below is guarded by lock_ (write side) except where noted.
	alignas(64) ReaderLock lock_;
	Index index_;   // cached entries (read under the read side)
	Index orphans_; // in use, not in the index; released at the last put
	Index dead_;    // unused, to be deregistered outside the lock
	Index unsettled_; // unlinked, held or not yet to be decided (settle_locked)
	Index parent_;  // after fork: the parent's entries, never touched again
	Entry *lru_head_ = nullptr, *lru_tail_ = nullptr;
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
	void note_invalidation_locked(Iface iface, uintptr_t s, uintptr_t e);
	bool raced_locked(uint64_t seq0, Iface iface, Range r) const;
	std::atomic<uint64_t> next_serial_{1};
	pid_t pid_;
	uint32_t id_ = 0; // unique per process (ChunkHeader::owner)
	uint64_t header_word_ = 0; // ChunkHeader{kEntryMagic, id_}.word()
	uint64_t *hit_counters_ = nullptr; // stats_->raw()->hits (try_hit: one load less)
};

// ---- hit path, inline (the C API's get and put compile into one call each)
// Forced: the C API functions are the only callers that matter, and a
// call with its register saves and a Lease in memory was a fifth of a hit.
#define HMEMREG_HIT_PATH inline __attribute__((always_inline))

// A hit on the memo: count a reference, then check the entry is still
// cached in the same life (the handshake in entry.hpp); if not, give it
// back. st: the state seen (its flags say which checks the hit needs).
// Out: a Lease, or the C API's output (c_api.cpp). view() takes the
// slot's copies at once (the caller's output, not registers, holds them
// while the entry is checked: on a miss, the slow path writes them again);
// held() completes a hit.
template <typename Out>
HMEMREG_HIT_PATH bool Cache::memo_hit(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Out &out,
				      const ThreadState &ts, uint64_t &st)
{
	MemoView v;
	if (!memo_.lookup(iface, device, s, e, v))
		return false;
	out.view(v);
	Entry *c = v.entry;
	// A slot left by an entry that is gone (evictions leave many) costs a
	// load, no write. The same load says whether this thread's shard bit
	// is set already (add_count).
	const uint64_t bit = Entry::own_bit(ts);
	uint64_t st0 = c->state().load(std::memory_order_relaxed);
	if ((st0 & (kOrphan | kLifeMask | bit)) != (v.life | bit)) [[unlikely]] {
		if ((st0 & (kOrphan | kLifeMask)) != v.life)
			return false;
		c->state().fetch_or(bit, std::memory_order_seq_cst);
	}
	c->bump_count(ts, 1);
	st = c->state_after_count();
	if ((st & (kOrphan | kLifeMask)) != v.life) [[unlikely]] {
		c->add_count(ts, -1);
		// Our passing increment may have kept its releaser from
		// releasing it: check again (the entry may be in another life).
		if (c->state_after_count() & kOrphan)
			release_orphan(c);
		return false;
	}
	out.held(c, ts.shard);
	return true;
}

template <typename Out>
HMEMREG_HIT_PATH bool Cache::try_hit(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Out &out)
{
	if (forked_.load(std::memory_order_relaxed) | dead_pending_.load(std::memory_order_relaxed) |
	    pending_->load(std::memory_order_acquire)) [[unlikely]]
		return false;
	const ThreadState &ts = tl_state;
	if (!ts.ready) [[unlikely]]
		return false; // get_slow() claims it
	uint64_t st;
	if (!memo_hit(iface, device, s, e, out, ts, st)) [[unlikely]]
		return false;
	// (Out of line with scalars: out stays in registers in the caller.)
	if ((st & (kHasGen | kValidate)) && !hit_checked(out.held_entry(), out.held_shard())) [[unlikely]]
		return false;
	StatsSlot::hit(hit_counters_, ts.shard, ts.owned);
	return true;
}

HMEMREG_HIT_PATH int Cache::get(const Request &req, Lease &out)
{
	uintptr_t s = reinterpret_cast<uintptr_t>(req.addr);
	if (!req.addr || !req.len || s + req.len < s || static_cast<uint32_t>(req.iface) >= HMEMREG_IFACE_MAX)
		return -HMEMREG_EINVAL;
	if (!(req.flags & HMEMREG_MR_NO_CACHE) && try_hit(req.iface, req.device, s, s + req.len, out)) [[likely]]
		return 0;
	return get_slow(req, out);
}

// The put of a reference this thread got (shard), on its own counter:
// a plain store (light) and one state load. kPutSlow: nothing done, put()
// must decide; kPutOrphan: done, and the entry has left the cache (the
// caller runs release_orphan()). Callers make the slow steps tail calls,
// so the fast one needs no saved registers.
HMEMREG_HIT_PATH Cache::PutStep Cache::try_put(Entry *e, unsigned shard)
{
	if (!e || e->header().word() != header_word_)
		return kPutSlow;
	// tl_state unclaimed reads !light: put_slow() claims it.
	const ThreadState &ts = tl_state;
	Cell &c = e->own_cell(ts);
	int32_t v = c.count.load(std::memory_order_relaxed);
	if (!ts.light || shard != ts.shard || v <= 0 || forked_.load(std::memory_order_relaxed)) [[unlikely]]
		return kPutSlow;
	// Counted on our own cell (v > 0): its shard bit is set already.
	c.count.store(v - 1, std::memory_order_release); // see Entry::add_count
	std::atomic_signal_fence(std::memory_order_seq_cst);
	auto now = static_cast<uint32_t>(clock_.load(std::memory_order_relaxed));
	now += !now; // 0 means "no put recorded"
	if (c.last.load(std::memory_order_relaxed) != now)
		c.last.store(now, std::memory_order_relaxed);
	if (e->state_after_count() & kOrphan) [[unlikely]]
		return kPutOrphan;
	return kPutDone;
}

HMEMREG_HIT_PATH int Cache::put(Entry *e, unsigned shard)
{
	if (!e || e->header().word() != header_word_) // (try_put leaves errors to us)
		return -HMEMREG_EINVAL;
	switch (try_put(e, shard)) {
	case kPutDone:
		return 0;
	case kPutOrphan:
		release_orphan(e);
		return 0;
	case kPutSlow:
		break;
	}
	return put_slow(e, shard);
}

} // namespace hmemreg::mr
