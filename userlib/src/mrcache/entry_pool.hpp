// SPDX-License-Identifier: MIT
// EntryPool: entries of one cache live in huge-page chunks (see
// huge_array.hpp), so random hits touch few TLB entries. Allocation and
// release take the pool's own mutex, never the cache lock; monitors never
// need it.
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

	EntryPtr make()
	{
		std::lock_guard g(mu_);
		if (free_.empty())
			grow();
		Entry *slot = free_.back();
		free_.pop_back();
		return EntryPtr(new (slot) Entry(), EntryDeleter{this});
	}
	void release(Entry *e) noexcept
	{
		e->~Entry();
		std::lock_guard g(mu_);
		free_.push_back(e); // capacity reserved in grow(): never allocates
	}

private:
	struct Raw {
		alignas(Entry) unsigned char b[sizeof(Entry)];
	};
	static constexpr size_t kPerChunk = (2u << 20) / sizeof(Raw);
	void grow()
	{
		chunks_.emplace_back(kPerChunk);
		free_.reserve(chunks_.size() * kPerChunk);
		HugeArray<Raw> &c = chunks_.back();
		for (size_t i = kPerChunk; i-- > 0;)
			free_.push_back(reinterpret_cast<Entry *>(&c[i]));
	}
	std::mutex mu_;
	std::vector<HugeArray<Raw>> chunks_;
	std::vector<Entry *> free_;
};

inline void EntryDeleter::operator()(Entry *e) const noexcept
{
	pool->release(e);
}

} // namespace hmemreg::mr
