// SPDX-License-Identifier: MIT
// The write planner: the chunks of one write, the target's decoded region
// descriptor and the engine's limits in, the RDMA writes of each rail out.
// Pure: no fabric, no locks, no engine state (the caller picks the first
// rail), so it is unit-tested with no provider (tests/unit/test_write_plan).
//
// Chunks that continue each other on both sides (same registration, next
// local byte, next remote byte) join first; each run is cut at max_write
// into pieces dealt round-robin over the rails, starting at first_rail; a
// rail's consecutive pieces share one write, up to write_iov of them and
// max_write bytes together. Local rail r writes to the target's rail
// r % (its rail count).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <sys/uio.h>

#include <rdma/fi_rma.h>

#include "engine/wire.hpp"

namespace hmemreg::engine {

class LocalRegistration;

// One chunk with its local side resolved: the NIC's address of its first
// byte (the region's memory or host mirror, plus the chunk's offset) and the
// registration that gives its descriptor on each rail.
struct PlanChunk {
	uint8_t *local = nullptr;
	const LocalRegistration *reg = nullptr;
	size_t len = 0;
	uint64_t remote_offset = 0;
};

struct PlanLimits {
	size_t rails = 1;     // local rails
	size_t max_write = 0; // bytes per write at most (> 0)
	size_t write_iov = 1; // pieces per write at most (> 0)
};

struct WritePlan {
	// Pieces, grouped by rail and write: a write's pieces are contiguous.
	std::vector<iovec> iovs;
	std::vector<void *> descs;
	std::vector<fi_rma_iov> rmas;
	struct Write {
		uint32_t first = 0; // its first piece
		uint32_t count = 0;
	};
	std::vector<Write> writes;
	std::vector<std::vector<uint32_t>> rail_writes; // write indices per rail
	uint64_t bytes = 0;
	// The first rail that carries a write (rails when there is none).
	unsigned first_busy_rail() const;
};

// Chunks already validated against `remote` (lengths > 0, in range).
// Throws Error(HMEMREG_EINVAL) when the pieces would not fit 32-bit indices.
WritePlan plan_write(std::span<const PlanChunk> chunks, const wire::RegionDescriptor &remote, const PlanLimits &lim,
		     unsigned first_rail);
// The same into `out`, whose vectors keep their capacity (a recycled
// transfer's plan: no allocation once they are large enough). The
// planner's own scratch is per thread, reused too.
void plan_write(std::span<const PlanChunk> chunks, const wire::RegionDescriptor &remote, const PlanLimits &lim,
		unsigned first_rail, WritePlan &out);

} // namespace hmemreg::engine
