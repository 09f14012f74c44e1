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

// Entry::state: reference count in the low bits, kOrphan once the entry has
// left the index (invalidated, replaced, or never cached). Whoever moves an
// orphan's count to zero, the last put or the unlinker, releases it: both
// steps are single atomic operations on this one word, so exactly one side
// sees (kOrphan | 0).
inline constexpr uint64_t kOrphan = 1ULL << 62;
inline constexpr uint64_t kCountMask = (1ULL << 48) - 1;
inline constexpr uint32_t kEntryMagic = 0x4d52454e; // "MREN"

// A generation word that never changes: entries whose monitor has none.
inline const std::atomic<uint64_t> kNoGeneration{0};

// Laid out for the hit path: a get reads line 0 (and writes state), the C
// API reads line 1 (the registration), a put reads and writes line 0 only.
struct alignas(64) Entry {
	// Line 0.
	std::atomic<uint64_t> state{0};
	Range range;
	uint64_t device = 0;
	const std::atomic<uint64_t> *gen_word = &kNoGeneration; // kmod: gen[slot]
	uint64_t gen = 0;
	std::atomic<uint64_t> last_use{0}; // cache clock at the last put
	Iface iface = Iface::host;
	uint32_t owner = 0; // id of the cache that made it (checked by put)
	// Line 1.
	Registration reg;
	uint32_t validate = 0; // 1: ask the iface's monitor valid() on each hit
	uint32_t magic = kEntryMagic;
	pid_t pid = 0;          // process that registered it
	uint64_t serial = 0;    // unique per cache, part of the index key
	// Cold.
	Cache *cache = nullptr;
	uint64_t lru_stamp = 0; // clock value the LRU position reflects
	Entry *lru_prev = nullptr, *lru_next = nullptr;
	bool on_lru = false;
	bool watched = false;   // a monitor subscription is armed
	uint32_t watch_slot = 0; // monitor-private (kmod slot)
	uint64_t watch_gen = 0;  // monitor-private (kmod generation)
	Request req;             // what the first request asked for

	uint64_t count() const { return state.load(std::memory_order_acquire) & kCountMask; }
};
static_assert(offsetof(Entry, reg) == 64, "hot fields fill exactly one line");

} // namespace hmemreg::mr
