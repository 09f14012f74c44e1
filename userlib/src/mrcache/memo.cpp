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
		return false; // (seq is even: +1 never carries into the life)
	q = static_cast<uint32_t>(cur);
	return true;
}

namespace {

// Does the slot name an entry still cached in the life it was memoised
// in? (Entries are never unmapped while the cache lives: the load is
// safe on a slot being rewritten; the answer is only a hint.)
bool names_live_entry(const Memo::Slot &s)
{
	uintptr_t tagged = s.entry.load(std::memory_order_acquire);
	auto *e = reinterpret_cast<const Entry *>(tagged & ~uintptr_t{63});
	if (!e)
		return false;
	uint64_t life = s.life();
	return (e->state().load(std::memory_order_relaxed) & (kOrphan | kLifeMask)) == life;
}

} // namespace

void Memo::fill(const Set &set, const Entry &c)
{
	constexpr auto rel = std::memory_order_release;
	const uint64_t life = c.state().load(std::memory_order_relaxed) & kLifeMask;
	const uintptr_t tagged = reinterpret_cast<uintptr_t>(&c) | static_cast<uint32_t>(c.iface);
	Slot *w = nullptr;
	for (Slot *s : set.way) {
		if (s->entry.load(std::memory_order_relaxed) == tagged && s->life() == life &&
		    !(s->word.load(std::memory_order_relaxed) & 1))
			return; // already there
		if (!w && !names_live_entry(*s))
			w = s;
	}
	if (!w) { // both hold live entries: evict one, alternating per thread
		static thread_local uint32_t flip;
		w = set.way[++flip & 1];
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
	w->end_write(q, life);
}

} // namespace hmemreg::mr
