// SPDX-License-Identifier: MIT
#include "xfer_payload.hpp"

namespace hmemreg::bench {

uint8_t pattern(size_t i)
{
	return static_cast<uint8_t>(i * 131 + 7 + (i >> 12));
}

std::vector<Placement> placements(size_t size, size_t nchunks)
{
	std::vector<Placement> v;
	const size_t per = size / nchunks;
	for (size_t k = 0; k < nchunks; k++) {
		const size_t len = k + 1 == nchunks ? size - per * k : per;
		v.push_back({per * k, len, nchunks == 1 ? 0 : size - per * k - len});
	}
	return v;
}

std::vector<uint8_t> expected_target(size_t size, size_t nchunks)
{
	std::vector<uint8_t> want(size);
	for (const Placement &c : placements(size, nchunks))
		for (size_t i = 0; i < c.len; i++)
			want[c.remote + i] = pattern(c.local + i);
	return want;
}

} // namespace hmemreg::bench
