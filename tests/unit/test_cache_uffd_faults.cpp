// SPDX-License-Identifier: MIT
// The userfaultfd monitor when the kernel says no: its thread's poll()
// fails (the monitor stops: every entry it covered goes, nothing is cached
// through it any more, a new cache gets a new monitor), or a mapping
// refuses whole registration (the range alone is registered, counted, and
// its unmap is still seen). The faults come from uffd_fault_shim.c.
#include <criterion/criterion.h>
#include <chrono>
#include <sys/mman.h>
#include <thread>

#include "stamp_checks.hpp"
#include "mrcache/uffd_monitor.hpp"
#include "uffd_fault_shim.h"

using namespace t;

namespace {

std::unique_ptr<Cache> make_uffd_cache(std::shared_ptr<Monitor> &m)
{
	int rc = UffdMonitor::instance(m);
	if (rc) {
		cr_skip_test("userfaultfd not available here: %s", UffdMonitor::unavailable_reason());
	}
	std::unique_ptr<Cache> c;
	rc = Cache::create(std::make_unique<StampRegistrar>(), config(1024, 1ULL << 40, HMEMREG_MONITOR_UFFD), m, c);
	cr_assert_eq(rc, 0, "%s", hmemreg_strerror(rc));
	return c;
}

char *map(size_t len, void *at = nullptr)
{
	auto *p = static_cast<char *>(::mmap(at, len, PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0));
	cr_assert_neq(p, MAP_FAILED);
	return p;
}

} // namespace

Test(cache_uffd_faults, a_monitor_whose_poll_fails_drops_its_entries_and_caches_nothing_more, .timeout = 60)
{
	std::shared_ptr<Monitor> m;
	auto c = make_uffd_cache(m);
	const size_t len = 4 * page();
	char *a = map(len), *b = map(len);
	stamp(a, 1);
	stamp(b, 1);
	c->put(get(*c, a, len));
	c->put(get(*c, b, len));
	cr_assert_eq(stats(*c).entries, 2);

	// The thread sleeps in poll(): an event (b's unmap) brings it back to
	// the poll() that fails.
	__atomic_store_n(&shim_uffd_poll_errno, EINVAL, __ATOMIC_RELEASE);
	cr_assert_eq(::munmap(b, len), 0);
	const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (stats(*c).monitor_failures == 0 && std::chrono::steady_clock::now() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	cr_assert_geq(__atomic_load_n(&shim_uffd_polls_failed, __ATOMIC_ACQUIRE), 1, "the shim's poll() ran");
	auto s = stats(*c);
	cr_expect_eq(s.monitor_failures, 1, "the stopped monitor is counted");
	cr_expect_eq(s.entries, 0, "a stopped monitor's entries stay cached (their unmaps go unseen)");
	cr_expect(static_cast<UffdMonitor *>(m.get())->dead());

	// a goes and comes back with other contents, unseen: never the old one.
	cr_assert_eq(::munmap(a, len), 0);
	char *a2 = map(len, a);
	stamp(a2, 2);
	Entry *e = get(*c, a2, len);
	cr_assert_eq(e->reg.cookie, 2u, "stale registration returned after the monitor stopped");
	cr_assert(e->state().load() & kOrphan, "cached through a monitor that watches nothing");
	c->put(e);
	cr_assert_geq(stats(*c).uncached_by[HMEMREG_UNCACHED_REFUSED], 1);

	// A cache made now gets a monitor that works.
	__atomic_store_n(&shim_uffd_poll_errno, 0, __ATOMIC_RELEASE);
	std::shared_ptr<Monitor> m2;
	auto c2 = make_uffd_cache(m2);
	cr_assert_neq(m2.get(), m.get(), "the stopped monitor was handed out again");
	e = get(*c2, a2, len);
	cr_assert(!(e->state().load() & kOrphan), "the new monitor caches");
	c2->put(e);
	cr_assert_eq(::munmap(a2, len), 0);
	char *a3 = map(len, a2);
	stamp(a3, 3);
	e = get(*c2, a3, len);
	cr_assert_eq(e->reg.cookie, 3u, "the new monitor missed an unmap");
	c2->put(e);
	c2.reset();
	c.reset();
	::munmap(a3, len);
}

// Whole registration refused (as when part of the mapping belongs to
// another userfaultfd): the entry's range alone is registered, cached,
// counted, and its unmap is reported like any other.
Test(cache_uffd_faults, a_mapping_refusing_whole_registration_falls_back_to_the_range, .timeout = 60)
{
	std::shared_ptr<Monitor> m;
	auto c = make_uffd_cache(m);
	const size_t pg = page(), len = 16 * pg;
	char *p = map(len);
	__atomic_store_n(&shim_uffd_register_max, pg, __ATOMIC_RELEASE);
	stamp(p + 3 * pg, 1);
	Entry *e = get(*c, p + 3 * pg, pg);
	cr_assert_geq(__atomic_load_n(&shim_uffd_registers_refused, __ATOMIC_ACQUIRE), 1, "whole registration tried");
	cr_assert(!(e->state().load() & kOrphan), "the range alone is watched: cached");
	c->put(e);
	auto s = stats(*c);
	cr_assert_eq(s.monitor_fallbacks, 1, "the fallback is counted");
	cr_assert_eq(s.entries, 1);
	cr_assert_eq(s.uncached_registrations, 0);

	// Its unmap is seen.
	cr_assert_eq(::munmap(p + 3 * pg, pg), 0);
	char *q = map(pg, p + 3 * pg);
	stamp(q, 2);
	e = get(*c, q, pg);
	cr_assert_eq(e->reg.cookie, 2u, "stale registration returned after munmap+mmap of a range registered alone");
	c->put(e);
	s = stats(*c);
	cr_assert_geq(s.invalidations[HMEMREG_INVAL_UNMAP], 1);
	cr_assert_eq(s.monitor_fallbacks, 2, "the next miss there asks again");
	__atomic_store_n(&shim_uffd_register_max, 0, __ATOMIC_RELEASE);
	c.reset();
	::munmap(p, len);
}
