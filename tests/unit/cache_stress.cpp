// SPDX-License-Identifier: MIT
// cache_stress [ROUNDS]: the concurrency scenarios without Criterion, for
// TSan (tests/host.d/15-sanitize.sh). Exit 0 when nothing stale, nothing
// failed and nothing leaked; 77 when userfaultfd is unavailable.
#include <cstdio>
#include <cstdlib>

#include "cache_stress.hpp"
#include "memo_race.hpp"
#include "mrcache/count_fence.hpp"
#include "mrcache/uffd_monitor.hpp"

using namespace t;

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
	int bad = 0;
	for (uint64_t max_count : {1024, 2}) {
		std::shared_ptr<Monitor> m;
		if (UffdMonitor::instance(m)) {
			std::printf("SKIP: userfaultfd not available: %s\n", UffdMonitor::unavailable_reason());
			return 77;
		}
		long before = StampRegistrar::live_.load();
		{
			std::unique_ptr<Cache> c;
			if (Cache::create(std::make_unique<StampRegistrar>(), config(max_count, 1ULL << 40, HMEMREG_MONITOR_UFFD), m, c))
				return 1;
			StressResult r = run_stress(*c, 4, rounds);
			std::printf("max_count %llu: stale %d errors %d in_use %llu\n", static_cast<unsigned long long>(max_count),
				    r.stale, r.errors, static_cast<unsigned long long>(c->in_use()));
			bad += r.stale + r.errors + static_cast<int>(c->in_use());
		}
		if (StampRegistrar::live_.load() != before) {
			std::printf("leaked %ld registrations\n", StampRegistrar::live_.load() - before);
			bad++;
		}
	}
	{ // the lock-free memo: colliding slots refilled and entries recycled under readers
		KeyRegistrar keys;
		{
			std::unique_ptr<Cache> c;
			if (Cache::create(std::make_unique<SharedKeys>(&keys), config(64), c))
				return 1;
			MemoRaceResult r = run_memo_race(*c, keys, 3, rounds * 50L);
			std::printf("memo race: %ld gets, bad %ld errors %ld in_use %llu\n", r.gets, r.bad, r.errors,
				    static_cast<unsigned long long>(c->in_use()));
			bad += static_cast<int>(r.bad + r.errors) + static_cast<int>(c->in_use());
		}
		if (keys.live()) {
			std::printf("memo race: %llu registrations left\n", static_cast<unsigned long long>(keys.live()));
			bad++;
		}
	}
	{ // evictions settled in batches under hits and cross-thread puts
		KeyRegistrar keys;
		{
			std::unique_ptr<Cache> c;
			if (Cache::create(std::make_unique<SharedKeys>(&keys), config(128), c))
				return 1;
			MemoRaceResult r = run_evict_race(*c, keys, 3, rounds * 20L, 256);
			std::printf("evict race (%s): %ld gets, bad %ld errors %ld in_use %llu\n", count_fence_name(), r.gets,
				    r.bad, r.errors, static_cast<unsigned long long>(c->in_use()));
			bad += static_cast<int>(r.bad + r.errors) + static_cast<int>(c->in_use());
		}
		if (keys.live()) {
			std::printf("evict race: %llu registrations left\n", static_cast<unsigned long long>(keys.live()));
			bad++;
		}
	}
	return bad ? 1 : 0;
}
