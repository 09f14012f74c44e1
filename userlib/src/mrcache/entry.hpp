// SPDX-License-Identifier: MIT
// One registration as the cache keeps it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <sys/types.h>

#include "mrcache/types.hpp"

namespace hmemreg::mr {

class Cache;

// Entry::state: reference count in bits 0..31, the entry's life (low bits
// of its serial, new each time the pool hands the memory out) in bits
// 32..61, kOrphan once the entry has left the index (invalidated, replaced,
// never cached, or free in the pool). Whoever moves an orphan's count to
// zero, the last put or the unlinker, releases it: both steps are single
// atomic operations on this one word, so exactly one side sees
// (kOrphan | 0).
//
// The lock-free hit path (Cache::memo_hit) takes a reference only with a
// compare-and-swap that expects "this life, not orphan": an entry that was
// unlinked, released or reused since the memo saw it fails the swap, so a
// stale memo can cost a miss but never return a dead registration. Entry
// memory is never unmapped while the cache lives (EntryPool), so that one
// load and swap on a recycled entry is harmless.
inline constexpr uint64_t kOrphan = 1ULL << 62;
inline constexpr uint64_t kCountMask = (1ULL << 32) - 1;
inline constexpr unsigned kLifeShift = 32;
inline constexpr uint64_t kLifeMask = ((1ULL << 30) - 1) << kLifeShift;
inline constexpr uint32_t kEntryMagic = 0x4d52454e; // "MREN"

inline constexpr uint64_t life_bits(uint64_t serial)
{
	return (serial << kLifeShift) & kLifeMask;
}

// A generation word that never changes: entries whose monitor has none.
inline const std::atomic<uint64_t> kNoGeneration{0};

// Laid out for the hit path: a memo hit reads and writes line 0 only (the
// memo slot carries copies of the range and the registration); a put
// reads and writes line 0 only. Line 1 is read by slow lookups and by C++
// callers that use e->reg directly.
struct alignas(64) Entry {
	// Line 0.
	std::atomic<uint64_t> state{kOrphan};
	const std::atomic<uint64_t> *gen_word = &kNoGeneration; // kmod: gen[slot]
	uint64_t gen = 0;
	std::atomic<uint64_t> last_use{0}; // cache clock at the last put
	uint64_t device = 0;
	Iface iface = Iface::host;
	uint32_t owner = 0;    // id of the cache that made it (checked by put)
	uint32_t validate = 0; // 1: ask the iface's monitor valid() on each hit
	uint32_t magic = kEntryMagic;
	pid_t pid = 0;         // process that registered it
	// Line 1.
	alignas(64) Registration reg;
	Range range;
	uint64_t serial = 0; // unique per cache, part of the index key
	// Cold.
	Cache *cache = nullptr;
	uint64_t lru_stamp = 0; // clock value the LRU position reflects
	Entry *lru_prev = nullptr, *lru_next = nullptr;
	bool on_lru = false;
	bool watched = false;    // a monitor subscription is armed
	uint32_t watch_slot = 0; // monitor-private (kmod slot)
	uint64_t watch_gen = 0;  // monitor-private (kmod generation)
	Request req;             // what the first request asked for

	uint64_t count() const { return state.load(std::memory_order_acquire) & kCountMask; }
	// The state word this entry's life starts from (not yet published).
	uint64_t life() const { return life_bits(serial); }
	// Every field back to its default, for a new life; state stays orphan
	// (a concurrent memo_hit cannot take it) until the cache publishes it.
	void recycle(uint64_t new_serial)
	{
		state.store(kOrphan | life_bits(new_serial), std::memory_order_relaxed);
		gen_word = &kNoGeneration;
		gen = 0;
		last_use.store(0, std::memory_order_relaxed);
		device = 0;
		iface = Iface::host;
		owner = 0;
		validate = 0;
		magic = kEntryMagic;
		pid = 0;
		reg = Registration{};
		range = Range{};
		serial = new_serial;
		cache = nullptr;
		lru_stamp = 0;
		lru_prev = lru_next = nullptr;
		on_lru = false;
		watched = false;
		watch_slot = 0;
		watch_gen = 0;
		req = Request{};
	}
};
static_assert(offsetof(Entry, reg) == 64, "hot fields fill exactly one line");

// What a get hands out: the entry (for put) and copies of what the caller
// needs, taken from the memo slot on a hit so the entry's line 1 stays cold.
struct Lease {
	Entry *entry = nullptr;
	Range range;
	void *handle = nullptr;
	void *desc = nullptr;
	uint64_t key = 0;
	bool cached = false;
};

} // namespace hmemreg::mr
