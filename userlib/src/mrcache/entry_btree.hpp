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
// A node's starts fill its first two lines and its pointers the next
// three; the serials (read only where starts are equal) and the count
// come after, and whether a node is a leaf is the tree's height, so a
// step down reads the starts and one pointer.
// Leaves and inner nodes are freed when they empty, never merged (a
// miss's eviction erases in a leaf without touching any other node);
// an inner node left with one child stays, the root is then collapsed.
// Nodes come from and go back to a BtreeNodes store owned by the index,
// so a steady state of misses allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "mrcache/entry.hpp"

namespace hmemreg::mr {

// A key within one tree.
struct BtreeKey {
	uintptr_t start;
	uint64_t serial;
};

inline constexpr unsigned kBtreeKeys = 16; // keys per node: starts fill two lines
inline constexpr uintptr_t kNoStart = ~uintptr_t{0}; // an unused slot's start

// Keys whose start is below s, of a node's starts: slots past its count
// hold kNoStart, never below, so all are read (unrolled: independent
// compares summed, no branch, no loop).
inline unsigned count_below(const uintptr_t (&start)[kBtreeKeys], uintptr_t s)
{
	return [&]<size_t... I>(std::index_sequence<I...>) {
		return (0u + ... + static_cast<unsigned>(start[I] < s));
	}(std::make_index_sequence<kBtreeKeys>{});
}

struct BtreeInner;

// Where every node begins: its starts (two lines), then its parent.
struct alignas(64) BtreeNodeBase {
	uintptr_t start[kBtreeKeys];
	BtreeInner *parent = nullptr; // null at the root
};

// What leaves and inner nodes share: n sorted keys, split in starts
// (first) and serials (after the pointers), and the searches on them.
template <typename Ptr, unsigned kPtrs>
struct BtreeNodeOf : BtreeNodeBase {
	Ptr ptr[kPtrs]; // leaf: entries; inner: children
	uint64_t serial[kBtreeKeys];
	uint32_t n = 0;

	BtreeNodeOf()
	{
		for (unsigned i = 0; i < kBtreeKeys; i++) {
			start[i] = kNoStart;
			serial[i] = 0;
		}
		for (unsigned i = 0; i < kPtrs; i++)
			ptr[i] = nullptr;
	}
	// Keys <= k.
	unsigned upper(const BtreeKey &k) const
	{
		unsigned c = count_below(start, k.start);
		while (c < n && start[c] == k.start && serial[c] <= k.serial)
			c++;
		return c;
	}
	// Keys < k.
	unsigned lower(const BtreeKey &k) const
	{
		unsigned c = count_below(start, k.start);
		while (c < n && start[c] == k.start && serial[c] < k.serial)
			c++;
		return c;
	}
	BtreeKey key(unsigned i) const { return BtreeKey{start[i], serial[i]}; }
	void set(unsigned i, const BtreeKey &k, Ptr p)
	{
		start[i] = k.start;
		serial[i] = k.serial;
		ptr[i] = p;
	}
	void clear(unsigned i)
	{
		start[i] = kNoStart;
		ptr[i] = nullptr;
	}
};

struct BtreeLeaf : BtreeNodeOf<Entry *, kBtreeKeys> {
	BtreeLeaf *prev = nullptr, *next = nullptr; // the index's chain of leaves

	Entry *val(unsigned i) const { return ptr[i]; }
	Entry *back() const { return ptr[n - 1]; }
	unsigned slot_of(const Entry *e) const
	{
		unsigned i = count_below(start, e->range.start); // then past equal starts
		while (ptr[i] != e)
			i++;
		return i;
	}
};

// n keys, n + 1 children (ptr); keys under child i are >= key(i - 1) and
// < key(i). A child is a leaf at the tree's last level, else an inner node.
struct BtreeInner : BtreeNodeOf<BtreeNodeBase *, kBtreeKeys + 1> {
	BtreeNodeBase *child(unsigned i) const { return ptr[i]; }
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
		if (free.empty()) {
			all.push_back(std::make_unique<N>());
			return all.back().get();
		}
		N *x = free.back();
		free.pop_back();
		*x = N{};
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
		const BtreeNodeBase *x = root_;
		for (unsigned h = height_; h; h--)
			x = static_cast<const BtreeInner *>(x)->child(0);
		return const_cast<BtreeLeaf *>(static_cast<const BtreeLeaf *>(x));
	}
	BtreeLeaf *last_leaf() const
	{
		const BtreeNodeBase *x = root_;
		for (unsigned h = height_; h; h--) {
			auto *in = const_cast<BtreeInner *>(static_cast<const BtreeInner *>(x));
			x = in->child(in->n);
		}
		return const_cast<BtreeLeaf *>(static_cast<const BtreeLeaf *>(x));
	}
	// The leaf where k is or would be.
	BtreeLeaf *leaf_for(const BtreeKey &k) const
	{
		const BtreeNodeBase *x = root_;
		for (unsigned h = height_; h; h--) {
			auto *in = const_cast<BtreeInner *>(static_cast<const BtreeInner *>(x));
			x = in->child(in->upper(k));
		}
		return const_cast<BtreeLeaf *>(static_cast<const BtreeLeaf *>(x));
	}

	// e is in no index; its key fields are set and stay while it is here.
	void insert(Entry *e)
	{
		const BtreeKey k = btree_key(*e);
		Path p;
		const BtreeNodeBase *x = root_;
		bool rightmost = true; // the last leaf: keys rise there (ascending misses)
		for (unsigned h = height_; h; h--) {
			auto *in = const_cast<BtreeInner *>(static_cast<const BtreeInner *>(x));
			const unsigned i = in->upper(k);
			rightmost = rightmost && i == in->n;
			p.node[p.depth] = in;
			p.slot[p.depth++] = i;
			x = in->child(i);
		}
		auto *l = const_cast<BtreeLeaf *>(static_cast<const BtreeLeaf *>(x));
		const unsigned s = l->upper(k);
		if (l->n < kBtreeKeys)
			put(l, s, e);
		else
			split_leaf(p, l, s, e, rightmost && s == l->n);
	}

	// insert(e) where e goes just before pos, an entry of this tree found
	// by the caller's own search; false (nothing done) where that needs a
	// split (then insert(e)).
	static bool insert_before(Entry *pos, Entry *e)
	{
		BtreeLeaf *l = leaf_of(pos);
		unsigned s = l->slot_of(pos);
		if (s == 0 && goes_before(l, btree_key(*e))) {
			l = l->prev; // e follows its last key
			s = l->n;
		}
		if (l->n == kBtreeKeys)
			return false;
		put(l, s, e);
		return true;
	}
	// insert(e) where e's key is above every key of this tree and l, the
	// tree's last leaf, has room; false (nothing done) where it is full.
	static bool append(BtreeLeaf *l, Entry *e)
	{
		if (l->n == kBtreeKeys)
			return false;
		put(l, l->n, e);
		return true;
	}

	// e is in this tree. True when the tree is left empty (and freed).
	bool erase(Entry *e)
	{
		BtreeLeaf *l = leaf_of(e);
		const unsigned s = l->slot_of(e);
		const BtreeKey k = btree_key(*e);
		for (unsigned i = s; i + 1 < l->n; i++)
			l->set(i, l->key(i + 1), l->ptr[i + 1]);
		l->clear(--l->n);
		e->ix_leaf = nullptr;
		if (l->n)
			return false;
		// The leaf emptied: take it out of its parent (found by e's key,
		// which still leads here), and every ancestor it empties.
		chain_.unlink(l);
		Path p;
		const BtreeNodeBase *x = root_;
		for (unsigned h = height_; h; h--) {
			auto *in = const_cast<BtreeInner *>(static_cast<const BtreeInner *>(x));
			p.node[p.depth] = in;
			p.slot[p.depth++] = in->upper(k);
			x = in->child(in->upper(k));
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
			for (unsigned i = kd; i + 1 < in->n; i++) {
				in->start[i] = in->start[i + 1];
				in->serial[i] = in->serial[i + 1];
			}
			for (unsigned i = c; i < in->n; i++)
				in->ptr[i] = in->ptr[i + 1];
			in->n--;
			in->start[in->n] = kNoStart;
			in->ptr[in->n + 1] = nullptr;
			collapse_root();
			return false;
		}
		root_ = nullptr;
		height_ = 0;
		return true;
	}

	// Shape checks for tests: leaves at one depth, keys in order inside
	// their bounds, unused slots clear, every entry's leaf link right.
	// Returns the entries.
	template <typename Fail>
	uint64_t check(Fail &&fail) const
	{
		return check_node(root_, nullptr, nullptr, 0, fail);
	}
	unsigned height() const { return height_; }

private:
	static constexpr unsigned kMaxDepth = 24; // 9^23 leaves: more than memory holds
	struct Path {
		BtreeInner *node[kMaxDepth];
		unsigned slot[kMaxDepth];
		unsigned depth = 0;
	};

	// Does k, below every key of l and above every key before l, belong to
	// the leaf before l? The key between the two leaves tells: the key left
	// of l's subtree in the lowest ancestor where l is not under the first
	// child (none: l is the tree's first leaf, k belongs to l).
	static bool goes_before(const BtreeLeaf *l, const BtreeKey &k)
	{
		const BtreeKey first = l->key(0);
		for (const BtreeInner *p = l->parent; p; p = p->parent)
			if (const unsigned j = p->upper(first))
				return less(k, p->key(j - 1));
		return false;
	}

	// e into l at slot s (l has room).
	static void put(BtreeLeaf *l, unsigned s, Entry *e)
	{
		for (unsigned i = l->n; i > s; i--)
			l->set(i, l->key(i - 1), l->ptr[i - 1]);
		l->set(s, btree_key(*e), e);
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
			r->set(i - keep, l->key(i), l->ptr[i]);
			l->ptr[i]->ix_leaf = r;
			l->clear(i);
		}
		r->n = l->n - keep;
		l->n = keep;
		chain_.link_after(l, r);
		if (s <= keep && !append)
			put(l, s, e);
		else
			put(r, s - keep, e);
		r->parent = l->parent;
		add_child(p, r->key(0), r, append);
	}

	// After a split below p's last node: key k and its right child r go
	// into the parent, splitting it when full (at the tree's end r alone
	// goes right), up to a new root.
	void add_child(Path &p, BtreeKey k, BtreeNodeBase *r, bool append)
	{
		while (p.depth) {
			BtreeInner *in = p.node[--p.depth];
			const unsigned c = p.slot[p.depth]; // the split child's slot
			if (in->n < kBtreeKeys) {
				insert_key(in, c, k, r);
				return;
			}
			BtreeKey keys[kBtreeKeys + 1];
			BtreeNodeBase *kids[kBtreeKeys + 2];
			for (unsigned i = 0, j = 0; i <= kBtreeKeys; i++)
				keys[i] = i == c ? k : in->key(j++);
			for (unsigned i = 0, j = 0; i <= kBtreeKeys + 1; i++)
				kids[i] = i == c + 1 ? r : in->ptr[j++];
			// Left keeps keys [0, half) and their children, key half goes up.
			const unsigned half = append ? kBtreeKeys : kBtreeKeys / 2;
			BtreeInner *rin = nodes_.inner();
			BtreeInner *up = in->parent;
			*in = BtreeInner{};
			in->parent = rin->parent = up;
			in->n = half;
			for (unsigned i = 0; i < half; i++) {
				in->start[i] = keys[i].start;
				in->serial[i] = keys[i].serial;
			}
			for (unsigned i = 0; i <= half; i++) {
				in->ptr[i] = kids[i];
				kids[i]->parent = in;
			}
			rin->n = kBtreeKeys - half;
			for (unsigned i = 0; i < rin->n; i++) {
				rin->start[i] = keys[half + 1 + i].start;
				rin->serial[i] = keys[half + 1 + i].serial;
			}
			for (unsigned i = 0; i <= rin->n; i++) {
				rin->ptr[i] = kids[half + 1 + i];
				kids[half + 1 + i]->parent = rin;
			}
			k = keys[half];
			r = rin;
		}
		BtreeInner *root = nodes_.inner();
		root->n = 1;
		root->start[0] = k.start;
		root->serial[0] = k.serial;
		root->ptr[0] = root_;
		root->ptr[1] = r;
		root_->parent = r->parent = root;
		root_ = root;
		height_++;
	}
	static void insert_key(BtreeInner *in, unsigned c, const BtreeKey &k, BtreeNodeBase *r)
	{
		for (unsigned i = in->n; i > c; i--) {
			in->start[i] = in->start[i - 1];
			in->serial[i] = in->serial[i - 1];
			in->ptr[i + 1] = in->ptr[i];
		}
		in->start[c] = k.start;
		in->serial[c] = k.serial;
		in->ptr[c + 1] = r;
		r->parent = in;
		in->n++;
	}
	void collapse_root()
	{
		while (height_ && static_cast<BtreeInner *>(root_)->n == 0) {
			auto *in = static_cast<BtreeInner *>(root_);
			root_ = in->child(0);
			root_->parent = nullptr;
			height_--;
			nodes_.give(in);
		}
	}

	static bool less(const BtreeKey &a, const BtreeKey &b)
	{
		return a.start < b.start || (a.start == b.start && a.serial < b.serial);
	}
	template <typename N, typename Fail>
	static void check_keys(const N *x, const BtreeKey *lo, const BtreeKey *hi, unsigned cap, Fail &fail)
	{
		if (x->n > cap)
			fail("a node over its size");
		for (unsigned i = x->n; i < kBtreeKeys; i++)
			if (x->start[i] != kNoStart)
				fail("an unused slot that a search would count");
		for (unsigned i = 0; i < x->n; i++) {
			if (i && !less(x->key(i - 1), x->key(i)))
				fail("keys out of order in a node");
			if ((lo && less(x->key(i), *lo)) || (hi && !less(x->key(i), *hi)))
				fail("a key outside its node's bounds");
		}
	}
	template <typename Fail>
	uint64_t check_node(const BtreeNodeBase *x, const BtreeKey *lo, const BtreeKey *hi, unsigned depth,
			    Fail &fail) const
	{
		if (depth == 0 && x->parent)
			fail("a root with a parent");
		if (depth == height_) {
			auto *l = static_cast<const BtreeLeaf *>(x);
			if (l->n == 0)
				fail("an empty leaf");
			check_keys(l, lo, hi, kBtreeKeys, fail);
			for (unsigned i = 0; i < l->n; i++)
				if (l->val(i)->ix_leaf != l || less(btree_key(*l->val(i)), l->key(i)) ||
				    less(l->key(i), btree_key(*l->val(i))))
					fail("an entry whose leaf link or key is wrong");
			return l->n;
		}
		if (depth + 1 >= kMaxDepth)
			fail("too deep");
		auto *in = static_cast<const BtreeInner *>(x);
		check_keys(in, lo, hi, kBtreeKeys, fail);
		if (depth == 0 && height_ && in->n == 0)
			fail("an inner root of one child");
		uint64_t total = 0;
		for (unsigned i = 0; i <= in->n; i++) {
			BtreeKey kl, kh;
			const BtreeKey *clo = lo, *chi = hi;
			if (i) {
				kl = in->key(i - 1);
				clo = &kl;
			}
			if (i < in->n) {
				kh = in->key(i);
				chi = &kh;
			}
			if (!in->child(i))
				fail("a missing child");
			else if (in->child(i)->parent != in)
				fail("a child whose parent link is wrong");
			else
				total += check_node(in->child(i), clo, chi, depth + 1, fail);
		}
		return total;
	}

	BtreeNodes &nodes_;
	BtreeChain &chain_;
	BtreeNodeBase *root_ = nullptr; // a leaf where height_ is 0
	unsigned height_ = 0;  // inner levels above the leaves
};

} // namespace hmemreg::mr
