// SPDX-License-Identifier: MIT
#include <algorithm>

#include "mrcache/memo.hpp"

namespace hmemreg::mr {

Memo::Memo(uint64_t max_entries)
{
	// Past 32Ki entries, two slots per entry up to 2Mi slots (128 MiB):
	// with 128Ki slots, most hits of a 1M-entry cache searched the index.
	uint64_t want = 4 * (max_entries ? max_entries : 64), n = 128;
	uint64_t cap = 1ULL << 17;
	if (max_entries > (1ULL << 15)) {
		want = std::max<uint64_t>(cap, 2 * max_entries);
		cap = 1ULL << 21;
	}
	while (n < want && n < cap)
		n <<= 1;
	slots_ = HugeArray<Slot>(n);
	shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
}

bool Memo::Slot::begin_write(uint32_t &q)
{
	uint64_t cur = word.load(std::memory_order_relaxed);
	if ((cur & 1) || !word.compare_exchange_strong(cur, cur + 1, std::memory_order_acquire))
		return false; // (seq is even: +1 never carries into kSpilled)
	q = static_cast<uint32_t>(cur);
	return true;
}

void Memo::fill(const Set &set, const Entry &c)
{
	constexpr auto rel = std::memory_order_release;
	const uint64_t life = c.state().load(std::memory_order_relaxed) & kLifeMask;
	const uintptr_t tagged = reinterpret_cast<uintptr_t>(&c) | static_cast<uint32_t>(c.iface);
	auto holds_c = [&](const Slot *s) {
		return s->entry.load(std::memory_order_relaxed) == tagged && s->life() == life &&
		       !(s->word.load(std::memory_order_relaxed) & 1);
	};
	Slot *const a = set.way[0], *const b = set.way[1];
	if (holds_c(a))
		return; // already there
	Slot *w = a;
	// The second way's line is read only when the first holds a live
	// entry: a miss whose first way is free touches one memo line. (If c
	// is in the second way already, the first now gets a copy: two slots
	// naming one entry in one life, both stale together.)
	if (a->names_live_entry()) {
		if (holds_c(b)) {
			a->set_spilled(); // (it may have been cleared since)
			return;
		}
		if (b->names_live_entry()) { // both live: evict one, alternating per thread
			static thread_local uint32_t flip;
			w = set.way[++flip & 1];
		} else {
			w = b;
		}
	}
	uint32_t q;
	if (!w->begin_write(q))
		return;
	w->entry.store(tagged, rel);
	w->device.store(c.device, rel);
	w->start.store(c.range.start, rel);
	w->end.store(c.range.end, rel);
	w->handle.store(reinterpret_cast<uintptr_t>(c.reg.handle), rel);
	w->desc.store(reinterpret_cast<uintptr_t>(c.reg.desc), rel);
	w->key.store(c.reg.key, rel);
	// The first way now holds a page of its own: pages that spilled from
	// it are forgotten (each refinds the bit at its next fill); that
	// keeps the bit rare where entries churn, so misses skip the probe.
	const bool first = w == a;
	w->end_write(q, life, !first);
	if (!first)
		a->set_spilled();
}

} // namespace hmemreg::mr
