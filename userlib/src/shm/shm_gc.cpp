// SPDX-License-Identifier: MIT
// hmemreg_shm_gc(): stale stats blocks and libfabric shm regions of dead
// processes. A file is stale only when no process holds its flock and its
// process is gone; anything in doubt is kept.
#include "shm/shm_gc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hmemreg/common.h"
#include "hmemreg/stats.h"

namespace hmemreg::shm {

namespace {

constexpr const char *kShmDir = "/dev/shm";
constexpr const char *kBlockPrefix = HMEMREG_STATS_SHM_PREFIX + 1; // "hmemreg-stats."
constexpr const char *kRegionPrefix = "hmemreg_"; // fabric/ep.cpp names shm endpoints so

// The pid in "<prefix><pid>" (stats blocks) or "<prefix><pid>_<n>" (regions);
// 0 when the name is not one of ours.
int pid_in(const char *name, const char *prefix, char end)
{
	size_t n = std::strlen(prefix);
	if (std::strncmp(name, prefix, n) != 0)
		return 0;
	char *stop = nullptr;
	errno = 0;
	long pid = std::strtol(name + n, &stop, 10);
	if (errno || stop == name + n || *stop != end || pid <= 0 || pid > 0x3fffffff)
		return 0;
	if (end == '_' && !stop[1])
		return 0;
	return static_cast<int>(pid);
}

bool pid_exists(int pid)
{
	return ::kill(pid, 0) == 0 || errno == EPERM;
}

// When pid started, in seconds since the epoch (/proc/stat btime plus
// /proc/<pid>/stat field 22); 0 if unknown.
double started_at(int pid)
{
	static const double boot = [] {
		std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen("/proc/stat", "re"), std::fclose);
		char line[256];
		unsigned long long t = 0;
		while (f && std::fgets(line, sizeof(line), f.get()))
			if (std::sscanf(line, "btime %llu", &t) == 1)
				break;
		return static_cast<double>(t);
	}();
	char path[64], buf[1024];
	std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path, "re"), std::fclose);
	if (!f || boot == 0)
		return 0;
	size_t n = std::fread(buf, 1, sizeof(buf) - 1, f.get());
	buf[n] = 0;
	const char *p = std::strrchr(buf, ')'); // comm may hold spaces and ')'
	unsigned long long ticks = 0;
	for (int field = 2; p && *p; p++)
		if (*p == ' ' && ++field == 22) {
			std::sscanf(p + 1, "%llu", &ticks);
			break;
		}
	long hz = ::sysconf(_SC_CLK_TCK);
	return ticks && hz > 0 ? boot + static_cast<double>(ticks) / static_cast<double>(hz) : 0;
}

bool block_is_stale(int fd, const struct stat &st, int pid)
{
	// Blocks of versions 1 and 2 (of an older library) are shorter.
	const size_t len = std::min(static_cast<size_t>(st.st_size), sizeof(hmemreg_stats_block));
	if (len >= HMEMREG_STATS_BLOCK_SIZE_V2) {
		void *p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			int rc = hmemreg_stats_block_check(static_cast<const hmemreg_stats_block *>(p), len);
			::munmap(p, len);
			if (rc == 0 || rc == -HMEMREG_ESTALE)
				return rc == -HMEMREG_ESTALE;
		}
	}
	// Another version, or half-written: go by the pid in its name.
	return !pid_exists(pid);
}

bool region_is_stale(const struct stat &st, int pid)
{
	if (!pid_exists(pid))
		return true;
	// Made before its pid's process started: the pid was reused. (ctime only
	// moves forward, so a live region never looks older than its process.)
	double t = started_at(pid);
	return t > 0 && static_cast<double>(st.st_ctim.tv_sec) + 1 < t;
}

int gc(const char *dir, unsigned flags, hmemreg_shm_gc_fn each, void *arg)
{
	if (flags & ~HMEMREG_SHM_GC_DRY_RUN)
		return -HMEMREG_EINVAL;
	int dfd = ::open(dir ? dir : kShmDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -HMEMREG_ESYS;
	UniqueFd dirfd(dfd);
	std::vector<std::string> names;
	{
		int dup = ::fcntl(dfd, F_DUPFD_CLOEXEC, 0);
		DIR *d = dup >= 0 ? ::fdopendir(dup) : nullptr;
		if (!d) {
			if (dup >= 0)
				::close(dup);
			return -HMEMREG_ESYS;
		}
		std::unique_ptr<DIR, int (*)(DIR *)> guard(d, ::closedir);
		while (dirent *e = ::readdir(d))
			if (pid_in(e->d_name, kBlockPrefix, '\0') || pid_in(e->d_name, kRegionPrefix, '_'))
				names.emplace_back(e->d_name);
	}
	int stale = 0;
	for (const std::string &name : names) {
		hmemreg_shm_file f{};
		f.name = name.c_str();
		f.pid = pid_in(f.name, kBlockPrefix, '\0');
		f.kind = f.pid ? HMEMREG_SHM_STATS_BLOCK : HMEMREG_SHM_FABRIC_REGION;
		if (!f.pid)
			f.pid = pid_in(f.name, kRegionPrefix, '_');
		struct stat st {};
		UniqueFd fd(::openat(dfd, f.name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
		if (fd ? ::fstat(fd.get(), &st) != 0 : ::fstatat(dfd, f.name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue; // gone meanwhile
		if (!S_ISREG(st.st_mode))
			continue;
		f.bytes = static_cast<uint64_t>(st.st_size);
		// The lock first: a holder is alive whatever its pid says (another pid
		// namespace sharing /dev/shm). Unreadable files go by their pid only.
		bool is_stale;
		if (fd && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
			is_stale = false;
		else if (f.kind == HMEMREG_SHM_STATS_BLOCK)
			is_stale = fd ? block_is_stale(fd.get(), st, f.pid) : !pid_exists(f.pid);
		else
			is_stale = region_is_stale(st, f.pid);
		// Still the file we judged (not one made meanwhile under that name)?
		struct stat now {};
		if (is_stale && (::fstatat(dfd, f.name, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_ino != st.st_ino ||
				 now.st_dev != st.st_dev))
			is_stale = false;
		if (!is_stale) {
			f.verdict = HMEMREG_SHM_LIVE;
		} else if (flags & HMEMREG_SHM_GC_DRY_RUN) {
			f.verdict = HMEMREG_SHM_STALE;
		} else if (::unlinkat(dfd, f.name, 0) == 0) {
			f.verdict = HMEMREG_SHM_REMOVED; // unlinked while we hold its lock
		} else {
			f.verdict = HMEMREG_SHM_FAILED;
			f.error = errno;
		}
		stale += is_stale;
		if (each)
			each(&f, arg);
	}
	return stale;
}

} // namespace

void gc_once()
{
	static std::once_flag once;
	std::call_once(once, [] { (void)gc(nullptr, 0, nullptr, nullptr); });
}

UniqueFd hold(const std::string &name)
{
	std::string path = std::string(kShmDir) + "/" + name;
	UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
	// Blocking: a gc holds its exclusive lock only while it judges the file.
	if (fd && ::flock(fd.get(), LOCK_SH) != 0)
		fd.reset();
	return fd;
}

} // namespace hmemreg::shm

extern "C" int hmemreg_shm_gc(const char *dir, unsigned flags, hmemreg_shm_gc_fn each, void *arg)
{
	return hmemreg::shm::gc(dir, flags, each, arg);
}
