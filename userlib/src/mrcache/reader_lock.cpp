// SPDX-License-Identifier: MIT
// Reader slots: a fixed process-wide array (no allocation, so taking a read
// lock never calls the allocator, which could re-enter a memory monitor).
#include <sched.h>

#include "mrcache/count_fence.hpp"
#include "mrcache/entry.hpp"
#include "mrcache/reader_lock.hpp"

namespace hmemreg::mr {

namespace {

constexpr unsigned kMaxSlots = 256;
ReaderSlot g_slots[kMaxSlots];
std::atomic<unsigned> g_high_water{0}; // slots [0, g_high_water) may be in use

std::atomic<uint32_t> g_owned_shards{0}; // bit s: shard s has an owner

struct ThreadSlot {
	ReaderSlot *slot = nullptr;
	unsigned shard = kSharedShard;
	ThreadSlot()
	{
		for (unsigned i = 0; i < kMaxSlots; i++) {
			uint32_t zero = 0;
			if (g_slots[i].claimed.load(std::memory_order_relaxed) == 0 &&
			    g_slots[i].claimed.compare_exchange_strong(zero, 1)) {
				slot = &g_slots[i];
				unsigned hw = g_high_water.load();
				while (hw < i + 1 && !g_high_water.compare_exchange_weak(hw, i + 1)) {
				}
				break;
			}
		}
		// Acquire: the previous owner's plain counter stores happen
		// before ours.
		uint32_t m = g_owned_shards.load(std::memory_order_relaxed);
		for (;;) {
			uint32_t free = ~m & ((1u << kSharedShard) - 1);
			if (!free)
				break;
			unsigned s = static_cast<unsigned>(__builtin_ctz(free));
			// seq_cst (acquire would do for the counters): heavy_fence()
			// skips the barrier when it sees no other claim.
			if (g_owned_shards.compare_exchange_weak(m, m | (1u << s), std::memory_order_seq_cst,
								 std::memory_order_relaxed)) {
				shard = s;
				break;
			}
		}
	}
	~ThreadSlot()
	{
		// Later cache calls of this thread (other TLS destructors) read
		// under the mutex and count on the shared shard.
		tl_state.slot = nullptr;
		tl_state.set_shard(kSharedShard);
		tl_state.owned = tl_state.light = 0;
		if (slot)
			slot->claimed.store(0, std::memory_order_release);
		if (shard != kSharedShard)
			g_owned_shards.fetch_and(~(1u << shard), std::memory_order_release);
	}
};

} // namespace

ThreadState &claim_thread_state()
{
	// Owns the slot and shard for the thread's lifetime; its destructor
	// frees them. The fence mode is fixed before the first shard is used.
	bool asym = count_fence() == CountFence::membarrier;
	static thread_local ThreadSlot ts;
	tl_state.slot = ts.slot;
	tl_state.set_shard(ts.shard);
	tl_state.owned = ts.shard != kSharedShard;
	tl_state.light = tl_state.owned && asym;
	tl_state.ready = 1;
	return tl_state;
}

bool other_thread_owns_a_shard()
{
	const uint32_t mine = tl_state.owned ? 1u << tl_state.shard : 0;
	return (g_owned_shards.load(std::memory_order_seq_cst) & ~mine) != 0;
}

void ThreadState::set_shard(unsigned s)
{
	shard = s;
	shard_bit = Entry::shard_bit(*this);
	cell_off = static_cast<uint32_t>(Entry::cell_offset(s));
}

void ReaderLock::lock()
{
	mu_.lock();
	writer_.store(1, std::memory_order_seq_cst);
	unsigned n = g_high_water.load(std::memory_order_acquire);
	for (unsigned i = 0; i < n; i++) {
		unsigned spins = 0;
		while (g_slots[i].reading.load(std::memory_order_acquire) == this) {
			if (++spins > 64)
				sched_yield(); // the reader may be preempted; let it finish
		}
	}
}

} // namespace hmemreg::mr
