// SPDX-License-Identifier: MIT
// ReaderLock: a reader-writer lock whose read side writes only to a cache
// line owned by the calling thread ("big reader" lock). Cache hits take the
// read side, so threads hitting the same cache never bounce a shared line;
// writers (misses, invalidations) pay instead: they scan the reader slots.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace hmemreg::mr {

// One per thread (up to kMaxSlots threads at once; later threads read under
// the writer mutex, correct but not scalable).
struct alignas(64) ReaderSlot {
	std::atomic<const void *> reading{nullptr}; // the lock being read, or null
	std::atomic<uint32_t> claimed{0};
};

// Count shards (entry.hpp): shards [0, kSharedShard) are each owned by at
// most one live thread at a time (claimed at its first cache call,
// returned at its exit, so a later thread may own it next); threads beyond
// them, and any cache call in a thread's exit after its state was torn
// down, share kSharedShard, which is only ever updated atomically.
inline constexpr unsigned kSharedShard = 23; // the last of entry.hpp's kCountShards

// Per-thread state of the hot path: reader slot and count shard. Constant
// initialised, initial-exec TLS: reading it is one load, no wrapper call.
struct ThreadState {
	ReaderSlot *slot;
	uint64_t shard_bit; // the shard's bit in an entry's state (entry.hpp)
	uint32_t shard;     // this thread's count (and hit statistics) shard
	uint32_t cell_off;  // where the shard's counter cells start in a pool chunk
	uint8_t owned;      // shard is this thread's alone (not kSharedShard)
	uint8_t light;      // owned, and counts need no atomic RMW (count_fence.hpp)
	uint8_t ready;      // 0 until claim_thread_state() ran
	void set_shard(unsigned s); // shard, shard_bit, cell_off (not owned, light)
};
inline thread_local ThreadState tl_state __attribute__((tls_model("initial-exec"))) = {nullptr, 0, kSharedShard, 0, 0, 0, 0};
// Claims a slot and a shard for this thread (first use; released at exit).
ThreadState &claim_thread_state();
// Does a live thread other than the caller own a count shard now (and so
// may count with plain stores)? A seq_cst load of the owned-shard word,
// whose claims are seq_cst: see heavy_fence().
bool other_thread_owns_a_shard();
inline ThreadState &thread_state()
{
	if (tl_state.ready) [[likely]]
		return tl_state;
	return claim_thread_state();
}

class ReaderLock {
public:
	ReaderLock() = default;
	ReaderLock(const ReaderLock &) = delete;
	ReaderLock &operator=(const ReaderLock &) = delete;

	// Read side. Returns the token to give back to read_unlock().
	ReaderSlot *read_lock()
	{
		ReaderSlot *s = thread_state().slot;
		if (s) [[likely]] {
			s->reading.store(this, std::memory_order_seq_cst);
			if (!writer_.load(std::memory_order_seq_cst)) [[likely]]
				return s;
			s->reading.store(nullptr, std::memory_order_release);
		}
		mu_.lock(); // writer active (or no slot): read under the mutex
		return nullptr;
	}
	void read_unlock(ReaderSlot *s)
	{
		if (s) [[likely]]
			s->reading.store(nullptr, std::memory_order_release);
		else
			mu_.unlock();
	}

	// Write side: excludes readers and other writers.
	void lock();
	void unlock()
	{
		writer_.store(0, std::memory_order_release);
		mu_.unlock();
	}

private:
	std::mutex mu_;
	std::atomic<uint32_t> writer_{0};
};

class ReadGuard {
public:
	explicit ReadGuard(ReaderLock &l) : l_(l), s_(l.read_lock()) {}
	~ReadGuard() { l_.read_unlock(s_); }
	ReadGuard(const ReadGuard &) = delete;
	ReadGuard &operator=(const ReadGuard &) = delete;

private:
	ReaderLock &l_;
	ReaderSlot *s_;
};

} // namespace hmemreg::mr
