// SPDX-License-Identifier: MIT
// One sample (processes' stats blocks and the kernel ledger, with its time),
// and the per-cache rates between samples.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>

#include "kernel_ledger.hpp"
#include "process_stats.hpp"

namespace mr_cache_stat {

struct Sample {
	double time = 0;      // seconds since the epoch (JSON "time", text TIME)
	double monotonic = 0; // CLOCK_MONOTONIC seconds (rates)
	bool processes = true; // false with --kernel
	Scan scan;
	Ledger ledger;
	bool loaded = false; // the ledger could be read
	std::string why;     // why not
};

// A cache, wherever and whenever: its process (pid and start time: a
// reused pid is another process) and its id there (never reused).
struct CacheKey {
	int pid = 0;
	uint64_t start_time = 0;
	uint32_t id = 0;
	auto operator<=>(const CacheKey &) const = default;
};

// Per second since the previous sample of the same cache.
struct Rates {
	bool known = false; // false: first sample of this cache, or a counter went back
	double seconds = 0;
	double hits = 0, misses = 0, registrations = 0, uncached = 0;
};

class RateBook {
public:
	// Rates of every cache of s; remembers s for the next call.
	void update(const Sample &s);
	Rates of(const CacheKey &k) const;

private:
	struct Seen {
		double monotonic;
		hmemreg_cache_stats sum;
	};
	std::map<CacheKey, Seen> prev_;
	std::map<CacheKey, Rates> now_;
};

} // namespace mr_cache_stat
