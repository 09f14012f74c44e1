// SPDX-License-Identifier: MIT
// Names and number formats shared by the text and JSON views.
#pragma once

#include <hmemreg/stats.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace mr_cache_stat {

inline const char *const kCauses[HMEMREG_INVAL_MAX] = {"unmap",    "clear",    "remap", "explicit", "stale",
							"overflow", "replaced", "fork",  "other"};
inline const char *const kUncached[HMEMREG_UNCACHED_MAX] = {"limit", "unwatchable", "refused", "raced", "asked"};

// What a monitor cannot see (hmemreg(3), MONITORS), for the text output.
inline const char *blind_spots(const std::string &monitor)
{
	if (monitor == "uffd")
		return "caches private anonymous memory only (shared/file-backed: uncached)";
	if (monitor == "none")
		return "sees nothing: the application invalidates";
	if (monitor == "unavailable")
		return "no monitor: nothing cached";
	return nullptr;
}

inline std::string human(uint64_t bytes)
{
	const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = static_cast<double>(bytes);
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	char b[32];
	std::snprintf(b, sizeof(b), u ? "%.1f%s" : "%.0f%s", v, units[u]);
	return b;
}

inline double ratio(uint64_t hits, uint64_t misses)
{
	return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0;
}

inline uint64_t mean_ns(const hmemreg_cache_stats &s)
{
	return s.registrations ? s.registration_ns / s.registrations : 0;
}

inline uint64_t invalidations(const hmemreg_cache_stats &s)
{
	uint64_t n = 0;
	for (uint64_t v : s.invalidations)
		n += v;
	return n;
}

// "limit=3,unwatchable=2000"; empty when every registration was cached.
inline std::string uncached_why(const hmemreg_cache_stats &s)
{
	std::string o;
	for (int i = 0; i < HMEMREG_UNCACHED_MAX; i++)
		if (s.uncached_by[i])
			o += (o.empty() ? "" : ",") + std::string(kUncached[i]) + "=" + std::to_string(s.uncached_by[i]);
	return o;
}

} // namespace mr_cache_stat
