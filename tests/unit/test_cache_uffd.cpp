// SPDX-License-Identifier: MIT
// Invalidation through the userfaultfd monitor on this machine's kernel:
// a registration whose memory was unmapped, zapped or moved is never
// returned again. The stamp registrar records what the memory held at
// registration, so a stale hit would show as a cookie mismatch.
#include <criterion/criterion.h>
#include <cstdlib>
#include <sys/mman.h>
#include <sys/wait.h>

#include "stamp_checks.hpp"
#include "mrcache/uffd_monitor.hpp"

using namespace t;

namespace {

std::unique_ptr<Cache> make_uffd_cache(uint64_t max_count = 1024)
{
	std::shared_ptr<Monitor> m;
	int rc = UffdMonitor::instance(m);
	if (rc) {
		cr_skip_test("userfaultfd not available here: %s", UffdMonitor::unavailable_reason());
	}
	std::unique_ptr<Cache> c;
	rc = Cache::create(std::make_unique<StampRegistrar>(), config(max_count, 1ULL << 40, HMEMREG_MONITOR_UFFD), m, c);
	cr_assert_eq(rc, 0, "%s", hmemreg_strerror(rc));
	cr_assert_eq(c->monitor_kind(), HMEMREG_MONITOR_UFFD);
	return c;
}

} // namespace

Test(cache_uffd, munmap_then_mmap_at_same_address_misses)
{
	auto c = make_uffd_cache();
	size_t len = 16 * page();
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	cr_assert_neq(p, MAP_FAILED);
	stamp(p, 1);
	Entry *e = get(*c, p, len);
	cr_assert(!(e->state().load() & kOrphan), "host memory is watched: cached");
	cr_assert_eq(e->reg.cookie, 1u);
	c->put(e);
	e = get(*c, p, len);
	cr_assert_eq(e->reg.cookie, 1u);
	c->put(e);
	cr_assert_eq(stats(*c).hits, 1);

	cr_assert_eq(::munmap(p, len), 0);
	auto *q = static_cast<char *>(::mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	cr_assert_eq(q, p);
	stamp(q, 2);
	e = get(*c, q, len);
	cr_assert_eq(e->reg.cookie, 2u, "stale registration returned after munmap+mmap");
	c->put(e);
	auto s = stats(*c);
	cr_assert_eq(s.misses, 2);
	cr_assert_geq(s.invalidations[HMEMREG_INVAL_UNMAP], 1);
	cr_assert_geq(s.monitor_events, 1);
	::munmap(q, len);
}

Test(cache_uffd, partial_munmap_invalidates)
{
	auto c = make_uffd_cache();
	size_t len = 8 * page();
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	stamp(p, 7);
	c->put(get(*c, p, len));
	::munmap(p + 7 * page(), page()); // only the last page
	Entry *e = get(*c, p, page());
	cr_assert_eq(stats(*c).misses, 2, "the entry covering the unmapped page is gone");
	c->put(e);
	::munmap(p, 7 * page());
}

Test(cache_uffd, madvise_dontneed_invalidates)
{
	auto c = make_uffd_cache();
	size_t len = 4 * page();
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	stamp(p, 3);
	c->put(get(*c, p, len));
	cr_assert_eq(::madvise(p, len, MADV_DONTNEED), 0); // the pages behind it are gone
	stamp(p, 4);
	Entry *e = get(*c, p, len);
	cr_assert_eq(e->reg.cookie, 4u);
	c->put(e);
	cr_assert_geq(stats(*c).invalidations[HMEMREG_INVAL_CLEAR], 1);
	::munmap(p, len);
}

Test(cache_uffd, mremap_away_invalidates)
{
	auto c = make_uffd_cache();
	size_t len = 4 * page();
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	auto *dst = static_cast<char *>(::mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	stamp(p, 5);
	c->put(get(*c, p, len));
	void *moved = ::mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	cr_assert_eq(moved, dst);
	auto *q = static_cast<char *>(::mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	cr_assert_eq(q, p);
	stamp(q, 6);
	Entry *e = get(*c, q, len);
	cr_assert_eq(e->reg.cookie, 6u);
	c->put(e);
	auto s = stats(*c);
	cr_assert_geq(s.invalidations[HMEMREG_INVAL_REMAP] + s.invalidations[HMEMREG_INVAL_UNMAP], 1);
	::munmap(q, len);
	::munmap(dst, len);
}

Test(cache_uffd, held_entry_unmapped_is_released_at_put)
{
	auto c = make_uffd_cache();
	long before = StampRegistrar::live_.load();
	size_t len = 4 * page();
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	Entry *e = get(*c, p, len);
	::munmap(p, len);
	Entry *probe = nullptr;
	Mapping other(page());
	c->get(req(other.p, 8), probe); // any call: applies the event
	c->put(probe);
	cr_assert_eq(stats(*c).entries, 1, "only the probe is cached");
	cr_assert_eq(StampRegistrar::live_.load(), before + 2, "held one stays registered");
	c->put(e);
	cr_assert_eq(StampRegistrar::live_.load(), before + 1);
}

Test(cache_uffd, free_and_malloc_of_large_buffer_misses)
{
	auto c = make_uffd_cache();
	size_t len = 4 << 20; // above glibc's mmap threshold: free() unmaps
	auto *p = static_cast<char *>(std::malloc(len));
	cr_assert_not_null(p);
	stamp(p, 11);
	c->put(get(*c, p, len));
	std::free(p);
	auto *q = static_cast<char *>(std::malloc(len));
	stamp(q, 12);
	Entry *e = get(*c, q, len);
	cr_assert_eq(e->reg.cookie, 12u, "stale registration after free/malloc");
	c->put(e);
	std::free(q);
}

Test(cache_uffd, two_caches_share_the_monitor)
{
	auto a = make_uffd_cache();
	auto b = make_uffd_cache();
	size_t len = 2 * page();
	auto *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	a->put(get(*a, p, len));
	b->put(get(*b, p, len));
	::munmap(p, len);
	Mapping m(page());
	b->put(get(*b, m.p, 8));
	a->put(get(*a, m.p, 8));
	cr_assert_eq(stats(*a).invalidations[HMEMREG_INVAL_UNMAP], 1);
	cr_assert_eq(stats(*b).invalidations[HMEMREG_INVAL_UNMAP], 1);
}

// Before the fix the parent hung in munmap (its reader thread had been stopped by
// the child): the timeout turns a regression into a failure.
Test(cache_uffd, fork_child_leaves_the_parents_monitor_running, .timeout = 60)
{
	auto c = make_uffd_cache();
	size_t len = 4 * page();
	char *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	stamp(p, 21);
	c->put(get(*c, p, len));
	pid_t pid = ::fork();
	if (pid == 0) {
		// The child drops its (inherited) cache and makes and uses a new one.
		c.reset();
		std::shared_ptr<Monitor> m;
		int bad = UffdMonitor::instance(m) ? 1 : 0;
		std::unique_ptr<Cache> d;
		bad |= Cache::create(std::make_unique<StampRegistrar>(), config(16, 1ULL << 40, HMEMREG_MONITOR_UFFD), m, d) ? 2 : 0;
		Mapping x(page());
		Entry *e = nullptr;
		bad |= d && d->get(req(x.p, 8), e) ? 4 : 0;
		if (e)
			d->put(e);
		d.reset();
		_exit(bad);
	}
	int st;
	::waitpid(pid, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: %d", st);
	::munmap(p, len);
	char *q = static_cast<char *>(::mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	stamp(q, 22);
	Entry *e = get(*c, q, len);
	cr_assert_eq(e->reg.cookie, 22u, "the parent's monitor stopped after the child exited");
	c->put(e);
	::munmap(q, len);
}
