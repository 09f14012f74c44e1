// SPDX-License-Identifier: MIT
// The kmod monitor against hmemreg.ko (VM lane: tests/vm.d/20-cache.sh loads
// the module with max_watches=256 ring_events=32; skipped where
// /dev/hmemreg is absent). Validity comes from each watch's generation word;
// events only release dead entries; an overflowed ring makes the cache
// recheck every generation word.
#include <criterion/criterion.h>
#include <sys/mman.h>
#include <thread>
#include <vector>

#include "stamp_checks.hpp"
#include "mrcache/kmod_monitor.hpp"
#include "mrcache/monitor_factory.hpp"

using namespace t;

namespace {

std::unique_ptr<Cache> make_kmod_cache(uint64_t max_count = 1024)
{
	std::shared_ptr<Monitor> m;
	int rc = KmodMonitor::open(m);
	if (rc == -HMEMREG_ENODEV || rc == -HMEMREG_EACCES)
		cr_skip_test("needs hmemreg.ko loaded (VM lane: tests/vm/run tests/vm.d/20-cache.sh): %s", hmemreg_strerror(rc));
	cr_assert_eq(rc, 0, "kmod monitor: %s", hmemreg_strerror(rc));
	std::unique_ptr<Cache> c;
	rc = Cache::create(std::make_unique<StampRegistrar>(), config(max_count, 1ULL << 40, HMEMREG_MONITOR_KMOD), m, c);
	cr_assert_eq(rc, 0, "%s", hmemreg_strerror(rc));
	cr_assert_eq(c->monitor_kind(), HMEMREG_MONITOR_KMOD);
	return c;
}

char *map(size_t len, void *at = nullptr)
{
	void *p = ::mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	return static_cast<char *>(p);
}

} // namespace

Test(cache_kmod, auto_picks_kmod_when_the_module_is_loaded)
{
	if (access("/dev/hmemreg", F_OK) != 0)
		cr_skip_test("needs hmemreg.ko loaded (VM lane)");
	std::shared_ptr<Monitor> m;
	cr_assert_eq(make_monitor(HMEMREG_MONITOR_AUTO, m), 0);
	cr_assert_eq(m->kind(), HMEMREG_MONITOR_KMOD);
}

Test(cache_kmod, munmap_then_mmap_at_same_address_misses)
{
	auto c = make_kmod_cache();
	size_t len = 16 * page();
	char *p = map(len);
	stamp(p, 1);
	Entry *e = get(*c, p, len);
	cr_assert_not(e->state().load() & kOrphan, "watched: cached");
	cr_assert_neq(e->gen, 0u, "has a generation");
	cr_assert_eq(e->gen_word->load(), e->gen);
	c->put(e);
	c->put(get(*c, p, len));
	cr_assert_eq(stats(*c).hits, 1);
	::munmap(p, len);
	cr_assert_eq(e->gen_word->load() == e->gen, false, "the kernel cleared the word before munmap returned");
	char *q = map(len, p);
	stamp(q, 2);
	e = get(*c, q, len);
	cr_assert_eq(e->reg.cookie, 2u, "stale registration after munmap+mmap");
	c->put(e);
	auto s = stats(*c);
	cr_assert_eq(s.misses, 2);
	cr_assert_geq(s.invalidations[HMEMREG_INVAL_UNMAP] + s.invalidations[HMEMREG_INVAL_STALE], 1);
	::munmap(q, len);
}

Test(cache_kmod, generation_word_alone_catches_a_free)
{
	// Two caches on two fds: the second one's events are never read by
	// the first; what protects it is the generation word checked on a hit.
	auto c = make_kmod_cache();
	size_t len = 4 * page();
	char *p = map(len);
	stamp(p, 3);
	Entry *e = get(*c, p, len);
	c->put(e);
	::munmap(p, len);
	char *q = map(len, p);
	stamp(q, 4);
	// Make the hit path see the entry before any event is drained: take
	// the entry straight from the index as a lookup would and check the word.
	cr_assert_neq(e->gen_word->load(), e->gen);
	e = get(*c, q, len);
	cr_assert_eq(e->reg.cookie, 4u);
	c->put(e);
	::munmap(q, len);
}

Test(cache_kmod, madvise_dontneed_invalidates)
{
	auto c = make_kmod_cache();
	size_t len = 4 * page();
	char *p = map(len);
	stamp(p, 5);
	c->put(get(*c, p, len));
	cr_assert_eq(::madvise(p, len, MADV_DONTNEED), 0);
	stamp(p, 6);
	Entry *e = get(*c, p, len);
	cr_assert_eq(e->reg.cookie, 6u);
	c->put(e);
	::munmap(p, len);
}

Test(cache_kmod, held_entry_survives_unmap_until_put)
{
	auto c = make_kmod_cache();
	long before = StampRegistrar::live_.load();
	size_t len = 4 * page();
	char *p = map(len);
	Entry *e = get(*c, p, len);
	::munmap(p, len);
	char *o = map(page());
	c->put(get(*c, o, 8)); // drains the event: e leaves the index
	cr_assert_eq(stats(*c).entries, 1);
	cr_assert_eq(StampRegistrar::live_.load(), before + 2);
	c->put(e);
	cr_assert_eq(StampRegistrar::live_.load(), before + 1);
	::munmap(o, page());
}

Test(cache_kmod, ring_overflow_revalidates_everything)
{
	auto c = make_kmod_cache();
	constexpr int n = 64; // the VM lane loads the module with ring_events=32
	std::vector<char *> bufs;
	for (int i = 0; i < n; i++) {
		bufs.push_back(map(page()));
		stamp(bufs.back(), 100 + i);
		c->put(get(*c, bufs.back(), 8));
	}
	char *keep = map(page());
	stamp(keep, 7);
	c->put(get(*c, keep, 8));
	for (char *b : bufs)
		::munmap(b, page());
	Entry *e = get(*c, keep, 8); // drains: overflow, ack, revalidate
	cr_assert_eq(e->reg.cookie, 7u);
	c->put(e);
	auto s = stats(*c);
	cr_assert_eq(s.entries, 1, "every unmapped entry is gone, the live one stays");
	cr_assert_geq(s.invalidations[HMEMREG_INVAL_OVERFLOW], 1, "the ring overflowed (ring_events=32?)");
	::munmap(keep, page());
}

Test(cache_kmod, watch_limit_falls_back_to_uncached)
{
	auto c = make_kmod_cache(4096);
	constexpr int n = 300; // module loaded with max_watches=256
	char *p = map(n * 2 * page());
	std::vector<Entry *> held;
	for (int i = 0; i < n; i++)
		held.push_back(get(*c, p + i * 2 * page(), 8));
	auto s = stats(*c);
	cr_assert_geq(s.uncached_registrations, 1, "beyond max_watches entries are uncached");
	cr_assert_leq(s.entries, 256u);
	for (Entry *e : held)
		c->put(e);
	::munmap(p, n * 2 * page());
}

Test(cache_kmod, threads_remapping_never_see_stale)
{
	auto c = make_kmod_cache();
	constexpr int threads = 3, rounds = 150;
	size_t slot = 4 * page();
	char *region = static_cast<char *>(::mmap(nullptr, slot * threads, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	std::atomic<int> stale{0}, errors{0};
	std::vector<std::thread> th;
	for (int id = 0; id < threads; id++) {
		th.emplace_back([&, id] {
			char *s = region + id * slot;
			for (int r = 0; r < rounds; r++) {
				if (::mmap(s, slot, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != s) {
					errors++;
					return;
				}
				uint64_t v = (static_cast<uint64_t>(id) << 32) | static_cast<uint64_t>(r + 1);
				stamp(s, v);
				for (int k = 0; k < 3; k++) {
					Entry *e = nullptr;
					if (c->get(req(s, 64), e)) {
						errors++;
						continue;
					}
					stale += e->reg.cookie != v;
					c->put(e);
				}
				::munmap(s, slot);
			}
		});
	}
	for (auto &x : th)
		x.join();
	cr_assert_eq(errors.load(), 0);
	cr_assert_eq(stale.load(), 0);
	cr_assert_eq(c->in_use(), 0u);
	::munmap(region, slot * threads);
}
