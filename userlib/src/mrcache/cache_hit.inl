// SPDX-License-Identifier: MIT
// The cache's hit path, inline (what UCX keeps in rcache.inl): the memo
// probe, the reference count, the put. Included by the C API (whose get
// and put compile into one call each) and by cache.cpp; every other
// caller goes through Cache::get()/put() out of line.
#pragma once

#include "mrcache/cache.hpp"

namespace hmemreg::mr {

// ---- hit path, inline (the C API's get and put compile into one call each)
// Forced: the C API functions are the only callers that matter, and a
// call with its register saves and a RawRef in memory was a fifth of a hit.
#define HMEMREG_HIT_PATH inline __attribute__((always_inline))

// A hit on the memo: count a reference, then check the entry is still
// cached in the same life (the handshake in entry.hpp); if not, give it
// back. st: the state seen (its flags say which checks the hit needs).
// Out: a RawRef, or the C API's output (c_api.cpp). view() takes the
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

HMEMREG_HIT_PATH int Cache::get(const Request &req, RawRef &out)
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
