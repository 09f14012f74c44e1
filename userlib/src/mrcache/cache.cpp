// SPDX-License-Identifier: MIT
// The registration cache core: lookups, misses, limits, invalidation.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <sched.h>
#include <unistd.h>

#include "settings/settings.hpp"
#include "hmemreg/hmemreg.h"
#include "mrcache/cache_hit.inl"
#include "mrcache/count_fence.hpp"
#include "mrcache/fork_registry.hpp"
#include "mrcache/monitor_factory.hpp"
#include "mrcache/reg_clock.hpp"

namespace hmemreg::mr {

namespace {

const std::atomic<uint64_t> kZeroWord{0};
// unlink_nested_locked(): no successor known (insert with a search).
Entry *const kNoSuccessor = reinterpret_cast<Entry *>(alignof(Entry));
constexpr unsigned kLruScanLimit = 256; // in-use entries skipped per eviction

} // namespace

// ---------------------------------------------------------------- Ref

Ref &Ref::operator=(Ref &&o) noexcept
{
	if (this != &o) {
		reset();
		c_ = o.c_;
		e_ = o.e_;
		shard_ = o.shard_;
		o.e_ = nullptr;
	}
	return *this;
}

void Ref::reset()
{
	if (e_)
		c_->put(e_, shard_);
	e_ = nullptr;
}

// ---------------------------------------------------------------- lifetime

int Cache::create(std::unique_ptr<Registrar> registrar, const hmemreg_cache_config &cfg,
		  std::unique_ptr<Cache> &out)
{
	std::shared_ptr<Monitor> m;
	int rc = make_monitor(static_cast<hmemreg_monitor>(cfg.monitor), m);
	if (rc)
		return rc;
	return create(std::move(registrar), cfg, std::move(m), out);
}

int Cache::create(std::unique_ptr<Registrar> registrar, const hmemreg_cache_config &cfg,
		  std::shared_ptr<Monitor> monitor, std::unique_ptr<Cache> &out)
{
	if (!registrar || !monitor || cfg.size < sizeof(hmemreg_cache_config))
		return -HMEMREG_EINVAL;
	std::unique_ptr<Cache> c(new Cache(std::move(registrar), cfg, std::move(monitor)));
	int rc = c->monitor_->attach(*c);
	if (rc)
		return rc;
	c->attach_memory_kinds();
	fork_registry_add(c.get());
	out = std::move(c);
	return 0;
}

Cache::Cache(std::unique_ptr<Registrar> r, const hmemreg_cache_config &cfg, std::shared_ptr<Monitor> m)
{
	cfg_ = cfg;
	registrar_ = std::move(r);
	monitor_ = std::move(m);
	pid_ = ::getpid();
	cfg_.name[sizeof(cfg_.name) - 1] = 0;
	stats_ = StatsSlot::acquire(cfg_.publish_stats != 0, cfg_.name[0] ? cfg_.name : "cache");
	id_ = stats_->raw()->id;
	header_word_ = ChunkHeader{kEntryMagic, id_}.word();
	hit_counters_ = stats_->raw()->hits;
	pool_.set_owner(id_);
	auto *s = stats_->raw();
	stats_->set_label(s->monitor, sizeof(s->monitor), monitor_->name());
	stats_->set_label(s->registrar, sizeof(s->registrar), registrar_->name());
	s->max_count = cfg_.max_count;
	s->max_size = cfg_.max_size;
	s->max_entry_size = cfg_.max_entry_size;
	std::atomic_ref<uint32_t>(s->state).store(1, std::memory_order_release);
	pending_ = monitor_->pending_word() ? monitor_->pending_word() : &kZeroWord;
	memo_ = Memo(cfg_.max_count);
	settle_batch_ = std::clamp<uint64_t>(cfg_.max_count / 64, 1, 64);
	stats_->set_label(s->count_fence, sizeof(s->count_fence), count_fence_name());
	(void)reg_clock::calibration(); // measured now, not at the first miss
}

void Cache::set_name(const std::string &name)
{
	std::snprintf(cfg_.name, sizeof(cfg_.name), "%s", name.c_str());
	stats_->set_label(stats_->raw()->name, sizeof(stats_->raw()->name), cfg_.name);
}

Cache::~Cache()
{
	fork_registry_remove(this);
	monitor_->detach(*this);
	for (auto &m : device_monitors_)
		if (m)
			m->detach(*this);
	EntryList all;
	lock_.lock();
	if (orphan_count_ || in_use_locked())
		log::write(HMEMREG_LOG_WARN, "cache", "cache '%s' destroyed with registrations in use", cfg_.name);
	take_all_locked(all);
	lock_.unlock();
	release_entries(all);
	// Never deregister the parent's registrations (the pool frees the memory).
	parent_.forget_all();
}

// Every entry of the index and the side lists onto `all`, all counts zero.
void Cache::take_all_locked(EntryList &all)
{
	lru_.forget_all(); // its links are reused by `all`
	for (Entry *e = index_.first(); e;) {
		Entry *nx = EntryIndex::next(e);
		e->on_lru = false;
		all.push_back(e);
		e = nx;
	}
	index_.forget_all();
	all.splice_back(orphans_);
	all.splice_back(dead_);
	all.splice_back(unsettled_);
	unsettled_count_ = unsettled_bytes_ = 0;
	count_ = bytes_ = orphan_count_ = orphan_bytes_ = dead_count_ = dead_bytes_ = 0;
}

// Every memory kind the factory knows gets its own monitor in this cache.
void Cache::attach_memory_kinds()
{
	for (uint32_t i = 0; i < HMEMREG_IFACE_MAX; i++) {
		const MemoryKind *k = memory_kind(static_cast<Iface>(i));
		if (!k)
			continue;
		kinds_[i] = k;
		std::shared_ptr<Monitor> m = k->monitor();
		if (m && m->attach(*this) == 0)
			device_monitors_[i] = std::move(m);
	}
}

Range Cache::extent_of(const Request &req) const
{
	Range r;
	const MemoryKind *k = kinds_[static_cast<uint32_t>(req.iface)];
	if (k && k->extent(req, r))
		return r;
	return registrar_->extent(req);
}

Monitor *Cache::monitor_for(Iface iface) const
{
	if (iface == Iface::host)
		return monitor_.get();
	return device_monitors_[static_cast<uint32_t>(iface)].get();
}

// ---------------------------------------------------------------- hit path

void Cache::raw_ref_of(Entry *c, RawRef &out)
{
	out.entry = c;
	out.range = c->range;
	out.handle = c->reg.handle;
	out.desc = c->reg.desc;
	out.key = c->reg.key;
	out.cached = !(c->state().load(std::memory_order_relaxed) & kOrphan);
}

// Slow lookup: the index under the read side; refills the memo. Not
// found: hint says where the search ended, for miss(); and a full cache's
// next victim is prefetched (miss() evicts it after registering).
Entry *Cache::lookup(const Request &req, uintptr_t s, uintptr_t e, RawRef &out, const ThreadState &ts,
		     MissHint &hint)
{
	ReadGuard g(lock_);
	Entry *before = index_.last_at_or_before(IndexKey{static_cast<uint32_t>(req.iface), req.device, s, ~0ULL});
	Entry *c = before && before->iface == req.iface && before->device == req.device && before->range.covers(s, e)
			   ? before
			   : nullptr;
	if (!c) {
		hint.changes = index_.changes();
		hint.before = before;
		hint.valid = true;
		// The victim the miss evicts (mostly loaded already: the
		// previous miss prefetched it; not so the first after hits).
		if (count_ >= cfg_.max_count) [[unlikely]]
			if (Entry *v = lru_.front())
				prefetch_victim(v, ts);
		return nullptr;
	}
	out.shard = ts.shard;
	c->add_count(ts, 1); // in the index; writers wait for us
	Memo::fill(memo_.set_for(req.iface, req.device, s), *c);
	raw_ref_of(c, out);
	return c;
}

// Caller holds either side of lock_.
Entry *Cache::find_cover_locked(Iface iface, uint64_t device, uintptr_t s, uintptr_t e)
{
	Entry *c = index_.last_at_or_before(IndexKey{static_cast<uint32_t>(iface), device, s, ~0ULL});
	if (!c || c->iface != iface || c->device != device)
		return nullptr;
	return c->range.covers(s, e) ? c : nullptr;
}

void Cache::sync_monitor()
{
	if (pending_->load(std::memory_order_acquire)) [[unlikely]]
		monitor_->sync(*this);
	// Other kinds' monitors: here only (a hit on their entries relies on
	// generation words or valid(), not on a drained queue).
	for (auto &m : device_monitors_) {
		const std::atomic<uint64_t> *w = m ? m->pending_word() : nullptr;
		if (w && w->load(std::memory_order_acquire)) [[unlikely]]
			m->sync(*this);
	}
}

// A memo hit on an entry whose generation word or monitor must be checked:
// true if it passes; else the reference is given back (false).
bool Cache::hit_checked(Entry *c, unsigned shard)
{
	if (entry_ok(c)) [[likely]]
		return true;
	drop_stale(c, shard);
	return false;
}

bool Cache::entry_ok(Entry *c)
{
	// Held: its state (this life's flags) is stable, and in cache.
	uint64_t checks = c->state().load(std::memory_order_relaxed) & (kHasGen | kValidate);
	if (!checks)
		return true;
	bool ok = c->gen_word->load(std::memory_order_acquire) == c->gen;
	if (ok && (checks & kValidate)) [[unlikely]] {
		Monitor *m = monitor_for(c->iface);
		ok = m && m->valid(*c);
	}
	return ok;
}

// Its memory changed since it was registered: drop it (the caller retries).
void Cache::drop_stale(Entry *c, unsigned shard)
{
	lock_.lock();
	if (!(c->state().load() & kOrphan)) // held, not orphan: in the index
		unlink_locked(c, Cause::stale);
	settle_locked();
	lock_.unlock();
	put(c, shard);
	reap();
}

// Everything get() does not do inline (request already validated).
int Cache::get_slow(const Request &req, RawRef &out)
{
	uintptr_t s = reinterpret_cast<uintptr_t>(req.addr);
	uintptr_t e = s + req.len;
	if (forked_.load(std::memory_order_relaxed) || (req.flags & HMEMREG_MR_NO_CACHE) || cfg_.max_count == 0)
		[[unlikely]] return register_uncached(req, out,
						      cfg_.max_count == 0 ? HMEMREG_UNCACHED_LIMIT : HMEMREG_UNCACHED_ASKED);
	Memo::prefetch_fill(memo_.set_for(req.iface, req.device, s)); // lookup() fills it if it finds one
	sync_monitor();
	if (dead_pending_.load(std::memory_order_relaxed)) [[unlikely]]
		reap();
	const ThreadState &ts = thread_state();
	// Every insert into the index ticks the clock under lock_: unchanged
	// at the miss, nobody inserted a covering entry since this lookup.
	const uint64_t clock0 = clock_.load(std::memory_order_acquire);
	// The memo was probed by try_hit() (or not, when something was
	// pending: then the index answers once and refills it).
	MissHint hint;
	for (;;) {
		if (!lookup(req, s, e, out, ts, hint))
			break;
		if (entry_ok(out.entry)) [[likely]] {
			stats_->hit(ts.shard, ts.owned);
			return 0;
		}
		drop_stale(out.entry, out.shard);
	}
	return miss(req, out, clock0, hint);
}

// The lines an eviction of v reads and writes: its index and list links,
// its state word and counter cells (the ones this thread uses; others'
// are rarer).
void Cache::prefetch_victim(const Entry *v, const ThreadState &ts)
{
	const char *p = reinterpret_cast<const char *>(v);
	for (size_t off = 0; off < offsetof(Entry, spare_); off += 64) // (line 3: unused)
		__builtin_prefetch(p + off, 1);
	__builtin_prefetch(&v->state(), 1);
	__builtin_prefetch(&v->cell(ts.shard), 1);
}

// Second-level prefetches for the eviction this miss will make: the LRU's
// next entry (whose back link the eviction clears) and the victim's right
// child in the index (where next() and erase() go). They read the
// victim's links, so they wait for lock_, when the victim's lines
// (prefetched by lookup()) have arrived: a load of a line still on its way
// stalls the next locked instruction (the pool's mutex, the lock) until it
// comes.
void Cache::prefetch_eviction_locked()
{
	if (count_ < cfg_.max_count) [[likely]]
		return;
	const Entry *v = lru_.front();
	if (!v)
		return;
	if (const Entry *n = EntryList::next(v))
		__builtin_prefetch(&n->link_prev, 1);
	if (const Entry *r = v->ix_right)
		__builtin_prefetch(r, 1);
}

// Misses come in strides (a pool registered buffer by buffer, a transfer
// walking a large buffer chunk by chunk, a cache cycling through more
// regions than it holds): when this miss is as far from the thread's last
// one as that was from the one before, the next is likely as far again.
// Its memo line starts loading now: the memo scatters neighbouring pages,
// so its probe would otherwise wait for memory once the memo outgrows the
// caches. (A wrong guess costs one prefetch on a path that registers.)
void Cache::prefetch_next_miss(const Request &req)
{
	struct Stride {
		const Cache *cache;
		uintptr_t addr;
		intptr_t step;
	};
	static thread_local Stride last __attribute__((tls_model("initial-exec")));
	const auto a = reinterpret_cast<uintptr_t>(req.addr);
	const intptr_t step = static_cast<intptr_t>(a - last.addr);
	if (last.cache == this && step == last.step && step) {
		// The one after next: the next one's came with the previous miss.
		const auto d = static_cast<uintptr_t>(step);
		__builtin_prefetch(memo_.set_for(req.iface, req.device, a + 2 * d).way[0]);
	}
	last = Stride{this, a, step};
}

int Cache::get(const Request &req, Entry *&out)
{
	RawRef l;
	int rc = get(req, l);
	if (rc == 0)
		out = l.entry;
	return rc;
}

int Cache::get(const Request &req, Ref &out)
{
	RawRef l;
	int rc = get(req, l);
	if (rc == 0)
		out = Ref(this, l.entry, l.shard);
	return rc;
}

// Takes one reference of e back on the calling thread's counter (where
// its get counted it, normally: hint) and records `now` (low bits of the
// clock) there for the LRU. A put of another thread's reference, or one
// whose counter has none, first checks that somebody holds e: false if
// not (a double put; not detected when it races with other puts, or
// when another thread's put of the same reference went first).
bool Cache::uncount(Entry *e, unsigned hint, uint32_t now, const ThreadState &ts)
{
	Cell &c = e->cell(ts.shard);
	if (hint != ts.shard || c.count.load(std::memory_order_relaxed) <= 0) [[unlikely]] {
		if (e->count() == 0)
			return false;
	}
	e->add_count(ts, -1);
	if (c.last.load(std::memory_order_relaxed) != now)
		c.last.store(now, std::memory_order_relaxed);
	return true;
}

int Cache::put(Entry *e)
{
	return put(e, thread_state().shard);
}

int Cache::put_slow(Entry *e, unsigned shard)
{
	if (forked_.load(std::memory_order_relaxed) && e->pid != pid_) [[unlikely]]
		return -HMEMREG_ESTALE;
	auto now = static_cast<uint32_t>(clock_.load(std::memory_order_relaxed));
	now += !now; // 0 means "no put recorded"
	if (!uncount(e, shard, now, thread_state())) [[unlikely]]
		return -HMEMREG_EINVAL;
	if (e->state_after_count() & kOrphan) [[unlikely]]
		release_orphan(e);
	return 0;
}

uint64_t Cache::in_use() const
{
	// Approximate under concurrency; exact when quiescent.
	auto *self = const_cast<Cache *>(this);
	ReadGuard g(self->lock_);
	return in_use_locked();
}

uint64_t Cache::in_use_locked() const
{
	uint64_t n = 0;
	for (Entry *e = index_.first(); e; e = EntryIndex::next(e))
		n += e->count();
	for (Entry *e = orphans_.front(); e; e = EntryList::next(e))
		n += e->count();
	for (Entry *e = unsettled_.front(); e; e = EntryList::next(e))
		n += e->count();
	return n;
}

// ---------------------------------------------------------------- miss path

EntryPtr Cache::make_entry(const Request &req, Range r)
{
	EntryPtr e = pool_.make_next();
	e->range = r;
	e->iface = req.iface;
	e->device = req.device;
	e->cache = this;
	e->pid = pid_; // getpid() is a system call; pid_ is reset in a fork child
	return e;
}

// The stats fields a miss writes (misses, registrations, their time and
// histogram, evictions, invalidations, races, uncached) are written under
// lock_ only, so each is a plain load and store (StatsSlot::add_locked).
int Cache::do_register(const Request &req, Range r, Registration &out, RegTally &t)
{
	const reg_clock::Calibration &clk = reg_clock::calibration();
	for (int attempt = 0;; attempt++) {
		const uint64_t t0 = reg_clock::ticks(clk);
		int rc = registrar_->reg(req, r, out);
		const uint64_t t1 = reg_clock::ticks(clk);
		// A counter read on another CPU may be behind (a TSC the kernel
		// later found unstable): no negative time, no wrapped sum.
		const uint64_t took = t1 > t0 ? reg_clock::to_ns(clk, t1 - t0) : 0;
		t.ns += took;
		const unsigned bucket = took ? static_cast<unsigned>(63 - __builtin_clzll(took)) : 0;
		t.buckets[t.timed++] = std::min<unsigned>(bucket, HMEMREG_STATS_REG_HIST_BUCKETS - 1);
		if (rc == 0) {
			t.ok++;
			return 0;
		}
		t.failed++;
		// Out of resources: give back what nobody uses and try once more.
		if (rc != -HMEMREG_ENOMEM || attempt > 0 || flush() == 0)
			return rc;
	}
}

void Cache::record_locked(const RegTally &t)
{
	auto *s = stats_->raw();
	if (t.misses)
		StatsSlot::add_locked(s->misses, t.misses);
	StatsSlot::add_locked(s->registration_ns, static_cast<int64_t>(t.ns));
	for (unsigned i = 0; i < t.timed; i++)
		StatsSlot::add_locked(s->registration_hist[t.buckets[i]], 1);
	if (t.ok)
		StatsSlot::add_locked(s->registrations, t.ok);
	if (t.failed)
		StatsSlot::add_locked(s->registration_failures, t.failed);
}

void Cache::record(const RegTally &t)
{
	lock_.lock();
	record_locked(t);
	lock_.unlock();
}

void Cache::count_uncached_locked(hmemreg_uncached_reason why)
{
	auto *s = stats_->raw();
	StatsSlot::add_locked(s->uncached_registrations, 1);
	StatsSlot::add_locked(s->uncached_by[why], 1);
}

int Cache::register_uncached(const Request &req, RawRef &out, hmemreg_uncached_reason why)
{
	return register_uncached(req, out, why, RegTally{});
}

int Cache::register_uncached(const Request &req, RawRef &out, hmemreg_uncached_reason why, RegTally t)
{
	Range r = extent_of(req);
	EntryPtr owned = make_entry(req, r);
	Entry *e = owned.get();
	int rc = do_register(req, r, e->reg, t);
	if (rc) {
		record(t);
		return rc;
	}
	const ThreadState &ts = thread_state();
	lock_.lock();
	record_locked(t);
	hand_out_uncached_locked(std::move(owned), why, ts);
	publish_gauges_locked();
	lock_.unlock();
	raw_ref_of(e, out);
	out.shard = ts.shard;
	return 0;
}

// An entry nobody else knows yet, handed out uncached: the cache's until
// its last put releases it.
void Cache::hand_out_uncached_locked(EntryPtr owned, hmemreg_uncached_reason why, const ThreadState &ts)
{
	Entry *e = owned.release();
	e->set_state(kOrphan | e->life());
	e->add_count(ts, 1);
	list_orphan_locked(e);
	count_uncached_locked(why);
}

void Cache::list_orphan_locked(Entry *e)
{
	e->orphan_listed = true;
	orphans_.push_back(e);
	orphan_count_++;
	orphan_bytes_ += e->range.size();
}

// The steps of miss(), in order. Each runs once per miss: always inline,
// so that the miss path compiles to what it was as one function.

// Watch first, then register: a change after the watch is seen either by
// the generation word or by notify_seq_ (raced_locked()).
[[gnu::always_inline]] inline int Cache::watch_and_register(const Request &req, Monitor *mon, Entry &e,
							     RegTally &tally, Watch &w)
{
	w.seq0 = notify_seq_.load(std::memory_order_acquire);
	w.rc = mon ? mon->subscribe(e) : -HMEMREG_ENOTSUP;
	e.watched = w.rc == 0 || w.rc == kWatchedAlone;
	if (w.rc == kWatchedAlone) [[unlikely]]
		StatsSlot::add(stats_->raw()->monitor_fallbacks, 1);
	int rc = do_register(req, e.range, e.reg, tally);
	if (rc) {
		record(tally);
		if (e.watched)
			mon->unsubscribe(e);
	}
	return rc;
}

// Another thread registered a covering range since the lookup (the clock
// moved, and the index has one): a reference on it, or null.
[[gnu::always_inline]] inline Entry *Cache::racer_locked(const Request &req, Range r, uint64_t clock0,
							  const ThreadState &ts)
{
	Entry *other = clock_.load(std::memory_order_relaxed) == clock0
			       ? nullptr
			       : find_cover_locked(req.iface, req.device, r.start, r.end);
	if (other) {
		other->add_count(ts, 1);
		StatsSlot::add_locked(stats_->raw()->races, 1);
	}
	return other;
}

// Where a registered miss goes: into the index once the entries its range
// covers left (replaced) and the LRU's front ones made room (evicted), or
// out uncached: not watched, invalidated while registering, or no room.
[[gnu::always_inline]] inline Cache::Placement Cache::place_locked(const Request &req, Range r, const Entry &e,
								   const Watch &w, const MissHint &hint)
{
	Placement p;
	p.successor = kNoSuccessor;
	p.why = w.rc == kUnwatchable ? HMEMREG_UNCACHED_UNWATCHABLE
		: !e.watched	     ? HMEMREG_UNCACHED_REFUSED
				     : HMEMREG_UNCACHED_RACED;
	p.cache_it = e.watched && !raced_locked(w.seq0, req.iface, r);
	if (!p.cache_it)
		return p;
	// Replaced entries settle now (tests and callers expect their
	// release); evictions are batched (one heavy fence per batch).
	p.settle_now = replace_locked(req, r, hint, p.successor);
	evict_locked(r, p.successor);
	p.cache_it = fits_locked(r);
	p.why = HMEMREG_UNCACHED_LIMIT;
	return p;
}

// The entries inside r leave the index; successor: where r goes in it.
// True if any left.
[[gnu::always_inline]] inline bool Cache::replace_locked(const Request &req, Range r, const MissHint &hint,
							  Entry *&successor)
{
	// The lookup's search still holds if the index did not change since.
	const bool same = hint.valid && hint.changes == index_.changes();
	return unlink_nested_locked(req.iface, req.device, r.start, r.end, successor,
				    same ? hint.before : kNoSuccessor) > 0;
}

// The least recently released entries leave until r fits or none is free
// (successor moves past one that leaves).
[[gnu::always_inline]] inline void Cache::evict_locked(Range r, Entry *&successor)
{
	while (!fits_locked(r)) {
		Entry *v = lru_pick_locked();
		if (!v)
			break;
		if (v == successor)
			successor = EntryIndex::next(v); // leaving: the next key after it is
		unlink_locked(v, Cause::evicted);
	}
}

bool Cache::fits_locked(Range r) const
{
	return count_ + 1 <= cfg_.max_count && bytes_ + r.size() <= cfg_.max_size;
}

// Published: memo_hit may take it from here on.
[[gnu::always_inline]] inline void Cache::insert_locked(EntryPtr owned, Entry *successor, uint64_t tick,
							 const ThreadState &ts)
{
	Entry *e = owned.get();
	e->add_count(ts, 1);
	e->inserted = tick;
	e->set_state(e->life());
	if (successor == kNoSuccessor)
		index_.insert(owned.release()); // the cache's until released
	else
		index_.insert_before(successor, owned.release());
	lru_append_locked(e, tick);
	count_++;
	bytes_ += e->range.size();
}

// What reap() releases (after lock_).
void Cache::take_dead_locked(EntryList &out)
{
	out.swap(dead_);
	dead_count_ = dead_bytes_ = 0;
	dead_pending_.store(0, std::memory_order_relaxed);
}

// Register the range, then under lock_: use a racing thread's covering
// entry instead, or make room and insert it, or hand it out uncached.
// The memo is left alone (memo.hpp says when a slot is filled).
int Cache::miss(const Request &req, RawRef &out, uint64_t clock0, const MissHint &hint)
{
	RegTally tally;
	tally.misses = 1;
	Range r = extent_of(req);
	if ((cfg_.max_entry_size && r.size() > cfg_.max_entry_size) || r.size() > cfg_.max_size)
		return register_uncached(req, out, HMEMREG_UNCACHED_LIMIT, tally);
	Monitor *mon = monitor_for(req.iface);
	prefetch_next_miss(req);
	EntryPtr owned = make_entry(req, r);
	Entry *e = owned.get();
	Watch w;
	if (int rc = watch_and_register(req, mon, *e, tally, w))
		return rc;

	const ThreadState &ts = thread_state();
	lock_.lock();
	prefetch_eviction_locked();
	record_locked(tally);
	if (Entry *other = racer_locked(req, r, clock0, ts)) {
		lock_.unlock();
		if (e->watched)
			mon->unsubscribe(*e);
		registrar_->dereg(e->reg);
		StatsSlot::add(stats_->raw()->deregistrations, 1);
		raw_ref_of(other, out);
		out.shard = ts.shard;
		return 0;
	}
	const Placement p = place_locked(req, r, *e, w, hint);
	const uint64_t tick = tick_locked();
	if (p.settle_now || unsettled_count_ >= settle_batch_)
		settle_locked();
	if (p.cache_it)
		insert_locked(std::move(owned), p.successor, tick, ts);
	else
		hand_out_uncached_locked(std::move(owned), p.why, ts);
	// The next miss of a full cache evicts the new LRU front: its lines
	// load now, behind this miss's unlock and the next get's memo probe,
	// instead of after the next lookup (a cache under churn misses in
	// runs; a hit next wastes the prefetch of a few lines).
	if (count_ >= cfg_.max_count)
		if (Entry *v = lru_.front())
			prefetch_victim(v, ts);
	EntryList released; // what reap() would take, in the same critical section
	take_dead_locked(released);
	publish_gauges_locked();
	lock_.unlock();
	release_entries(released);
	raw_ref_of(e, out);
	out.shard = ts.shard;
	return 0;
}

// ---------------------------------------------------------------- LRU

void Cache::lru_remove_locked(Entry *e)
{
	if (!e->on_lru)
		return;
	lru_.remove(e);
	e->on_lru = false;
}

// Insert keeping the list sorted by stamp; walks from the tail, where
// recently released entries belong.
void Cache::lru_append_locked(Entry *e, uint64_t stamp)
{
	e->lru_stamp = stamp;
	Entry *after = lru_.back();
	while (after && after->lru_stamp > stamp)
		after = EntryList::prev(after);
	lru_.insert_after(after, e);
	e->on_lru = true;
}

// The least recently released unused entry, or null. Entries released
// since they were placed move to their place by release time; in-use ones
// go to the tail (they will be placed properly after their put).
Entry *Cache::lru_pick_locked()
{
	unsigned busy = 0;
	uint64_t steps = 0, limit = count_ + kLruScanLimit;
	Entry *e = lru_.front();
	while (e && steps++ < limit) {
		Entry *next = EntryList::next(e);
		uint64_t used = e->last_used(clock_.load(std::memory_order_relaxed));
		if (e->count() != 0) {
			if (++busy > kLruScanLimit)
				return nullptr; // (nearly) everything is in use
			lru_remove_locked(e);
			lru_append_locked(e, clock_.load(std::memory_order_relaxed));
		} else if (used > e->lru_stamp) {
			lru_remove_locked(e);
			lru_append_locked(e, used);
		} else {
			return e;
		}
		e = next ? next : lru_.front();
	}
	return nullptr;
}

// ---------------------------------------------------------------- invalidation

void Cache::unlink_locked(Entry *e, Cause cause)
{
	index_.erase(e);
	lru_remove_locked(e);
	count_--;
	bytes_ -= e->range.size();
	e->state().fetch_or(kOrphan, std::memory_order_seq_cst);
	// Held or not is decided by settle_locked(), after a heavy fence.
	unsettled_.push_back(e);
	unsettled_count_++;
	unsettled_bytes_ += e->range.size();
	auto ci = static_cast<uint32_t>(cause);
	if (ci < HMEMREG_INVAL_MAX)
		StatsSlot::add_locked(stats_->raw()->invalidations[ci], 1);
	else
		StatsSlot::add_locked(stats_->raw()->evictions, 1);
}

// Decide for every unlinked entry whether it is still held (orphans_,
// released at its last put) or not (dead_, deregistered by reap()). The
// heavy fence makes every count stored before it visible, and every later
// get or put see kOrphan (entry.hpp). Until then an unsettled entry is
// neither listed nor released: a put that sees kOrphan and finds it
// unlisted leaves the decision to this sum, which sees its decrement
// (stored before it took lock_, or ordered by the fence).
void Cache::settle_locked()
{
	if (unsettled_.empty())
		return;
	heavy_fence();
	while (Entry *e = unsettled_.pop_front()) {
		if (e->count() != 0) {
			list_orphan_locked(e);
		} else {
			dead_count_++;
			dead_bytes_ += e->range.size();
			dead_.push_back(e);
			dead_pending_.store(1, std::memory_order_relaxed);
		}
	}
	unsettled_count_ = unsettled_bytes_ = 0;
}

// Entries of iface (any device) overlapping [s, e).
int Cache::unlink_overlapping_locked(Iface iface, uintptr_t s, uintptr_t e, Cause cause)
{
	int n = 0;
	const auto i = static_cast<uint32_t>(iface);
	Entry *it = index_.first_at_or_after(IndexKey{i, 0, 0, 0});
	while (it && it->iface == iface) {
		const uint64_t dev = it->device;
		auto same = [&](const Entry *x) { return x && x->iface == iface && x->device == dev; };
		// Non-nested ranges: ends grow with starts, so walk back from the
		// first entry starting at or after s while ends reach past s.
		Entry *first = index_.first_at_or_after(IndexKey{i, dev, s, 0});
		Entry *cur = first;
		for (Entry *p = first ? EntryIndex::prev(first) : index_.last(); same(p) && p->range.end > s;
		     p = EntryIndex::prev(p))
			cur = p;
		while (same(cur) && cur->range.start < e) {
			Entry *nx = EntryIndex::next(cur);
			if (cur->range.overlaps(s, e)) {
				unlink_locked(cur, cause);
				n++;
			}
			cur = nx;
		}
		if (dev == ~0ULL)
			break;
		it = index_.first_at_or_after(IndexKey{i, dev + 1, 0, 0});
	}
	return n;
}

// The first of the entries with e's iface, device and start (they differ
// by serial: a replaced one still in the index beside its replacement).
Entry *Cache::first_starting_at(Entry *e)
{
	for (Entry *p = EntryIndex::prev(e); p && p->iface == e->iface && p->device == e->device &&
					     p->range.start == e->range.start;
	     p = EntryIndex::prev(p))
		e = p;
	return e;
}

// Entries of (iface, device) inside [s, e): what a registration of [s, e)
// replaces. Only entries starting at or after s can be inside, so this is
// one search. successor: the first entry left whose start is past s, or
// null if none (what insert_before() takes for a new entry starting at
// s); kNoSuccessor where an entry starting at s stays (a race: the
// caller then inserts with a search).
int Cache::unlink_nested_locked(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, Entry *&successor,
				Entry *before)
{
	int n = 0;
	// before (unless kNoSuccessor): the last entry at or before (s, any
	// serial), from a search of this same index, or null if none is.
	Entry *cur;
	if (before == kNoSuccessor)
		cur = index_.first_at_or_after(IndexKey{static_cast<uint32_t>(iface), device, s, 0});
	else if (!before)
		cur = index_.first();
	else if (before->iface == iface && before->device == device && before->range.start == s)
		cur = first_starting_at(before); // entries starting at s may be inside
	else
		cur = EntryIndex::next(before);
	Entry *kept = kNoSuccessor; // the first entry of the walk left in the index
	while (cur && cur->iface == iface && cur->device == device && cur->range.start < e) {
		Entry *nx = EntryIndex::next(cur);
		if (cur->range.end <= e) {
			unlink_locked(cur, Cause::replaced);
			n++;
		} else if (kept == kNoSuccessor) {
			kept = cur;
		}
		cur = nx;
	}
	if (kept == kNoSuccessor)
		kept = cur; // past the walk (another device or kind, or none)
	successor = kept && kept->iface == iface && kept->device == device && kept->range.start == s ? kNoSuccessor : kept;
	return n;
}

void Cache::note_invalidation_locked(Iface iface, uintptr_t s, uintptr_t e)
{
	uint64_t seq = notify_seq_.load(std::memory_order_relaxed) + 1;
	recent_[seq % kRecent] = RecentRange{static_cast<uint32_t>(iface), s, e};
	notify_seq_.store(seq, std::memory_order_release);
}

// Was [r) (or everything, if too much happened) invalidated since seq0?
bool Cache::raced_locked(uint64_t seq0, Iface iface, Range r) const
{
	uint64_t cur = notify_seq_.load(std::memory_order_acquire);
	if (cur - seq0 >= kRecent)
		return cur != seq0;
	for (uint64_t q = seq0 + 1; q <= cur; q++) {
		const RecentRange &x = recent_[q % kRecent];
		if (x.iface == static_cast<uint32_t>(iface) && r.overlaps(x.start, x.end))
			return true;
	}
	return false;
}

void Cache::notify(Iface iface, uintptr_t s, uintptr_t e, Cause cause)
{
	lock_.lock();
	note_invalidation_locked(iface, s, e);
	if (unlink_overlapping_locked(iface, s, e, cause))
		tick_locked();
	settle_locked();
	publish_gauges_locked();
	lock_.unlock();
}

void Cache::notify_entry(Iface iface, uint64_t device, uintptr_t start, uint64_t serial, Cause cause)
{
	lock_.lock();
	if (Entry *e = index_.find(IndexKey{static_cast<uint32_t>(iface), device, start, serial})) {
		note_invalidation_locked(iface, start, e->range.end);
		unlink_locked(e, cause);
	}
	settle_locked();
	publish_gauges_locked();
	lock_.unlock();
}

void Cache::revalidate(Cause cause)
{
	lock_.lock();
	note_invalidation_locked(Iface::host, 0, ~uintptr_t{0});
	for (Entry *e = index_.first(); e;) {
		Entry *nx = EntryIndex::next(e);
		if (e->gen_word->load(std::memory_order_acquire) != e->gen)
			unlink_locked(e, cause);
		e = nx;
	}
	settle_locked();
	publish_gauges_locked();
	lock_.unlock();
}

int Cache::invalidate(Iface iface, uintptr_t s, uintptr_t e, Cause cause)
{
	lock_.lock();
	note_invalidation_locked(iface, s, e);
	int n = unlink_overlapping_locked(iface, s, e, cause);
	settle_locked();
	publish_gauges_locked();
	lock_.unlock();
	reap();
	return n;
}

uint64_t Cache::drop_device(Iface iface, uint64_t device, Cause cause)
{
	const auto i = static_cast<uint32_t>(iface);
	lock_.lock();
	bool any = false;
	for (Entry *e = index_.first_at_or_after(IndexKey{i, device, 0, 0});
	     e && e->iface == iface && e->device == device;) {
		Entry *nx = EntryIndex::next(e);
		note_invalidation_locked(iface, e->range.start, e->range.end);
		unlink_locked(e, cause);
		any = true;
		e = nx;
	}
	if (any)
		tick_locked();
	settle_locked();
	uint64_t held = 0;
	for (Entry *e = orphans_.front(); e; e = EntryList::next(e))
		held += e->iface == iface && e->device == device;
	publish_gauges_locked();
	lock_.unlock();
	reap();
	return held;
}

int Cache::flush()
{
	int n = 0;
	lock_.lock();
	for (Entry *e = index_.first(); e;) {
		Entry *nx = EntryIndex::next(e);
		if (e->count() == 0) {
			unlink_locked(e, Cause::evicted);
			n++;
		}
		e = nx;
	}
	settle_locked();
	publish_gauges_locked();
	lock_.unlock();
	reap();
	return n;
}

// ---------------------------------------------------------------- release

// e was seen orphan after a put (or a stale hit's undo): release it if it
// is still listed and nobody holds it. e may have been released meanwhile
// (then it is not listed and maybe already in another life): only the
// flag, which changes under lock_ alone, is read before that is known.
void Cache::release_orphan(Entry *e)
{
	EntryList out;
	lock_.lock();
	if (e->orphan_listed && e->count() == 0) { // listed: on orphans_
		e->orphan_listed = false;
		orphan_count_--;
		orphan_bytes_ -= e->range.size();
		orphans_.remove(e);
		out.push_back(e);
	}
	publish_gauges_locked();
	lock_.unlock();
	release_entries(out);
}

void Cache::reap()
{
	EntryList out;
	lock_.lock();
	take_dead_locked(out);
	publish_gauges_locked();
	lock_.unlock();
	release_entries(out);
}

// No lock held: unsubscribe, deregister, back to the pool (all at once:
// one pool lock, one count).
void Cache::release_entries(EntryList &list)
{
	if (list.empty())
		return;
	int64_t n = 0;
	for (Entry *e = list.front(); e; e = EntryList::next(e), n++) {
		if (e->watched) {
			if (Monitor *m = monitor_for(e->iface))
				m->unsubscribe(*e);
		}
		registrar_->dereg(e->reg);
	}
	StatsSlot::add(stats_->raw()->deregistrations, n);
	pool_.release_all(list);
}

void Cache::publish_gauges_locked()
{
	auto *s = stats_->raw();
	StatsSlot::set(s->entries, count_);
	StatsSlot::set(s->bytes, bytes_);
	StatsSlot::set(s->uncached, orphan_count_);
	StatsSlot::set(s->uncached_bytes, orphan_bytes_);
	StatsSlot::set(s->dead, dead_count_ + unsettled_count_);
	StatsSlot::set(s->dead_bytes, dead_bytes_ + unsettled_bytes_);
}

// ---------------------------------------------------------------- fork

void Cache::before_fork()
{
	if (cfg_.purge_on_fork && !forked_.load()) {
		int n = flush();
		// flush() counted them as evictions; they are fork purges.
		lock_.lock();
		StatsSlot::add_locked(stats_->raw()->evictions, -n);
		StatsSlot::add_locked(stats_->raw()->invalidations[HMEMREG_INVAL_FORK], n);
		lock_.unlock();
	}
	lock_.lock(); // no thread may be inside the cache at fork()
}

void Cache::after_fork_parent()
{
	lock_.unlock();
}

void Cache::after_fork_child()
{
	// Registrations belong to the parent: forget them without touching the
	// registrar, keep the Entry objects so a stale put is recognised.
	take_all_locked(parent_);
	dead_pending_.store(0);
	forked_.store(1);
	pid_ = ::getpid();
	pending_ = &kZeroWord; // the monitor's thread did not survive fork
	// Counters now describe this process: private slot (the shared one is the parent's).
	// Deliberately not destroyed: its destructor would free the parent's
	// slot in the still-shared mapping.
	(void)stats_.release();
	stats_ = StatsSlot::acquire(false, cfg_.name);
	hit_counters_ = stats_->raw()->hits;
	lock_.unlock();
}

} // namespace hmemreg::mr
