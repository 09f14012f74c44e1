// SPDX-License-Identifier: MIT
// The cache's intrusive containers (entry_index.hpp): the treap index
// answers every search as an ordered set of the same keys does, through
// random inserts (with a search, or before a known successor) and erases
// (including equal starts told apart by serial, several memory kinds and
// devices, deep trees, and the miss path's cyclic pattern), walks both
// ways in order, keeps its shape (parent links, one root, a balanced
// depth), and an entry found before stays valid, with the same
// neighbours, while changes() stays the same; the lists keep their order
// through insert_after, remove and splice.
#include <algorithm>
#include <cmath>
#include <criterion/criterion.h>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "mrcache/entry_index.hpp"
#include "mrcache/entry_pool.hpp"

using namespace hmemreg::mr;

namespace {

// The treap's shape invariants: parent links agree, keys in order, one
// root, and a depth a balanced tree has (a treap that never rotated, a
// list, would pass the others).
size_t check_tree(const EntryIndex &ix)
{
	size_t n = 0, roots = 0, depth = 0;
	const Entry *prev = nullptr;
	for (const Entry *e = ix.first(); e; e = EntryIndex::next(e), n++) {
		if (e->ix_left)
			cr_assert_eq(e->ix_left->ix_parent, e);
		if (e->ix_right)
			cr_assert_eq(e->ix_right->ix_parent, e);
		if (prev)
			cr_assert(key_of(*prev) < key_of(*e), "keys out of order");
		size_t d = 0;
		for (const Entry *p = e->ix_parent; p; p = p->ix_parent)
			d++;
		roots += d == 0;
		depth = std::max(depth, d);
		prev = e;
	}
	cr_assert_eq(n, ix.size());
	cr_assert(n == 0 || roots == 1, "%zu roots", roots);
	const size_t bound = 4 * static_cast<size_t>(std::log2(static_cast<double>(n) + 1)) + 10;
	cr_assert(depth <= bound, "depth %zu for %zu entries (bound %zu): the treap is not balanced", depth, n, bound);
	return n;
}

// The index's shape, its size, and both walks against the oracle.
void check_index(const EntryIndex &ix, const std::set<IndexKey> &ref)
{
	const size_t n = check_tree(ix);
	cr_assert_eq(n, ref.size());
	cr_assert_eq(ix.size(), ref.size());
	cr_assert_eq(ix.empty(), ref.empty());
	const Entry *e = ix.first();
	for (auto it = ref.begin(); it != ref.end(); ++it, e = EntryIndex::next(e))
		cr_assert(e && key_of(*e) == *it, "forward walk");
	cr_assert_null(e);
	e = ix.last();
	for (auto it = ref.rbegin(); it != ref.rend(); ++it, e = EntryIndex::prev(e))
		cr_assert(e && key_of(*e) == *it, "backwards walk");
	cr_assert_null(e);
}

// Random inserts and erases over `kinds` memory kinds, `devices` devices
// and `starts` page starts (few starts: many equal, other serials), each
// followed by searches checked against std::set, and a search kept from
// before: valid (same entry, same neighbours as a new search) while
// changes() has not moved, and changes() moves at every insert and erase.
void random_ops(unsigned seed, int entries, int steps, unsigned kinds, unsigned devices, unsigned starts, int keep_in)
{
	EntryPool pool;
	std::vector<EntryPtr> owned;
	std::vector<Entry *> in, out;
	EntryIndex ix;
	std::set<IndexKey> ref;
	std::mt19937_64 rng(seed);
	uint64_t serial = 1;
	for (int i = 0; i < entries; i++) {
		owned.push_back(pool.make(serial++));
		Entry *e = owned.back().get();
		e->iface = static_cast<Iface>(rng() % kinds);
		e->device = rng() % devices;
		e->range.start = (rng() % starts) * 4096; // repeats: equal starts, other serials
		e->range.end = e->range.start + 4096;
		out.push_back(e);
	}
	auto random_key = [&] {
		return IndexKey{static_cast<uint32_t>(rng() % (kinds + 1)), rng() % (devices + 1),
				(rng() % (starts + 1)) * 4096 + (rng() % 4 == 0 ? 1 : 0),
				rng() % 2 ? 0 : (rng() % 2 ? ~0ULL : rng() % serial)};
	};
	auto probe = [&](const IndexKey &k) {
		auto ub = ref.upper_bound(k);
		const Entry *le = ix.last_at_or_before(k);
		if (ub == ref.begin())
			cr_assert_null(le);
		else
			cr_assert(le && key_of(*le) == *std::prev(ub), "last_at_or_before");
		auto lb = ref.lower_bound(k);
		const Entry *ge = ix.first_at_or_after(k);
		if (lb == ref.end())
			cr_assert_null(ge);
		else
			cr_assert(ge && key_of(*ge) == *lb, "first_at_or_after");
		const Entry *f = ix.find(k);
		cr_assert_eq(f != nullptr, ref.count(k) == 1);
		if (f)
			cr_assert(key_of(*f) == k);
	};
	// A search kept across steps, as a miss keeps its lookup's.
	IndexKey kept_key{};
	const Entry *kept = nullptr;
	uint64_t kept_changes = ~0ULL;
	for (int step = 0; step < steps; step++) {
		const uint64_t c0 = ix.changes();
		if (kept_changes == c0) {
			cr_assert_eq(ix.last_at_or_before(kept_key), kept, "a search went stale without changes()");
			if (kept) { // its neighbours, from its leaf, still the right ones
				cr_assert(ref.count(key_of(*kept)), "a kept entry left without changes()");
				auto up = ref.upper_bound(kept_key);
				const Entry *nx = EntryIndex::next(kept);
				cr_assert(up == ref.end() ? !nx : nx && key_of(*nx) == *up, "next of a kept search");
			}
		}
		const bool add = !out.empty() && (in.empty() || static_cast<int>(in.size()) < keep_in ||
						  rng() % 3 != 0);
		if (add) {
			size_t j = rng() % out.size();
			Entry *e = out[j];
			out[j] = out.back();
			out.pop_back();
			if (rng() % 2) {
				ix.insert(e);
			} else { // what a miss does: the successor from a search it made
				IndexKey k = key_of(*e);
				k.serial++;
				ix.insert_before(ix.first_at_or_after(k), e);
			}
			cr_assert_eq(ix.find(key_of(*e)), e, "an inserted entry is found");
			ref.insert(key_of(*e));
			in.push_back(e);
		} else if (!in.empty()) {
			size_t j = rng() % in.size();
			Entry *e = in[j];
			in[j] = in.back();
			in.pop_back();
			ix.erase(e);
			ref.erase(key_of(*e));
			cr_assert(!e->ix_parent && !e->ix_left && !e->ix_right, "an erased entry keeps no links");
			out.push_back(e);
		}
		cr_assert_neq(ix.changes(), c0, "an insert or erase must move changes()");
		probe(random_key());
		if (rng() % 8 == 0) {
			kept_key = random_key();
			kept = ix.last_at_or_before(kept_key);
			kept_changes = ix.changes();
		}
		if (step % 997 == 0)
			check_index(ix, ref);
	}
	check_index(ix, ref);
	for (Entry *e : in)
		ix.erase(e);
	cr_assert(ix.empty());
	cr_assert_eq(ix.size(), 0);
	cr_assert_null(ix.first());
	cr_assert_null(ix.last());
}

} // namespace

Test(cache_index, searches_agree_with_an_ordered_set)
{
	random_ops(42, 3000, 20000, 2, 3, 500, 0);
}

// Deep trees, one kind and device, few equal starts.
Test(cache_index, deep_tree_agrees_with_an_ordered_set)
{
	random_ops(7, 20000, 60000, 1, 1, 1u << 20, 12000);
}

// Many equal starts, told apart by serial.
Test(cache_index, equal_starts_agree_with_an_ordered_set)
{
	random_ops(9, 4000, 20000, 1, 2, 7, 2000);
}

// What the cache's miss path does at capacity: ascending starts, each
// inserted before the successor its search found, the oldest erased
// (a cyclic walk over twice the capacity, as hmemreg_bench cache's miss
// case); then the index forgotten at once and used again.
Test(cache_index, cyclic_misses_keep_order)
{
	EntryPool pool;
	std::vector<EntryPtr> owned;
	EntryIndex ix;
	std::set<IndexKey> ref;
	std::map<uint64_t, Entry *> by_serial; // insertion order: the LRU
	const int cap = 5000, span = 2 * cap;
	uint64_t serial = 1;
	for (int i = 0; i < 4 * span; i++) {
		const uintptr_t s = static_cast<uintptr_t>(i % span) * 65536;
		Entry *before = ix.last_at_or_before(IndexKey{0, 0, s, ~0ULL});
		Entry *succ = before ? EntryIndex::next(before) : ix.first();
		if (by_serial.size() == static_cast<size_t>(cap)) {
			Entry *v = by_serial.begin()->second;
			by_serial.erase(by_serial.begin());
			if (v == succ)
				succ = EntryIndex::next(v);
			ix.erase(v);
			ref.erase(key_of(*v));
		}
		owned.push_back(pool.make(serial++));
		Entry *e = owned.back().get();
		e->range.start = s;
		e->range.end = s + 8192;
		ix.insert_before(succ, e);
		ref.insert(key_of(*e));
		by_serial[e->serial] = e;
		if (i % 4999 == 0)
			check_index(ix, ref);
	}
	check_index(ix, ref);
	ix.forget_all();
	cr_assert(ix.empty());
	cr_assert_null(ix.first());
	cr_assert_null(ix.last());
	// Usable again after forgetting.
	Entry *e = by_serial.begin()->second;
	e->ix_parent = e->ix_left = e->ix_right = nullptr;
	ix.insert(e);
	cr_assert_eq(ix.first(), e);
	cr_assert_eq(ix.last(), e);
	cr_assert_null(EntryIndex::next(e));
	cr_assert_null(EntryIndex::prev(e));
	ix.erase(e);
	cr_assert(ix.empty());
}

Test(cache_index, lists_keep_order)
{
	EntryPool pool;
	std::vector<EntryPtr> owned;
	for (uint64_t i = 1; i <= 6; i++)
		owned.push_back(pool.make(i));
	Entry *e[6];
	for (int i = 0; i < 6; i++)
		e[i] = owned[i].get();
	EntryList a, b;
	a.push_back(e[1]);
	a.insert_after(nullptr, e[0]); // front
	a.insert_after(e[1], e[2]);
	b.push_back(e[3]);
	b.push_back(e[4]);
	a.splice_back(b);
	cr_assert(b.empty());
	a.push_back(e[5]);
	a.remove(e[3]);
	const int want[] = {0, 1, 2, 4, 5};
	Entry *x = a.front();
	for (int w : want) {
		cr_assert_eq(x, e[w]);
		x = EntryList::next(x);
	}
	cr_assert_null(x);
	cr_assert_eq(a.size(), 5);
	cr_assert_eq(a.back(), e[5]);
	cr_assert_eq(EntryList::prev(e[4]), e[2]);
	cr_assert_eq(a.pop_front(), e[0]);
	a.swap(b);
	cr_assert(a.empty());
	cr_assert_eq(b.size(), 4);
	while (b.pop_front()) {
	}
	cr_assert(b.empty() && !b.front() && !b.back());
}
