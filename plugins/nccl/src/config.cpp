// SPDX-License-Identifier: MIT
#include "config.hpp"

#include <hmemreg/settings.h>

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace hmemreg::nccl {
namespace {

const char *env(const char *name)
{
	const char *v = std::getenv(name);
	return v && *v ? v : nullptr;
}

bool number(const char *name, unsigned long long lo, unsigned long long hi, unsigned long long &out, std::string &why,
	    bool size = false)
{
	const char *v = env(name);
	if (!v)
		return true;
	unsigned long long x = 0;
	bool ok;
	if (size) {
		uint64_t bytes = 0;
		ok = hmemreg_parse_size(v, &bytes) == 0;
		x = bytes;
	} else {
		char *end = nullptr;
		errno = 0;
		x = std::strtoull(v, &end, 10);
		ok = !errno && end != v && !*end && *v != '-';
	}
	if (!ok || x < lo || x > hi) {
		why = std::string(name) + "='" + v + "' is not a " + (size ? "size" : "number") + " in [" +
		      std::to_string(lo) + ", " + std::to_string(hi) + "]" +
		      (size ? " (bytes, or with k/m/g: 64k, 16MiB)" : "");
		return false;
	}
	out = x;
	return true;
}

// CPUs in this process's affinity mask (taskset, cgroup cpusets, MPI or
// NCCL binding), at least 1.
unsigned usable_cpus()
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return std::max(1, CPU_COUNT(&set));
	return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace

bool Config::load(std::string &why)
{
	if (const char *v = env("HMEMREG_NCCL_PROVIDER"))
		provider = v;
	if (const char *v = env("HMEMREG_NCCL_NODE"))
		node = v;
	if (const char *v = env("HMEMREG_NCCL_DOMAIN"))
		domain = v;
	if (const char *v = env("HMEMREG_NCCL_TIMELINE"))
		timeline_dir = v;
	unsigned long long x;
	x = rails;
	if (!number("HMEMREG_NCCL_RAILS", 1, 16, x, why))
		return false;
	rails = static_cast<unsigned>(x);
	x = progress_threads;
	if (!number("HMEMREG_NCCL_PROGRESS_THREADS", 0, 16, x, why))
		return false;
	progress_threads = static_cast<unsigned>(x);
	x = static_cast<unsigned long long>(speed_mbps);
	if (!number("HMEMREG_NCCL_SPEED_MBPS", 0, 100000000, x, why))
		return false;
	speed_mbps = static_cast<int>(x);
	x = static_cast<unsigned long long>(latency_us);
	if (!number("HMEMREG_NCCL_LATENCY_US", 0, 1000000, x, why))
		return false;
	latency_us = static_cast<double>(x);
	x = max_requests;
	if (!number("HMEMREG_NCCL_MAX_REQUESTS", 1, 65536, x, why))
		return false;
	max_requests = x;
	x = max_write;
	if (!number("HMEMREG_NCCL_MAX_WRITE", 0, 1ULL << 40, x, why, true))
		return false;
	max_write = x;
	x = eager_max;
	if (!number("HMEMREG_NCCL_EAGER_MAX", 0, 64ULL << 20, x, why, true))
		return false;
	eager_max = x;
	x = eager_busy_max;
	if (!number("HMEMREG_NCCL_EAGER_BUSY_MAX", 0, 64ULL << 20, x, why, true))
		return false;
	eager_busy_max = x;
	x = eager_slots;
	if (!number("HMEMREG_NCCL_EAGER_SLOTS", 1, 1024, x, why))
		return false;
	eager_slots = x;
	x = stall_ms;
	if (!number("HMEMREG_NCCL_STALL_MS", 0, 86'400'000, x, why))
		return false;
	stall_ms = static_cast<unsigned>(x);
	x = inline_max;
	if (!number("HMEMREG_NCCL_INLINE_MAX", 0, 64ULL << 10, x, why, true))
		return false;
	inline_max = x;
	x = first_rail_max;
	if (!number("HMEMREG_NCCL_FIRST_RAIL_MAX", 0, 1ULL << 40, x, why, true))
		return false;
	first_rail_max = x;
	if (env("HMEMREG_NCCL_PEER_TIMEOUT_MS")) {
		x = 0;
		if (!number("HMEMREG_NCCL_PEER_TIMEOUT_MS", 0, 86'400'000, x, why))
			return false;
		peer_timeout_ms = static_cast<long long>(x);
	}
	if (!cpus)
		cpus = usable_cpus();
	if (rails == 0)
		rails = provider.find("tcp") != std::string::npos && cpus >= kTcpRailsMinCpus ? 4 : 1;
	if (progress_threads == kPerRail)
		progress_threads = std::min(rails, cpus - 1);
	if (const char *v = env("HMEMREG_NCCL_NOTIFY")) {
		notify = v;
		if (notify != "auto" && notify != "immediate" && notify != "message") {
			why = std::string("HMEMREG_NCCL_NOTIFY='") + v + "' is not auto, immediate or message";
			return false;
		}
	}
	if (const char *v = env("HMEMREG_NCCL_DEVICE_MEMORY")) {
		device_memory = v;
		if (device_memory != "auto" && device_memory != "staged" && device_memory != "host") {
			why = std::string("HMEMREG_NCCL_DEVICE_MEMORY='") + v + "' is not auto, staged or host";
			return false;
		}
	}
	return true;
}

std::string Config::describe() const
{
	std::ostringstream o;
	o << "provider=" << (provider.empty() ? "auto" : provider) << " node=" << (node.empty() ? "default" : node)
	  << " domain=" << (domain.empty() ? "any" : domain) << " rails=" << rails
	  << " progress_threads=" << progress_threads << " cpus=" << cpus << " speed=" << (speed_mbps ? std::to_string(speed_mbps) + "Mbps" : std::string("NICs'"))
	  << " max_requests=" << max_requests << " notify=" << notify << " device_memory=" << device_memory << " eager="
	  << (eager_max && eager_slots ? std::to_string(eager_slots) + "x" + std::to_string(eager_max >> 10) + "KiB (busy<=" +
						 std::to_string(eager_busy_max >> 10) + "KiB)"
				       : std::string("off"))
	  << " inline<=" << inline_max << "B rail0<=" << (first_rail_max >> 10) << "KiB peer_timeout="
	  << (peer_timeout_ms == kEngineDefault ? std::string("engine's")
	      : peer_timeout_ms == 0		 ? std::string("never")
						 : std::to_string(peer_timeout_ms) + "ms");
	if (!timeline_dir.empty())
		o << " timeline=" << timeline_dir;
	return o.str();
}

} // namespace hmemreg::nccl
