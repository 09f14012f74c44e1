// SPDX-License-Identifier: MIT
// The lock-free memo under contention, shared by test_cache_memo (Criterion)
// and cache_stress (TSan). Threads hit a few dozen pages of a small cache,
// so memo slots collide and are refilled while others read them; one thread
// keeps invalidating pages and flushing. Every get must return copies
// (range, handle, desc, key) that belong to one live registration covering
// the request: a torn slot or a reference taken on a released or recycled
// entry shows up as a key that is not live, or not the entry's.
#pragma once

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "cache_test_util.hpp"

namespace t {

// Keys are indices into a liveness table: reg marks one live, dereg dead.
class KeyRegistrar final : public Registrar {
public:
	static constexpr uint64_t kMaxKeys = 1 << 20;
	KeyRegistrar() : alive_(new std::atomic<uint8_t>[kMaxKeys]) {}
	const char *name() const override { return "keys"; }
	int reg(const Request &, Range r, Registration &o) override
	{
		uint64_t k = next_.fetch_add(1);
		if (k >= kMaxKeys)
			return -HMEMREG_ENOMEM;
		alive_[k].store(1, std::memory_order_release);
		o.key = k;
		o.desc = reinterpret_cast<void *>(r.start ^ k); // tied to key and range
		o.handle = reinterpret_cast<void *>(r.end + k);
		return 0;
	}
	void dereg(Registration &o) noexcept override { alive_[o.key].store(0, std::memory_order_release); }
	bool alive(uint64_t k) const { return k < kMaxKeys && alive_[k].load(std::memory_order_acquire); }
	uint64_t live() const
	{
		uint64_t n = 0, end = std::min(next_.load(), kMaxKeys);
		for (uint64_t k = 0; k < end; k++)
			n += alive_[k].load();
		return n;
	}

private:
	std::unique_ptr<std::atomic<uint8_t>[]> alive_;
	std::atomic<uint64_t> next_{1};
};

// Forwards to a KeyRegistrar the test owns (it must outlive the cache).
class SharedKeys final : public Registrar {
public:
	explicit SharedKeys(KeyRegistrar *k) : k_(k) {}
	const char *name() const override { return "keys"; }
	int reg(const Request &q, Range r, Registration &o) override { return k_->reg(q, r, o); }
	void dereg(Registration &o) noexcept override { k_->dereg(o); }

private:
	KeyRegistrar *k_;
};

struct MemoRaceResult {
	long bad = 0, errors = 0, gets = 0;
};

// Cache over a KeyRegistrar (owned by the caller, outliving the cache),
// max_count 64 (64 memo sets). 24 regions of 8 pages are registered whole;
// requests land on any of their 192 pages, so about three request pages
// share each memo set and slots are refilled all the time. The main thread
// invalidates a region now and then and registers it whole again (which
// replaces the page-sized entries misses made meanwhile).
inline MemoRaceResult run_memo_race(Cache &cache, KeyRegistrar &keys, int threads, long iters)
{
	constexpr int kRegions = 24, kPagesPer = 8;
	Mapping mem(kRegions * kPagesPer * page());
	if (!mem.p)
		return {0, 1, 0};
	std::atomic<long> bad{0}, errors{0}, gets{0};
	std::atomic<int> done{0};
	auto base = reinterpret_cast<uintptr_t>(mem.p);
	const size_t region_len = kPagesPer * page();
	auto whole = [&](size_t r) {
		Entry *e = nullptr;
		if (cache.get(req(reinterpret_cast<void *>(base + r * region_len), region_len), e) == 0)
			cache.put(e);
		else
			errors++;
	};
	for (size_t r = 0; r < kRegions; r++)
		whole(r);
	auto worker = [&](int id) {
		std::mt19937 rng(77 + id);
		for (long i = 0; i < iters; i++) {
			size_t pg = rng() % (kRegions * kPagesPer);
			size_t off = rng() % (page() / 2), len = 1 + rng() % (page() / 2);
			uintptr_t s = base + pg * page() + off;
			RawRef l;
			if (cache.get(req(reinterpret_cast<void *>(s), len), l)) {
				errors++;
				continue;
			}
			gets++;
			Entry *e = l.entry;
			// Held: nothing here may have been deregistered or changed.
			bool ok = keys.alive(l.key) && l.key == e->reg.key && l.desc == e->reg.desc &&
				  l.handle == e->reg.handle && l.range.start == e->range.start &&
				  l.range.end == e->range.end && l.range.covers(s, s + len) &&
				  l.desc == reinterpret_cast<void *>(l.range.start ^ l.key) &&
				  l.handle == reinterpret_cast<void *>(l.range.end + l.key);
			bad += !ok;
			if (i % 2 ? cache.put(e, l.shard) : cache.put(e))
				errors++;
		}
		done++;
	};
	std::vector<std::thread> th;
	for (int i = 0; i < threads; i++)
		th.emplace_back(worker, i);
	// The invalidator: entries leave the index (and get recycled) under the readers.
	std::mt19937 rng(5);
	for (long n = 0; done.load() < threads; n++) {
		size_t r = rng() % kRegions;
		cache.invalidate(Iface::host, base + r * region_len, base + (r + 1) * region_len);
		whole(r);
		if (n % 64 == 0)
			cache.flush();
		std::this_thread::yield();
	}
	for (auto &x : th)
		x.join();
	return {bad.load(), errors.load(), gets.load()};
}

// Evictions under hits: a cache of max_count entries (batched settling
// from 128 up, cache.cpp) and threads that get pages of a span twice as
// large, so most misses evict; each get is checked as above while held,
// sometimes across a yield, and every other reference is put by the next
// thread in line (cross-thread puts).
inline MemoRaceResult run_evict_race(Cache &cache, KeyRegistrar &keys, int threads, long iters, size_t span_pages)
{
	Mapping mem(span_pages * page());
	if (!mem.p)
		return {0, 1, 0};
	std::atomic<long> bad{0}, errors{0}, gets{0};
	auto base = reinterpret_cast<uintptr_t>(mem.p);
	std::vector<std::atomic<uintptr_t>> handoff(static_cast<size_t>(threads)); // Entry * | shard
	auto put_tagged = [&](uintptr_t h) {
		if (h && cache.put(reinterpret_cast<Entry *>(h & ~uintptr_t{63}), static_cast<unsigned>(h & 63)))
			errors++;
	};
	auto worker = [&](int id) {
		std::mt19937 rng(99 + id);
		for (long i = 0; i < iters; i++) {
			uintptr_t s = base + (rng() % span_pages) * page() + 8;
			RawRef l;
			if (cache.get(req(reinterpret_cast<void *>(s), 64), l)) {
				errors++;
				continue;
			}
			gets++;
			if (i % 8 == 0)
				std::this_thread::yield();
			Entry *e = l.entry;
			bool ok = keys.alive(l.key) && l.key == e->reg.key && l.range.covers(s, s + 64) &&
				  l.desc == reinterpret_cast<void *>(l.range.start ^ l.key);
			bad += !ok;
			if (i % 2) {
				put_tagged(reinterpret_cast<uintptr_t>(e) | l.shard);
			} else { // the next thread puts it; we put what the previous one left
				auto &slot = handoff[static_cast<size_t>((id + 1) % threads)];
				put_tagged(handoff[static_cast<size_t>(id)].exchange(0));
				put_tagged(slot.exchange(reinterpret_cast<uintptr_t>(e) | l.shard));
			}
		}
	};
	std::vector<std::thread> th;
	for (int i = 0; i < threads; i++)
		th.emplace_back(worker, i);
	for (auto &x : th)
		x.join();
	for (auto &h : handoff)
		put_tagged(h.exchange(0));
	return {bad.load(), errors.load(), gets.load()};
}

} // namespace t
