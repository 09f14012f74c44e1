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

// References are counted per shard of threads (kCountShards counters per
// entry, in per-shard arrays: a thread's counters share cache lines with
// nobody else's), so hits of different threads never write a common line.
// A get adds one to its thread's counter; a put takes one back from the
// counter its get used (Lease::shard, kept in the C API's handle), or
// from any counter that has one. No counter goes below zero; their sum
// (Entry::count) is the number of references held.
//
// Entry::state: the entry's life (low bits of its serial, new each time the
// pool hands the memory out) and kOrphan once the entry has left the index
// (invalidated, replaced, never cached, or free in the pool). Counting
// against invalidation is a store-load handshake, all seq_cst:
//   get:    counter += 1;  load state  (orphan or other life: undo, miss)
//   put:    counter -= 1;  load state  (orphan: try to release)
//   unlink: state |= kOrphan;  sum the counters (0: release now)
// Either the unlinker sees a get's increment, or that get sees kOrphan.
// Releases of an orphan are decided under the cache lock, by whoever then
// finds the sum at zero and the entry still on the orphan list.
//
// The lock-free hit path (Cache::memo_hit) checks "this life, not orphan"
// after its increment: an entry that was unlinked, released or reused
// since the memo saw it fails, so a stale memo slot can cost a miss but
// never return a dead registration. Entry memory and counters are never
// unmapped while the cache lives (EntryPool), so that one increment and
// load on a recycled entry are harmless, and its undo restores the sum.
inline constexpr uint64_t kOrphan = 1ULL << 62;
inline constexpr unsigned kLifeShift = 32;
inline constexpr uint64_t kLifeMask = ((1ULL << 30) - 1) << kLifeShift;
inline constexpr uint32_t kEntryMagic = 0x4d52454e; // "MREN"
inline constexpr unsigned kCountShards = 16;
// EntryPool chunk layout: one mapping aligned to its size, entries first,
// then their counters shard-major (shard s of entry i at counters[s][i]),
// so an entry's counter is found from its address alone and can be loaded
// in parallel with the entry itself.
inline constexpr size_t kEntriesPerChunk = 8192;
inline constexpr size_t kChunkEntryBytes = 2u << 20;
inline constexpr size_t kChunkBytes = 4u << 20;

inline constexpr uint64_t life_bits(uint64_t serial)
{
	return (serial << kLifeShift) & kLifeMask;
}

// A generation word that never changes: entries whose monitor has none.
inline const std::atomic<uint64_t> kNoGeneration{0};

// Laid out for the hit path: a memo hit reads line 0 only (the memo slot
// carries copies of the range and the registration) and writes only the
// thread's counter; a put likewise. Line 1 is read by slow lookups and by
// C++ callers that use e->reg directly.
struct alignas(64) Entry {
	// Line 0.
	std::atomic<uint64_t> state{kOrphan};
	const std::atomic<uint64_t> *gen_word = &kNoGeneration; // kmod: gen[slot]
	uint64_t gen = 0;
	std::atomic<uint64_t> last_use{0}; // cache clock at the last put (stored only when it moved)
	Iface iface = Iface::host;
	uint32_t owner = 0;    // id of the cache that made it (checked by put)
	uint32_t validate = 0; // 1: ask the iface's monitor valid() on each hit
	uint32_t magic = kEntryMagic;
	// Line 1.
	alignas(64) Registration reg;
	Range range;
	uint64_t device = 0;
	uint64_t serial = 0; // unique per cache, part of the index key
	pid_t pid = 0;       // process that registered it
	// Cold.
	Cache *cache = nullptr;
	uint64_t lru_stamp = 0; // clock value the LRU position reflects
	Entry *lru_prev = nullptr, *lru_next = nullptr;
	bool on_lru = false;
	bool watched = false;    // a monitor subscription is armed
	bool orphan_listed = false; // on Cache::orphans_ (read and written under the cache lock only; false while free)
	uint32_t watch_slot = 0; // monitor-private (kmod slot)
	uint64_t watch_gen = 0;  // monitor-private (kmod generation)
	Request req;             // what the first request asked for

	// Only for entries made by an EntryPool (see the chunk layout above).
	std::atomic<int64_t> &counter(unsigned shard) const
	{
		auto self = reinterpret_cast<uintptr_t>(this), base = self & ~(kChunkBytes - 1);
		auto *counters = reinterpret_cast<std::atomic<int64_t> *>(base + kChunkEntryBytes);
		return counters[(shard % kCountShards) * kEntriesPerChunk + (self - base) / sizeof(Entry)];
	}
	// References held now (exact when no get or put runs concurrently).
	uint64_t count() const
	{
		int64_t n = 0;
		for (unsigned s = 0; s < kCountShards; s++)
			n += counter(s).load(std::memory_order_seq_cst);
		return n > 0 ? static_cast<uint64_t>(n) : 0;
	}
	// The state word of this entry's life while cached.
	uint64_t life() const { return life_bits(serial); }
	// Every field back to its default, for a new life; state stays orphan
	// (a concurrent memo_hit cannot take it) until the cache publishes it.
	// The counters are left alone: they sum to zero (the entry was
	// released), and a stale hit's increment may still be undone on them.
	void recycle(uint64_t new_serial)
	{
		state.store(kOrphan | life_bits(new_serial), std::memory_order_relaxed);
		gen_word = &kNoGeneration;
		gen = 0;
		last_use.store(0, std::memory_order_relaxed);
		iface = Iface::host;
		owner = 0;
		validate = 0;
		magic = kEntryMagic;
		reg = Registration{};
		range = Range{};
		device = 0;
		serial = new_serial;
		pid = 0;
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
static_assert(sizeof(Entry) * kEntriesPerChunk == kChunkEntryBytes, "entries fill their half chunk");
static_assert(kCountShards * kEntriesPerChunk * sizeof(int64_t) <= kChunkBytes - kChunkEntryBytes, "counters fit");

// What a get hands out: the entry (for put) and copies of what the caller
// needs, taken from the memo slot on a hit so the entry's line 1 stays cold.
struct Lease {
	Entry *entry = nullptr;
	Range range;
	void *handle = nullptr;
	void *desc = nullptr;
	uint64_t key = 0;
	bool cached = false;
	unsigned shard = 0; // the counter the reference was added to: give it to put()
};

} // namespace hmemreg::mr
