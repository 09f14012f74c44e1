// SPDX-License-Identifier: MIT
// Test data of the fabric and NCCL plugin suites and their peer programs:
// page-aligned zeroed buffers, and bytes that depend on a seed and on their
// position, so misplaced or stale data shows. No Criterion here: forked ranks
// and peer processes use it too.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace test_bytes {

inline uint8_t pattern(uint64_t seed, size_t i)
{
	return static_cast<uint8_t>(((seed + i) * 0x9E3779B97F4A7C15ull) >> 56);
}

inline void fill(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(seed, i);
}

// Page-aligned, zeroed memory (throws std::bad_alloc when there is none).
class PageBuffer {
public:
	explicit PageBuffer(size_t n) : len(n)
	{
		void *q = nullptr;
		if (posix_memalign(&q, 4096, n ? n : 1) != 0)
			throw std::bad_alloc();
		std::memset(q, 0, n);
		mem_.reset(static_cast<uint8_t *>(q));
	}
	uint8_t *data() const { return mem_.get(); }
	size_t len;

private:
	struct Free {
		void operator()(uint8_t *q) const { std::free(q); }
	};
	std::unique_ptr<uint8_t, Free> mem_;
};

} // namespace test_bytes
