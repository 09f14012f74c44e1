// SPDX-License-Identifier: MIT
// Several threads hitting, missing and invalidating one cache at once
// (scenario in cache_stress.hpp; the same runs under TSan as cache_stress).
#include <criterion/criterion.h>

#include "cache_stress.hpp"
#include "mrcache/uffd_monitor.hpp"

using namespace t;

namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 300;

std::unique_ptr<Cache> make(uint64_t max_count)
{
	std::shared_ptr<Monitor> m;
	if (UffdMonitor::instance(m))
		cr_skip_test("userfaultfd not available: %s", UffdMonitor::unavailable_reason());
	std::unique_ptr<Cache> c;
	cr_assert_eq(Cache::create(std::make_unique<StampRegistrar>(), config(max_count, 1ULL << 40, HMEMREG_MONITOR_UFFD), m, c), 0);
	return c;
}

} // namespace

Test(cache_concurrency, remap_hit_invalidate_never_stale)
{
	auto c = make(1024);
	StressResult r = run_stress(*c, kThreads, kRounds);
	cr_assert_eq(r.errors, 0);
	cr_assert_eq(r.stale, 0, "stale registrations returned");
	cr_assert_eq(c->in_use(), 0u);
	auto st = stats(*c);
	cr_assert_geq(st.hits, static_cast<uint64_t>(kThreads * kRounds * 3), "most lookups hit");
	cr_assert_geq(st.invalidations[HMEMREG_INVAL_UNMAP], static_cast<uint64_t>(kThreads * kRounds / 2));
}

Test(cache_concurrency, tiny_cache_evicts_under_contention)
{
	long before = StampRegistrar::live_.load();
	{
		auto c = make(2); // constant eviction and uncached fallback
		StressResult r = run_stress(*c, kThreads, kRounds);
		cr_assert_eq(r.errors, 0);
		cr_assert_eq(r.stale, 0);
		cr_assert_leq(stats(*c).entries, 2u);
	}
	cr_assert_eq(StampRegistrar::live_.load(), before, "everything deregistered");
}
