// SPDX-License-Identifier: MIT
// How reference counts are ordered against invalidation (count_fence.hpp):
// membarrier where the kernel has it, seq_cst counts where it does not or
// HMEMREG_MR_CACHE_MEMBARRIER=0 says so (each Criterion test runs in its
// own process, so .init picks the mode). Owned and shared count shards,
// cross-thread puts, and evictions settled in batches, in both modes.
#include <criterion/criterion.h>
#include <cstdlib>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <thread>
#include <vector>

#include "memo_race.hpp"
#include "mrcache/count_fence.hpp"

using namespace t;

namespace {

void force_seq_cst()
{
	setenv("HMEMREG_MR_CACHE_MEMBARRIER", "0", 1);
}

bool kernel_has_membarrier()
{
	long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

struct Fixture {
	MemoryRegistrar reg;
	std::unique_ptr<Cache> cache;
	Mapping mem{64 * page()};
	explicit Fixture(uint64_t max_count = 1024)
	{
		cr_assert_not_null(mem.p);
		cr_assert_eq(Cache::create(std::make_unique<SharedRegistrar>(&reg), config(max_count), cache), 0);
	}
	char *at(size_t pages) { return mem.p + pages * page(); }
	RawRef get(const void *a, size_t len = 64)
	{
		RawRef l;
		int rc = cache->get(req(a, len), l);
		cr_assert_eq(rc, 0, "get: %s", hmemreg_strerror(rc));
		return l;
	}
};

// More threads than owned shards hold one entry at once; each reference
// is put by another thread; an invalidation while all are held keeps it
// registered until the last put.
void many_threads_hand_references_over()
{
	constexpr unsigned kThreads = kSharedShard + 5; // more than the owned shards
	Fixture f;
	RawRef first = f.get(f.at(1));
	cr_assert_eq(f.cache->put(first.entry, first.shard), 0);
	std::vector<RawRef> refs(kThreads);
	std::vector<ThreadState> states(kThreads);
	std::atomic<unsigned> got{0}, go{0};
	std::vector<std::thread> th;
	for (unsigned i = 0; i < kThreads; i++)
		th.emplace_back([&, i] {
			cr_assert_eq(f.cache->get(req(f.at(1), 64), refs[i]), 0);
			states[i] = thread_state();
			got++;
			while (!go.load()) // all alive at once: no shard is handed down
				std::this_thread::yield();
			unsigned j = (i + 1) % kThreads;
			cr_assert_eq(f.cache->put(refs[j].entry, refs[j].shard), 0, "cross-thread put");
		});
	while (got.load() < kThreads)
		std::this_thread::yield();
	Entry *e = first.entry;
	unsigned owned = 0, shared = 0;
	for (unsigned i = 0; i < kThreads; i++) {
		cr_assert_eq(refs[i].entry, e);
		cr_assert_eq(refs[i].shard, states[i].shard);
		if (states[i].owned) {
			owned++;
			cr_assert_neq(states[i].shard, kSharedShard);
			for (unsigned k = 0; k < i; k++)
				cr_assert(!states[k].owned || states[k].shard != states[i].shard, "owned shards are exclusive");
		} else {
			shared++;
			cr_assert_eq(states[i].shard, kSharedShard);
			cr_assert_eq(states[i].light, 0, "a shared shard is counted atomically");
		}
	}
	cr_assert_geq(shared, kThreads + 1 - kSharedShard, "threads beyond the owned shards share one");
	cr_assert_eq(owned + shared, kThreads);
	cr_assert_eq(e->count(), kThreads);
	auto s = reinterpret_cast<uintptr_t>(f.at(1));
	cr_assert_eq(f.cache->invalidate(Iface::host, s, s + 1), 1);
	cr_assert_eq(f.reg.deregs(), 0u, "held by every thread");
	go = 1;
	for (auto &x : th)
		x.join();
	cr_assert_eq(e->count(), 0u);
	cr_assert_eq(f.reg.deregs(), 1u, "released by the last put");
	cr_assert_eq(f.cache->in_use(), 0u);
}

// Evictions wait for a batch (max_count / 64, at most 64) before their
// heavy fence and the decision held or not; until then they count as dead.
void evictions_settle_in_batches()
{
	Fixture f(128); // batches of 2
	Mapping span(130 * page());
	cr_assert_not_null(span.p);
	RawRef held = f.get(span.p);
	for (size_t i = 1; i < 128; i++) {
		RawRef l = f.get(span.p + i * page());
		cr_assert_eq(f.cache->put(l.entry, l.shard), 0);
	}
	cr_assert_eq(f.reg.live(), 128u);
	RawRef l = f.get(span.p + 128 * page()); // evicts page 1 (page 0 is in use)
	cr_assert_eq(f.cache->put(l.entry, l.shard), 0);
	cr_assert_eq(stats(*f.cache).evictions, 1u);
	cr_assert_eq(stats(*f.cache).dead, 1u, "an eviction waits for its batch");
	cr_assert_eq(f.reg.deregs(), 0u);
	l = f.get(span.p + 129 * page()); // evicts page 2: batch full
	cr_assert_eq(f.cache->put(l.entry, l.shard), 0);
	cr_assert_eq(stats(*f.cache).evictions, 2u);
	cr_assert_eq(stats(*f.cache).dead, 0u);
	cr_assert_eq(f.reg.deregs(), 2u, "both deregistered once settled");
	cr_assert_eq(f.reg.live(), 128u);
	l = f.get(span.p + 1 * page()); // evicts page 3, unsettled
	cr_assert_eq(f.cache->put(l.entry, l.shard), 0);
	cr_assert_eq(stats(*f.cache).dead, 1u);
	f.cache->flush(); // settles what waits
	cr_assert_eq(stats(*f.cache).dead, 0u);
	cr_assert_eq(f.reg.live(), 1u, "only the held entry is left");
	cr_assert_eq(f.cache->put(held.entry, held.shard), 0);
	cr_assert_eq(f.cache->in_use(), 0u);
}

void evict_race()
{
	KeyRegistrar keys;
	{
		std::unique_ptr<Cache> c;
		cr_assert_eq(Cache::create(std::make_unique<SharedKeys>(&keys), config(128), c), 0);
		MemoRaceResult res = run_evict_race(*c, keys, 3, 20000, 256);
		cr_assert_eq(res.errors, 0);
		cr_assert_eq(res.bad, 0, "%ld of %ld gets handed out a dead or wrong registration", res.bad, res.gets);
		cr_assert_eq(c->in_use(), 0u);
		cr_assert_gt(stats(*c).evictions, 1000u);
	}
	cr_assert_eq(keys.live(), 0u);
}

// heavy_fence() skips the barrier while no thread but the caller owns a
// count shard. New threads claim one and hit at once, again and again,
// while this thread (the only other owner) evicts under them: every
// reference handed out must name a live registration.
void fresh_threads_hit_while_one_evicts()
{
	KeyRegistrar keys;
	{
		std::unique_ptr<Cache> c;
		cr_assert_eq(Cache::create(std::make_unique<SharedKeys>(&keys), config(64), c), 0);
		const size_t pages = 192;
		Mapping mem(pages * page());
		cr_assert_not_null(mem.p);
		std::atomic<long> bad{0}, errors{0};
		std::atomic<bool> stop{false};
		auto base = reinterpret_cast<uintptr_t>(mem.p);
		auto check_get = [&](uintptr_t s) {
			RawRef l;
			if (c->get(req(reinterpret_cast<void *>(s), 64), l)) {
				errors++;
				return;
			}
			bad += !(keys.alive(l.key) && l.key == l.entry->reg.key && l.range.covers(s, s + 64));
			if (c->put(l.entry, l.shard))
				errors++;
		};
		// Most of the evictor's gets are misses, each a new key: on a
		// loaded machine, where the fresh threads start slowly, an
		// unbounded evictor ran through KeyRegistrar's 1Mi keys and its
		// gets failed with ENOMEM. It stops well before that.
		std::thread evictor([&] {
			std::mt19937 rng(7);
			for (uint64_t n = 0; n < KeyRegistrar::kMaxKeys / 2 && !stop.load(std::memory_order_relaxed); n++)
				check_get(base + (rng() % pages) * page() + 8);
		});
		for (int round = 0; round < 400; round++) {
			std::thread fresh([&, round] {
				std::mt19937 rng(1000 + round);
				for (int i = 0; i < 200; i++)
					check_get(base + (rng() % pages) * page() + 8);
			});
			fresh.join();
		}
		stop = true;
		evictor.join();
		cr_assert_eq(errors.load(), 0);
		cr_assert_eq(bad.load(), 0, "%ld gets handed out a dead registration", bad.load());
		cr_assert_eq(c->in_use(), 0u);
		cr_assert_gt(stats(*c).evictions, 1000u);
	}
	cr_assert_eq(keys.live(), 0u);
}

} // namespace

Test(cache_fence, fresh_threads_hit_while_one_evicts, .timeout = 120)
{
	fresh_threads_hit_while_one_evicts();
}

Test(cache_fence, membarrier_where_the_kernel_has_it)
{
	Fixture f;
	RawRef l = f.get(f.at(0));
	bool mb = kernel_has_membarrier();
	cr_assert_eq(count_fence() == CountFence::membarrier, mb);
	cr_assert_str_eq(count_fence_name(), mb ? "membarrier" : "seq_cst");
	cr_assert(thread_state().owned);
	cr_assert_eq(thread_state().light, mb, "owned shard, plain stores only with membarrier");
	cr_assert_eq(f.cache->put(l.entry, l.shard), 0);
	cr_assert_eq(f.cache->put(l.entry, l.shard), -HMEMREG_EINVAL, "second put");
}

Test(cache_fence, environment_forces_seq_cst, .init = force_seq_cst)
{
	Fixture f;
	cr_assert_eq(count_fence(), CountFence::seq_cst);
	cr_assert_str_eq(count_fence_name(), "seq_cst");
	RawRef l = f.get(f.at(0));
	cr_assert(thread_state().owned);
	cr_assert_eq(thread_state().light, 0);
	cr_assert_eq(f.cache->put(l.entry, l.shard), 0);
	cr_assert_eq(f.cache->put(l.entry, l.shard), -HMEMREG_EINVAL, "second put");
}

Test(cache_fence, many_threads_hand_references_over)
{
	many_threads_hand_references_over();
}

Test(cache_fence, many_threads_hand_references_over_seq_cst, .init = force_seq_cst)
{
	many_threads_hand_references_over();
}

Test(cache_fence, evictions_settle_in_batches)
{
	evictions_settle_in_batches();
}

Test(cache_fence, evictions_settle_in_batches_seq_cst, .init = force_seq_cst)
{
	evictions_settle_in_batches();
}

Test(cache_fence, evictions_under_hits_and_cross_thread_puts)
{
	evict_race();
}

Test(cache_fence, evictions_under_hits_and_cross_thread_puts_seq_cst, .init = force_seq_cst)
{
	evict_race();
}

Test(cache_fence, memo_race_seq_cst, .init = force_seq_cst)
{
	KeyRegistrar keys;
	{
		std::unique_ptr<Cache> c;
		cr_assert_eq(Cache::create(std::make_unique<SharedKeys>(&keys), config(64), c), 0);
		MemoRaceResult res = run_memo_race(*c, keys, 3, 20000);
		cr_assert_eq(res.errors, 0);
		cr_assert_eq(res.bad, 0);
		cr_assert_eq(c->in_use(), 0u);
	}
	cr_assert_eq(keys.live(), 0u);
}
