// SPDX-License-Identifier: MIT
// Every HMEMREG_* setting of the project, in one table: what mr_cache_stat
// --env lists, what the load-time typo check knows. A setting read anywhere
// (library or plugin) is listed here; tests/host.d/12-settings.sh checks that
// every name the sources read is in this table. At load, each HMEMREG_*
// variable that is not a setting is reported once.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "settings/settings.hpp"

extern char **environ;

namespace {

constexpr std::array<hmemreg_setting, 33> kSettings = {{
	{"HMEMREG_LOG_LEVEL", "warn", "log", "none|error|warn|info|debug",
	 "messages on stderr at this level and more severe ones"},
	{"HMEMREG_MR_CACHE_MAX_COUNT", "1024", "cache", "number", "entries per cache before the LRU evicts"},
	{"HMEMREG_MR_CACHE_MAX_SIZE", "half of RAM", "cache", "size", "registered bytes per cache before the LRU evicts"},
	{"HMEMREG_MR_CACHE_MAX_ENTRY_SIZE", "0 (no limit)", "cache", "size",
	 "larger registrations are made uncached"},
	{"HMEMREG_MR_CACHE_MONITOR", "auto", "cache", "auto|kmod|uffd|none",
	 "how the cache learns that memory went away (auto: kmod if loaded, else uffd)"},
	{"HMEMREG_MR_CACHE_PURGE_ON_FORK", "1", "cache", "bool", "release unused entries before fork()"},
	{"HMEMREG_MR_CACHE_STATS", "1", "cache", "bool", "publish /dev/shm/hmemreg-stats.PID for mr_cache_stat"},
	{"HMEMREG_MR_CACHE_MEMBARRIER", "1", "cache", "bool",
	 "count hits with plain stores and membarrier(2) at unlink (0: seq_cst atomics)"},
	{"HMEMREG_KEEP_PROVIDER_MR_CACHE", "0", "fabric", "bool",
	 "leave libfabric providers' own MR caches on (default: their monitors off, FI_MR_CACHE_MONITOR=disabled)"},
	{"HMEMREG_WRAP_DMABUF", "1", "fabric", "bool",
	 "register device memory's DMA-BUF through hmemreg.ko's DMABUF provider where loaded (the pin ledger sees it)"},
	{"HMEMREG_FABRIC_API", "newest of 2.0, 1.20, 1.17 the runtime takes", "fabric", "MAJOR.MINOR",
	 "cap on the libfabric API version asked for (1.17: no FI_MR_DMABUF)"},
	{"HMEMREG_PEER_TIMEOUT_MS", "10000", "engine", "number",
	 "a peer with posted work and no completion this long is declared dead (0: never)"},
	{"HMEMREG_ENGINE_BUNDLE", "1", "engine", "bool",
	 "0: every control message its own send (a comparison; 1 packs messages queued for one peer into one)"},
	{"HMEMREG_NCCL_PROVIDER", "auto", "nccl", "text", "libfabric provider, e.g. tcp;ofi_rxm"},
	{"HMEMREG_NCCL_NODE", "default", "nccl", "text", "fabric address (node) the engine binds"},
	{"HMEMREG_NCCL_DOMAIN", "any", "nccl", "text", "libfabric domain name"},
	{"HMEMREG_NCCL_RAILS", "4 on tcp with 8 or more CPUs, else 1", "nccl", "number",
	 "rails (endpoints) of the engine, 1-16"},
	{"HMEMREG_NCCL_PROGRESS_THREADS", "one per rail, at most the CPUs less one", "nccl", "number",
	 "progress threads, 0-16 (0: NCCL's calls drive progress)"},
	{"HMEMREG_NCCL_SPEED_MBPS", "0", "nccl", "number",
	 "link speed reported to NCCL, Mbps (0: the rails' NICs' link speeds summed, 10000 where unknown)"},
	{"HMEMREG_NCCL_LATENCY_US", "0", "nccl", "number", "latency reported to NCCL, microseconds"},
	{"HMEMREG_NCCL_MAX_REQUESTS", "256", "nccl", "number", "requests in flight per comm (1-65536)"},
	{"HMEMREG_NCCL_MAX_WRITE", "0 (engine's)", "nccl", "size", "largest single RDMA write"},
	{"HMEMREG_NCCL_NOTIFY", "auto", "nccl", "auto|immediate|message", "how the receiver learns a write landed"},
	{"HMEMREG_NCCL_STALL_MS", "0", "nccl", "ms", "log the plugin's state once when a request waits this long (0: off)"},
	{"HMEMREG_NCCL_DEVICE_MEMORY", "auto", "nccl", "auto|staged|host",
	 "GPU buffers the plugin takes: staged (through host memory by the engine, only where CUDA loads kernels eagerly: CUDA_MODULE_LOADING=EAGER), host (none: NCCL copies) or auto (a NIC writing GPU memory with iflush's read-back, else none)"},
	{"HMEMREG_NCCL_EAGER_MAX", "0", "nccl", "size", "largest send copied through an eager slot (0: off)"},
	{"HMEMREG_NCCL_EAGER_BUSY_MAX", "64k", "nccl", "size",
	 "largest eager send while the comm has sends outstanding"},
	{"HMEMREG_NCCL_PEER_TIMEOUT_MS", "the engine's", "nccl", "number",
	 "the plugin's engine's peer timeout (0: never)"},
	{"HMEMREG_NCCL_EAGER_SLOTS", "16", "nccl", "number", "eager slots per receive comm"},
	{"HMEMREG_NCCL_INLINE_MAX", "16k", "nccl", "size", "largest send carried in a control message (0: off)"},
	{"HMEMREG_NCCL_FIRST_RAIL_MAX", "64k", "nccl", "size",
	 "largest write kept on rail 0, which NCCL's calls poll every time (with progress threads)"},
	{"HMEMREG_NCCL_TIMELINE", "off", "nccl", "folder",
	 "each process writes its requests' step times there (timeline.PID.txt; the folder is made if missing) "
	 "for hmemreg_bench timeline"},
	{"HMEMREG_NCCL_PLUGIN_PATH", "none", "tests", "text", "the plugin the GPU suite's NCCL program loads"},
}};

} // namespace

namespace hmemreg::settings {

const hmemreg_setting *find(const char *name)
{
	for (const auto &s : kSettings)
		if (!std::strcmp(s.name, name))
			return &s;
	return nullptr;
}

} // namespace hmemreg::settings

extern "C" size_t hmemreg_settings_count(void)
{
	return kSettings.size();
}

extern "C" const struct hmemreg_setting *hmemreg_setting_at(size_t index)
{
	return index < kSettings.size() ? &kSettings[index] : nullptr;
}

namespace {

// Levenshtein distance, for "did you mean".
size_t distance(std::string_view a, std::string_view b)
{
	std::vector<size_t> d(b.size() + 1, 0);
	for (size_t j = 0; j <= b.size(); j++)
		d[j] = j;
	for (size_t i = 1; i <= a.size(); i++) {
		size_t diag = d[0];
		d[0] = i;
		for (size_t j = 1; j <= b.size(); j++) {
			size_t up = d[j];
			d[j] = std::min({d[j] + 1, d[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
			diag = up;
		}
	}
	return d[b.size()];
}

// Names under these prefixes are the library's and the plugin's: any other
// name there is a mistake. Elsewhere under HMEMREG_ (the test harness has its
// own variables) only a near miss of a setting is reported.
bool owned(std::string_view name)
{
	for (std::string_view p : {"HMEMREG_MR_", "HMEMREG_NCCL_", "HMEMREG_LOG", "HMEMREG_KEEP_", "HMEMREG_PEER_", "HMEMREG_FABRIC_"})
		if (name.substr(0, p.size()) == p)
			return true;
	return false;
}

// At load: each HMEMREG_* variable that is not a setting, once.
__attribute__((constructor)) void check_environment()
{
	for (char **e = environ; e && *e; e++) {
		std::string_view kv(*e);
		if (kv.substr(0, 8) != "HMEMREG_")
			continue;
		std::string name(kv.substr(0, kv.find('=')));
		if (hmemreg::settings::find(name.c_str()))
			continue;
		const hmemreg_setting *best = nullptr;
		size_t best_d = ~size_t{0};
		for (size_t i = 0; i < hmemreg_settings_count(); i++) {
			const hmemreg_setting *s = hmemreg_setting_at(i);
			size_t d = distance(name, s->name);
			if (d < best_d)
				best = s, best_d = d;
		}
		bool near = best && best_d <= 2;
		if (!owned(name) && !near)
			continue;
		if (near)
			hmemreg::log::write(HMEMREG_LOG_WARN, "settings",
					    "%s is not a setting (ignored); did you mean %s? (mr_cache_stat --env "
					    "lists them)", name.c_str(), best->name);
		else
			hmemreg::log::write(HMEMREG_LOG_WARN, "settings",
					    "%s is not a setting (ignored; mr_cache_stat --env lists them)",
					    name.c_str());
	}
}

} // namespace
