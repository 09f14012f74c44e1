// SPDX-License-Identifier: MIT
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <mutex>
#include <sys/ioctl.h>
#include <unistd.h>

#include "mrcache/vma_probe.hpp"
#include "unique_fd.hpp"

namespace hmemreg::mr {

namespace {

// <linux/fs.h> of Linux 6.11 (Debian's headers may predate it).
struct ProcmapQuery {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaShared = 0x08;     // VM_MAYSHARE
constexpr uint64_t kCoveringOrNext = 0x10;

// The /proc/self/maps descriptor PROCMAP_QUERY is asked through. It
// describes the address space of the process that opened it: a fork
// child opens its own.
struct ProbeState {
	std::mutex mu;
	UniqueFd fd;
	pid_t pid = 0;
	bool no_query = false; // ENOTTY once: this kernel has no PROCMAP_QUERY
	const char *name = "none yet";
};

ProbeState &state()
{
	static ProbeState s;
	return s;
}

// Every mapping in [s, e): private_anon if all are, else the first other.
// 1 when PROCMAP_QUERY is not there (the caller reads maps instead).
int query_backing(int fd, uintptr_t s, uintptr_t e, Backing &out, MappingSpan &span)
{
	uintptr_t at = s;
	while (at < e) {
		ProcmapQuery q{};
		q.size = sizeof(q);
		q.query_flags = kCoveringOrNext;
		q.query_addr = at;
		if (::ioctl(fd, kProcmapQuery, &q) != 0) {
			if (errno == ENOTTY || errno == EINVAL)
				return 1;
			out = Backing::unmapped; // ENOENT: nothing at or after `at`
			return 0;
		}
		if (q.vma_start > at) {
			out = Backing::unmapped;
			return 0;
		}
		if ((q.vma_flags & kVmaShared) || q.inode != 0 || q.dev_major != 0 || q.dev_minor != 0) {
			out = Backing::shared_or_file;
			return 0;
		}
		if (at == s)
			span.start = static_cast<uintptr_t>(q.vma_start);
		at = static_cast<uintptr_t>(q.vma_end);
		span.end = at;
	}
	out = Backing::private_anon;
	return 0;
}

// One line of /proc/self/maps: "start-end perms offset major:minor inode path".
bool parse_line(const char *l, uintptr_t &start, uintptr_t &end, bool &anon_private)
{
	unsigned long long a, b, off, ino;
	unsigned maj, mnr;
	char perms[8];
	if (std::sscanf(l, "%llx-%llx %7s %llx %x:%x %llu", &a, &b, perms, &off, &maj, &mnr, &ino) != 7)
		return false;
	start = static_cast<uintptr_t>(a);
	end = static_cast<uintptr_t>(b);
	anon_private = perms[3] == 'p' && ino == 0 && maj == 0 && mnr == 0;
	return true;
}

Backing maps_backing(uintptr_t s, uintptr_t e, MappingSpan &span)
{
	UniqueFd fd(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
	if (fd.get() < 0)
		return Backing::unmapped;
	char buf[16384];
	size_t have = 0;
	uintptr_t at = s;
	for (;;) {
		ssize_t n = ::read(fd.get(), buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			return Backing::unmapped; // ended before the range did
		have += static_cast<size_t>(n);
		buf[have] = 0;
		char *line = buf;
		for (char *nl; (nl = std::strchr(line, '\n')); line = nl + 1) {
			*nl = 0;
			uintptr_t vs, ve;
			bool anon;
			if (!parse_line(line, vs, ve, anon))
				return Backing::unmapped;
			if (ve <= at)
				continue;
			if (vs > at)
				return Backing::unmapped;
			if (!anon)
				return Backing::shared_or_file;
			if (at == s)
				span.start = vs;
			at = ve;
			span.end = ve;
			if (at >= e)
				return Backing::private_anon;
		}
		have = static_cast<size_t>(buf + have - line); // a partial line: keep it
		std::memmove(buf, line, have);
		if (have >= sizeof(buf) - 1)
			return Backing::unmapped; // a line longer than the buffer (path); give up safely
	}
}

} // namespace

Backing probe_backing(uintptr_t s, uintptr_t e, MappingSpan *span)
{
	MappingSpan ignored;
	MappingSpan &sp = span ? *span : ignored;
	ProbeState &st = state();
	std::lock_guard g(st.mu);
	if (!st.no_query) {
		pid_t me = ::getpid();
		if (st.pid != me || st.fd.get() < 0) {
			st.fd = UniqueFd(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
			st.pid = me;
		}
		Backing b;
		if (st.fd.get() >= 0 && query_backing(st.fd.get(), s, e, b, sp) == 0) {
			st.name = "procmap_query";
			return b;
		}
		st.no_query = true;
		st.fd = UniqueFd();
	}
	st.name = "maps";
	return maps_backing(s, e, sp);
}

const char *backing_probe_name()
{
	return state().name;
}

void release_backing_probe()
{
	ProbeState &st = state();
	std::lock_guard g(st.mu);
	st.fd = UniqueFd();
}

} // namespace hmemreg::mr
