// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: the bytes a transfer moves and where each chunk
// lands, for the writer and for the target that verifies them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hmemreg::bench {

// The bench's source bytes, and where each chunk of a size-byte transfer in
// `nchunks` chunks goes (scattered: chunk k lands in reverse order).
uint8_t pattern(size_t i);
struct Placement {
	size_t local, len, remote;
};
std::vector<Placement> placements(size_t size, size_t nchunks);
// The target's first `size` bytes once such a transfer landed.
std::vector<uint8_t> expected_target(size_t size, size_t nchunks);

} // namespace hmemreg::bench
