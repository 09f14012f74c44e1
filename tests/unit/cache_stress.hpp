// SPDX-License-Identifier: MIT
// The multi-threaded scenario shared by test_cache_concurrency (Criterion)
// and cache_stress (a plain program, run under TSan: Criterion's runner does
// not start under TSan). Each thread remaps its own slot of a reserved
// region over and over and stamps it; a get must always return a
// registration of the current mapping (stamp registrar). All threads also
// hit a shared buffer, and thread 0 invalidates it explicitly now and then.
#pragma once

#include <sys/mman.h>
#include <thread>
#include <vector>

#include "cache_test_util.hpp"

namespace t {

struct StressResult {
	int stale = 0, errors = 0;
};

inline StressResult run_stress(Cache &cache, int threads, int rounds)
{
	std::atomic<int> stale{0}, errors{0};
	size_t slot_len = 4 * page();
	Mapping shared(8 * page());
	for (size_t i = 0; i < shared.len; i += 8)
		std::memcpy(shared.p + i, "\xbc\x0a\0\0\0\0\0\0", 8); // 0xabc everywhere
	auto *region = static_cast<char *>(::mmap(nullptr, slot_len * threads, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	if (region == MAP_FAILED)
		return {0, 1};
	auto worker = [&](int id) {
		char *slot = region + id * slot_len;
		for (int r = 0; r < rounds; r++) {
			if (::mmap(slot, slot_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != slot) {
				errors++;
				return;
			}
			uint64_t v = (static_cast<uint64_t>(id) << 32) | static_cast<uint64_t>(r + 1);
			for (int k = 0; k < 4; k++) // every address a get may register from
				std::memcpy(slot + 64 * k, &v, sizeof(v));
			for (int k = 0; k < 4; k++) { // miss once, then hit
				Entry *e = nullptr;
				if (cache.get(req(slot + 64 * k, 64), e)) {
					errors++;
					continue;
				}
				stale += e->reg.cookie != v;
				cache.put(e);
			}
			for (int k = 0; k < 8; k++) {
				Entry *e = nullptr;
				if (cache.get(req(shared.p + 128 * k, 128), e) == 0) {
					stale += e->reg.cookie != 0xabc;
					cache.put(e);
				} else {
					errors++;
				}
			}
			if (id == 0 && r % 16 == 0) {
				auto s = reinterpret_cast<uintptr_t>(shared.p);
				cache.invalidate(Iface::host, s, s + 1);
			}
			::munmap(slot, slot_len); // the next get of this slot must miss
		}
	};
	std::vector<std::thread> th;
	for (int i = 0; i < threads; i++)
		th.emplace_back(worker, i);
	for (auto &x : th)
		x.join();
	::munmap(region, slot_len * threads);
	return {stale.load(), errors.load()};
}

} // namespace t
