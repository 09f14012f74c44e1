// SPDX-License-Identifier: MIT
// Recycled transfers (see transfer_pool.hpp).
#include "engine/transfer_pool.hpp"

#include <algorithm>
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
		peak_ = std::max(peak_, ++in_use_);
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

namespace {

// The heap a recycled transfer still holds (its vectors' capacity).
size_t held_bytes(const TransferImpl &x)
{
	auto cap = [](const auto &v) { return v.capacity() * sizeof(v[0]); };
	size_t n = cap(x.regions) + cap(x.segs) + cap(x.cursor) + cap(x.message) + cap(x.plan.iovs) +
		   cap(x.plan.descs) + cap(x.plan.rmas) + cap(x.plan.writes) + cap(x.plan.rail_writes);
	for (const auto &v : x.plan.rail_writes)
		n += cap(v);
	return n;
}

} // namespace

// Its control block is gone: back to the free list, or deleted when full
// or holding much; the last one back trims the list (see the header).
void TransferPool::give_back(TransferImpl *x)
{
	std::unique_ptr<TransferImpl> owned(x);
	const bool oversized = held_bytes(*x) > kKeepBytes;
	std::lock_guard l(mu_);
	if (in_use_)
		in_use_--;
	if (!oversized && free_.size() < keep_)
		free_.push_back(std::move(owned));
	else {
		stats_.dropped++;
		stats_.oversized += oversized;
	}
	if (in_use_ == 0) {
		const size_t want = std::max({kFloor, peak_, last_peak_});
		while (free_.size() > want) {
			free_.pop_back();
			stats_.trimmed++;
		}
		last_peak_ = peak_;
		peak_ = 0;
	}
}

TransferPool::Stats TransferPool::stats() const
{
	std::lock_guard l(mu_);
	Stats s = stats_;
	s.free = free_.size();
	return s;
}

} // namespace hmemreg::engine
