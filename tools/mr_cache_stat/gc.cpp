// SPDX-License-Identifier: MIT
// --gc over hmemreg_shm_gc() (libhmemreg decides what is stale: the flock its
// processes hold on their files, then the pid).
#include "gc.hpp"

#include <hmemreg/common.h>
#include <hmemreg/stats.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "json_view.hpp"
#include "labels.hpp"

namespace mr_cache_stat {

namespace {

struct Seen {
	std::string name;
	int kind, pid, verdict, error;
	uint64_t bytes;
};

const char *kind_name(int kind)
{
	return kind == HMEMREG_SHM_STATS_BLOCK ? "stats_block" : "fabric_region";
}

const char *verdict_name(int v)
{
	switch (v) {
	case HMEMREG_SHM_REMOVED: return "removed";
	case HMEMREG_SHM_STALE: return "stale";
	case HMEMREG_SHM_FAILED: return "failed";
	default: return "live";
	}
}

double now()
{
	timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

} // namespace

int run_gc(bool json, bool dry_run)
{
	std::vector<Seen> files;
	int rc = hmemreg_shm_gc(nullptr, dry_run ? HMEMREG_SHM_GC_DRY_RUN : 0,
				[](const hmemreg_shm_file *f, void *arg) {
					static_cast<std::vector<Seen> *>(arg)->push_back(
						{f->name, f->kind, f->pid, f->verdict, f->error, f->bytes});
				},
				&files);
	if (rc < 0) {
		std::fprintf(stderr, "mr_cache_stat: --gc: cannot read /dev/shm: %s\n", std::strerror(errno));
		return 1;
	}
	int live = 0, gone = 0, failed = 0;
	uint64_t bytes = 0;
	for (const Seen &f : files) {
		live += f.verdict == HMEMREG_SHM_LIVE;
		failed += f.verdict == HMEMREG_SHM_FAILED;
		if (f.verdict == HMEMREG_SHM_REMOVED || f.verdict == HMEMREG_SHM_STALE) {
			gone++;
			bytes += f.bytes;
		}
	}
	if (json) {
		Json list = Json::array();
		for (const Seen &f : files) {
			Json j = {{"name", f.name},
				  {"kind", kind_name(f.kind)},
				  {"pid", f.pid},
				  {"bytes", f.bytes},
				  {"verdict", verdict_name(f.verdict)}};
			if (f.verdict == HMEMREG_SHM_FAILED)
				j["error"] = std::strerror(f.error);
			list.push_back(j);
		}
		print_json({{"schema", 1},
			    {"time", now()},
			    {"gc",
			     {{"dry_run", dry_run},
			      {"files", list},
			      {dry_run ? "stale" : "removed", gone},
			      {"kept", live},
			      {"failed", failed}}}});
		return failed ? 1 : 0;
	}
	for (const Seen &f : files) {
		if (f.verdict == HMEMREG_SHM_LIVE)
			continue;
		const std::string what = std::string(f.kind == HMEMREG_SHM_STATS_BLOCK ? "stats block"
										 : "libfabric shm region") +
					 " of dead pid " + std::to_string(f.pid) + ", " + human(f.bytes);
		if (f.verdict == HMEMREG_SHM_FAILED)
			std::printf("could not remove /dev/shm/%s (%s): %s\n", f.name.c_str(), what.c_str(),
				    std::strerror(f.error));
		else
			std::printf("%s /dev/shm/%s (%s)\n", dry_run ? "stale" : "removed", f.name.c_str(), what.c_str());
	}
	std::printf("gc: %s %d stale file(s) (%s), kept %d in use, %d could not be removed\n",
		    dry_run ? "would remove" : "removed", gone, human(bytes).c_str(), live, failed);
	return failed ? 1 : 0;
}

} // namespace mr_cache_stat
