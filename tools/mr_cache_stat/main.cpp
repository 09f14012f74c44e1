// SPDX-License-Identifier: MIT
// mr_cache_stat: what is registered and pinned, per process and in the kernel.
//
//   mr_cache_stat [-p PID] [-w SECONDS [-c COUNT]] [--json] [--kernel] [--check]
//   mr_cache_stat --gc [--dry-run] [--json]
//   mr_cache_stat --env [--json]
//   mr_cache_stat --exports [-p PID] [--json]
//
// Exit status: 0 fine; 1 error (e.g. --kernel and the module is not loaded,
// --gc could not remove a stale file); 2 usage; 3 with --check, the kernel
// holds exports of dead processes (orphaned) or unbalanced pins, with
// --exports, a cache holds an export the kernel does not have; 4 with
// --check or --exports, the kernel could not be read (module not loaded,
// netlink failed).
#include <getopt.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include <hmemreg/common.h>
#include <linux/hmemreg.h>

#include "export_join.hpp"
#include "gc.hpp"
#include "json_view.hpp"
#include "sample.hpp"
#include "settings_view.hpp"
#include "text_view.hpp"

using namespace mr_cache_stat;

namespace {

constexpr int kExitError = 1, kExitUsage = 2, kExitCheckFailed = 3, kExitUnchecked = 4;

struct Options {
	int pid = 0;
	double interval = 0;
	long count = 0; // samples with -w; 0 = until stopped
	bool json = false;
	bool kernel_only = false;
	bool check = false;
	bool gc = false;
	bool dry_run = false;
	bool env = false;
	bool exports = false;
};

void usage(FILE *f)
{
	std::fprintf(f, "usage: mr_cache_stat [-p PID] [-w SECONDS [-c COUNT]] [--json] [--kernel] [--check]\n"
			"       mr_cache_stat --gc [--dry-run] [--json]\n"
			"       mr_cache_stat --env [--json]\n"
			"       mr_cache_stat --exports [-p PID] [--json]\n"
			"  -p PID       only this process (and only its exports in the kernel ledger)\n"
			"  -w SECONDS   a sample every SECONDS, with rates since the last one; on a terminal\n"
			"               the view is redrawn in place, else (or with --json) lines are appended\n"
			"  -c COUNT     with -w: stop after COUNT samples\n"
			"  --json       one JSON record per sample, one line each (schema in mr_cache_stat(1))\n"
			"  --kernel     the kernel's pin ledger only\n"
			"  --check      exit 3 when the kernel holds orphaned exports or unbalanced pins\n"
			"               (naming wrappers of other exporters' dma-bufs whose owner died),\n"
			"               4 when it cannot tell (hmemreg.ko not loaded)\n"
			"  --gc         remove the stats blocks and libfabric shm regions of dead processes\n"
			"  --dry-run    with --gc: list them, remove nothing\n"
			"  --env        every HMEMREG_* setting: default, value here, meaning\n"
			"  --exports    each cache's registrations of hmemreg.ko exports joined to the\n"
			"               kernel ledger's importers and pins; exit 3 when a cache holds an\n"
			"               export the kernel does not have, 4 when hmemreg.ko is not loaded\n"
			"  --version    print the version and exit\n");
}

double clock_seconds(clockid_t id)
{
	timespec ts;
	clock_gettime(id, &ts);
	return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

Sample take_sample(const Options &opt)
{
	Sample s;
	s.time = clock_seconds(CLOCK_REALTIME);
	s.monotonic = clock_seconds(CLOCK_MONOTONIC);
	s.processes = !opt.kernel_only;
	if (s.processes)
		s.scan = scan_processes(opt.pid);
	s.loaded = read_ledger(s.ledger, true, static_cast<uint32_t>(opt.pid), s.why) == 0;
	return s;
}

// " (N wrapping other exporters' dma-bufs: export 7 of pid 12 over nvidia, ...)", or "".
std::string orphaned_wrappers(const Ledger &l)
{
	std::string list;
	size_t n = 0;
	for (const auto &e : l.exports) {
		if (e.provider != HMEMREG_PROVIDER_DMABUF || !(e.state & HMEMREG_EXP_STATE_ORPHANED))
			continue;
		list += (n++ ? ", " : ": ") + std::string("export ") + std::to_string(e.id) + " of pid " +
			std::to_string(e.owner_pid) + " over " + e.inner + " (" + std::to_string(e.pins_live) +
			" pins, " + std::to_string(e.attach_live) + " importers)";
	}
	return n ? " (" + std::to_string(n) + " wrapping another exporter's dma-buf" + list + ")" : "";
}

// The exit status one sample calls for; `complaint` is its one line for stderr.
int verdict(const Options &opt, const Sample &s, std::string &complaint)
{
	if (opt.check && !s.loaded) {
		complaint = "--check could not check the kernel's pin ledger: " + s.why;
		return kExitUnchecked;
	}
	if (opt.kernel_only && !s.loaded) {
		complaint = s.why;
		return kExitError;
	}
	if (opt.check) {
		uint64_t orphans = s.ledger.stat("orphans_live"), unbalanced = s.ledger.stat("unbalanced");
		if (orphans || unbalanced) {
			complaint = "--check failed: " + std::to_string(orphans) + " orphaned export(s)" +
				    orphaned_wrappers(s.ledger) + ", " + std::to_string(unbalanced) +
				    " unbalanced unpin/unmap call(s)";
			return kExitCheckFailed;
		}
	}
	return 0;
}

// The process side is read before the ledger: an export freed in between
// would look missing from the kernel, so such a sample is taken again.
int run_exports(const Options &opt)
{
	Sample s = take_sample(opt);
	ExportJoin j = join_exports(s);
	for (int again = 0; j.missing && again < 3; again++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		s = take_sample(opt);
		j = join_exports(s);
	}
	if (opt.json)
		print_json(exports_json(s, j));
	else
		print_exports_text(s, j);
	if (!s.loaded)
		return kExitUnchecked;
	return j.missing ? kExitCheckFailed : 0;
}

bool parse_args(int argc, char **argv, Options &opt, int &status)
{
	static const option longs[] = {
		{"json", no_argument, nullptr, 'j'},	  {"kernel", no_argument, nullptr, 'k'},
		{"check", no_argument, nullptr, 'C'},	  {"help", no_argument, nullptr, 'h'},
		{"gc", no_argument, nullptr, 'g'},	  {"dry-run", no_argument, nullptr, 'n'},
		{"pid", required_argument, nullptr, 'p'}, {"watch", required_argument, nullptr, 'w'},
		{"count", required_argument, nullptr, 'c'}, {"env", no_argument, nullptr, 'e'},
		{"version", no_argument, nullptr, 'V'},	  {"exports", no_argument, nullptr, 'x'},
		{nullptr, 0, nullptr, 0},
	};
	status = kExitUsage;
	int c;
	while ((c = getopt_long(argc, argv, "p:w:c:h", longs, nullptr)) != -1) {
		char *end = nullptr;
		switch (c) {
		case 'p': {
			long v = std::strtol(optarg, &end, 10);
			if (!*optarg || *end || v <= 0 || v > INT32_MAX) {
				std::fprintf(stderr, "mr_cache_stat: -p wants a process id, got '%s'\n", optarg);
				return false;
			}
			opt.pid = static_cast<int>(v);
			break;
		}
		case 'w':
			opt.interval = std::strtod(optarg, &end);
			if (!*optarg || *end || !std::isfinite(opt.interval) || opt.interval <= 0 || opt.interval > 86400) {
				std::fprintf(stderr, "mr_cache_stat: -w wants seconds > 0, got '%s'\n", optarg);
				return false;
			}
			break;
		case 'c':
			opt.count = std::strtol(optarg, &end, 10);
			if (!*optarg || *end || opt.count <= 0) {
				std::fprintf(stderr, "mr_cache_stat: -c wants a count > 0, got '%s'\n", optarg);
				return false;
			}
			break;
		case 'j': opt.json = true; break;
		case 'k': opt.kernel_only = true; break;
		case 'C': opt.check = true; break;
		case 'g': opt.gc = true; break;
		case 'n': opt.dry_run = true; break;
		case 'e': opt.env = true; break;
		case 'x': opt.exports = true; break;
		case 'h':
			usage(stdout);
			status = 0;
			return false;
		case 'V':
			std::printf("mr_cache_stat %s\n", HMEMREG_VERSION_STRING);
			status = 0;
			return false;
		default: usage(stderr); return false;
		}
	}
	const char *bad = optind != argc		       ? "unexpected arguments"
			  : opt.count && opt.interval == 0     ? "-c needs -w"
			  : opt.dry_run && !opt.gc	       ? "--dry-run goes with --gc"
			  : opt.gc && (opt.interval > 0 || opt.kernel_only || opt.check || opt.pid)
				  ? "--gc takes only --dry-run and --json"
			  : opt.env && (opt.gc || opt.interval > 0 || opt.kernel_only || opt.check || opt.pid)
				  ? "--env takes only --json"
			  : opt.exports && (opt.gc || opt.env || opt.interval > 0 || opt.kernel_only || opt.check)
				  ? "--exports takes only -p and --json"
				  : nullptr;
	if (bad) {
		std::fprintf(stderr, "mr_cache_stat: %s\n", bad);
		usage(stderr);
		return false;
	}
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	Options opt;
	int status = 0;
	if (!parse_args(argc, argv, opt, status))
		return status;
	if (opt.env)
		return print_settings(opt.json);
	if (opt.gc)
		return run_gc(opt.json, opt.dry_run);
	if (opt.exports)
		return run_exports(opt);

	TextView view;
	view.interval = opt.interval;
	view.layout = opt.interval == 0 ? Layout::once
		      : isatty(STDOUT_FILENO) && std::getenv("TERM") && std::strcmp(std::getenv("TERM"), "dumb")
			      ? Layout::live
			      : Layout::append;
	RateBook rates;
	std::string said; // the last complaint printed: each is said once, not per sample
	for (long n = 1;; n++) {
		Sample s = take_sample(opt);
		rates.update(s);
		std::string complaint;
		status = verdict(opt, s, complaint);
		if (opt.json) {
			print_json(sample_json(s, rates));
		} else {
			// A ledger that cannot be read is said once: on stderr when it
			// decides the exit status, else as the kernel line.
			view.kmod_lines = s.loaded || complaint.empty();
			print_text(s, rates, view);
		}
		if (!complaint.empty() && complaint != said)
			std::fprintf(stderr, "mr_cache_stat: %s\n", complaint.c_str());
		said = complaint;
		if (opt.interval == 0 || (opt.count && n >= opt.count))
			break;
		std::this_thread::sleep_for(std::chrono::duration<double>(opt.interval));
	}
	return status;
}
