// SPDX-License-Identifier: MIT
// Memo: the cache's lock-free front, a 2-way skewed-associative table of
// recent lookups hashed by the request's page: each page has two candidate
// slots from two hashes, so two pages that share one rarely share the
// other, and a fill takes whichever holds no live entry, the first way if
// it can (2-way sets thrashed when three hot pages met in one set). A slot
// is one cache line: the covering entry, the life it had when memoised
// (entry.hpp), and copies of its range and registration, so a hit reads
// this line, the entry's state word and the thread's counter cell only.
//
// An entry is memoised by its first hit, not by its miss: slots are
// written under a per-slot seqlock by slow lookups (Cache::lookup()) only.
// So a range used once (a scan, a cache cycling through more than it
// holds) never displaces a hot page's slot, and a miss reads no slot's
// entry to choose a way. Several may fill at once; a slot busy with
// another writer is skipped: the memo is a hint.
// Readers take no lock: a slot that is being written, or changed while
// read, is a miss. What a slot names is only a candidate: the cache counts
// a reference and then checks that the entry is still cached in that life
// (entry.hpp), so a stale slot never answers.
//
// A slot's word also says whether a page whose first way it is went to its
// second way (kSpilled, set by that fill): without it a lookup does not
// probe the second way. A miss (nothing memoised for its page) then waits
// for one memo line, not two in a row (two DRAM misses at 1M entries).
// The bit is a hint like the rest: cleared when the slot is written for a
// page of its own, it may leave a page in its second way unseen; that get
// then searches the index, and its fill, finding the page there, sets the
// bit again.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "mrcache/entry.hpp"
#include "mrcache/huge_array.hpp"

namespace hmemreg::mr {

// What a slot held when read consistently.
struct MemoView {
	Entry *entry = nullptr;
	uint64_t life = 0; // state & kLifeMask when memoised (kOrphan clear)
	Range range;
	void *handle = nullptr, *desc = nullptr;
	uint64_t key = 0;
};

class Memo {
public:
	struct alignas(64) Slot {
		// Low half: seq (bits 0-30), odd while a writer holds the slot,
		// and kSpilled (bit 31). High half: the entry's life when
		// memoised ((state & kLifeMask) >> 32), so one load reads both
		// and the closing re-load checks both.
		std::atomic<uint64_t> word{0};
		std::atomic<uintptr_t> entry{0}; // Entry * | iface (entries are 64-byte aligned)
		std::atomic<uintptr_t> start{0}, end{0};
		std::atomic<uint64_t> device{0};
		std::atomic<uintptr_t> handle{0}, desc{0};
		std::atomic<uint64_t> key{0};

		// Writer side: false if another writer holds it; else q is the
		// value to give end_write(), which publishes life (state bits)
		// and keeps kSpilled (as set now, also by others meanwhile: a
		// set racing with this store may be lost, a hint) unless told.
		bool begin_write(uint32_t &q);
		void end_write(uint32_t q, uint64_t life, bool keep_spilled = true)
		{
			const uint64_t sp = keep_spilled ? word.load(std::memory_order_relaxed) & kSpilled : 0;
			word.store((life & kLifeMask) | sp | ((q + 2) & kSeqMask), std::memory_order_release);
		}
		void end_write(uint32_t q) { end_write(q, life()); }
		uint64_t life() const { return word.load(std::memory_order_relaxed) & ~uint64_t{0xffffffff}; }
		bool spilled() const { return word.load(std::memory_order_relaxed) & kSpilled; }
		// A page whose first way this is went to its second way. (A
		// reader that sees the word change misses once; a writer that
		// holds the slot may lose it: hints.)
		void set_spilled()
		{
			if (!spilled())
				word.fetch_or(kSpilled, std::memory_order_relaxed);
		}
		// Does it name an entry still cached in the life it was memoised
		// in? (Entries are never unmapped while the cache lives: the load
		// is safe on a slot being rewritten; the answer is only a hint.)
		bool names_live_entry() const
		{
			auto *e = reinterpret_cast<const Entry *>(entry.load(std::memory_order_acquire) & ~uintptr_t{63});
			return e && (e->state().load(std::memory_order_relaxed) & (kOrphan | kLifeMask)) == life();
		}
	};
	// (In the low half, so the high half stays the life alone: the hit
	// path takes it with one mask, as before the bit.)
	static constexpr uint64_t kSpilled = 1ULL << 31;
	static constexpr uint32_t kSeqMask = 0x7fffffff; // seq wraps below kSpilled
	static_assert(sizeof(Slot) == 64);
	// A page's two candidate slots.
	struct Set {
		Slot *way[2];
	};

	Memo() = default;
	// Four slots per entry the cache may hold (rounded up to a power of
	// two), 128 .. 128Ki slots of 64 bytes (8 MiB); caches of more than
	// 32Ki entries get two per entry, up to 2Mi slots (128 MiB). In huge
	// pages, every slot constructed (written) once here.
	explicit Memo(uint64_t max_entries);

	__attribute__((always_inline)) Set set_for(Iface iface, uint64_t device, uintptr_t s)
	{
		uint64_t k = key(iface, device, s);
		size_t a = first(k);
		return Set{{&slots_[a], &slots_[second(k, a)]}};
	}
	// find(set_for(...)) that hashes for the second way only when the
	// first does not answer (the hit path's usual case needs one hash),
	// and probes it only if a page of the first way spilled there.
	// (Not prefetching the second way's line: that would save a memo miss
	// one wait, but doubles the memo lines every hit pulls into the caches.)
	__attribute__((always_inline)) bool lookup(Iface iface, uint64_t device, uintptr_t s, uintptr_t e, MemoView &out)
	{
		uint64_t k = key(iface, device, s);
		size_t a = first(k);
		uint64_t w;
		if (probe(slots_[a], iface, device, s, e, out, w)) [[likely]]
			return true;
		if (!(w & kSpilled)) // (as the probe read it)
			return false;
		return probe(slots_[second(k, a)], iface, device, s, e, out, w);
	}

	// A slot of set naming an entry of (iface, device) covering [s, e).
	// Every load is acquire, so the closing load of word cannot move above
	// the field loads: a seqlock without fences (which TSan understands;
	// plain loads on x86). The first way is tried first: fills prefer it,
	// so in a sparse table that branch is predictable.
	__attribute__((always_inline)) static bool find(const Set &set, Iface iface, uint64_t device, uintptr_t s, uintptr_t e, MemoView &out)
	{
		return probe(*set.way[0], iface, device, s, e, out) || probe(*set.way[1], iface, device, s, e, out);
	}
	__attribute__((always_inline)) static bool probe(const Slot &slot, Iface iface, uint64_t device, uintptr_t s, uintptr_t e,
							 MemoView &out)
	{
		uint64_t w;
		return probe(slot, iface, device, s, e, out, w);
	}
	// The same, w: the slot's word as first read.
	__attribute__((always_inline)) static bool probe(const Slot &slot, Iface iface, uint64_t device, uintptr_t s, uintptr_t e,
							 MemoView &out, uint64_t &w)
	{
		constexpr auto acq = std::memory_order_acquire;
		w = slot.word.load(acq);
		uintptr_t tagged = slot.entry.load(acq);
		uintptr_t st = slot.start.load(acq), en = slot.end.load(acq);
		if ((w & 1) || (tagged & 63) != static_cast<uint32_t>(iface) || st > s || e > en)
			return false;
		uint64_t dev = slot.device.load(acq);
		out.handle = reinterpret_cast<void *>(slot.handle.load(acq));
		out.desc = reinterpret_cast<void *>(slot.desc.load(acq));
		out.key = slot.key.load(acq);
		if (slot.word.load(acq) != w || dev != device || !(tagged & ~uintptr_t{63}))
			return false;
		out.life = w & ~uint64_t{0xffffffff};
		out.entry = reinterpret_cast<Entry *>(tagged & ~uintptr_t{63});
		out.range = Range{st, en};
		return true;
	}

	// A fill of set will soon read the state word of the entry its first
	// way names (to keep a live one), and if that one is live the second
	// way: start loading them now, so a slow lookup hides those cache
	// misses behind its index search. (Not the second way's entry: a fill
	// whose first way is free never needs it.)
	static void prefetch_fill(const Set &set)
	{
		uintptr_t tagged = set.way[0]->entry.load(std::memory_order_relaxed) & ~uintptr_t{63};
		if (tagged) {
			__builtin_prefetch(&reinterpret_cast<const Entry *>(tagged)->state());
			__builtin_prefetch(set.way[1]);
		}
	}

	// Memoise c (caller holds a reference, so its fields are stable) in a
	// slot of set that does not name a live entry, else in either (a slot
	// another writer holds is left alone: the fill gives up). In the
	// second way, or found there: the first way is marked kSpilled.
	static void fill(const Set &set, const Entry &c);

private:
	static uint64_t key(Iface iface, uint64_t device, uintptr_t s)
	{
		return (s >> 12) ^ (static_cast<uint64_t>(iface) << 56) ^ (device << 48);
	}
	// The first way: Fibonacci hashing of the page number. Pages at a
	// constant stride (buffers carved from one allocation, pools) land on
	// distinct slots for every stride up to 16 MiB or so, and random pages
	// spread as with any hash; a few huge power-of-two strides (1 GiB,
	// 4 GiB) cluster. The second way: a 64-bit finalizer, independent of
	// the first, which takes those. Fills prefer the first way, so hits
	// mostly need one line and one predictable branch. (Simulated, 16k
	// entries in 128Ki slots: 64 KiB stride, no page needs the second way;
	// random pages, 6% do and 0.6% find both ways taken, as with the
	// finalizer for both.)
	size_t first(uint64_t k) const { return static_cast<size_t>((k * 0x9e3779b97f4a7c15ULL) >> shift_); }
	size_t second(uint64_t k, size_t a) const
	{
		k ^= k >> 33;
		k *= 0xff51afd7ed558ccdULL;
		k ^= k >> 33;
		k *= 0xc4ceb9fe1a85ec53ULL;
		k ^= k >> 33;
		size_t b = static_cast<size_t>(k >> shift_);
		return b ^ (a == b); // two distinct slots
	}
	HugeArray<Slot> slots_;
	unsigned shift_ = 57;
};

} // namespace hmemreg::mr
