// SPDX-License-Identifier: MIT
// The per-process stats blocks that libhmemreg caches publish in /dev/shm.
#pragma once

#include <hmemreg/stats.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mr_cache_stat {

struct CacheView {
	std::string name, monitor, registrar;
	hmemreg_cache_stats sum{};
	uint64_t reg_p99_ns = 0; // from the registration-time histogram, 0 if none
};

struct ProcessView {
	int pid = 0;
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
