// SPDX-License-Identifier: MIT
// The engine's core (see core.hpp).
#include "engine/core.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "engine/thread_scratch.hpp"
#include "engine/write_plan.hpp"

namespace hmemreg::engine {

Core::~Core() = default;

void Core::ActiveList::insert(TransferImpl *x)
{
	x->active_prev = nullptr;
	x->active_next = head_;
	if (head_)
		head_->active_prev = x;
	head_ = x;
	x->active_linked = true;
	n_++;
}

void Core::ActiveList::erase(TransferImpl *x)
{
	if (!x->active_linked)
		return;
	if (x->active_prev)
		x->active_prev->active_next = x->active_next;
	else
		head_ = x->active_next;
	if (x->active_next)
		x->active_next->active_prev = x->active_prev;
	x->active_prev = x->active_next = nullptr;
	x->active_linked = false;
	n_--;
}

void Core::kick(uint64_t rails)
{
	if (threads)
		threads->kick(rails);
}

void Core::admit(const std::shared_ptr<TransferImpl> &x, bool internal)
{
	PeerState &p = *x->peer;
	if (p.dead.load(std::memory_order_acquire) && !internal)
		throw Error(HMEMREG_EFABRIC, p.dead_reason);
	std::lock_guard l(active_mu);
	if (active.size() >= cfg.max_transfers && !internal)
		throw Error(HMEMREG_EAGAIN, "engine: " + std::to_string(active.size()) +
						    " transfers active (max_transfers); progress and retry");
	active.insert(x.get());
	x->self = x;
	if (!x->handshake && (p.active.fetch_add(1) == 0 || p.inflight.load() == 0))
		p.last_progress.store(PeerState::now_ns(), std::memory_order_relaxed);
}

bool Core::take_back(const std::shared_ptr<TransferImpl> &x) noexcept
{
	x->fail(HMEMREG_ENOMEM, "out of memory"); // (short: no allocation)
	// An Announce that may have been queued resolves nothing (and finishes nothing).
	x->unresolved.store(0, std::memory_order_relaxed);
	const bool untold = !x->reported.exchange(true);
	if (untold) {
		x->callback = nullptr;
		if (!x->handshake)
			x->peer->active--;
		x->set_status(-HMEMREG_ENOMEM);
		x->mark_done();
	}
	{
		std::lock_guard l(active_mu);
		active.erase(x.get());
	}
	x->self.reset();
	return untold;
}

void Core::report(TransferImpl &x)
{
	if (x.reported.exchange(true))
		return;
	int code = x.first_error();
	x.set_status(code ? -code : 0);
	if (x.callback)
		x.callback(x);
	x.callback = nullptr;
	if (!x.handshake)
		x.peer->active--;
	x.mark_done();
}

void Core::finish(const std::shared_ptr<TransferImpl> &x)
{
	report(*x);
	{
		std::lock_guard l(active_mu);
		active.erase(x.get());
	}
	x->regions.clear();
	x->self.reset();
}

// Their queued operations fail on the rails' next turn; their transfers
// are reported failed now even if operations stay posted (a dead shm peer
// never completes them; those are released when the endpoint closes).
void Core::fail_dead(std::span<const std::shared_ptr<PeerState>> dead)
{
	if (dead.empty())
		return;
	doom_epoch++;
	std::vector<std::shared_ptr<TransferImpl>> victims;
	{
		std::lock_guard l(active_mu);
		active.for_each([&](TransferImpl *x) {
			if (x->peer->dead.load() && !x->reported.load())
				victims.push_back(x->self);
		});
	}
	for (auto &x : victims) {
		x->fail(HMEMREG_EFABRIC, x->peer->dead_reason);
		report(*x);
	}
}

std::shared_ptr<TransferImpl> Core::make_send(const std::shared_ptr<PeerState> &peer, wire::MsgType type,
					      std::span<const uint8_t> data, unsigned rail, TransferCallback cb,
					      std::span<const uint8_t> body, bool borrow_body)
{
	auto x = pool->take();
	x->kind = TransferImpl::Kind::Send;
	x->peer = peer;
	x->send_rail = rail;
	x->total = data.size() + body.size();
	x->callback = std::move(cb);
	wire::MsgHeader h = wire::header(type, id);
	h.length = static_cast<uint32_t>(x->total);
	x->message.resize(sizeof(h) + data.size() + (borrow_body ? 0 : body.size()));
	std::memcpy(x->message.data(), &h, sizeof(h));
	if (!data.empty())
		std::memcpy(x->message.data() + sizeof(h), data.data(), data.size());
	if (borrow_body)
		x->borrowed = body;
	else if (!body.empty())
		std::memcpy(x->message.data() + sizeof(h) + data.size(), body.data(), body.size());
	return x;
}

std::shared_ptr<TransferImpl> Core::send(const std::shared_ptr<PeerState> &peer, wire::MsgType type,
					 std::span<const uint8_t> data, unsigned rail, TransferCallback cb, bool internal,
					 bool handshake)
{
	auto x = make_send(peer, type, data, rail, std::move(cb));
	x->handshake = handshake;
	admit(x, internal);
	try {
		rails[rail]->enqueue_send(x); // one push: queued or not
	} catch (const std::bad_alloc &) {
		if (take_back(x))
			throw;
	}
	kick(rail_bit(rail));
	return x;
}

void Core::send_message(const std::shared_ptr<TransferImpl> &x)
{
	rails[x->send_rail]->enqueue_send(x);
	kick(rail_bit(x->send_rail));
}

unsigned Core::message_rail()
{
	return cfg.sends_on_first_rail ? 0 : next_rail.fetch_add(1) % rails.size();
}

std::shared_ptr<TransferImpl> Core::plan(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
					 const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done,
					 bool internal)
{
	auto x = pool->take();
	x->start_write(p, tag, chunks.size(), std::move(done));
	x->notify = !internal;
	// Per thread, reused: planning allocates nothing once warm.
	std::vector<PlanChunk> own;
	std::vector<PlanChunk> *pp = thread_scratch<std::vector<PlanChunk>>();
	std::vector<PlanChunk> &pcs = pp ? *pp : own;
	pcs.clear();
	size_t total = 0;
	for (const Chunk &c : chunks) {
		auto *r = static_cast<const RegionImpl *>(c.local);
		// Hold a reference to every distinct region for the transfer's lifetime.
		if (std::none_of(x->regions.begin(), x->regions.end(), [&](const RegionRef &h) { return h.get() == r; }))
			x->regions.push_back(std::const_pointer_cast<RegionImpl>(r->shared_from_this()));
		pcs.push_back({r->io_addr() + c.local_offset, r->reg.get(), c.len, c.remote_offset});
		total += c.len;
	}
	// Small writes on rail 0 with sends_on_first_rail, where the target's
	// caller looks first; others start on the next rail in turn.
	const unsigned first = cfg.sends_on_first_rail && total <= cfg.first_rail_write_max
				       ? 0
				       : next_rail.fetch_add(1) % static_cast<unsigned>(rails.size());
	WritePlan &wp = x->plan;
	plan_write(pcs, d, {rails.size(), caps.max_write, caps.write_iov}, first, wp);
	x->total = wp.bytes;
	x->segs.assign(wp.writes.size(), Segment{});
	for (size_t i = 0; i < wp.writes.size(); i++) {
		x->segs[i].xfer = x.get();
		x->segs[i].first = wp.writes[i].first;
		x->segs[i].count = wp.writes[i].count;
	}
	x->cursor.assign(rails.size(), 0);
	x->unresolved = static_cast<uint32_t>(x->segs.size());
	return x;
}

void Core::submit(const std::shared_ptr<TransferImpl> &x, bool internal)
{
	admit(x, internal);
	// The Announce with the writes of its rail: one hand-over (lock).
	// That rail first: an enqueue that throws (out of memory) queued
	// nothing of its writes, though maybe the Announce with them; the
	// rails after it nothing at all.
	const unsigned n = static_cast<unsigned>(rails.size()), first = x->send_rail;
	const bool announce_alone = x->immediate && x->plan.rail_writes[first].empty();
	unsigned handed = 0; // rails first, first + 1, ... given their writes
	try {
		if (announce_alone)
			rails[first]->enqueue_send(x);
		for (; handed < n; handed++) {
			const unsigned r = (first + handed) % n;
			if (!x->plan.rail_writes[r].empty())
				rails[r]->enqueue_writes(x, x->immediate && !announce_alone && r == first);
		}
	} catch (const std::bad_alloc &) {
		if (handed == 0) { // no rail holds a write of x
			if (take_back(x))
				throw;
			return;
		}
		// Rails hold parts of x: they fail them and finish x (its callback
		// says ENOMEM); the segments never queued resolve here.
		x->fail(HMEMREG_ENOMEM, "out of memory");
		uint32_t left = 0;
		for (unsigned k = handed; k < n; k++)
			left += static_cast<uint32_t>(x->plan.rail_writes[(first + k) % n].size());
		if (x->unresolved.fetch_sub(left) == left && take_back(x))
			throw; // those rails were done with x already
	}
	uint64_t busy = rail_bit(first);
	for (unsigned r = 0; r < n; r++)
		if (!x->plan.rail_writes[r].empty())
			busy |= rail_bit(r);
	kick(busy);
}

size_t Core::progress_rail(unsigned r, Events &ev)
{
	if (!rails[r]->progress(ev))
		return 0; // another thread's turn is on it: not a quiet turn
	const size_t got = ev.handled + ev.messages.size() + ev.finished.size();
	if (got)
		rail_quiet_[r].store(0, std::memory_order_relaxed);
	else if (rail_quiet_[r].load(std::memory_order_relaxed) < UINT32_MAX)
		rail_quiet_[r].fetch_add(1, std::memory_order_relaxed);
	return got;
}

// With sends_on_first_rail a caller polls rail 0 on every turn, other rails
// fully only while they carry traffic: a thread leaves its rails to the
// caller unless one of them (other than 0) does, so bulk transfers striped
// over the rails keep a poller per rail.
bool Core::caller_covers(std::span<const unsigned> ids) const
{
	if (!cfg.sends_on_first_rail)
		return true;
	for (unsigned r : ids)
		if (r != 0 && (rails[r]->busy() || rail_quiet_[r].load(std::memory_order_relaxed) < kActiveTurns))
			return false;
	return true;
}

// A caller's turn. With sends_on_first_rail: rail 0 (control messages),
// rails with work of ours, rails where something arrived within the last
// kActiveTurns turns, and the others one turn in kSparseTurn.
std::span<const unsigned> Core::caller_rails(unsigned *ids, uint32_t also)
{
	constexpr uint32_t kSparseTurn = 16;
	if (!cfg.sends_on_first_rail || rails.size() == 1 || rails.size() > kMaxCallerRails)
		return all_rails;
	const uint32_t t = caller_turns_.fetch_add(1, std::memory_order_relaxed);
	size_t n = 0;
	for (unsigned r = 0; r < rails.size(); r++)
		if (r == 0 || t % kSparseTurn == 0 || (also >> std::min(r, 31u)) & 1 || rails[r]->busy() ||
		    rail_quiet_[r].load(std::memory_order_relaxed) < kActiveTurns)
			ids[n++] = r;
	return {ids, n};
}

} // namespace hmemreg::engine
