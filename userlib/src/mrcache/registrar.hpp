// SPDX-License-Identifier: MIT
// Registrar: how the cache turns a range into a registration. Pluggable so
// the cache core is tested without a NIC (MemoryRegistrar) and used with any
// libfabric domain (FabricRegistrar, fabric_registrar.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>

#include "mrcache/types.hpp"

namespace hmemreg::mr {

class Registrar {
public:
	virtual ~Registrar() = default;
	virtual const char *name() const = 0;

	// The range to register for a request. Default: the whole pages the
	// request touches (two buffers sharing a page then share an entry, and
	// a registration never ends inside a page it claims to cover). A
	// memory kind may decide instead (MemoryKind::extent: CUDA takes the
	// whole allocation); the cache asks it first.
	virtual Range extent(const Request &req) const;

	// Register `range` (which covers req) and fill `out`. Called without any
	// cache lock held. 0 or -HMEMREG_E* (-HMEMREG_ENOMEM means "resources
	// exhausted": the cache evicts unused entries and retries once).
	virtual int reg(const Request &req, Range range, Registration &out) = 0;

	// Release a registration made by reg(). Called without cache locks.
	virtual void dereg(Registration &r) noexcept = 0;
};

// In-memory registrar for unit tests and benchmarks: registers nothing,
// hands out unique keys, tracks what is live so tests can assert that
// nothing leaked, and can be told to fail.
class MemoryRegistrar final : public Registrar {
public:
	const char *name() const override { return "memory"; }
	int reg(const Request &req, Range range, Registration &out) override;
	void dereg(Registration &r) noexcept override;

	uint64_t live() const { return live_.load(std::memory_order_relaxed); }
	uint64_t regs() const { return regs_.load(std::memory_order_relaxed); }
	uint64_t deregs() const { return deregs_.load(std::memory_order_relaxed); }
	// Fail the next n registrations with `code` (negative HMEMREG_E*).
	void fail_next(uint32_t n, int code)
	{
		fail_code_.store(code);
		fail_left_.store(n);
	}
	// Track each live registration's range (slower; tests only).
	void track_ranges(bool on) { track_ = on; }
	bool is_live_range(uintptr_t start, uintptr_t end) const;

private:
	std::atomic<uint64_t> next_key_{1};
	std::atomic<uint64_t> live_{0}, regs_{0}, deregs_{0};
	std::atomic<uint32_t> fail_left_{0};
	std::atomic<int> fail_code_{0};
	bool track_ = false;
	mutable std::mutex mu_;
	std::multiset<std::pair<uintptr_t, uintptr_t>> ranges_;
};

} // namespace hmemreg::mr
