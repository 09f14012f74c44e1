// SPDX-License-Identifier: MIT
// Reader slots: a fixed process-wide array (no allocation, so taking a read
// lock never calls the allocator, which could re-enter a memory monitor).
#include <sched.h>

#include "mrcache/reader_lock.hpp"

namespace hmemreg::mr {

namespace {

constexpr unsigned kMaxSlots = 256;
ReaderSlot g_slots[kMaxSlots];
std::atomic<unsigned> g_high_water{0}; // slots [0, g_high_water) may be in use

} // namespace

namespace {

struct ThreadSlot {
	ReaderSlot *slot = nullptr;
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
				return;
			}
		}
	}
	~ThreadSlot()
	{
		tl_state.slot = nullptr; // later reads in this thread use the mutex
		if (slot)
			slot->claimed.store(0, std::memory_order_release);
	}
};

} // namespace

std::atomic<uint32_t> g_next_shard{0};

ThreadState &claim_thread_state()
{
	// Owns the slot for the thread's lifetime; its destructor frees it.
	static thread_local ThreadSlot ts;
	tl_state.slot = ts.slot;
	tl_state.shard = g_next_shard.fetch_add(1, std::memory_order_relaxed);
	tl_state.ready = 1;
	return tl_state;
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
