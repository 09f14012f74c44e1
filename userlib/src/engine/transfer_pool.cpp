// SPDX-License-Identifier: MIT
// Recycled transfers (see transfer_pool.hpp).
#include "engine/transfer_pool.hpp"

#include <new>

namespace hmemreg::engine {

// The allocator of the shared_ptrs' control blocks: one size only (the
// control block type is fixed), from the pool's free list.
template <class T> struct TransferPool::BlockAlloc {
	using value_type = T;
	std::shared_ptr<TransferPool> pool;

	explicit BlockAlloc(std::shared_ptr<TransferPool> p) : pool(std::move(p)) {}
	template <class U> BlockAlloc(const BlockAlloc<U> &o) : pool(o.pool) {}
	T *allocate(size_t n)
	{
		if (n != 1)
			return static_cast<T *>(::operator new(n * sizeof(T)));
		return static_cast<T *>(pool->block(sizeof(T)));
	}
	void deallocate(T *p, size_t n)
	{
		if (n != 1)
			::operator delete(p);
		else
			pool->unblock(p, sizeof(T));
	}
	template <class U> bool operator==(const BlockAlloc<U> &o) const { return pool == o.pool; }
};

std::shared_ptr<TransferPool> TransferPool::create(size_t keep)
{
	return std::shared_ptr<TransferPool>(new TransferPool(keep));
}

TransferPool::~TransferPool() = default;

void TransferPool::Recycle::operator()(TransferImpl *x) const
{
	pool->give_back(x);
}

std::shared_ptr<TransferImpl> TransferPool::take()
{
	std::unique_ptr<TransferImpl> x;
	{
		std::lock_guard l(mu_);
		stats_.taken++;
		if (!free_.empty()) {
			x = std::move(free_.back());
			free_.pop_back();
			stats_.reused++;
		}
	}
	if (!x)
		x = std::make_unique<TransferImpl>();
	auto self = shared_from_this();
	// The shared_ptr owns it from here (on a throw, the deleter takes it).
	std::shared_ptr<TransferImpl> out(x.get(), Recycle{self}, BlockAlloc<TransferImpl>(self));
	x.release();
	return out;
}

// The last reference went: back to the free list, or deleted when full.
void TransferPool::give_back(TransferImpl *x)
{
	std::unique_ptr<TransferImpl> owned(x);
	owned->recycle(); // outside the lock: releases its peer, regions, callback
	std::lock_guard l(mu_);
	if (free_.size() < keep_) {
		free_.push_back(std::move(owned));
		return;
	}
	stats_.dropped++;
}

void *TransferPool::block(size_t bytes)
{
	{
		std::lock_guard l(mu_);
		if (block_size_ == 0)
			block_size_ = bytes;
		if (bytes == block_size_ && !blocks_.empty()) {
			void *p = blocks_.back().release();
			blocks_.pop_back();
			return p;
		}
	}
	return new std::byte[bytes];
}

void TransferPool::unblock(void *p, size_t bytes)
{
	std::unique_ptr<std::byte[]> owned(static_cast<std::byte *>(p));
	std::lock_guard l(mu_);
	if (bytes == block_size_ && blocks_.size() < keep_)
		blocks_.push_back(std::move(owned));
}

TransferPool::Stats TransferPool::stats() const
{
	std::lock_guard l(mu_);
	Stats s = stats_;
	s.free = free_.size();
	s.blocks = blocks_.size();
	return s;
}

} // namespace hmemreg::engine
