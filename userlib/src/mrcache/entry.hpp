// SPDX-License-Identifier: MIT
// One registration as the cache keeps it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sys/types.h>

#include "mrcache/reader_lock.hpp"
#include "mrcache/types.hpp"

namespace hmemreg::mr {

class Cache;

// References are counted per shard of threads (kCountShards counters per
// entry, in per-shard arrays: a thread's counters share cache lines with
// nobody else's), so hits of different threads never write a common line.
// A thread counts on its own shard only (reader_lock.hpp: owned shards
// have one live thread each; the rest share kSharedShard): a get adds one
// there, a put takes one off there, so the counter of a thread that puts
// what another thread got goes below zero. Only the sum (Entry::count)
// means something: the number of references held.
//
// Entry::state(): the entry's life (low bits of its serial, new each time
// the pool hands the memory out), kOrphan once the entry has left the index
// (invalidated, replaced, never cached, or free in the pool), what a hit
// must check besides (kHasGen, kValidate), and which shards' counters were
// ever used (so a sum reads those cells only, not all kCountShards lines). Shard
// bits are sticky across lives (a counter may end a life at -1 with
// another at +1): every counter that is not zero has its bit set.
//
// Counting against invalidation is a store-load handshake:
//   get:    shard bit set (once); counter += 1; load state
//           (orphan or other life: undo, miss)
//   put:    counter -= 1;  load state  (orphan: try to release)
//   unlink: state |= kOrphan;  heavy_fence();  sum the counters
// (count_fence.hpp). Either the unlinker sees a get's increment (and its
// bit, set before), or that get sees kOrphan; likewise a put's decrement,
// or the put sees kOrphan and releases. With membarrier, an owner's
// counter is a plain load+store (nobody else writes it) followed by a
// compiler barrier; heavy_fence() runs a full barrier on every thread of
// the process, which orders each side. Without it, counts are seq_cst
// read-modify-writes (all of it seq_cst: nothing more). Sums of several
// counters are exact in quiescence; under concurrency a reader may see a
// put's decrement only if it sees the get's increment too (the handle went
// from getter to putter through synchronisation, and x86 and ARMv8 are
// multi-copy atomic), so a sum is never too low for a held reference.
// Releases of an orphan are decided under the cache lock, by whoever then
// finds the sum at zero and the entry still on the orphan list.
//
// The lock-free hit path (Cache::memo_hit) checks "this life, not orphan"
// after its increment: an entry that was unlinked, released or reused
// since the memo saw it fails, so a stale memo slot can cost a miss but
// never return a dead registration. Entry memory, states and counters are
// never unmapped while the cache lives (EntryPool), so that one increment
// and load on a recycled entry are harmless, and its undo restores the sum.
inline constexpr uint64_t kOrphan = 1ULL << 62;
inline constexpr unsigned kLifeShift = 32;
inline constexpr uint64_t kLifeMask = ((1ULL << 30) - 1) << kLifeShift;
inline constexpr uint64_t kHasGen = 1;   // compare *gen_word with gen on a hit (kmod)
inline constexpr uint64_t kValidate = 2; // ask the iface's monitor valid() on a hit (CUDA)
inline constexpr unsigned kShardShift = 2; // bits 2..25: shards whose counters this life used
inline constexpr uint32_t kEntryMagic = 0x4d52454e; // "MREN"
inline constexpr unsigned kCountShards = 24; // 23 owned: 16 busy threads and a few more

// EntryPool chunk layout, one mapping whose start is aligned to kChunkAlign,
// so everything about an entry is found from its address alone (no load
// to wait for), and a hit touches the entry's slice of the small dense
// arrays instead of the entry itself:
//   [0, 2 MiB)            entries (256 bytes each)
//   [2 MiB, 3.5 MiB)      counter cells, shard-major: cell[s][i]
//   [3.5 MiB, +64 KiB)    state words, state[i]
//   then a header         magic and the owning cache's id (checked by put)
inline constexpr size_t kEntriesPerChunk = 8192;
inline constexpr size_t kChunkAlign = 4u << 20;
inline constexpr size_t kCellsOffset = 2u << 20;
inline constexpr size_t kStatesOffset = 7u << 19;
inline constexpr size_t kHeaderOffset = kStatesOffset + kEntriesPerChunk * 8;
inline constexpr size_t kChunkMapped = kHeaderOffset + 4096;

// A thread shard's counter of one entry, and the low bits of the cache
// clock at that shard's last put of it (LRU recency, no shared write).
struct Cell {
	std::atomic<int32_t> count{0};
	std::atomic<uint32_t> last{0};
};
struct ChunkHeader {
	uint32_t magic = kEntryMagic;
	uint32_t owner = 0;
	// Both fields in one word (put compares them with one load).
	uint64_t word() const
	{
		uint64_t w;
		std::memcpy(&w, this, sizeof(w));
		return w;
	}
};
static_assert(sizeof(ChunkHeader) == 8);

inline constexpr uint64_t life_bits(uint64_t serial)
{
	return (serial << kLifeShift) & kLifeMask;
}

// A generation word that never changes: entries whose monitor has none.
inline const std::atomic<uint64_t> kNoGeneration{0};

// Line 0 is what a slow lookup reads of each entry it passes in the index
// (links and key, entry_index.hpp). Line 1 is read on hits only for
// entries that need a check (kHasGen, kValidate), and by C++ callers that
// use e->reg directly; a memo hit otherwise reads the memo slot (copies of
// range and registration), the state word and the thread's counter cell.
struct alignas(64) Entry {
	// Line 0: the index's links (written under the cache lock) and key.
	Entry *ix_parent = nullptr, *ix_left = nullptr, *ix_right = nullptr;
	Range range;
	uint64_t device = 0;
	uint64_t serial = 0; // unique per cache, part of the index key
	Iface iface = Iface::host;
	uint32_t validate = 0; // 1: ask the iface's monitor valid() on each hit
	// Line 1.
	alignas(64) Registration reg;
	const std::atomic<uint64_t> *gen_word = &kNoGeneration; // kmod: gen[slot]
	uint64_t gen = 0;
	uint64_t inserted = 0; // cache clock when it entered the index (LRU)
	pid_t pid = 0;         // process that registered it
	// Cold.
	Cache *cache = nullptr;
	uint64_t lru_stamp = 0; // clock value the LRU position reflects
	// The list the entry is on (entry_index.hpp): the LRU while indexed
	// (on_lru), else orphans, dead, unsettled or a local list.
	Entry *link_prev = nullptr, *link_next = nullptr;
	bool on_lru = false;
	bool watched = false;    // a monitor subscription is armed
	bool orphan_listed = false; // on Cache::orphans_ (read and written under the cache lock only; false while free)
	uint32_t watch_slot = 0; // monitor-private (kmod slot)
	uint64_t watch_gen = 0;  // monitor-private (kmod generation)
	// Line 3: unused, so that entries stay 256 bytes (index() a shift);
	// a field a miss wrote here would cost it one more line.
	alignas(64) char spare_[64] = {};

	// Only for entries made by an EntryPool (see the chunk layout above).
	uintptr_t chunk() const { return reinterpret_cast<uintptr_t>(this) & ~(kChunkAlign - 1); }
	size_t index() const { return (reinterpret_cast<uintptr_t>(this) - chunk()) / sizeof(Entry); }
	std::atomic<uint64_t> &state() const { return reinterpret_cast<std::atomic<uint64_t> *>(chunk() + kStatesOffset)[index()]; }
	Cell &cell(unsigned shard) const
	{
		return reinterpret_cast<Cell *>(chunk() + kCellsOffset)[(shard % kCountShards) * kEntriesPerChunk + index()];
	}
	// The same from ThreadState::cell_off (one add on the hit path).
	static constexpr size_t cell_offset(unsigned shard)
	{
		return kCellsOffset + (shard % kCountShards) * kEntriesPerChunk * sizeof(Cell);
	}
	template <typename TS>
	Cell &own_cell(const TS &ts) const
	{
		return *reinterpret_cast<Cell *>(chunk() + ts.cell_off + index() * sizeof(Cell));
	}
	const ChunkHeader &header() const { return *reinterpret_cast<const ChunkHeader *>(chunk() + kHeaderOffset); }
	// Add d to the calling thread's counter (ts from thread_state()),
	// its shard named in the state first. With ts.light the counter is
	// the thread's alone: a plain load+store, then a compiler barrier so
	// the caller's following state load is not hoisted above it (the
	// hardware side is heavy_fence()'s job).
	template <typename TS>
	void add_count(const TS &ts, int32_t d) const
	{
		uint64_t bit = shard_bit(ts);
		if (!(state().load(std::memory_order_relaxed) & bit)) [[unlikely]]
			state().fetch_or(bit, std::memory_order_seq_cst);
		bump_count(ts, d);
	}
	template <typename TS>
	static uint64_t shard_bit(const TS &ts)
	{
		return 1ULL << (kShardShift + ts.shard);
	}
	template <typename TS>
	static uint64_t own_bit(const TS &ts)
	{
		return ts.shard_bit; // == shard_bit(ts), precomputed
	}
	// add_count() once the shard bit is known to be set.
	template <typename TS>
	void bump_count(const TS &ts, int32_t d) const
	{
		std::atomic<int32_t> &c = own_cell(ts).count;
		if (ts.light) {
			// Release: what this thread read of the entry before a put
			// happens before the release of whoever sums this value
			// (free on x86; needed where loads may pass later stores).
			c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_release);
			std::atomic_signal_fence(std::memory_order_seq_cst);
		} else {
			c.fetch_add(d, std::memory_order_seq_cst);
		}
	}
	// The state after a count (ordered after it: see add_count).
	uint64_t state_after_count() const { return state().load(std::memory_order_seq_cst); }
	static unsigned shards_of(uint64_t st) { return static_cast<unsigned>(st >> kShardShift) & ((1u << kCountShards) - 1); }
	static constexpr uint64_t kShardBits = static_cast<uint64_t>((1u << kCountShards) - 1) << kShardShift;
	// References held now (exact when no get or put runs concurrently;
	// never too low for a held one), summed over the shards named in st
	// (a state value; default: now). A negative sum (a caller's double
	// put across threads) reads as zero.
	uint64_t count() const { return count(state().load(std::memory_order_seq_cst)); }
	uint64_t count(uint64_t st) const
	{
		int64_t n = 0;
		for (unsigned m = shards_of(st); m; m &= m - 1)
			n += cell(static_cast<unsigned>(__builtin_ctz(m))).count.load(std::memory_order_seq_cst);
		return n > 0 ? static_cast<uint64_t>(n) : 0;
	}
	// Replace everything but the shard bits of the state with v.
	void set_state(uint64_t v) const
	{
		uint64_t old = state().load(std::memory_order_relaxed);
		while (!state().compare_exchange_weak(old, (old & kShardBits) | v, std::memory_order_seq_cst,
						      std::memory_order_relaxed)) {
		}
	}
	// The cache clock at the last put, or when it entered the index. Cells
	// keep 32 bits (ages up to 2^32 ticks read right) and may hold values
	// of an earlier life: those are older than `inserted` and ignored.
	uint64_t last_used(uint64_t now) const
	{
		uint64_t best = inserted;
		for (unsigned m = shards_of(state().load(std::memory_order_relaxed)); m; m &= m - 1) {
			uint32_t l = cell(static_cast<unsigned>(__builtin_ctz(m))).last.load(std::memory_order_relaxed);
			uint64_t t = now - static_cast<uint32_t>(static_cast<uint32_t>(now) - l);
			if (l && t <= now && t > best)
				best = t;
		}
		return best;
	}
	// The state word of this entry's life while cached, with its checks.
	uint64_t life() const { return life_bits(serial) | (gen_word != &kNoGeneration ? kHasGen : 0) | (validate ? kValidate : 0); }
	// Every field back to its default, for a new life; state stays orphan
	// (a concurrent memo_hit cannot take it) until the cache publishes it.
	// The counters and their bits are left alone: they sum to zero (the
	// entry was released), and a stale hit's increment may still be undone
	// on them.
	void recycle(uint64_t new_serial)
	{
		set_state(kOrphan | life_bits(new_serial));
		gen_word = &kNoGeneration;
		gen = 0;
		inserted = 0;
		iface = Iface::host;
		validate = 0;
		pid = 0;
		reg = Registration{};
		range = Range{};
		device = 0;
		serial = new_serial;
		cache = nullptr;
		lru_stamp = 0;
		ix_parent = ix_left = ix_right = nullptr;
		link_prev = link_next = nullptr;
		on_lru = false;
		watched = false;
		watch_slot = 0;
		watch_gen = 0;
	}
};
static_assert(offsetof(Entry, reg) == 64, "line 0 holds the index links and key");
static_assert(sizeof(Entry) * kEntriesPerChunk == kCellsOffset, "entries fill their part of a chunk");
static_assert(kCellsOffset + kCountShards * kEntriesPerChunk * sizeof(Cell) <= kStatesOffset, "cells fit");
static_assert(kChunkMapped <= kChunkAlign);
static_assert(kSharedShard == kCountShards - 1, "every shard but the shared one can be owned");
static_assert(kShardShift + kCountShards <= kLifeShift, "shard bits below the life bits");

// A reference without a destructor (mr::Ref is the one that puts itself):
// what a get hands out, the entry (for put) and copies of what the caller
// needs, taken from the memo slot on a hit so the entry's line 1 stays cold.
struct RawRef {
	Entry *entry = nullptr;
	Range range;
	void *handle = nullptr;
	void *desc = nullptr;
	uint64_t key = 0;
	bool cached = false;
	unsigned shard = 0; // the counter the reference was added to: give it to put()

	// As the hit path's output (Cache::memo_hit).
	template <typename View>
	void view(const View &v)
	{
		range = v.range;
		handle = v.handle;
		desc = v.desc;
		key = v.key;
	}
	void held(Entry *e, unsigned s)
	{
		entry = e;
		shard = s;
		cached = true;
	}
	Entry *held_entry() const { return entry; }
	unsigned held_shard() const { return shard; }
};

} // namespace hmemreg::mr
