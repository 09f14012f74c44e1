// SPDX-License-Identifier: MIT
// The userfaultfd monitor registers whole mappings: many cached ranges in
// one mapping neither split it (the process's mapping count stays flat)
// nor run into vm.max_map_count (every get stays cached), and an unmap
// inside such a mapping still invalidates exactly the entries it covers.
#include <criterion/criterion.h>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache_test_util.hpp"
#include "mrcache/uffd_monitor.hpp"

using namespace t;

namespace {

std::unique_ptr<Cache> make_uffd_cache(uint64_t max_count)
{
	std::shared_ptr<Monitor> m;
	int rc = UffdMonitor::instance(m);
	if (rc) {
		cr_skip_test("userfaultfd not available here: %s", UffdMonitor::unavailable_reason());
	}
	std::unique_ptr<Cache> c;
	rc = Cache::create(std::make_unique<MemoryRegistrar>(), config(max_count, 1ULL << 50, HMEMREG_MONITOR_UFFD), m, c);
	cr_assert_eq(rc, 0, "%s", hmemreg_strerror(rc));
	return c;
}

long mapping_count()
{
	std::ifstream f("/proc/self/maps");
	long n = 0;
	for (std::string l; std::getline(f, l);)
		n++;
	return n;
}

long max_map_count()
{
	std::ifstream f("/proc/sys/vm/max_map_count");
	long n = 65530;
	f >> n;
	return n;
}

void getput(Cache &c, const void *p, size_t len)
{
	Entry *e = nullptr;
	int rc = c.get(req(p, len), e);
	cr_assert_eq(rc, 0, "get: %s", hmemreg_strerror(rc));
	cr_assert_eq(c.put(e), 0);
}

} // namespace

// One page in every two of one mapping, more ranges than half the mapping
// limit (registering each range split the mapping in three: the ioctl
// failed past the limit and gets became uncached).
Test(cache_uffd_wide, many_ranges_in_one_mapping_stay_cached_and_do_not_split_it, .timeout = 120)
{
	const long n = std::min<long>(max_map_count() / 2 + 4096, 200000);
	const size_t pg = page(), len = static_cast<size_t>(2 * n) * pg;
	auto *p = static_cast<char *>(
		::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
	cr_assert_neq(p, MAP_FAILED);
	auto c = make_uffd_cache(static_cast<uint64_t>(n));
	getput(*c, p, pg); // the first miss registers the mapping
	const long before = mapping_count();
	for (long i = 1; i < n; i++)
		getput(*c, p + static_cast<size_t>(2 * i) * pg, pg);
	const long after = mapping_count();
	auto s = stats(*c);
	cr_assert_eq(s.misses, static_cast<uint64_t>(n));
	cr_assert_eq(s.uncached_registrations, 0, "%llu of %ld gets uncached (mapping limit %ld)",
		     static_cast<unsigned long long>(s.uncached_registrations), n, max_map_count());
	cr_assert_eq(s.entries, static_cast<uint64_t>(n));
	// (The cache maps its own entry chunks as it grows: a few; every
	// range registered alone added two.)
	cr_assert_leq(after - before, 64, "mappings %ld -> %ld for %ld ranges: cached ranges split the mapping", before, after, n);
	// Every one of them hits now.
	for (long i = 0; i < n; i += 997)
		getput(*c, p + static_cast<size_t>(2 * i) * pg, pg);
	cr_assert_eq(stats(*c).misses, static_cast<uint64_t>(n));
	c.reset();
	::munmap(p, len);
}

// Inside a mapping registered whole: an unmap of one entry's pages drops
// that entry only; an unmap of pages no entry covers drops none (it is
// reported: the monitor counts the event); the rest keep hitting.
Test(cache_uffd_wide, unmap_inside_a_wide_mapping_invalidates_exactly_what_it_covers)
{
	const size_t pg = page(), len = 64 * pg;
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	cr_assert_neq(p, MAP_FAILED);
	auto c = make_uffd_cache(1024);
	// Entries of two pages at 0, 4, 8, ... 60 (16 of them).
	for (size_t i = 0; i < 64; i += 4)
		getput(*c, p + i * pg, 2 * pg);
	auto s0 = stats(*c);
	cr_assert_eq(s0.entries, 16);
	cr_assert_eq(s0.uncached_registrations, 0);

	// Pages 2-3: between entries 0 and 4, nobody's.
	cr_assert_eq(::munmap(p + 2 * pg, 2 * pg), 0);
	getput(*c, p, pg); // a get applies what the monitor saw
	auto s1 = stats(*c);
	cr_assert_eq(s1.entries, 16, "an unmap of pages no entry covers dropped an entry");
	cr_assert_eq(s1.invalidations[HMEMREG_INVAL_UNMAP], 0);
	cr_assert_geq(s1.monitor_events, s0.monitor_events + 1, "the unrelated unmap is reported (the trade-off)");

	// Page 9: the second page of the entry at 8.
	cr_assert_eq(::munmap(p + 9 * pg, pg), 0);
	getput(*c, p + 4 * pg, 2 * pg);
	auto s2 = stats(*c);
	cr_assert_eq(s2.invalidations[HMEMREG_INVAL_UNMAP], 1);
	cr_assert_eq(s2.entries, 15);
	// Every other entry still hits.
	const uint64_t misses = s2.misses;
	for (size_t i = 0; i < 64; i += 4)
		if (i != 8)
			getput(*c, p + i * pg, 2 * pg);
	cr_assert_eq(stats(*c).misses, misses, "an entry the unmap did not cover was dropped");

	// Mapped again at the same place: a new registration of a new mapping.
	auto *q = static_cast<char *>(::mmap(p + 8 * pg, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	cr_assert_eq(q, p + 8 * pg);
	getput(*c, q, 2 * pg);
	auto s3 = stats(*c);
	cr_assert_eq(s3.entries, 16);
	cr_assert_eq(s3.uncached_registrations, 0);
	// And an unmap of it is seen (the new mapping was registered too).
	cr_assert_eq(::munmap(q, pg), 0);
	getput(*c, p, pg);
	cr_assert_eq(stats(*c).invalidations[HMEMREG_INVAL_UNMAP], 2);
	c.reset();
	::munmap(p, len);
}

// A fork child inherits the monitor's userfaultfd. Had it kept its copy,
// the parent's whole-mapping registrations would outlive the parent's
// monitor (closing the parent's descriptor would not release them), and
// the parent's next munmap there would wait for ever for a reader: the
// test's timeout fails it.
Test(cache_uffd_wide, a_fork_child_does_not_keep_the_registrations_alive, .timeout = 30)
{
	const size_t pg = page(), len = 16 * pg;
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	cr_assert_neq(p, MAP_FAILED);
	int go[2];
	cr_assert_eq(::pipe(go), 0);
	pid_t child = -1;
	{
		auto c = make_uffd_cache(64);
		getput(*c, p, pg); // the mapping is registered whole
		child = ::fork();
		cr_assert_geq(child, 0);
		if (child == 0) {
			char b;
			::close(go[1]);
			while (::read(go[0], &b, 1) < 0 && errno == EINTR) {
			}
			::_exit(0);
		}
	} // the last cache goes, and with it the monitor and its userfaultfd
	cr_assert_eq(::munmap(p, len), 0, "munmap: %s", std::strerror(errno));
	::close(go[0]);
	::close(go[1]); // the child's read ends
	int status = 0;
	cr_assert_eq(::waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// More mappings registered whole than the monitor's table of known ones
// holds (64: replaced in turn): the ones it forgot are registered again at
// their next miss (harmless), and every one of them still reports its
// unmaps, since the registration lives in the kernel, not in the table.
Test(cache_uffd_wide, more_wide_mappings_than_the_table_holds_still_report_every_unmap)
{
	constexpr size_t kMaps = 100, kPages = 4; // mapping i: pages [5i, 5i + 4), a PROT_NONE page between
	const size_t pg = page(), len = kMaps * (kPages + 1) * pg;
	auto *base = static_cast<char *>(::mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	cr_assert_neq(base, MAP_FAILED);
	auto at = [&](size_t i, size_t pgno) { return base + (i * (kPages + 1) + pgno) * pg; };
	for (size_t i = 0; i < kMaps; i++)
		cr_assert_eq(::mprotect(at(i, 0), kPages * pg, PROT_READ | PROT_WRITE), 0);
	auto c = make_uffd_cache(1024);
	for (size_t round = 0; round < 2; round++) // page 0 of each, then page 1 of each
		for (size_t i = 0; i < kMaps; i++)
			getput(*c, at(i, round), pg);
	auto s = stats(*c);
	cr_assert_eq(s.entries, 2 * kMaps);
	cr_assert_eq(s.uncached_registrations, 0);
	cr_assert_eq(s.monitor_fallbacks, 0, "every mapping was registered whole");
	// Page 0 of every mapping, then page 1: each unmap drops its entry.
	for (size_t round = 0; round < 2; round++) {
		for (size_t i = 0; i < kMaps; i++)
			cr_assert_eq(::munmap(at(i, round), pg), 0);
		getput(*c, at(0, 3), pg); // applies what the monitor saw
		s = stats(*c);
		cr_assert_eq(s.invalidations[HMEMREG_INVAL_UNMAP], (round + 1) * kMaps,
			     "round %zu: %llu unmaps seen of %zu", round,
			     static_cast<unsigned long long>(s.invalidations[HMEMREG_INVAL_UNMAP]), (round + 1) * kMaps);
	}
	cr_assert_eq(s.entries, 1); // the last getput's
	c.reset();
	::munmap(base, len);
}
