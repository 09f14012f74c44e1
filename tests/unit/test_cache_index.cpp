// SPDX-License-Identifier: MIT
// The cache's intrusive containers (entry_index.hpp): the treap index
// answers every search as an ordered set of the same keys does, through
// random inserts (with a search, or before a known successor) and erases
// (including equal starts told apart by serial),
// and the lists keep their order through insert_after, remove and splice.
#include <algorithm>
#include <cmath>
#include <criterion/criterion.h>
#include <iterator>
#include <random>
#include <set>
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

} // namespace

Test(cache_index, searches_agree_with_an_ordered_set)
{
	EntryPool pool;
	std::vector<EntryPtr> owned;
	std::vector<Entry *> in, out;
	EntryIndex ix;
	std::set<IndexKey> ref;
	std::mt19937_64 rng(42);
	uint64_t serial = 1;
	for (int i = 0; i < 3000; i++) {
		owned.push_back(pool.make(serial++));
		Entry *e = owned.back().get();
		e->iface = static_cast<Iface>(rng() % 2);
		e->device = rng() % 3;
		e->range.start = (rng() % 500) * 4096; // repeats: equal starts, other serials
		e->range.end = e->range.start + 4096;
		out.push_back(e);
	}
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
	};
	for (int step = 0; step < 20000; step++) {
		bool add = !out.empty() && (in.empty() || rng() % 3 != 0);
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
			ref.insert(key_of(*e));
			in.push_back(e);
		} else {
			size_t j = rng() % in.size();
			Entry *e = in[j];
			in[j] = in.back();
			in.pop_back();
			ix.erase(e);
			ref.erase(key_of(*e));
			cr_assert(!e->ix_parent && !e->ix_left && !e->ix_right, "an erased entry keeps no links");
			out.push_back(e);
		}
		IndexKey k{static_cast<uint32_t>(rng() % 2), rng() % 3, (rng() % 501) * 4096,
			   rng() % 2 ? 0 : (rng() % 2 ? ~0ULL : rng() % serial)};
		probe(k);
		if (step % 1000 == 0) {
			cr_assert_eq(check_tree(ix), ref.size());
			const Entry *e = ix.last();
			for (auto it = ref.rbegin(); it != ref.rend(); ++it, e = EntryIndex::prev(e))
				cr_assert(e && key_of(*e) == *it, "backwards walk");
			cr_assert_null(e);
		}
	}
	for (Entry *e : in)
		ix.erase(e);
	cr_assert(ix.empty());
	cr_assert_eq(ix.size(), 0);
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
