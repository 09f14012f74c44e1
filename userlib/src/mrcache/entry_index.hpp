// SPDX-License-Identifier: MIT
// The cache's containers of entries, intrusive: each entry carries the
// links of the index (ix_*) and of the one list it is on (link_*), so an
// entry that moves between the index, the LRU and the side lists (orphans,
// dead, unsettled) allocates nothing, frees nothing and searches nothing.
// With std::map and node handles, every miss paid about nine tree
// operations (two of them node moves with rebalancing) and a node
// allocation; now a miss pays the searches it needs and one insert.
//
// EntryIndex is a treap ordered by IndexKey: a binary search tree whose
// shape is that of a heap on a pseudo-random priority derived from the
// entry's serial (expected depth about 1.4 log2 n, no balance state to
// keep). Neither container owns its entries: they belong to the cache's
// EntryPool, and the cache gives every entry it takes out of them back.
#pragma once

#include <compare>
#include <cstdint>
#include <utility>

#include "mrcache/entry.hpp"

namespace hmemreg::mr {

// Index order: (memory kind, device, start), then the serial so that a
// replaced entry and its replacement never collide.
struct IndexKey {
	uint32_t iface;
	uint64_t device;
	uintptr_t start;
	uint64_t serial;
	auto operator<=>(const IndexKey &) const = default;
};

inline IndexKey key_of(const Entry &e)
{
	return IndexKey{static_cast<uint32_t>(e.iface), e.device, e.range.start, e.serial};
}

class EntryIndex {
public:
	EntryIndex() = default;
	EntryIndex(const EntryIndex &) = delete;
	EntryIndex &operator=(const EntryIndex &) = delete;

	bool empty() const { return root_ == nullptr; }
	uint64_t size() const { return n_; }
	// Bumped by every insert and erase: unchanged, an entry found by an
	// earlier search (under either side of the cache lock) is still here
	// and still where it was.
	uint64_t changes() const { return changes_; }

	Entry *first() const { return root_ ? leftmost(root_) : nullptr; }
	Entry *last() const { return last_; }
	static Entry *next(const Entry *e)
	{
		if (e->ix_right)
			return leftmost(e->ix_right);
		while (e->ix_parent && e == e->ix_parent->ix_right)
			e = e->ix_parent;
		return e->ix_parent;
	}
	static Entry *prev(const Entry *e)
	{
		if (e->ix_left)
			return rightmost(e->ix_left);
		while (e->ix_parent && e == e->ix_parent->ix_left)
			e = e->ix_parent;
		return e->ix_parent;
	}

	// The last entry whose key is <= k, or null.
	Entry *last_at_or_before(const IndexKey &k) const
	{
		Entry *best = nullptr;
		for (Entry *c = root_; c;) {
			if (key_of(*c) <= k) {
				best = c;
				c = c->ix_right;
			} else {
				c = c->ix_left;
			}
		}
		return best;
	}
	// The first entry whose key is >= k, or null.
	Entry *first_at_or_after(const IndexKey &k) const
	{
		Entry *best = nullptr;
		for (Entry *c = root_; c;) {
			if (key_of(*c) >= k) {
				best = c;
				c = c->ix_left;
			} else {
				c = c->ix_right;
			}
		}
		return best;
	}
	// The entry with exactly this key, or null.
	Entry *find(const IndexKey &k) const
	{
		Entry *c = first_at_or_after(k);
		return c && key_of(*c) == k ? c : nullptr;
	}

	// e is in no index; its key fields are set and stay while it is here.
	void insert(Entry *e)
	{
		const IndexKey k = key_of(*e);
		Entry *parent = nullptr;
		bool left = false;
		for (Entry *c = root_; c;) {
			parent = c;
			left = k < key_of(*c);
			c = left ? c->ix_left : c->ix_right;
		}
		if (!last_ || key_of(*last_) < k)
			last_ = e;
		link_leaf(e, parent, left);
	}

	// insert(e) where the caller knows e's successor: pos, the first entry
	// whose key is greater than e's (null: none is), found by a search it
	// made anyway (a miss's unlink_nested_locked), so no second descent.
	void insert_before(Entry *pos, Entry *e)
	{
		Entry *parent;
		bool left;
		if (!pos) {
			parent = last_; // e is the new last
			left = false;
			last_ = e;
		} else if (!pos->ix_left) {
			parent = pos;
			left = true;
		} else {
			parent = rightmost(pos->ix_left); // e's predecessor: e becomes its right child
			left = false;
		}
		link_leaf(e, parent, left);
	}

	// e is in this index.
	void erase(Entry *e)
	{
		if (e == last_)
			last_ = prev(e);
		// Rotate it down until it has one child at most, then splice it out.
		while (e->ix_left && e->ix_right)
			rotate_up(priority(e->ix_left) > priority(e->ix_right) ? e->ix_left : e->ix_right);
		Entry *child = e->ix_left ? e->ix_left : e->ix_right;
		Entry *p = e->ix_parent;
		if (child)
			child->ix_parent = p;
		if (!p)
			root_ = child;
		else
			(p->ix_left == e ? p->ix_left : p->ix_right) = child;
		e->ix_parent = e->ix_left = e->ix_right = nullptr;
		n_--;
		changes_++;
	}

	// Forget every entry without touching them (their links are stale).
	void forget_all()
	{
		root_ = last_ = nullptr;
		n_ = 0;
		changes_++;
	}

private:
	static Entry *leftmost(Entry *e)
	{
		while (e->ix_left)
			e = e->ix_left;
		return e;
	}
	static Entry *rightmost(Entry *e)
	{
		while (e->ix_right)
			e = e->ix_right;
		return e;
	}
	// A fixed pseudo-random function of the serial (unique per cache).
	static uint64_t priority(const Entry *e)
	{
		uint64_t x = e->serial + 0x9e3779b97f4a7c15ULL;
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
		return x ^ (x >> 31);
	}
	// x takes its parent's place; the parent becomes x's child.
	// e becomes parent's left or right leaf (the root when parent is null),
	// then rises to its place in the heap order.
	void link_leaf(Entry *e, Entry *parent, bool left)
	{
		e->ix_parent = parent;
		e->ix_left = e->ix_right = nullptr;
		if (!parent)
			root_ = e;
		else
			(left ? parent->ix_left : parent->ix_right) = e;
		const uint64_t pe = priority(e);
		while (e->ix_parent && pe > priority(e->ix_parent))
			rotate_up(e);
		n_++;
		changes_++;
	}
	void rotate_up(Entry *x)
	{
		Entry *p = x->ix_parent, *g = p->ix_parent;
		if (p->ix_left == x) {
			p->ix_left = x->ix_right;
			if (x->ix_right)
				x->ix_right->ix_parent = p;
			x->ix_right = p;
		} else {
			p->ix_right = x->ix_left;
			if (x->ix_left)
				x->ix_left->ix_parent = p;
			x->ix_left = p;
		}
		p->ix_parent = x;
		x->ix_parent = g;
		if (!g)
			root_ = x;
		else
			(g->ix_left == p ? g->ix_left : g->ix_right) = x;
	}

	Entry *root_ = nullptr;
	Entry *last_ = nullptr; // the greatest key (misses at rising addresses insert after it)
	uint64_t n_ = 0;
	uint64_t changes_ = 0;
};

// A doubly linked list of entries through their link_* fields: the LRU
// while an entry is indexed, else the side list it waits on.
class EntryList {
public:
	EntryList() = default;
	EntryList(const EntryList &) = delete;
	EntryList &operator=(const EntryList &) = delete;

	bool empty() const { return head_ == nullptr; }
	uint64_t size() const { return n_; }
	Entry *front() const { return head_; }
	Entry *back() const { return tail_; }
	static Entry *next(const Entry *e) { return e->link_next; }
	static Entry *prev(const Entry *e) { return e->link_prev; }

	// Insert e after pos (null: at the front).
	void insert_after(Entry *pos, Entry *e)
	{
		e->link_prev = pos;
		e->link_next = pos ? pos->link_next : head_;
		(e->link_next ? e->link_next->link_prev : tail_) = e;
		(pos ? pos->link_next : head_) = e;
		n_++;
	}
	void push_back(Entry *e) { insert_after(tail_, e); }
	void remove(Entry *e)
	{
		(e->link_prev ? e->link_prev->link_next : head_) = e->link_next;
		(e->link_next ? e->link_next->link_prev : tail_) = e->link_prev;
		e->link_prev = e->link_next = nullptr;
		n_--;
	}
	Entry *pop_front()
	{
		Entry *e = head_;
		if (e)
			remove(e);
		return e;
	}
	// Move every entry of o to the end of this list.
	void splice_back(EntryList &o)
	{
		if (o.empty())
			return;
		if (tail_) {
			tail_->link_next = o.head_;
			o.head_->link_prev = tail_;
		} else {
			head_ = o.head_;
		}
		tail_ = o.tail_;
		n_ += o.n_;
		o.forget_all();
	}
	void swap(EntryList &o) noexcept
	{
		std::swap(head_, o.head_);
		std::swap(tail_, o.tail_);
		std::swap(n_, o.n_);
	}
	// Forget every entry without touching them (their links are stale).
	void forget_all()
	{
		head_ = tail_ = nullptr;
		n_ = 0;
	}

private:
	Entry *head_ = nullptr, *tail_ = nullptr;
	uint64_t n_ = 0;
};

} // namespace hmemreg::mr
