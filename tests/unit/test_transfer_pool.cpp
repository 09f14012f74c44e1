// SPDX-License-Identifier: MIT
// The engine's recycled transfers (engine/transfer_pool.hpp) with no
// fabric: a transfer comes back fresh with its vectors' capacity (and its
// shared_ptr's control block inside it), a full
// pool deletes what comes back, an empty one makes new transfers, and a
// transfer may outlive the pool's owner (ASan: no leak, no use after free).
#include <criterion/criterion.h>

#include <memory>
#include <vector>

#include "engine/transfer_pool.hpp"

using namespace hmemreg::engine;

namespace {

// A transfer used as the core uses one: peer, plan, segments, message,
// callback, status, error.
void dirty(TransferImpl &x, const std::shared_ptr<int> &captured)
{
	x.kind = TransferImpl::Kind::Send;
	x.peer = std::make_shared<PeerState>();
	x.segs.resize(4);
	x.plan.iovs.resize(4);
	x.plan.descs.resize(4);
	x.plan.rmas.resize(4);
	x.plan.writes.resize(4);
	x.plan.rail_writes.resize(2);
	x.plan.rail_writes[1] = {0, 1, 2};
	x.plan.bytes = 4096;
	x.cursor.assign(2, 3);
	x.unresolved = 5;
	x.message.assign(100, 0xab);
	x.send_rail = 1;
	x.tag = 77;
	x.total = 4096;
	x.notify = false;
	x.immediate = true;
	x.imm_key = 9;
	x.handshake = true;
	x.via_staging = true;
	x.chunks = 3;
	x.callback = [captured](const Transfer &) {};
	x.reported = true;
	x.fail(5, "failed on purpose");
	x.set_status(-5);
	x.mark_done();
}

} // namespace

Test(transfer_pool, a_transfer_comes_back_fresh_with_its_capacity)
{
	auto pool = TransferPool::create(8);
	auto captured = std::make_shared<int>(1);
	TransferImpl *first;
	const uint8_t *message_storage;
	{
		auto x = pool->take();
		first = x.get();
		dirty(*x, captured);
		message_storage = x->message.data();
		cr_assert_eq(captured.use_count(), 2);
	}
	cr_assert_eq(captured.use_count(), 1, "the callback's captures go with the transfer's last reference");
	cr_assert_eq(pool->stats().free, 1u);
	auto y = pool->take();
	cr_assert_eq(y.get(), first, "the free transfer is reused");
	cr_assert(y->kind == TransferImpl::Kind::Write);
	cr_assert(!y->peer);
	cr_assert(y->segs.empty() && y->plan.iovs.empty() && y->plan.descs.empty() && y->plan.rmas.empty());
	cr_assert(y->plan.writes.empty() && y->cursor.empty() && y->message.empty());
	for (const auto &v : y->plan.rail_writes)
		cr_assert(v.empty());
	cr_assert_eq(y->plan.bytes, 0u);
	cr_assert_eq(y->unresolved.load(), 0u);
	cr_assert(y->send_rail == 0 && y->tag == 0 && y->total == 0 && y->chunks == 0 && y->imm_key == 0);
	cr_assert(y->notify && !y->immediate && !y->handshake && !y->via_staging);
	cr_assert(!y->callback && !y->self && !y->reported.load() && !y->failed.load());
	cr_assert_eq(y->status(), -HMEMREG_EAGAIN);
	cr_assert(!y->done());
	cr_assert_eq(y->first_error(), 0);
	cr_assert(y->error().empty());
	cr_assert(!y->active_linked && !y->active_prev && !y->active_next);
	cr_assert_geq(y->message.capacity(), 100u, "capacity is kept");
	y->message.assign(100, 1);
	cr_assert_eq(y->message.data(), message_storage, "no new allocation for the same size");
	auto s = pool->stats();
	cr_assert_eq(s.taken, 2u);
	cr_assert_eq(s.reused, 1u);
}

Test(transfer_pool, empty_makes_new_and_full_deletes_returns)
{
	auto pool = TransferPool::create(2);
	std::vector<std::shared_ptr<TransferImpl>> xs;
	for (int i = 0; i < 5; i++)
		xs.push_back(pool->take()); // beyond what it keeps: all new, none refused
	for (size_t i = 0; i < xs.size(); i++)
		for (size_t j = 0; j < i; j++)
			cr_assert_neq(xs[i].get(), xs[j].get());
	xs.clear();
	auto s = pool->stats();
	cr_assert_eq(s.free, 2u, "a full pool keeps `keep`");
	cr_assert_eq(s.dropped, 3u, "and deletes the rest");
	for (int i = 0; i < 5; i++)
		xs.push_back(pool->take());
	s = pool->stats();
	cr_assert_eq(s.reused, 2u);
	cr_assert_eq(s.free, 0u);
	cr_assert_eq(s.taken, 10u);
}

Test(transfer_pool, a_transfer_outlives_the_pools_owner)
{
	auto pool = TransferPool::create(4);
	auto x = pool->take();
	std::weak_ptr<TransferPool> w = pool;
	pool.reset(); // the engine went; its transfer did not
	cr_assert(!w.expired(), "the transfer keeps its pool");
	x->message.assign(64, 1);
	x.reset();
	cr_assert(w.expired(), "the last transfer took the pool with it (LeakSanitizer: nothing left)");
}

Test(transfer_pool, a_weak_reference_keeps_the_slot_until_it_goes)
{
	auto pool = TransferPool::create(4);
	std::weak_ptr<TransferImpl> wx;
	TransferImpl *first;
	{
		auto x = pool->take();
		first = x.get();
		x->message.assign(10, 1);
		wx = x;
	}
	cr_assert(wx.expired());
	// The control block lives in the transfer: it stays out of the pool
	// (reset already) while the weak reference needs that block.
	cr_assert_eq(pool->stats().free, 0u);
	cr_assert(first->message.empty(), "reset when its last strong reference went");
	auto other = pool->take();
	cr_assert_neq(other.get(), first, "a slot in use is never handed out");
	wx.reset();
	cr_assert_eq(pool->stats().free, 1u);
	auto y = pool->take();
	cr_assert_eq(y.get(), first);
	cr_assert_eq(pool->stats().reused, 1u);
}

Test(transfer_pool, a_taken_transfer_can_be_waited_on)
{
	auto pool = TransferPool::create(4);
	auto x = pool->take();
	cr_assert(!x->wait_for(std::chrono::milliseconds(1)));
	x->set_status(0);
	x->mark_done();
	cr_assert(x->wait_for(std::chrono::milliseconds(1)));
}

// What stays cached is bounded: a transfer that grew large (a write of
// many chunks, a big message) is not kept, and a burst's transfers go
// once two busy spells (every transfer back in between) passed without one.
Test(transfer_pool, a_large_transfer_is_not_kept)
{
	auto pool = TransferPool::create(8);
	{
		auto x = pool->take();
		x->message.assign(TransferPool::kKeepBytes + 1, 1);
	}
	auto s = pool->stats();
	cr_assert_eq(s.free, 0u, "a transfer holding %zu bytes was kept", TransferPool::kKeepBytes + 1);
	cr_assert_eq(s.oversized, 1u);
	{
		auto x = pool->take();
		x->message.assign(100, 1);
	}
	cr_assert_eq(pool->stats().free, 1u, "a small one is kept");
}

Test(transfer_pool, a_bursts_transfers_go_after_two_quiet_spells)
{
	constexpr size_t kBurst = 3 * TransferPool::kFloor;
	auto pool = TransferPool::create(1024);
	auto spell = [&](size_t n) {
		std::vector<std::shared_ptr<TransferImpl>> xs;
		for (size_t i = 0; i < n; i++)
			xs.push_back(pool->take());
	};
	spell(kBurst);
	cr_assert_eq(pool->stats().free, kBurst, "the burst's transfers are kept");
	spell(1);
	cr_assert_eq(pool->stats().free, kBurst, "and stay through one quiet spell");
	spell(kBurst);
	spell(1);
	cr_assert_eq(pool->stats().free, kBurst, "bursts that come back keep them");
	spell(1);
	auto s = pool->stats();
	cr_assert_eq(s.free, TransferPool::kFloor, "two quiet spells: back to the floor");
	cr_assert_eq(s.trimmed, kBurst - TransferPool::kFloor);
	cr_assert_eq(s.reused, s.taken - kBurst, "only the first burst made transfers");
}
