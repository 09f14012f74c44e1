// SPDX-License-Identifier: MIT
// Cache semantics with the in-memory registrar and no monitor: covering
// lookups, nested/overlapping ranges, LRU order, both limits, in-use entries
// never evicted, uncached fallback, failures, explicit invalidation.
#include <criterion/criterion.h>

#include "cache_test_util.hpp"

using namespace t;

namespace {

struct Fixture {
	MemoryRegistrar reg;
	std::unique_ptr<Cache> cache;
	Mapping mem{64 * page()};

	explicit Fixture(hmemreg_cache_config cfg = config())
	{
		reg.track_ranges(true);
		cr_assert_not_null(mem.p);
		int rc = Cache::create(std::make_unique<SharedRegistrar>(&reg), cfg, cache);
		cr_assert_eq(rc, 0, "create: %s", hmemreg_strerror(rc));
	}
	char *at(size_t pages) { return mem.p + pages * page(); }
	Entry *get(const void *a, size_t len)
	{
		Entry *e = nullptr;
		int rc = cache->get(req(a, len), e);
		cr_assert_eq(rc, 0, "get: %s", hmemreg_strerror(rc));
		return e;
	}
	void getput(const void *a, size_t len) { cr_assert_eq(cache->put(get(a, len)), 0); }
	bool live(size_t first_page, size_t pages)
	{
		auto s = reinterpret_cast<uintptr_t>(at(first_page));
		return reg.is_live_range(s, s + pages * page());
	}
};

} // namespace

Test(cache_core, hit_covers_request_and_counts)
{
	Fixture f;
	Entry *a = f.get(f.at(0) + 100, 200);
	cr_assert_eq(a->range.start, reinterpret_cast<uintptr_t>(f.at(0)), "registered whole pages");
	cr_assert_eq(a->range.size(), page());
	Entry *b = f.get(f.at(0) + 1000, 50); // same page: covered
	cr_assert_eq(a, b);
	cr_assert_eq(a->count(), 2u);
	f.cache->put(a);
	f.cache->put(b);
	auto s = stats(*f.cache);
	cr_assert_eq(s.hits, 1);
	cr_assert_eq(s.misses, 1);
	cr_assert_eq(s.entries, 1);
	cr_assert_eq(s.bytes, page());
	cr_assert_eq(f.reg.regs(), 1u);
}

Test(cache_core, request_spanning_two_pages_needs_both)
{
	Fixture f;
	f.getput(f.at(0), page());
	Entry *e = f.get(f.at(0) + page() - 8, 16); // crosses into page 1: not covered
	cr_assert_eq(e->range.size(), 2 * page());
	f.cache->put(e);
	cr_assert_eq(stats(*f.cache).misses, 2);
}

Test(cache_core, larger_request_replaces_nested_unused_entries)
{
	Fixture f;
	f.getput(f.at(1), page());
	f.getput(f.at(3), page());
	f.getput(f.at(0), 8 * page()); // covers both
	auto s = stats(*f.cache);
	cr_assert_eq(s.entries, 1);
	cr_assert_eq(s.invalidations[HMEMREG_INVAL_REPLACED], 2);
	cr_assert_eq(f.reg.live(), 1u, "replaced registrations were released");
	cr_assert(f.live(0, 8));
	f.getput(f.at(3), 10); // now a hit in the big one
	cr_assert_eq(stats(*f.cache).hits, 1);
}

Test(cache_core, nested_entry_in_use_is_released_at_last_put)
{
	Fixture f;
	Entry *small = f.get(f.at(2), page());
	Entry *big = f.get(f.at(0), 8 * page());
	cr_assert_neq(small, big);
	cr_assert_eq(stats(*f.cache).entries, 1, "only the big one is indexed");
	cr_assert_eq(f.reg.live(), 2u, "the small one stays registered while held");
	cr_assert_eq(f.cache->put(small), 0);
	cr_assert_eq(f.reg.live(), 1u);
	cr_assert_eq(f.cache->put(big), 0);
	cr_assert_eq(f.reg.live(), 1u);
}

Test(cache_core, overlapping_ranges_are_both_kept_and_never_merged)
{
	Fixture f;
	f.getput(f.at(0), 2 * page());
	f.getput(f.at(1), 2 * page()); // overlaps, not nested
	cr_assert_eq(stats(*f.cache).entries, 2);
	cr_assert(f.live(0, 2) && f.live(1, 2));
	f.getput(f.at(1) + 10, 100); // covered by either
	cr_assert_eq(stats(*f.cache).hits, 1);
	f.getput(f.at(0), 3 * page()); // covers both: replaces both
	cr_assert_eq(stats(*f.cache).entries, 1);
	cr_assert_eq(f.reg.live(), 1u);
}

Test(cache_core, lru_evicts_least_recently_released)
{
	Fixture f(config(3));
	f.getput(f.at(0), page()); // A
	f.getput(f.at(2), page()); // B
	f.getput(f.at(4), page()); // C
	f.getput(f.at(0), page()); // A again: now B is the oldest
	f.getput(f.at(6), page()); // D evicts B
	cr_assert(f.live(0, 1), "A kept");
	cr_assert_not(f.live(2, 1), "B evicted");
	cr_assert(f.live(4, 1) && f.live(6, 1));
	f.getput(f.at(8), page()); // E evicts C
	cr_assert_not(f.live(4, 1), "C evicted");
	cr_assert(f.live(0, 1) && f.live(6, 1) && f.live(8, 1));
	auto s = stats(*f.cache);
	cr_assert_eq(s.evictions, 2);
	cr_assert_eq(s.entries, 3);
}

Test(cache_core, byte_limit_evicts_until_it_fits)
{
	Fixture f(config(100, 4 * page()));
	f.getput(f.at(0), page());
	f.getput(f.at(2), page());
	f.getput(f.at(4), page());
	f.getput(f.at(10), 2 * page()); // 5 pages > 4: evict the oldest
	auto s = stats(*f.cache);
	cr_assert_leq(s.bytes, 4 * page());
	cr_assert_not(f.live(0, 1));
	cr_assert(f.live(2, 1) && f.live(4, 1) && f.live(10, 2));
}

Test(cache_core, in_use_entries_are_never_evicted_and_overflow_is_uncached)
{
	Fixture f(config(2));
	Entry *a = f.get(f.at(0), page());
	Entry *b = f.get(f.at(2), page());
	Entry *c = f.get(f.at(4), page()); // cache full of in-use entries
	cr_assert(c->state().load() & kOrphan, "returned uncached");
	auto s = stats(*f.cache);
	cr_assert_eq(s.entries, 2);
	cr_assert_eq(s.uncached, 1);
	cr_assert_eq(s.uncached_registrations, 1);
	cr_assert_eq(s.evictions, 0);
	cr_assert(f.live(0, 1) && f.live(2, 1) && f.live(4, 1));
	f.cache->put(c);
	cr_assert_not(f.live(4, 1), "uncached registration released at put");
	f.cache->put(a);
	f.cache->put(b);
	f.getput(f.at(6), page()); // now an unused entry can go
	cr_assert_eq(stats(*f.cache).evictions, 1);
}

Test(cache_core, max_entry_size_and_no_cache_flag_bypass_the_index)
{
	auto cfg = config();
	cfg.max_entry_size = 2 * page();
	Fixture f(cfg);
	Entry *big = f.get(f.at(0), 3 * page());
	cr_assert(big->state().load() & kOrphan);
	f.cache->put(big);
	Request r = req(f.at(8), page());
	r.flags = HMEMREG_MR_NO_CACHE;
	Entry *e = nullptr;
	cr_assert_eq(f.cache->get(r, e), 0);
	cr_assert(e->state().load() & kOrphan);
	f.cache->put(e);
	cr_assert_eq(stats(*f.cache).entries, 0);
	cr_assert_eq(f.reg.live(), 0u);
}

Test(cache_core, max_count_zero_disables_caching)
{
	Fixture f(config(0));
	f.getput(f.at(0), page());
	f.getput(f.at(0), page());
	cr_assert_eq(f.reg.regs(), 2u);
	cr_assert_eq(f.reg.live(), 0u);
}

Test(cache_core, explicit_invalidate_of_held_entry)
{
	Fixture f;
	Entry *a = f.get(f.at(0), page());
	cr_assert_eq(f.cache->invalidate(Iface::host, reinterpret_cast<uintptr_t>(f.at(0)), reinterpret_cast<uintptr_t>(f.at(0)) + 1), 1);
	cr_assert_eq(stats(*f.cache).entries, 0);
	cr_assert_eq(f.reg.live(), 1u, "still held: still registered");
	Entry *b = f.get(f.at(0), page());
	cr_assert_neq(a, b, "a get after invalidation misses");
	cr_assert_neq(a->reg.key, b->reg.key);
	f.cache->put(a);
	cr_assert_eq(f.reg.live(), 1u);
	f.cache->put(b);
	cr_assert_eq(stats(*f.cache).invalidations[HMEMREG_INVAL_EXPLICIT], 1);
}

Test(cache_core, invalidate_only_touches_overlapping_entries)
{
	Fixture f;
	f.getput(f.at(0), page());
	f.getput(f.at(2), page());
	f.getput(f.at(4), 2 * page());
	auto b = reinterpret_cast<uintptr_t>(f.at(5));
	cr_assert_eq(f.cache->invalidate(Iface::host, b, b + 2 * page()), 1);
	cr_assert(f.live(0, 1) && f.live(2, 1));
	cr_assert_not(f.live(4, 2));
	// Another memory kind is a different key space.
	cr_assert_eq(f.cache->invalidate(Iface::cuda, 0, ~0ULL), 0);
	cr_assert_eq(stats(*f.cache).entries, 2);
}

Test(cache_core, registration_failure_is_returned_and_nothing_cached)
{
	Fixture f;
	f.reg.fail_next(1, -HMEMREG_EFABRIC);
	Entry *e = nullptr;
	cr_assert_eq(f.cache->get(req(f.at(0), 10), e), -HMEMREG_EFABRIC);
	auto s = stats(*f.cache);
	cr_assert_eq(s.entries, 0);
	cr_assert_eq(s.registration_failures, 1);
	f.getput(f.at(0), 10);
	cr_assert_eq(f.reg.live(), 1u);
}

Test(cache_core, out_of_resources_flushes_unused_and_retries_once)
{
	Fixture f;
	f.getput(f.at(0), page());
	f.getput(f.at(2), page());
	f.reg.fail_next(1, -HMEMREG_ENOMEM);
	f.getput(f.at(4), page());
	cr_assert_eq(f.reg.live(), 1u, "the two unused entries were flushed for the retry");
	f.reg.fail_next(2, -HMEMREG_ENOMEM);
	Entry *e = nullptr;
	cr_assert_eq(f.cache->get(req(f.at(6), 10), e), -HMEMREG_ENOMEM, "only one retry");
}

Test(cache_core, double_put_and_foreign_entry_are_rejected)
{
	Fixture f;
	Fixture g;
	Entry *e = f.get(f.at(0), 10);
	cr_assert_eq(g.cache->put(e), -HMEMREG_EINVAL, "not from this cache");
	cr_assert_eq(f.cache->put(e), 0);
	cr_assert_eq(f.cache->put(e), -HMEMREG_EINVAL, "second put");
	cr_assert_eq(e->count(), 0u);
	cr_assert_eq(f.cache->put(nullptr), -HMEMREG_EINVAL);
}

Test(cache_core, bad_requests)
{
	Fixture f;
	Entry *e = nullptr;
	cr_assert_eq(f.cache->get(req(nullptr, 10), e), -HMEMREG_EINVAL);
	cr_assert_eq(f.cache->get(req(f.at(0), 0), e), -HMEMREG_EINVAL);
	cr_assert_eq(f.cache->get(req(reinterpret_cast<void *>(~0ULL - 10), 100), e), -HMEMREG_EINVAL);
	Request r = req(f.at(0), 10);
	r.iface = static_cast<Iface>(99);
	cr_assert_eq(f.cache->get(r, e), -HMEMREG_EINVAL);
	cr_assert_eq(f.reg.regs(), 0u);
}

Test(cache_core, destroy_releases_everything)
{
	MemoryRegistrar reg;
	Mapping m(8 * page());
	{
		std::unique_ptr<Cache> c;
		cr_assert_eq(Cache::create(std::make_unique<SharedRegistrar>(&reg), config(), c), 0);
		Entry *e;
		c->get(req(m.p, 10), e);
		c->put(e);
		c->get(req(m.p + 2 * page(), 10), e);
		c->put(e);
		c->get(req(m.p + 4 * page(), 10), e); // uncached-in-use at destroy
		cr_assert_eq(reg.live(), 3u);
	}
	cr_assert_eq(reg.live(), 0u);
}

Test(cache_core, flush_releases_unused_only)
{
	Fixture f;
	f.getput(f.at(0), 10);
	Entry *held = f.get(f.at(2), 10);
	cr_assert_eq(f.cache->flush(), 1);
	cr_assert_eq(f.reg.live(), 1u);
	cr_assert_eq(stats(*f.cache).entries, 1);
	f.cache->put(held);
}

Test(cache_core, raii_ref_puts)
{
	Fixture f;
	{
		Ref r;
		cr_assert_eq(f.cache->get(req(f.at(0), 10), r), 0);
		cr_assert(r);
		cr_assert_eq(r.entry()->count(), 1u);
	}
	cr_assert_eq(f.cache->in_use(), 0u);
}

Test(cache_core, device_memory_without_device_monitor_is_uncached)
{
	Fixture f(config(1024, 1ULL << 40, HMEMREG_MONITOR_UFFD));
	Request r = req(f.at(0), 10);
	r.iface = Iface::cuda;
	r.device = 1;
	Entry *e = nullptr;
	cr_assert_eq(f.cache->get(r, e), 0);
	cr_assert(e->state().load() & kOrphan, "nothing can watch it: uncached");
	f.cache->put(e);
	cr_assert_eq(f.reg.live(), 0u);
}

// Registration time in the stats (registration_ns and its histogram, timed
// with the CPU counter where it can: mrcache/reg_clock.hpp) is real time:
// a registration that sleeps 3 ms reads as 3 ms, not a scaled or sampled
// guess, and lands in its power-of-two bucket.
Test(cache_core, registration_time_is_measured_in_ns)
{
	class Slow final : public Registrar {
	public:
		const char *name() const override { return "slow"; }
		int reg(const Request &, Range, Registration &o) override
		{
			::usleep(3000);
			o.key = 1;
			return 0;
		}
		void dereg(Registration &) noexcept override {}
	};
	std::unique_ptr<Cache> c;
	cr_assert_eq(Cache::create(std::make_unique<Slow>(), config(), c), 0);
	Mapping m(4 * page());
	for (int i = 0; i < 2; i++) {
		Entry *e = nullptr;
		cr_assert_eq(c->get(req(m.p + static_cast<size_t>(i) * 2 * page(), page()), e), 0);
		c->put(e);
	}
	auto s = stats(*c);
	cr_assert_eq(s.registrations, 2);
	cr_assert(s.registration_ns >= 6000000 && s.registration_ns < 200000000, "two 3 ms registrations took %llu ns",
		  static_cast<unsigned long long>(s.registration_ns));
	uint64_t below = 0, at_or_above = 0;
	for (unsigned b = 0; b < HMEMREG_STATS_REG_HIST_BUCKETS; b++)
		(b < 21 ? below : at_or_above) += c->stats_slot().raw()->registration_hist[b]; // 2^21 ns = 2.1 ms
	cr_assert_eq(below, 0);
	cr_assert_eq(at_or_above, 2);
}
