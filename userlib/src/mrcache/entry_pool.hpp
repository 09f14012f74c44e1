// SPDX-License-Identifier: MIT
// EntryPool: entries of one cache live in huge-page chunks (see
// huge_array.hpp), so random hits touch few TLB entries. Allocation and
// release take the pool's own mutex, never the cache lock; monitors never
// need it. Entries are constructed once and recycled in place, never
// destroyed or unmapped before the pool: the lock-free hit path may still
// load the state word of an entry that was released meanwhile (it then
// sees another life or kOrphan and backs off).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "mrcache/entry.hpp"
#include "mrcache/huge_array.hpp"

namespace hmemreg::mr {

class EntryPool;

struct EntryDeleter {
	EntryPool *pool = nullptr;
	void operator()(Entry *e) const noexcept;
};
using EntryPtr = std::unique_ptr<Entry, EntryDeleter>;

class EntryPool {
public:
	EntryPool() = default;
	EntryPool(const EntryPool &) = delete;
	EntryPool &operator=(const EntryPool &) = delete;

	// A free entry recycled for a life identified by serial (see entry.hpp).
	EntryPtr make(uint64_t serial)
	{
		Entry *e;
		{
			std::lock_guard g(mu_);
			if (free_.empty())
				grow();
			e = free_.back();
			free_.pop_back();
		}
		e->recycle(serial);
		return EntryPtr(e, EntryDeleter{this});
	}
	void release(Entry *e) noexcept
	{
		e->state.fetch_or(kOrphan, std::memory_order_seq_cst); // already so, unless never published
		std::lock_guard g(mu_);
		free_.push_back(e); // capacity reserved in grow(): never allocates
	}

private:
	static constexpr size_t kPerChunk = kEntriesPerChunk;
	void grow()
	{
		chunks_.emplace_back(kPerChunk); // constructs every entry (state: orphan)
		counts_.emplace_back(kPerChunk * kCountShards); // shard-major: counts[s][i]
		free_.reserve(chunks_.size() * kPerChunk);
		HugeArray<Entry> &c = chunks_.back();
		HugeArray<std::atomic<int64_t>> &n = counts_.back();
		for (size_t i = kPerChunk; i-- > 0;) {
			c[i].counts = &n[i];
			free_.push_back(&c[i]);
		}
	}
	std::mutex mu_;
	std::vector<HugeArray<Entry>> chunks_;
	std::vector<HugeArray<std::atomic<int64_t>>> counts_;
	std::vector<Entry *> free_;
};

inline void EntryDeleter::operator()(Entry *e) const noexcept
{
	pool->release(e);
}

} // namespace hmemreg::mr
