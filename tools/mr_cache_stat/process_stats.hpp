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

// A cache's registrations of one hmemreg.ko export (stats block version 3).
struct ExportHeld {
	uint32_t cache_id = 0;
	uint64_t export_id = 0;
	uint64_t entries = 0, bytes = 0;
};

struct ProcessView {
	int pid = 0;
	uint64_t start_time = 0; // the block's (clock ticks since boot): with pid, names the process
	std::string comm;
	std::vector<CacheView> caches;
	std::vector<ExportHeld> exports;
	uint32_t version = 0;          // of its block: below 3 it has no export rows
	uint64_t exports_unlisted = 0; // pairs its full table could not list
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
