// SPDX-License-Identifier: MIT
// mr_cache_stat: what is registered and pinned, per process and in the kernel.
//
//   mr_cache_stat [-p PID] [-w SECONDS] [--json] [--kernel] [--check]
//   mr_cache_stat --env [--json]
//
// Exit status: 0 fine; 1 error (e.g. --kernel and the module is not loaded);
// 2 usage; 3 with --check, the kernel holds exports of dead processes
// (orphaned) or unbalanced pins.
#include <getopt.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <linux/hmemreg.h>

#include "kernel_ledger.hpp"
#include "process_stats.hpp"
#include "settings_view.hpp"

using namespace mr_cache_stat;

namespace {

struct Options {
	int pid = 0;
	double interval = 0;
	bool json = false;
	bool kernel_only = false;
	bool check = false;
	bool env = false;
};

const char *const kCauses[HMEMREG_INVAL_MAX] = {"unmap",   "clear",    "remap", "explicit", "stale",
						"overflow", "replaced", "fork",  "other"};
const char *const kUncached[HMEMREG_UNCACHED_MAX] = {"limit", "unwatchable", "refused", "raced", "asked"};

// What a monitor cannot see (hmemreg(3), MONITORS), for the text output.
const char *blind_spots(const std::string &monitor)
{
	if (monitor == "uffd")
		return "caches private anonymous memory only (shared/file-backed: uncached)";
	if (monitor == "none")
		return "sees nothing: the application invalidates";
	if (monitor == "unavailable")
		return "no monitor: nothing cached";
	return nullptr;
}

void usage(FILE *f)
{
	std::fprintf(f, "usage: mr_cache_stat [-p PID] [-w SECONDS] [--json] [--kernel] [--check]\n"
			"  -p PID       only this process (and only its exports in the kernel ledger)\n"
			"  -w SECONDS   repeat every SECONDS, with rates since the last sample\n"
			"  --json       one JSON document per sample (schema in mr_cache_stat(1))\n"
			"  --kernel     the kernel's pin ledger only\n"
			"  --check      exit 3 when the kernel holds orphaned exports or unbalanced pins\n"
			"  --env        every HMEMREG_* setting: default, value here, meaning\n");
}

std::string json_str(const std::string &s)
{
	std::string o = "\"";
	for (unsigned char c : s) {
		if (c == '"' || c == '\\')
			o += '\\';
		if (c < 0x20) {
			char b[8];
			std::snprintf(b, sizeof(b), "\\u%04x", c);
			o += b;
		} else {
			o += static_cast<char>(c);
		}
	}
	return o + "\"";
}

std::string human(uint64_t bytes)
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

double ratio(uint64_t hits, uint64_t misses)
{
	return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0;
}

uint64_t mean_ns(const hmemreg_cache_stats &s)
{
	return s.registrations ? s.registration_ns / s.registrations : 0;
}

// Previous sample of each (pid, cache name) for -w rates.
using Key = std::pair<int, std::string>;
std::map<Key, hmemreg_cache_stats> g_prev;

void print_processes_text(const Scan &scan, double dt)
{
	if (scan.live.empty()) {
		std::printf("processes: no process is using hmemreg (no live stats block in /dev/shm)\n");
	} else {
		std::printf("%-8s %-16s %-10s %-6s %8s %10s %12s %12s %6s %9s %9s %10s %10s %6s\n", "PID", "COMM",
			    "CACHE", "MON", "ENTRIES", "BYTES", "HITS", "MISSES", "HIT%", "EVICT", "INVAL", "REG_MEAN",
			    "REG_P99", "FAIL");
		for (const auto &p : scan.live) {
			for (const auto &c : p.caches) {
				const auto &s = c.sum;
				uint64_t inval = 0;
				for (uint64_t v : s.invalidations)
					inval += v;
				std::printf("%-8d %-16.16s %-10.10s %-6.6s %8" PRIu64 " %10s %12" PRIu64 " %12" PRIu64
					    " %5.1f%% %9" PRIu64 " %9" PRIu64 " %8.1fus %8.1fus %6" PRIu64 "\n",
					    p.pid, p.comm.c_str(), c.name.c_str(), c.monitor.c_str(), s.entries,
					    human(s.bytes).c_str(), s.hits, s.misses, 100 * ratio(s.hits, s.misses),
					    s.evictions, inval, mean_ns(s) / 1e3, c.reg_p99_ns / 1e3,
					    s.registration_failures);
				std::string causes;
				for (int i = 0; i < HMEMREG_INVAL_MAX; i++)
					if (s.invalidations[i])
						causes += std::string(" ") + kCauses[i] + "=" + std::to_string(s.invalidations[i]);
				if (!causes.empty())
					std::printf("%-8s invalidations:%s\n", "", causes.c_str());
				std::string why;
				for (int i = 0; i < HMEMREG_UNCACHED_MAX; i++)
					if (s.uncached_by[i])
						why += std::string(" ") + kUncached[i] + "=" + std::to_string(s.uncached_by[i]);
				if (!why.empty())
					std::printf("%-8s uncached registrations:%s\n", "", why.c_str());
				if (const char *b = blind_spots(c.monitor))
					std::printf("%-8s monitor %s: %s\n", "", c.monitor.c_str(), b);
				auto it = g_prev.find({p.pid, c.name});
				if (dt > 0 && it != g_prev.end()) {
					const auto &o = it->second;
					std::printf("%-8s rates: %.0f hits/s, %.0f misses/s, %.0f registrations/s\n", "",
						    (s.hits - o.hits) / dt, (s.misses - o.misses) / dt,
						    (s.registrations - o.registrations) / dt);
				}
				g_prev[{p.pid, c.name}] = s;
			}
		}
	}
	if (scan.stale || scan.foreign || scan.unreadable)
		std::printf("(ignored: %d stale block(s) of dead processes, %d of another version or half-written, "
			    "%d unreadable: permission)\n",
			    scan.stale, scan.foreign, scan.unreadable);
}

void print_kernel_text(const Ledger &l)
{
	std::printf("kernel: %" PRIu64 " exports (%s), %" PRIu64 " orphaned, %" PRIu64 " attachments, %" PRIu64
		    " pins, %" PRIu64 " maps, %" PRIu64 " host pages pinned, %" PRIu64 " watches, %" PRIu64
		    " events (%" PRIu64 " dropped), %" PRIu64 " open fds\n",
		    l.stat("exports_live"), human(l.stat("exported_bytes")).c_str(), l.stat("orphans_live"),
		    l.stat("attach_live"), l.stat("pins_live"), l.stat("maps_live"), l.stat("host_pages_pinned"),
		    l.stat("watches_live"), l.stat("events_total"), l.stat("events_dropped"), l.stat("contexts_live"));
	if (l.stat("devmem_pool_bytes"))
		std::printf("devmem: %s of %s used, %" PRIu64 " handles\n", human(l.stat("devmem_used_bytes")).c_str(),
			    human(l.stat("devmem_pool_bytes")).c_str(), l.stat("devmem_handles_live"));
	if (l.stat("unbalanced"))
		std::printf("WARNING: %" PRIu64 " unbalanced unpin/unmap calls by importers\n", l.stat("unbalanced"));
	if (l.exports.empty())
		return;
	std::printf("%-6s %-7s %-8s %-16s %-18s %10s %5s %5s %5s %s\n", "ID", "KIND", "OWNER", "COMM", "ADDR", "LEN",
		    "ATT", "PINS", "MAPS", "STATE / IMPORTERS");
	for (const auto &e : l.exports) {
		std::string state = e.state & HMEMREG_EXP_STATE_ORPHANED ? "orphaned" : "live";
		if (e.state & HMEMREG_EXP_STATE_HANDLE_FREED)
			state += ",handle-freed";
		if (e.state & HMEMREG_EXP_STATE_STALE)
			state += ",stale";
		for (const auto &a : e.attachments)
			state += " " + a.device + "(" + a.comm + "/" + std::to_string(a.pid) + (a.dynamic ? ",dyn" : "") +
				 " pinned=" + std::to_string(a.pinned) + ")";
		std::printf("%-6" PRIu64 " %-7s %-8u %-16.16s 0x%016" PRIx64 " %10s %5u %5u %5u %s\n", e.id,
			    provider_name(e.provider), e.owner_pid, e.owner_comm.c_str(), e.addr, human(e.len).c_str(),
			    e.attach_live, e.pins_live, e.maps_live, state.c_str());
	}
}

std::string processes_json(const Scan &scan)
{
	std::string o = "[";
	for (size_t i = 0; i < scan.live.size(); i++) {
		const auto &p = scan.live[i];
		o += (i ? "," : "") + std::string("{\"pid\":") + std::to_string(p.pid) + ",\"comm\":" + json_str(p.comm) +
		     ",\"caches\":[";
		for (size_t j = 0; j < p.caches.size(); j++) {
			const auto &c = p.caches[j];
			const auto &s = c.sum;
			char num[64];
			std::snprintf(num, sizeof(num), "%.6f", ratio(s.hits, s.misses));
			o += (j ? "," : "") + std::string("{\"name\":") + json_str(c.name) +
			     ",\"monitor\":" + json_str(c.monitor) + ",\"registrar\":" + json_str(c.registrar) +
			     ",\"entries\":" + std::to_string(s.entries) + ",\"bytes\":" + std::to_string(s.bytes) +
			     ",\"hits\":" + std::to_string(s.hits) + ",\"misses\":" + std::to_string(s.misses) +
			     ",\"hit_ratio\":" + num + ",\"evictions\":" + std::to_string(s.evictions) +
			     ",\"uncached\":" + std::to_string(s.uncached) +
			     ",\"registrations\":" + std::to_string(s.registrations) +
			     ",\"registration_mean_ns\":" + std::to_string(mean_ns(s)) +
			     ",\"registration_p99_ns\":" + std::to_string(c.reg_p99_ns) +
			     ",\"registration_failures\":" + std::to_string(s.registration_failures) +
			     ",\"invalidations\":{";
			for (int k = 0; k < HMEMREG_INVAL_MAX; k++)
				o += (k ? "," : "") + json_str(kCauses[k]) + ":" + std::to_string(s.invalidations[k]);
			o += "},\"uncached_by\":{";
			for (int k = 0; k < HMEMREG_UNCACHED_MAX; k++)
				o += (k ? "," : "") + json_str(kUncached[k]) + ":" + std::to_string(s.uncached_by[k]);
			o += "}}";
		}
		o += "]}";
	}
	return o + "]";
}

std::string kernel_json(const Ledger &l, bool loaded, const std::string &why)
{
	if (!loaded)
		return "{\"loaded\":false,\"error\":" + json_str(why) + "}";
	std::string o = "{\"loaded\":true,\"stats\":{";
	for (size_t i = 0; i < l.stats.size(); i++)
		o += (i ? "," : "") + json_str(l.stats[i].first) + ":" + std::to_string(l.stats[i].second);
	o += "},\"exports\":[";
	for (size_t i = 0; i < l.exports.size(); i++) {
		const auto &e = l.exports[i];
		o += (i ? "," : "") + std::string("{\"id\":") + std::to_string(e.id) +
		     ",\"provider\":" + json_str(provider_name(e.provider)) +
		     ",\"orphaned\":" + (e.state & HMEMREG_EXP_STATE_ORPHANED ? "true" : "false") +
		     ",\"owner_pid\":" + std::to_string(e.owner_pid) + ",\"owner_comm\":" + json_str(e.owner_comm) +
		     ",\"addr\":" + std::to_string(e.addr) + ",\"len\":" + std::to_string(e.len) +
		     ",\"cookie\":" + std::to_string(e.cookie) + ",\"attach_live\":" + std::to_string(e.attach_live) +
		     ",\"pins_live\":" + std::to_string(e.pins_live) + ",\"maps_live\":" + std::to_string(e.maps_live) +
		     ",\"pins_total\":" + std::to_string(e.pins_total) + ",\"attachments\":[";
		for (size_t j = 0; j < e.attachments.size(); j++) {
			const auto &a = e.attachments[j];
			o += (j ? "," : "") + std::string("{\"device\":") + json_str(a.device) +
			     ",\"pid\":" + std::to_string(a.pid) + ",\"comm\":" + json_str(a.comm) +
			     ",\"pinned\":" + std::to_string(a.pinned) + ",\"mapped\":" + std::to_string(a.mapped) +
			     ",\"dynamic\":" + (a.dynamic ? "true" : "false") + "}";
		}
		o += "]}";
	}
	return o + "]}";
}

// One sample. Returns the exit status it calls for.
int sample(const Options &opt, double dt)
{
	Ledger ledger;
	std::string why;
	bool loaded = read_ledger(ledger, true, static_cast<uint32_t>(opt.pid), why) == 0;
	Scan scan;
	if (!opt.kernel_only)
		scan = scan_processes(opt.pid);

	if (opt.json) {
		std::string o = "{\"schema\":1";
		if (!opt.kernel_only)
			o += ",\"processes\":" + processes_json(scan) + ",\"ignored_blocks\":{\"stale\":" +
			     std::to_string(scan.stale) + ",\"foreign\":" + std::to_string(scan.foreign) +
			     ",\"unreadable\":" + std::to_string(scan.unreadable) + "}";
		o += ",\"kernel\":" + kernel_json(ledger, loaded, why) + "}";
		std::printf("%s\n", o.c_str());
	} else {
		if (!opt.kernel_only)
			print_processes_text(scan, dt);
		if (loaded)
			print_kernel_text(ledger);
		else
			std::printf("kernel: %s\n", why.c_str());
	}
	std::fflush(stdout);
	if (!loaded && opt.kernel_only) {
		if (!opt.json)
			std::fprintf(stderr, "mr_cache_stat: %s\n", why.c_str());
		return 1;
	}
	if (opt.check && loaded && (ledger.stat("orphans_live") || ledger.stat("unbalanced")))
		return 3;
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	Options opt;
	static const option longs[] = {
		{"json", no_argument, nullptr, 'j'},	{"kernel", no_argument, nullptr, 'k'},
		{"check", no_argument, nullptr, 'c'},	{"env", no_argument, nullptr, 'e'},	{"help", no_argument, nullptr, 'h'},
		{"pid", required_argument, nullptr, 'p'}, {"watch", required_argument, nullptr, 'w'},
		{nullptr, 0, nullptr, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "p:w:h", longs, nullptr)) != -1) {
		char *end = nullptr;
		switch (c) {
		case 'p':
			opt.pid = static_cast<int>(std::strtol(optarg, &end, 10));
			if (!*optarg || *end || opt.pid <= 0) {
				std::fprintf(stderr, "mr_cache_stat: -p wants a process id, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'w':
			opt.interval = std::strtod(optarg, &end);
			if (!*optarg || *end || opt.interval <= 0) {
				std::fprintf(stderr, "mr_cache_stat: -w wants seconds > 0, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'j': opt.json = true; break;
		case 'k': opt.kernel_only = true; break;
		case 'c': opt.check = true; break;
		case 'e': opt.env = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (opt.env)
		return print_settings(opt.json);
	int rc = sample(opt, 0);
	while (opt.interval > 0) {
		usleep(static_cast<useconds_t>(opt.interval * 1e6));
		if (!opt.json)
			std::printf("\n");
		rc = sample(opt, opt.interval);
	}
	return rc;
}
