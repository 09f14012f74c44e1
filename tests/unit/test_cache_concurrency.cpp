// SPDX-License-Identifier: MIT
// Several threads hitting, missing and invalidating one cache at once (also
// built under TSan by tests/host.d/15-sanitize.sh). Each thread remaps its
// own slot of a reserved region over and over and stamps it; a get must
// always return a registration of the current mapping (stamp registrar).
// All threads also hit a shared buffer, and one invalidates it explicitly.
#include <criterion/criterion.h>
#include <cstdio>
#include <sys/mman.h>
#include <thread>
#include <vector>

#include "cache_test_util.hpp"
#include "mrcache/uffd_monitor.hpp"

using namespace t;

namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 300;

void stamp(void *p, uint64_t v) { std::memcpy(p, &v, sizeof(v)); }

struct Stress {
	std::unique_ptr<Cache> cache;
	char *region = nullptr;
	size_t slot_len = 4 * page();
	Mapping shared{8 * page()};
	std::atomic<int> stale{0}, errors{0};

	explicit Stress(uint64_t max_count)
	{
		std::shared_ptr<Monitor> m;
		if (UffdMonitor::instance(m))
			cr_skip_test("userfaultfd not available: %s", UffdMonitor::unavailable_reason());
		cr_assert_eq(Cache::create(std::make_unique<StampRegistrar>(), config(max_count, 1ULL << 40, HMEMREG_MONITOR_UFFD), m, cache), 0);
		region = static_cast<char *>(::mmap(nullptr, slot_len * kThreads, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
		cr_assert_neq(region, MAP_FAILED);
		for (size_t i = 0; i < shared.len; i += 8)
			stamp(shared.p + i, 0xabc);
	}
	~Stress() { ::munmap(region, slot_len * kThreads); }

	void worker(int id)
	{
		char *slot = region + id * slot_len;
		for (int r = 0; r < kRounds; r++) {
			void *p = ::mmap(slot, slot_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (p != slot) {
				errors++;
				return;
			}
			uint64_t v = (static_cast<uint64_t>(id) << 32) | static_cast<uint64_t>(r + 1);
			for (int k = 0; k < 4; k++) // every address a get may register from
				stamp(slot + 64 * k, v);
			for (int k = 0; k < 4; k++) { // miss once, then hit
				Entry *e = nullptr;
				if (cache->get(req(slot + 64 * k, 64), e)) {
					errors++;
					continue;
				}
				if (e->reg.cookie != v) {
					stale++;
					std::fprintf(stderr, "stale slot t%d r%d k%d cookie %lx want %lx\n", id, r, k, (unsigned long)e->reg.cookie, (unsigned long)v);
				}
				cache->put(e);
			}
			for (int k = 0; k < 8; k++) {
				Entry *e = nullptr;
				if (cache->get(req(shared.p + 128 * k, 128), e) == 0) {
					if (e->reg.cookie != 0xabc) {
						stale++;
						std::fprintf(stderr, "stale shared cookie %lx\n", (unsigned long)e->reg.cookie);
					}
					cache->put(e);
				} else {
					errors++;
				}
			}
			if (id == 0 && r % 16 == 0) {
				auto s = reinterpret_cast<uintptr_t>(shared.p);
				cache->invalidate(Iface::host, s, s + 1);
			}
			::munmap(slot, slot_len); // the next get of this slot must miss
		}
	}

	void run()
	{
		std::vector<std::thread> th;
		for (int i = 0; i < kThreads; i++)
			th.emplace_back([this, i] { worker(i); });
		for (auto &t : th)
			t.join();
	}
};

} // namespace

Test(cache_concurrency, remap_hit_invalidate_never_stale)
{
	Stress s(1024);
	s.run();
	cr_assert_eq(s.errors.load(), 0);
	cr_assert_eq(s.stale.load(), 0, "stale registrations returned");
	cr_assert_eq(s.cache->in_use(), 0u);
	auto st = stats(*s.cache);
	cr_assert_geq(st.hits, static_cast<uint64_t>(kThreads * kRounds * 3), "most lookups hit");
	cr_assert_geq(st.invalidations[HMEMREG_INVAL_UNMAP], static_cast<uint64_t>(kThreads * kRounds / 2));
}

Test(cache_concurrency, tiny_cache_evicts_under_contention)
{
	long before = StampRegistrar::live_.load();
	{
		Stress s(2); // constant eviction and uncached fallback
		s.run();
		cr_assert_eq(s.errors.load(), 0);
		cr_assert_eq(s.stale.load(), 0);
		cr_assert_leq(stats(*s.cache).entries, 2u);
	}
	cr_assert_eq(StampRegistrar::live_.load(), before, "everything deregistered");
}
