// SPDX-License-Identifier: MIT
// The B+tree behind EntryIndex (entry_index.hpp): the entries of one
// (memory kind, device), ordered by (start, serial), with the keys inline
// in the nodes. A search reads a few nodes of a few lines each (about 5
// at 1M entries, the upper ones warm) instead of one cold entry per level
// of a binary tree (about 28 at 1M), and counts keys without branching
// on them.
//
// Leaves hold entries; every leaf of every tree of an index is on one
// chain in index order (BtreeChain), so stepping from an entry to its
// neighbour, across trees too, needs the entry and its leaf only: each
// entry points at its leaf (Entry::ix_leaf), and the tree keeps those
// pointers right when it moves entries between leaves (splits).
// Leaves and inner nodes are freed when they empty, never merged (a
// miss's eviction erases in a leaf without touching any other node);
// an inner node left with one child stays, the root is then collapsed.
// Nodes come from and go back to a BtreeNodes store owned by the index,
// so a steady state of misses allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "mrcache/entry.hpp"

namespace hmemreg::mr {

// A key within one tree.
struct BtreeKey {
	uintptr_t start;
	uint64_t serial;
};

inline constexpr unsigned kBtreeKeys = 16; // keys per node: starts fill two lines

// What leaves and inner nodes share: sorted keys, starts first (what a
// search reads), serials beside (read where starts are equal).
struct alignas(64) BtreeNode {
	uintptr_t start[kBtreeKeys];
	uint64_t serial[kBtreeKeys];
	uint32_t n = 0; // keys held
	bool leaf = false;

	// Keys whose start is below s (no branch on the keys).
	unsigned count_below(uintptr_t s) const
	{
		unsigned c = 0;
		for (unsigned i = 0; i < kBtreeKeys; i++)
			c += (i < n) & (start[i] < s);
		return c;
	}
	// Keys <= k.
	unsigned upper(const BtreeKey &k) const
	{
		unsigned c = count_below(k.start);
		while (c < n && start[c] == k.start && serial[c] <= k.serial)
			c++;
		return c;
	}
	// Keys < k.
	unsigned lower(const BtreeKey &k) const
	{
		unsigned c = count_below(k.start);
		while (c < n && start[c] == k.start && serial[c] < k.serial)
			c++;
		return c;
	}
	BtreeKey key(unsigned i) const { return BtreeKey{start[i], serial[i]}; }
	void set_key(unsigned i, const BtreeKey &k)
	{
		start[i] = k.start;
		serial[i] = k.serial;
	}
};

struct BtreeLeaf : BtreeNode {
	Entry *val[kBtreeKeys];
	BtreeLeaf *prev = nullptr, *next = nullptr; // the index's chain of leaves

	Entry *back() const { return val[n - 1]; }
	unsigned slot_of(const Entry *e) const
	{
		unsigned i = 0;
		while (val[i] != e)
			i++;
		return i;
	}
};

// n keys, n + 1 children; keys in child[i] are >= key(i - 1) and < key(i).
struct BtreeInner : BtreeNode {
	BtreeNode *child[kBtreeKeys + 1];
};

// The index's chain of leaves, first to last.
struct BtreeChain {
	BtreeLeaf *head = nullptr, *tail = nullptr;

	// Link l after pos (null: at the front).
	void link_after(BtreeLeaf *pos, BtreeLeaf *l)
	{
		l->prev = pos;
		l->next = pos ? pos->next : head;
		(l->next ? l->next->prev : tail) = l;
		(pos ? pos->next : head) = l;
	}
	void unlink(BtreeLeaf *l)
	{
		(l->prev ? l->prev->next : head) = l->next;
		(l->next ? l->next->prev : tail) = l->prev;
		l->prev = l->next = nullptr;
	}
};

// Every node an index ever used, owned here; freed ones wait for reuse.
class BtreeNodes {
public:
	BtreeLeaf *leaf() { return take(leaves_, free_leaves_); }
	BtreeInner *inner() { return take(inners_, free_inners_); }
	void give(BtreeLeaf *l) { free_leaves_.push_back(l); }
	void give(BtreeInner *x) { free_inners_.push_back(x); }
	// Every node free again (the trees are forgotten).
	void give_all()
	{
		refill(leaves_, free_leaves_);
		refill(inners_, free_inners_);
	}

private:
	template <typename N>
	static N *take(std::vector<std::unique_ptr<N>> &all, std::vector<N *> &free)
	{
		N *x;
		if (free.empty()) {
			all.push_back(std::make_unique<N>());
			x = all.back().get();
		} else {
			x = free.back();
			free.pop_back();
			*x = N{};
		}
		x->leaf = std::is_same_v<N, BtreeLeaf>;
		return x;
	}
	template <typename N>
	static void refill(std::vector<std::unique_ptr<N>> &all, std::vector<N *> &free)
	{
		free.clear();
		for (auto &x : all)
			free.push_back(x.get());
	}
	std::vector<std::unique_ptr<BtreeLeaf>> leaves_;
	std::vector<std::unique_ptr<BtreeInner>> inners_;
	std::vector<BtreeLeaf *> free_leaves_;
	std::vector<BtreeInner *> free_inners_;
};

inline BtreeLeaf *leaf_of(const Entry *e)
{
	return e->ix_leaf;
}

inline BtreeKey btree_key(const Entry &e)
{
	return BtreeKey{e.range.start, e.serial};
}

// One (memory kind, device)'s entries. Never empty while it exists: the
// index drops a tree whose last entry leaves.
class EntryBtree {
public:
	// A tree of one leaf holding e, linked on the chain after pos.
	EntryBtree(BtreeNodes &nodes, BtreeChain &chain, BtreeLeaf *pos, Entry *e) : nodes_(nodes), chain_(chain)
	{
		BtreeLeaf *l = nodes_.leaf();
		put(l, 0, e);
		chain_.link_after(pos, l);
		root_ = l;
	}
	EntryBtree(const EntryBtree &) = delete;
	EntryBtree &operator=(const EntryBtree &) = delete;

	BtreeLeaf *first_leaf() const
	{
		const BtreeNode *x = root_;
		while (!x->leaf)
			x = static_cast<const BtreeInner *>(x)->child[0];
		return static_cast<BtreeLeaf *>(const_cast<BtreeNode *>(x));
	}
	BtreeLeaf *last_leaf() const
	{
		const BtreeNode *x = root_;
		while (!x->leaf) {
			auto *in = static_cast<const BtreeInner *>(x);
			x = in->child[in->n];
		}
		return static_cast<BtreeLeaf *>(const_cast<BtreeNode *>(x));
	}
	// The leaf where k is or would be.
	BtreeLeaf *leaf_for(const BtreeKey &k) const
	{
		const BtreeNode *x = root_;
		while (!x->leaf)
			x = static_cast<const BtreeInner *>(x)->child[x->upper(k)];
		return static_cast<BtreeLeaf *>(const_cast<BtreeNode *>(x));
	}

	// e is in no index; its key fields are set and stay while it is here.
	void insert(Entry *e)
	{
		const BtreeKey k = btree_key(*e);
		Path p;
		BtreeNode *x = root_;
		bool rightmost = true; // the last leaf: keys rise there (ascending misses)
		while (!x->leaf) {
			auto *in = static_cast<BtreeInner *>(x);
			const unsigned i = in->upper(k);
			rightmost = rightmost && i == in->n;
			p.node[p.depth] = in;
			p.slot[p.depth++] = i;
			x = in->child[i];
		}
		auto *l = static_cast<BtreeLeaf *>(x);
		const unsigned s = l->upper(k);
		if (l->n < kBtreeKeys)
			put(l, s, e);
		else
			split_leaf(p, l, s, e, rightmost && s == l->n);
	}

	// insert(e) where e goes just before pos, an entry of this tree found
	// by the caller's own search; false (nothing done) where that needs a
	// split or pos is the first of its leaf (then insert(e)).
	static bool insert_before(Entry *pos, Entry *e)
	{
		BtreeLeaf *l = leaf_of(pos);
		if (l->n == kBtreeKeys)
			return false;
		const unsigned s = l->slot_of(pos);
		if (s == 0) // e may belong to the leaf before: only the inner keys tell
			return false;
		put(l, s, e);
		return true;
	}

	// e is in this tree. True when the tree is left empty (and freed).
	bool erase(Entry *e)
	{
		BtreeLeaf *l = leaf_of(e);
		const unsigned s = l->slot_of(e);
		const BtreeKey k = btree_key(*e);
		for (unsigned i = s; i + 1 < l->n; i++) {
			l->set_key(i, l->key(i + 1));
			l->val[i] = l->val[i + 1];
		}
		l->n--;
		e->ix_leaf = nullptr;
		if (l->n)
			return false;
		// The leaf emptied: take it out of its parent (found by e's key,
		// which still leads here), and every ancestor it empties.
		chain_.unlink(l);
		Path p;
		for (BtreeNode *x = root_; !x->leaf;) {
			auto *in = static_cast<BtreeInner *>(x);
			p.node[p.depth] = in;
			p.slot[p.depth++] = in->upper(k);
			x = in->child[in->upper(k)];
		}
		nodes_.give(l);
		while (p.depth) {
			BtreeInner *in = p.node[--p.depth];
			const unsigned c = p.slot[p.depth];
			if (in->n == 0) { // its only child went: it goes too
				nodes_.give(in);
				continue;
			}
			// Drop child c and the key on its left (its right for child 0).
			const unsigned kd = c ? c - 1 : 0;
			for (unsigned i = kd; i + 1 < in->n; i++)
				in->set_key(i, in->key(i + 1));
			for (unsigned i = c; i < in->n; i++)
				in->child[i] = in->child[i + 1];
			in->n--;
			collapse_root();
			return false;
		}
		root_ = nullptr;
		return true;
	}

	// Every node back to the store, the entries untouched.
	void forget() { root_ = nullptr; }

	// Height and shape checks for tests: leaves at one depth, keys in
	// order inside their bounds, child counts right. Returns the entries.
	template <typename Fail>
	uint64_t check(Fail &&fail) const
	{
		int leaf_depth = -1;
		return check_node(root_, nullptr, nullptr, 0, leaf_depth, fail);
	}

private:
	static constexpr unsigned kMaxDepth = 24; // 17^23 nodes: more than memory holds
	struct Path {
		BtreeInner *node[kMaxDepth];
		unsigned slot[kMaxDepth];
		unsigned depth = 0;
	};

	// e into l at slot s (l has room).
	static void put(BtreeLeaf *l, unsigned s, Entry *e)
	{
		for (unsigned i = l->n; i > s; i--) {
			l->set_key(i, l->key(i - 1));
			l->val[i] = l->val[i - 1];
		}
		l->set_key(s, btree_key(*e));
		l->val[s] = e;
		l->n++;
		e->ix_leaf = l;
	}

	// l is full; e goes at slot s. At the tree's end (append) the new leaf
	// takes e alone, so ascending inserts leave full leaves behind.
	void split_leaf(Path &p, BtreeLeaf *l, unsigned s, Entry *e, bool append)
	{
		BtreeLeaf *r = nodes_.leaf();
		const unsigned keep = append ? kBtreeKeys : kBtreeKeys / 2;
		for (unsigned i = keep; i < l->n; i++) {
			r->set_key(i - keep, l->key(i));
			r->val[i - keep] = l->val[i];
			r->val[i - keep]->ix_leaf = r;
		}
		r->n = l->n - keep;
		l->n = keep;
		chain_.link_after(l, r);
		if (s <= keep && !append)
			put(l, s, e);
		else
			put(r, s - keep, e);
		add_child(p, r->key(0), r);
	}

	// After a split below p's last node: key k and its right child r go
	// into the parent, splitting it when full, up to a new root.
	void add_child(Path &p, BtreeKey k, BtreeNode *r)
	{
		while (p.depth) {
			BtreeInner *in = p.node[--p.depth];
			const unsigned c = p.slot[p.depth]; // the split child's slot
			if (in->n < kBtreeKeys) {
				insert_key(in, c, k, r);
				return;
			}
			// Split in: the upper half goes to a new node, the middle key up.
			BtreeKey keys[kBtreeKeys + 1];
			BtreeNode *kids[kBtreeKeys + 2];
			for (unsigned i = 0, j = 0; i <= kBtreeKeys; i++)
				keys[i] = i == c ? k : in->key(j++);
			for (unsigned i = 0, j = 0; i <= kBtreeKeys + 1; i++)
				kids[i] = i == c + 1 ? r : in->child[j++];
			const unsigned half = kBtreeKeys / 2;
			BtreeInner *rin = nodes_.inner();
			in->n = half;
			for (unsigned i = 0; i < half; i++)
				in->set_key(i, keys[i]);
			for (unsigned i = 0; i <= half; i++)
				in->child[i] = kids[i];
			rin->n = kBtreeKeys - half;
			for (unsigned i = 0; i < rin->n; i++)
				rin->set_key(i, keys[half + 1 + i]);
			for (unsigned i = 0; i <= rin->n; i++)
				rin->child[i] = kids[half + 1 + i];
			k = keys[half];
			r = rin;
		}
		BtreeInner *root = nodes_.inner();
		root->n = 1;
		root->set_key(0, k);
		root->child[0] = root_;
		root->child[1] = r;
		root_ = root;
	}
	static void insert_key(BtreeInner *in, unsigned c, const BtreeKey &k, BtreeNode *r)
	{
		for (unsigned i = in->n; i > c; i--) {
			in->set_key(i, in->key(i - 1));
			in->child[i + 1] = in->child[i];
		}
		in->set_key(c, k);
		in->child[c + 1] = r;
		in->n++;
	}
	void collapse_root()
	{
		while (!root_->leaf && root_->n == 0) {
			auto *in = static_cast<BtreeInner *>(root_);
			root_ = in->child[0];
			nodes_.give(in);
		}
	}

	static bool less(const BtreeKey &a, const BtreeKey &b)
	{
		return a.start < b.start || (a.start == b.start && a.serial < b.serial);
	}
	template <typename Fail>
	uint64_t check_node(const BtreeNode *x, const BtreeKey *lo, const BtreeKey *hi, int depth, int &leaf_depth,
			    Fail &fail) const
	{
		if (x->n == 0 && x->leaf)
			fail("an empty leaf");
		if (x->n > kBtreeKeys)
			fail("a node over its size");
		for (unsigned i = 0; i < x->n; i++) {
			if (i && !less(x->key(i - 1), x->key(i)))
				fail("keys out of order in a node");
			if ((lo && less(x->key(i), *lo)) || (hi && !less(x->key(i), *hi)))
				fail("a key outside its node's bounds");
		}
		if (x->leaf) {
			if (leaf_depth < 0)
				leaf_depth = depth;
			else if (leaf_depth != depth)
				fail("leaves at different depths");
			auto *l = static_cast<const BtreeLeaf *>(x);
			for (unsigned i = 0; i < l->n; i++)
				if (l->val[i]->ix_leaf != l || less(btree_key(*l->val[i]), l->key(i)) ||
				    less(l->key(i), btree_key(*l->val[i])))
					fail("an entry whose leaf link or key is wrong");
			return l->n;
		}
		if (depth + 1 >= static_cast<int>(kMaxDepth))
			fail("too deep");
		auto *in = static_cast<const BtreeInner *>(x);
		uint64_t total = 0;
		for (unsigned i = 0; i <= in->n; i++) {
			const BtreeKey *clo = lo;
			BtreeKey kl, kh;
			if (i) {
				kl = in->key(i - 1);
				clo = &kl;
			}
			const BtreeKey *chi = hi;
			if (i < in->n) {
				kh = in->key(i);
				chi = &kh;
			}
			total += check_node(in->child[i], clo, chi, depth + 1, leaf_depth, fail);
		}
		return total;
	}

	BtreeNodes &nodes_;
	BtreeChain &chain_;
	BtreeNode *root_ = nullptr;
};

} // namespace hmemreg::mr
