// SPDX-License-Identifier: MIT
// Reading stats blocks from outside their process. A block may be of another
// version, truncated, half-written or of a dead process: none of that may
// crash us, so sizes are checked before every access.
#include "process_stats.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "hmemreg/common.h"

namespace mr_cache_stat {

namespace {

constexpr const char *kShmDir = "/dev/shm";

std::string comm_of(int pid)
{
	std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
	std::string s;
	std::getline(f, s);
	return s;
}

std::string field(const char *s, size_t n)
{
	return std::string(s, strnlen(s, n));
}

struct Mapping {
	void *addr = MAP_FAILED;
	size_t len = 0;
	~Mapping()
	{
		if (addr != MAP_FAILED)
			munmap(addr, len);
	}
};

// Nearest-rank p99 over log2 buckets: the upper bound of its bucket.
uint64_t p99_from_hist(const uint64_t *hist, size_t buckets)
{
	uint64_t total = 0;
	for (size_t i = 0; i < buckets; i++)
		total += hist[i];
	if (!total)
		return 0;
	uint64_t rank = total - total / 100, seen = 0;
	for (size_t i = 0; i < buckets; i++) {
		seen += hist[i];
		if (seen >= rank)
			return i >= 63 ? UINT64_MAX : (uint64_t{1} << (i + 1));
	}
	return 0;
}

// Each row is copied between two equal even loads of its seq (it is being
// rewritten otherwise: tried again, then left out).
void read_exports(const hmemreg_stats_block &b, ProcessView &p)
{
	const uint32_t n = b.max_exports < HMEMREG_STATS_MAX_EXPORTS ? b.max_exports : HMEMREG_STATS_MAX_EXPORTS;
	for (uint32_t i = 0; i < n; i++) {
		const hmemreg_stats_export &r = b.exports[i];
		for (int tries = 0; tries < 100; tries++) {
			uint64_t s0 = __atomic_load_n(&r.seq, __ATOMIC_ACQUIRE);
			ExportHeld h;
			h.cache_id = __atomic_load_n(&r.cache_id, __ATOMIC_RELAXED);
			h.export_id = __atomic_load_n(&r.export_id, __ATOMIC_RELAXED);
			h.entries = __atomic_load_n(&r.entries, __ATOMIC_RELAXED);
			h.bytes = __atomic_load_n(&r.bytes, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (s0 & 1 || __atomic_load_n(&r.seq, __ATOMIC_RELAXED) != s0)
				continue;
			if (h.entries)
				p.exports.push_back(h);
			break;
		}
	}
	p.exports_unlisted = __atomic_load_n(&b.exports_unlisted, __ATOMIC_RELAXED);
}

void read_block(const std::string &path, int want_pid, Scan &scan)
{
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM)
			scan.unreadable++;
		return;
	}
	struct stat st;
	Mapping m;
	// Blocks of versions 1 and 2 end where version 3's export rows begin.
	if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= HMEMREG_STATS_BLOCK_SIZE_V2) {
		m.len = std::min(static_cast<size_t>(st.st_size), sizeof(hmemreg_stats_block));
		m.addr = mmap(nullptr, m.len, PROT_READ, MAP_SHARED, fd, 0);
	}
	close(fd);
	if (m.addr == MAP_FAILED) {
		scan.foreign++;
		return;
	}
	const auto *b = static_cast<const hmemreg_stats_block *>(m.addr);
	int rc = hmemreg_stats_block_check(b, m.len);
	if (rc == -HMEMREG_ESTALE) {
		scan.stale++;
		return;
	}
	if (rc) {
		scan.foreign++;
		return;
	}
	if (want_pid > 0 && b->pid != want_pid)
		return;
	ProcessView p;
	p.pid = b->pid;
	p.start_time = b->start_time;
	p.comm = comm_of(b->pid);
	const uint32_t n = b->max_caches < HMEMREG_STATS_MAX_CACHES ? b->max_caches : HMEMREG_STATS_MAX_CACHES;
	for (uint32_t i = 0; i < n; i++) {
		const hmemreg_stats_cache &slot = b->caches[i];
		if (__atomic_load_n(&slot.state, __ATOMIC_ACQUIRE) != 1)
			continue;
		CacheView c;
		c.id = __atomic_load_n(&slot.id, __ATOMIC_RELAXED);
		c.name = field(slot.name, sizeof(slot.name));
		hmemreg_stats_sum(&slot, &c.sum);
		c.monitor = field(c.sum.monitor, sizeof(c.sum.monitor));
		c.registrar = field(c.sum.registrar, sizeof(c.sum.registrar));
		c.reg_p99_le_ns = p99_from_hist(slot.registration_hist, HMEMREG_STATS_REG_HIST_BUCKETS);
		p.caches.push_back(std::move(c));
	}
	p.version = b->version;
	if (b->version >= HMEMREG_STATS_VERSION_EXPORTS)
		read_exports(*b, p);
	scan.live.push_back(std::move(p));
}

} // namespace

Scan scan_processes(int pid)
{
	Scan scan;
	const std::string prefix = HMEMREG_STATS_SHM_PREFIX + 1; // without the leading '/'
	std::unique_ptr<DIR, int (*)(DIR *)> dir(opendir(kShmDir), closedir);
	if (!dir)
		return scan;
	while (dirent *e = readdir(dir.get())) {
		if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0)
			continue;
		read_block(std::string(kShmDir) + "/" + e->d_name, pid, scan);
	}
	return scan;
}

} // namespace mr_cache_stat
