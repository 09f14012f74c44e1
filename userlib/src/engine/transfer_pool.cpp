// SPDX-License-Identifier: MIT
// Recycled transfers (see transfer_pool.hpp).
#include "engine/transfer_pool.hpp"

#include <new>

namespace hmemreg::engine {

// The allocator of a pooled transfer's control block: the transfer's own
// control_block bytes. Freeing it means the control block is gone, the
// transfer reset already (Recycle): back to the pool.
template <class T> struct TransferPool::InPlace {
	using value_type = T;
	std::shared_ptr<TransferPool> pool;
	TransferImpl *owner;

	InPlace(std::shared_ptr<TransferPool> p, TransferImpl *x) : pool(std::move(p)), owner(x) {}
	template <class U> InPlace(const InPlace<U> &o) : pool(o.pool), owner(o.owner) {}
	T *allocate(size_t n)
	{
		static_assert(sizeof(T) <= TransferImpl::kControlBlockBytes && alignof(T) <= alignof(std::max_align_t),
			      "TransferImpl::control_block is too small for shared_ptr's control block");
		if (n != 1)
			throw std::bad_alloc();
		return reinterpret_cast<T *>(owner->control_block);
	}
	void deallocate(T *, size_t) { pool->give_back(owner); }
	template <class U> bool operator==(const InPlace<U> &o) const { return owner == o.owner; }
};

std::shared_ptr<TransferPool> TransferPool::create(size_t keep)
{
	return std::shared_ptr<TransferPool>(new TransferPool(keep));
}

TransferPool::~TransferPool() = default;

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
	// Cannot throw: the control block's storage is the transfer's own.
	std::shared_ptr<TransferImpl> out(x.get(), Recycle{}, InPlace<TransferImpl>(shared_from_this(), x.get()));
	x.release();
	return out;
}

// Its control block is gone: back to the free list, or deleted when full.
void TransferPool::give_back(TransferImpl *x)
{
	std::unique_ptr<TransferImpl> owned(x);
	std::lock_guard l(mu_);
	if (free_.size() < keep_) {
		free_.push_back(std::move(owned));
		return;
	}
	stats_.dropped++;
}

TransferPool::Stats TransferPool::stats() const
{
	std::lock_guard l(mu_);
	Stats s = stats_;
	s.free = free_.size();
	return s;
}

} // namespace hmemreg::engine
