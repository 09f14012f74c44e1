// SPDX-License-Identifier: MIT
// Recycled transfers. The core's writes and control messages come from
// here and go back when their last reference goes (the shared_ptr's
// deleter), their vectors keeping their capacity (TransferImpl::recycle);
// the shared_ptrs' control blocks come from a free list here too. A steady
// stream of sends then allocates nothing once warm. Exhaustion is no
// error: an empty pool makes a new transfer, and a full one (`keep` free)
// deletes what comes back. The pool lives while any of its transfers does
// (their deleters and control blocks hold a reference), so a TransferRef
// may outlive the engine.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/transfer.hpp"

namespace hmemreg::engine {

class TransferPool : public std::enable_shared_from_this<TransferPool> {
public:
	struct Stats {
		uint64_t taken = 0;   // take() calls
		uint64_t reused = 0;  // of those, served from the free list
		uint64_t dropped = 0; // transfers deleted on return (the pool was full)
		size_t free = 0;      // transfers waiting for reuse now
		size_t blocks = 0;    // control blocks waiting for reuse now
	};

	static std::shared_ptr<TransferPool> create(size_t keep);
	~TransferPool();
	TransferPool(const TransferPool &) = delete;
	TransferPool &operator=(const TransferPool &) = delete;

	// A transfer in its fresh state (kind Write; the caller sets it up).
	std::shared_ptr<TransferImpl> take();
	Stats stats() const;

private:
	explicit TransferPool(size_t keep) : keep_(keep) {}

	struct Recycle {
		std::shared_ptr<TransferPool> pool;
		void operator()(TransferImpl *x) const;
	};
	template <class T> struct BlockAlloc;
	void give_back(TransferImpl *x);
	void *block(size_t bytes);
	void unblock(void *p, size_t bytes);

	const size_t keep_;
	mutable std::mutex mu_;
	std::vector<std::unique_ptr<TransferImpl>> free_;
	// Control blocks of one size (that of shared_ptr<TransferImpl>'s with
	// Recycle and BlockAlloc), as bytes.
	std::vector<std::unique_ptr<std::byte[]>> blocks_;
	size_t block_size_ = 0;
	Stats stats_;
};

} // namespace hmemreg::engine
