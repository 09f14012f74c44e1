// SPDX-License-Identifier: MIT
// The cache's containers of entries, intrusive: each entry carries its
// link to the index (ix_leaf) and the links of the one list it is on
// (link_*), so an entry that moves between the index, the LRU and the side
// lists (orphans, dead, unsettled) allocates nothing and frees nothing
// (the index's nodes come from its own store and go back to it).
// With std::map and node handles, every miss paid about nine tree
// operations (two of them node moves with rebalancing) and a node
// allocation; now a miss pays the searches it needs and one insert.
//
// EntryIndex is ordered by IndexKey: one B+tree (entry_btree.hpp) per
// (memory kind, device), keyed by (start, serial), the trees in key order
// in a small table and all their leaves on one chain, so walks cross from
// one tree to the next. It replaced a treap (a binary tree through the
// entries: a search at 1M entries loaded about 28 cold entries to read
// their keys; a B+tree search reads about 5 nodes, the upper ones warm).
// Neither container owns its entries: they belong to the cache's
// EntryPool, and the cache gives every entry it takes out of them back.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "mrcache/entry.hpp"
#include "mrcache/entry_btree.hpp"

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

	bool empty() const { return n_ == 0; }
	uint64_t size() const { return n_; }
	// Bumped by every insert and erase: unchanged, an entry found by an
	// earlier search (under either side of the cache lock) is still here
	// and still where it was.
	uint64_t changes() const { return changes_; }

	Entry *first() const { return chain_.head ? chain_.head->val(0) : nullptr; }
	Entry *last() const { return chain_.tail ? chain_.tail->back() : nullptr; }
	static Entry *next(const Entry *e)
	{
		const BtreeLeaf *l = leaf_of(e);
		const unsigned i = l->slot_of(e);
		if (i + 1 < l->n)
			return l->val(i + 1);
		return l->next ? l->next->val(0) : nullptr;
	}
	static Entry *prev(const Entry *e)
	{
		const BtreeLeaf *l = leaf_of(e);
		const unsigned i = l->slot_of(e);
		if (i)
			return l->val(i - 1);
		return l->prev ? l->prev->back() : nullptr;
	}

	// The last entry whose key is <= k, or null.
	Entry *last_at_or_before(const IndexKey &k) const
	{
		bool exact;
		const size_t d = domain_at(k, exact);
		const BtreeLeaf *l;
		if (exact) {
			l = domains_[d].tree->leaf_for(BtreeKey{k.start, k.serial});
			if (unsigned i = l->upper(BtreeKey{k.start, k.serial}))
				return l->val(i - 1);
		} else if (d == domains_.size()) {
			return last();
		} else {
			l = domains_[d].tree->first_leaf();
		}
		return l->prev ? l->prev->back() : nullptr;
	}
	// The first entry whose key is >= k, or null.
	Entry *first_at_or_after(const IndexKey &k) const
	{
		bool exact;
		const size_t d = domain_at(k, exact);
		if (d == domains_.size())
			return nullptr;
		if (!exact)
			return domains_[d].tree->first_leaf()->val(0);
		const BtreeLeaf *l = domains_[d].tree->leaf_for(BtreeKey{k.start, k.serial});
		const unsigned i = l->lower(BtreeKey{k.start, k.serial});
		if (i < l->n)
			return l->val(i);
		return l->next ? l->next->val(0) : nullptr;
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
		bool exact;
		const size_t d = domain_at(k, exact);
		if (exact) {
			domains_[d].tree->insert(e);
		} else {
			// A new (kind, device): its one leaf goes on the chain after
			// the previous tree's last leaf.
			BtreeLeaf *pos = d ? domains_[d - 1].tree->last_leaf() : nullptr;
			domains_.insert(domains_.begin() + static_cast<ptrdiff_t>(d),
					Domain{k.iface, k.device, std::make_unique<EntryBtree>(nodes_, chain_, pos, e)});
		}
		n_++;
		changes_++;
	}

	// insert(e) where the caller knows e's successor: pos, the first entry
	// whose key is greater than e's (null: none is), found by a search it
	// made anyway (a miss's unlink_nested_locked), so mostly no descent.
	void insert_before(Entry *pos, Entry *e)
	{
		// Null: e is the new last, at the end of the chain's last leaf
		// when that is its tree's (misses at rising addresses).
		const Entry *t = pos ? pos : last();
		if (t && t->iface == e->iface && t->device == e->device &&
		    (pos ? EntryBtree::insert_before(pos, e) : EntryBtree::append(chain_.tail, e))) {
			n_++;
			changes_++;
			return;
		}
		insert(e);
	}

	// e is in this index.
	void erase(Entry *e)
	{
		bool exact;
		const size_t d = domain_at(key_of(*e), exact);
		if (domains_[d].tree->erase(e))
			domains_.erase(domains_.begin() + static_cast<ptrdiff_t>(d));
		n_--;
		changes_++;
	}

	// Forget every entry without touching them (their links are stale).
	void forget_all()
	{
		domains_.clear();
		nodes_.give_all();
		chain_ = BtreeChain{};
		n_ = 0;
		changes_++;
	}

	// The trees' shapes, for tests (fail is called with what is wrong);
	// returns the entries they hold.
	template <typename Fail>
	uint64_t check(Fail &&fail) const
	{
		uint64_t n = 0;
		for (size_t i = 0; i < domains_.size(); i++) {
			if (i && !(std::pair{domains_[i - 1].iface, domains_[i - 1].device} <
				   std::pair{domains_[i].iface, domains_[i].device}))
				fail("trees out of order");
			n += domains_[i].tree->check(fail);
		}
		return n;
	}
	size_t trees() const { return domains_.size(); }

private:
	// One (memory kind, device) and its tree.
	struct Domain {
		uint32_t iface;
		uint64_t device;
		std::unique_ptr<EntryBtree> tree;
	};
	// The first domain at or after k's (kind, device); exact: it is k's.
	size_t domain_at(const IndexKey &k, bool &exact) const
	{
		size_t d = 0;
		while (d < domains_.size() &&
		       (domains_[d].iface < k.iface || (domains_[d].iface == k.iface && domains_[d].device < k.device)))
			d++;
		exact = d < domains_.size() && domains_[d].iface == k.iface && domains_[d].device == k.device;
		return d;
	}

	BtreeNodes nodes_; // before the trees: they give nodes back to it
	BtreeChain chain_;
	std::vector<Domain> domains_; // few: a cache sees one kind and a few devices
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
