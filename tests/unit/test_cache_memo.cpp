// SPDX-License-Identifier: MIT
// The lock-free hit path (memo): what it hands out is the entry's, and a
// memo slot left behind by an entry that was invalidated, released or
// recycled for another range never answers again.
#include <criterion/criterion.h>
#include <thread>

#include "memo_race.hpp"

using namespace t;

namespace {

struct Fixture {
	MemoryRegistrar reg;
	std::unique_ptr<Cache> cache;
	Mapping mem{16 * page()};

	Fixture()
	{
		cr_assert_not_null(mem.p);
		cr_assert_eq(Cache::create(std::make_unique<SharedRegistrar>(&reg), config(), cache), 0);
	}
	char *at(size_t pages) { return mem.p + pages * page(); }
	RawRef get(const void *a, size_t len)
	{
		RawRef l;
		int rc = cache->get(req(a, len), l);
		cr_assert_eq(rc, 0, "get: %s", hmemreg_strerror(rc));
		return l;
	}
};

void assert_ref_is_entry(const RawRef &l)
{
	cr_assert_eq(l.key, l.entry->reg.key);
	cr_assert_eq(l.desc, l.entry->reg.desc);
	cr_assert_eq(l.handle, l.entry->reg.handle);
	cr_assert_eq(l.range.start, l.entry->range.start);
	cr_assert_eq(l.range.end, l.entry->range.end);
}

// Watches through one generation word (what the kmod monitor does per
// watch) and, when asked, a per-hit valid() (what the CUDA one does).
class GenMonitor final : public Monitor {
public:
	explicit GenMonitor(bool validate) : validate_(validate) {}
	hmemreg_monitor kind() const override { return HMEMREG_MONITOR_NONE; }
	const char *name() const override { return "gen"; }
	int subscribe(Entry &e) override
	{
		e.gen_word = &word;
		e.gen = word.load();
		e.validate = validate_;
		return 0;
	}
	bool valid(const Entry &) override
	{
		checks++;
		return ok.load();
	}
	std::atomic<uint64_t> word{5};
	std::atomic<bool> ok{true};
	std::atomic<int> checks{0};

private:
	bool validate_;
};

void gen_or_validate_checked_on_memo_hit(bool validate)
{
	MemoryRegistrar reg;
	auto mon = std::make_shared<GenMonitor>(validate);
	std::unique_ptr<Cache> c;
	cr_assert_eq(Cache::create(std::make_unique<SharedRegistrar>(&reg), config(), mon, c), 0);
	Mapping mem(4 * page());
	RawRef a;
	cr_assert_eq(c->get(req(mem.p, 64), a), 0);
	cr_assert_eq(c->put(a.entry, a.shard), 0);
	RawRef b;
	cr_assert_eq(c->get(req(mem.p, 64), b), 0); // memo hit, checks pass
	cr_assert_eq(b.entry, a.entry);
	cr_assert_eq(c->put(b.entry, b.shard), 0);
	if (validate) {
		cr_assert_geq(mon->checks.load(), 1, "valid() asked on the hit");
		mon->ok = false; // the device says the buffer changed
	} else {
		mon->word++; // the watch fired; no event read yet
	}
	RawRef d;
	cr_assert_eq(c->get(req(mem.p, 64), d), 0);
	cr_assert_neq(d.key, a.key, "a changed entry never answers, even from the memo");
	cr_assert_eq(reg.regs(), 2u);
	cr_assert_eq(stats(*c).invalidations[HMEMREG_INVAL_STALE], 1u);
	mon->ok = true;
	cr_assert_eq(c->put(d.entry, d.shard), 0);
}

} // namespace

Test(cache_memo, generation_word_is_checked_on_memo_hits)
{
	gen_or_validate_checked_on_memo_hit(false);
}

Test(cache_memo, monitor_valid_is_asked_on_memo_hits)
{
	gen_or_validate_checked_on_memo_hit(true);
}

Test(cache_memo, slot_being_written_is_a_miss)
{
	Memo memo(64);
	EntryPool pool;
	EntryPtr pa = pool.make(7), pb = pool.make(8), pc = pool.make(9);
	Entry &a = *pa, &b = *pb, &c = *pc;
	a.range = Range{0x10000, 0x12000};
	a.reg.key = 42;
	b.range = Range{0x20000, 0x21000};
	b.reg.key = 43;
	c.range = Range{0x30000, 0x31000};
	c.reg.key = 44;
	for (Entry *e : {&a, &b, &c})
		e->set_state(e->life()); // cached (what a fill looks at)
	Memo::Set set = memo.set_for(Iface::host, 0, 0x10000);
	cr_assert_neq(set.way[0], set.way[1], "two distinct candidate slots");
	MemoView v;
	cr_assert_not(Memo::find(set, Iface::host, 0, 0x10000, 0x10010, v), "empty");
	Memo::fill(set, a);
	cr_assert(Memo::find(set, Iface::host, 0, 0x10000, 0x10010, v));
	cr_assert_eq(v.entry, &a);
	cr_assert_eq(v.key, 42u);
	cr_assert_eq(v.life, a.life());
	cr_assert_not(Memo::find(set, Iface::host, 0, 0x11ff0, 0x12010, v), "not covered");
	cr_assert_not(Memo::find(set, Iface::host, 1, 0x10000, 0x10010, v), "other device");
	cr_assert_not(Memo::find(set, Iface::cuda, 0, 0x10000, 0x10010, v), "other memory kind");
	Memo::Slot *sa = set.way[0]->entry.load() ? set.way[0] : set.way[1];
	uint32_t q;
	cr_assert(sa->begin_write(q));
	cr_assert_not(sa->begin_write(q), "one writer at a time");
	cr_assert_not(Memo::find(set, Iface::host, 0, 0x10000, 0x10010, v), "a slot being written never answers");
	sa->end_write(q);
	Memo::fill(set, b); // a is live: b takes the other slot
	cr_assert(Memo::find(set, Iface::host, 0, 0x20000, 0x20010, v));
	cr_assert_eq(v.entry, &b);
	cr_assert(Memo::find(set, Iface::host, 0, 0x10000, 0x10010, v));
	cr_assert_eq(v.entry, &a);
	uint32_t q0, q1;
	cr_assert(set.way[0]->begin_write(q0));
	cr_assert(set.way[1]->begin_write(q1));
	Memo::fill(set, c); // both busy: the fill gives up
	set.way[0]->end_write(q0);
	set.way[1]->end_write(q1);
	cr_assert_not(Memo::find(set, Iface::host, 0, 0x30000, 0x30010, v));
	a.set_state(kOrphan | a.life()); // a left the cache: its slot is free for c
	Memo::fill(set, c);
	cr_assert(Memo::find(set, Iface::host, 0, 0x30000, 0x30010, v));
	cr_assert_eq(v.entry, &c);
	cr_assert_not(Memo::find(set, Iface::host, 0, 0x10000, 0x10010, v));
	cr_assert(Memo::find(set, Iface::host, 0, 0x20000, 0x20010, v), "the live one stays");
	cr_assert_eq(v.key, 43u);
}

// Memo::lookup (the hit path's probe) hashes for the second way only when
// the first does not answer: both ways must still be found.
Test(cache_memo, lookup_finds_either_way)
{
	Memo memo(64);
	EntryPool pool;
	EntryPtr pa = pool.make(7), pd = pool.make(8);
	Entry &a = *pa, &d = *pd;
	a.range = Range{0x10800, 0x12000};
	a.reg.key = 1;
	d.range = Range{0x10000, 0x11000};
	d.reg.key = 2;
	for (Entry *e : {&a, &d})
		e->set_state(e->life());
	Memo::Set set = memo.set_for(Iface::host, 0, 0x10000);
	MemoView v;
	cr_assert_not(memo.lookup(Iface::host, 0, 0x10000, 0x10010, v), "empty");
	Memo::fill(set, a);
	cr_assert_neq(set.way[0]->entry.load(), 0u, "a fill prefers the first way");
	Memo::fill(set, d); // a is live: d takes the second way
	cr_assert(memo.lookup(Iface::host, 0, 0x10900, 0x10910, v));
	cr_assert_eq(v.entry, &a, "found in the first way");
	cr_assert(memo.lookup(Iface::host, 0, 0x10000, 0x10010, v));
	cr_assert_eq(v.entry, &d, "found in the second way");
	cr_assert_eq(v.key, 2u);
	cr_assert_eq(v.life, d.life());
	cr_assert_not(memo.lookup(Iface::host, 0, 0x10000, 0x12010, v), "neither covers");
	cr_assert_not(memo.lookup(Iface::host, 3, 0x10000, 0x10010, v), "other device");
}

// The second way is probed only while the first says a page spilled there
// (Memo::kSpilled): a fill into the second way sets it, a fill of the first
// way for a page of its own clears it, and a fill that finds its page in
// the second way sets it again (a cleared bit costs one index search).
Test(cache_memo, second_way_probed_only_after_a_spill)
{
	Memo memo(64);
	EntryPool pool;
	EntryPtr pa = pool.make(7), pd = pool.make(8), pe = pool.make(9);
	Entry &a = *pa, &d = *pd, &e = *pe;
	a.range = Range{0x10800, 0x12000};
	d.range = Range{0x10000, 0x11000};
	e.range = Range{0x10800, 0x13000};
	for (Entry *x : {&a, &d, &e})
		x->set_state(x->life());
	Memo::Set set = memo.set_for(Iface::host, 0, 0x10000);
	MemoView v;
	Memo::fill(set, a);
	cr_assert_not(set.way[0]->spilled(), "a page in its first way spills nothing");
	Memo::fill(set, d); // a is live: d takes the second way
	cr_assert(set.way[0]->spilled());
	cr_assert(memo.lookup(Iface::host, 0, 0x10000, 0x10010, v));
	cr_assert_eq(v.entry, &d);
	cr_assert_eq(v.life, d.life(), "the bit is not part of the life");
	a.set_state(kOrphan | a.life()); // a leaves: e takes the first way
	Memo::fill(set, e);
	cr_assert_eq(set.way[0]->entry.load() & ~uintptr_t{63}, reinterpret_cast<uintptr_t>(&e));
	cr_assert_not(set.way[0]->spilled(), "cleared by a page of its own");
	cr_assert(memo.lookup(Iface::host, 0, 0x10900, 0x10910, v));
	cr_assert_eq(v.entry, &e, "the first way answers first (d covers it too)");
	cr_assert_not(memo.lookup(Iface::host, 0, 0x12f00, 0x13100, v), "nothing covers");
	// d is still in the second way, unseen until a fill finds it there.
	Memo::Slot *first = set.way[0];
	uint32_t q;
	cr_assert(first->begin_write(q));
	first->end_write(q, first->life(), false); // e stays in the first way, bit clear
	cr_assert_not(memo.lookup(Iface::host, 0, 0x10000, 0x10010, v), "second way not probed");
	const uint64_t w0 = first->word.load();
	Memo::fill(set, d); // the slow path's refill: d is there already
	cr_assert(first->spilled(), "set again");
	cr_assert_eq(first->word.load(), w0 | Memo::kSpilled, "and nothing rewritten");
	cr_assert(memo.lookup(Iface::host, 0, 0x10000, 0x10010, v));
	cr_assert_eq(v.entry, &d);
	// With the first way free, a fill takes it without looking further (a
	// copy of d beside the one in the second way: both name its life).
	e.set_state(kOrphan | e.life());
	Memo::fill(set, d);
	cr_assert_eq(first->entry.load() & ~uintptr_t{63}, reinterpret_cast<uintptr_t>(&d));
	cr_assert_not(first->spilled());
	cr_assert(memo.lookup(Iface::host, 0, 0x10000, 0x10010, v));
	cr_assert_eq(v.entry, &d);
	d.set_state(kOrphan | d.life());
	cr_assert(memo.lookup(Iface::host, 0, 0x10000, 0x10010, v), "a candidate only:");
	cr_assert_neq(d.state().load() & kOrphan, 0u, "its entry's state says it is gone");
}

Test(cache_memo, memo_hit_hands_out_the_entry_registration)
{
	Fixture f;
	RawRef a = f.get(f.at(2) + 8, 64); // miss
	RawRef b = f.get(f.at(2) + 8, 64); // first hit: the index, then memoised
	RawRef c = f.get(f.at(2) + 100, 8); // same page: memo
	cr_assert_eq(a.entry, b.entry);
	cr_assert_eq(a.entry, c.entry);
	assert_ref_is_entry(b);
	assert_ref_is_entry(c);
	cr_assert(c.cached);
	cr_assert_eq(a.entry->count(), 3u);
	for (RawRef *l : {&a, &b, &c})
		cr_assert_eq(f.cache->put(l->entry), 0);
	cr_assert_eq(stats(*f.cache).hits, 2u);
	cr_assert_eq(f.reg.regs(), 1u);
}

// A miss leaves the memo alone; the entry's first hit memoises it. (A
// range registered once, as in a scan, then never takes a memo slot.)
Test(cache_memo, first_hit_memoises_not_the_miss)
{
	Fixture f;
	auto s = reinterpret_cast<uintptr_t>(f.at(6));
	RawRef l;
	RawRef a = f.get(f.at(6), 64); // miss
	cr_assert_not(f.cache->try_hit(Iface::host, 0, s, s + 64, l), "a miss does not memoise its entry");
	RawRef b = f.get(f.at(6), 64); // hit, from the index
	cr_assert_eq(b.entry, a.entry);
	cr_assert(f.cache->try_hit(Iface::host, 0, s, s + 64, l), "the first hit memoised it");
	cr_assert_eq(l.entry, a.entry);
	assert_ref_is_entry(l);
	for (RawRef *r : {&a, &b, &l})
		cr_assert_eq(f.cache->put(r->entry, r->shard), 0);
	cr_assert_eq(stats(*f.cache).hits, 2u, "b and the memo hit");
	cr_assert_eq(f.reg.regs(), 1u);
}

Test(cache_memo, invalidated_held_entry_is_not_returned_again)
{
	Fixture f;
	RawRef a = f.get(f.at(1), 64);
	RawRef a2 = f.get(f.at(1), 64); // memoised, count 2
	cr_assert_eq(a.entry, a2.entry);
	auto s = reinterpret_cast<uintptr_t>(f.at(1));
	cr_assert_eq(f.cache->invalidate(Iface::host, s, s + 1), 1);
	RawRef b = f.get(f.at(1), 64); // the memo still names a: it must not answer
	cr_assert_neq(b.entry, a.entry);
	cr_assert_neq(b.key, a.key);
	cr_assert_eq(f.reg.regs(), 2u);
	cr_assert_eq(f.cache->put(a.entry), 0);
	cr_assert_eq(f.cache->put(a2.entry), 0); // last put releases the orphan
	cr_assert_eq(f.cache->put(b.entry), 0);
	cr_assert_eq(f.reg.live(), 1u);
}

Test(cache_memo, recycled_entry_never_answers_for_its_old_range)
{
	Fixture f;
	RawRef a = f.get(f.at(3), 64);
	Entry *old = a.entry;
	uint64_t old_key = a.key;
	cr_assert_eq(f.cache->put(old), 0);
	f.get(f.at(3), 64); // memo filled with (old, its life)
	cr_assert_eq(f.cache->put(old), 0);
	auto s = reinterpret_cast<uintptr_t>(f.at(3));
	cr_assert_eq(f.cache->invalidate(Iface::host, s, s + page()), 1); // released to the pool
	RawRef b = f.get(f.at(9), 64); // another range gets the same memory
	cr_assert_eq(b.entry, old, "the pool hands the freed entry out again (this test needs that)");
	RawRef c = f.get(f.at(3), 64); // the memo slot for page 3 still names `old`
	cr_assert_neq(c.entry, old);
	cr_assert_neq(c.key, old_key);
	cr_assert(c.range.covers(s, s + 64));
	assert_ref_is_entry(c);
	cr_assert_eq(f.reg.regs(), 3u);
	cr_assert_eq(f.cache->put(b.entry), 0);
	cr_assert_eq(f.cache->put(c.entry), 0);
}

Test(cache_memo, put_of_unheld_entry_keeps_it_usable)
{
	Fixture f;
	RawRef a = f.get(f.at(0), 64);
	cr_assert_eq(f.cache->put(a.entry), 0);
	cr_assert_eq(f.cache->put(a.entry), -HMEMREG_EINVAL);
	RawRef b = f.get(f.at(0), 64); // still cached, still hits
	cr_assert_eq(b.entry, a.entry);
	cr_assert_eq(f.reg.regs(), 1u);
	cr_assert_eq(f.cache->put(b.entry), 0);
}

Test(cache_memo, put_from_another_thread_takes_the_count_back)
{
	Fixture f;
	RawRef a = f.get(f.at(4), 64);
	RawRef b = f.get(f.at(4), 64);
	cr_assert_eq(a.entry->count(), 2u);
	int rc1 = -1, rc2 = -1, rc3 = -1;
	std::thread([&] {
		rc1 = f.cache->put(a.entry, a.shard); // where the get counted it
		rc2 = f.cache->put(b.entry);          // shard unknown: any counter holding one
		rc3 = f.cache->put(b.entry);          // nothing held any more
	}).join();
	cr_assert_eq(rc1, 0);
	cr_assert_eq(rc2, 0);
	cr_assert_eq(rc3, -HMEMREG_EINVAL);
	cr_assert_eq(a.entry->count(), 0u);
	int64_t sum = 0;
	for (unsigned s = 0; s < kCountShards; s++)
		sum += a.entry->cell(s).count.load();
	cr_assert_eq(sum, 0, "the counters sum to zero (the putter's went below zero)");
	RawRef c = f.get(f.at(4), 64); // still cached
	cr_assert_eq(c.entry, a.entry);
	cr_assert_eq(f.cache->put(c.entry, c.shard), 0);
}

Test(cache_memo, reference_of_another_thread_keeps_invalidated_entry_registered)
{
	Fixture f;
	RawRef a = f.get(f.at(5), 64);
	cr_assert_eq(f.cache->put(a.entry, a.shard), 0);
	RawRef b;
	std::thread([&] { b = f.get(f.at(5), 64); }).join(); // memo hit, counted on that thread's shard
	cr_assert_eq(b.entry, a.entry);
	cr_assert_neq(b.shard, a.shard, "this test needs two shards");
	auto s = reinterpret_cast<uintptr_t>(f.at(5));
	cr_assert_eq(f.cache->invalidate(Iface::host, s, s + 1), 1);
	cr_assert_eq(f.reg.deregs(), 0u, "still held (by the other thread's count): not deregistered");
	cr_assert_eq(b.entry->count(), 1u);
	cr_assert_eq(f.cache->put(b.entry, b.shard), 0);
	cr_assert_eq(f.reg.deregs(), 1u, "released at the last put");
}

Test(cache_memo, colliding_slots_under_invalidation_never_lie)
{
	KeyRegistrar keys;
	{
		std::unique_ptr<Cache> c;
		cr_assert_eq(Cache::create(std::make_unique<SharedKeys>(&keys), config(64), c), 0);
		MemoRaceResult r = run_memo_race(*c, keys, 3, 20000);
		cr_assert_eq(r.errors, 0);
		cr_assert_eq(r.bad, 0, "%ld of %ld gets handed out a wrong or dead registration", r.bad, r.gets);
		cr_assert_eq(c->in_use(), 0u);
		cr_assert_gt(stats(*c).hits, 0u);
	}
	cr_assert_eq(keys.live(), 0u, "everything deregistered");
}
