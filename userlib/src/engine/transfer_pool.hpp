// SPDX-License-Identifier: MIT
// Recycled transfers. The core's writes and control messages come from
// here: the shared_ptr that owns one keeps its control block inside the
// transfer (TransferImpl::control_block), its deleter resets the transfer
// (TransferImpl::recycle: vectors keep their capacity) and, once the
// control block goes too (no weak reference left), the transfer goes back
// to the free list. A steady stream of sends allocates nothing once warm,
// and takes this pool's lock twice per transfer. Exhaustion is no error:
// an empty pool makes a new transfer, and a full one (`keep` free) deletes
// what comes back. The pool lives while any of its transfers does (their
// control blocks hold a reference), so a TransferRef may outlive the engine.
// What it keeps is bounded twice: a transfer whose vectors grew past
// kKeepBytes (a write of many chunks, a large message) is deleted on
// return, and when every transfer is back (the engine idle) the free list
// is trimmed to the most that were in use at once in this busy spell or
// the one before (at least kFloor): a burst's transfers stay while bursts
// come back, and go after two spells without one.
#pragma once

#include <cstddef>
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
		uint64_t oversized = 0; // of those, deleted for the capacity they held
		uint64_t trimmed = 0; // free transfers deleted when the engine went idle
		size_t free = 0;      // transfers waiting for reuse now
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
		void operator()(TransferImpl *x) const { x->recycle(); }
	};
	template <class T> struct InPlace;
	void give_back(TransferImpl *x);

public:
	static constexpr size_t kKeepBytes = 32 << 10, kFloor = 64;

private:
	const size_t keep_;
	mutable std::mutex mu_;
	std::vector<std::unique_ptr<TransferImpl>> free_;
	size_t in_use_ = 0, peak_ = 0, last_peak_ = 0; // this busy spell's and the previous one's
	Stats stats_;
};

} // namespace hmemreg::engine
