// SPDX-License-Identifier: MIT
// The per-process stats blocks that libhmemreg caches publish in /dev/shm.
#pragma once

#include <hmemreg/stats.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mr_cache_stat {

struct CacheView {
	uint32_t id = 0; // unique in its process, never reused (the block's slot id)
	std::string name, monitor, registrar;
	hmemreg_cache_stats sum{};
	// Upper bound of the registration-time histogram bucket holding the p99
	// (a power of two), 0 if none: "p99 <= this", not a measured p99.
	uint64_t reg_p99_le_ns = 0;
};

struct ProcessView {
	int pid = 0;
	uint64_t start_time = 0; // the block's (clock ticks since boot): with pid, names the process
	std::string comm;
	std::vector<CacheView> caches;
};

struct Scan {
	std::vector<ProcessView> live;
	int stale = 0;       // blocks of dead processes (ignored)
	int unreadable = 0;  // blocks we may not open (permission)
	int foreign = 0;     // other version, truncated or half-written
};

// Reads every /dev/shm/hmemreg-stats.* block (or only pid's when pid > 0).
Scan scan_processes(int pid);

} // namespace mr_cache_stat
