// SPDX-License-Identifier: MIT
// EntryPool: entries of one cache and their reference counters live in
// huge-page chunks (layout in entry.hpp), so random hits touch few TLB
// entries. Allocation and
// release take the pool's own mutex, never the cache lock; monitors never
// need it. Entries are constructed once and recycled in place, never
// destroyed or unmapped before the pool: the lock-free hit path may still
// load the state word of an entry that was released meanwhile (it then
// sees another life or kOrphan and backs off).
#pragma once

#include <memory>
#include <mutex>
#include <new>
#include <sys/mman.h>
#include <vector>

#include "mrcache/entry.hpp"
#include "mrcache/entry_index.hpp"

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
	// The cache's id, written in each chunk's header (put checks it). Set
	// before the first make().
	void set_owner(uint32_t owner) { owner_ = owner; }
	EntryPool(const EntryPool &) = delete;
	EntryPool &operator=(const EntryPool &) = delete;

	// A free entry recycled for a life identified by serial (see entry.hpp).
	EntryPtr make(uint64_t serial)
	{
		Entry *e;
		{
			std::lock_guard g(mu_);
			e = take_locked();
		}
		e->recycle(serial);
		return EntryPtr(e, EntryDeleter{this});
	}
	// The same with the pool's next serial (unique per pool: the cache's
	// entries), counted under the lock it takes anyway (no atomic add).
	EntryPtr make_next()
	{
		Entry *e;
		uint64_t serial;
		{
			std::lock_guard g(mu_);
			e = take_locked();
			serial = next_serial_++;
		}
		e->recycle(serial);
		return EntryPtr(e, EntryDeleter{this});
	}
	void release(Entry *e) noexcept
	{
		e->state().fetch_or(kOrphan, std::memory_order_seq_cst); // already so, unless never published
		std::lock_guard g(mu_);
		free_.push_back(e); // capacity reserved in grow(): never allocates
	}
	// release() of every entry of list (emptied), under one lock.
	void release_all(EntryList &list) noexcept
	{
		for (Entry *e = list.front(); e; e = EntryList::next(e))
			e->state().fetch_or(kOrphan, std::memory_order_seq_cst);
		std::lock_guard g(mu_);
		while (Entry *e = list.pop_front())
			free_.push_back(e);
	}

private:
	// One chunk (layout in entry.hpp).
	class Chunk {
	public:
		explicit Chunk(uint32_t owner)
		{
			// Over-allocate, keep an aligned window.
			void *p = ::mmap(nullptr, 2 * kChunkAlign, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				throw std::bad_alloc();
			auto a = reinterpret_cast<uintptr_t>(p), b = (a + kChunkAlign - 1) & ~(kChunkAlign - 1);
			if (b > a)
				::munmap(p, b - a);
			::munmap(reinterpret_cast<void *>(b + kChunkMapped), a + 2 * kChunkAlign - (b + kChunkMapped));
			base_ = reinterpret_cast<char *>(b);
			::madvise(base_, kStatesOffset, MADV_HUGEPAGE); // best effort
			entries_ = reinterpret_cast<Entry *>(base_);
			for (size_t i = 0; i < kEntriesPerChunk; i++)
				new (&entries_[i]) Entry();
			auto *cells = reinterpret_cast<Cell *>(base_ + kCellsOffset);
			for (size_t i = 0; i < kCountShards * kEntriesPerChunk; i++)
				new (&cells[i]) Cell();
			auto *states = reinterpret_cast<std::atomic<uint64_t> *>(base_ + kStatesOffset);
			for (size_t i = 0; i < kEntriesPerChunk; i++)
				new (&states[i]) std::atomic<uint64_t>(kOrphan);
			new (base_ + kHeaderOffset) ChunkHeader{kEntryMagic, owner};
		}
		~Chunk()
		{
			if (base_)
				::munmap(base_, kChunkMapped);
		}
		Chunk(const Chunk &) = delete;
		Chunk &operator=(const Chunk &) = delete;
		Entry &operator[](size_t i) { return entries_[i]; }

	private:
		char *base_ = nullptr;
		Entry *entries_ = nullptr;
	};

	Entry *take_locked()
	{
		if (free_.empty())
			grow();
		Entry *e = free_.back();
		free_.pop_back();
		return e;
	}
	void grow()
	{
		chunks_.push_back(std::make_unique<Chunk>(owner_)); // every entry constructed, state orphan
		free_.reserve(chunks_.size() * kEntriesPerChunk);
		Chunk &c = *chunks_.back();
		for (size_t i = kEntriesPerChunk; i-- > 0;)
			free_.push_back(&c[i]);
	}
	std::mutex mu_;
	uint64_t next_serial_ = 1;
	uint32_t owner_ = 0;
	std::vector<std::unique_ptr<Chunk>> chunks_;
	std::vector<Entry *> free_;
};

inline void EntryDeleter::operator()(Entry *e) const noexcept
{
	pool->release(e);
}

} // namespace hmemreg::mr
