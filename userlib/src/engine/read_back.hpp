// SPDX-License-Identifier: MIT
// A read-back: a few bytes of a local region read through every rail's NIC
// (an RDMA READ from the rail's own endpoint into a host word the rail
// registered), so that what the NICs wrote into the region before is in
// place for the device owning it once the reads complete: PCIe orders a
// read behind the writes ahead of it. GPUDirect RDMA's flush (NCCL's
// iflush on GPUs below compute capability 9.0). Completes once every rail's
// read did; the first failure is its status. A NIC copy (Facade::nic_copy)
// is the same READ on one rail, into a region instead of the word.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "engine/facade.hpp"

namespace hmemreg::engine {

struct ReadBack final : Transfer {
	ReadBack(RegionRef r, size_t n, uint32_t rails, RegionRef from = nullptr)
		: region(std::move(r)), source(std::move(from)), len(n), pending(rails)
	{
	}
	// One rail's read completed (err: 0, or a positive fi_errno).
	void rail_done(int err, const std::string &why);

	int status() const override { return status_.load(std::memory_order_acquire); }
	std::string error() const override
	{
		std::lock_guard l(mu_);
		return why_;
	}
	size_t bytes() const override { return len; }
	bool staged() const override { return false; }

	const RegionRef region; // keeps the registration (and its keys) alive
	const RegionRef source; // a NIC copy's (Facade::nic_copy): what is read
	const size_t len;

private:
	std::atomic<uint32_t> pending;
	std::atomic<int> status_{-HMEMREG_EAGAIN};
	mutable std::mutex mu_;
	int first_error_ = 0;
	std::string why_;
};

} // namespace hmemreg::engine
