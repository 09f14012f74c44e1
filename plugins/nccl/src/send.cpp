// SPDX-License-Identifier: MIT
// The send path: isend into an advertised buffer (a write), an eager slot,
// or inline in a control message; the engine's completion settles it.
#include "plugin.hpp"

#include <cstdio>

#include "log.hpp"

namespace hmemreg::nccl {

void Plugin::settle_send_locked(Request &r, int status, const char *why)
{
	if (r.state != Request::State::Pending)
		return;
	if (status == 0) {
		r.state = Request::State::Done;
		r.bytes = r.size;
		bytes_sent_ += r.size;
	} else {
		r.state = Request::State::Failed;
		r.error = ncclRemoteError;
		r.why = why && *why ? why : "transfer failed";
	}
}

void Plugin::send_done(void *arg, int status)
{
	auto *raw = static_cast<Request *>(arg);
	Plugin &p = *raw->plugin;
	if (p.timeline_)
		p.timeline_->mark(HMEMREG_STEP_SEND_CALLBACK, p.engine_id_, raw->comm_id, raw->seq, raw->size);
	// Why it failed: the engine's per-thread message, read before anything
	// else can overwrite it.
	const std::string why = status < 0 ? hmemreg_engine_last_error() : "";
	std::lock_guard l(p.mu_);
	std::shared_ptr<Request> r = std::move(raw->engine_hold); // the last reference, if NCCL is done with it
	p.settle_send_locked(*r, status, why.c_str());
}

// The send comm `id` if it is talking to engine `sender`, else null (closed,
// or a message from someone else).
SendComm *Plugin::send_comm_of_locked(uint32_t id, uint64_t sender)
{
	auto it = sends_.find(id);
	return it != sends_.end() && it->second->peer_engine == sender ? it->second : nullptr;
}

// The receiver says its receives before done_upto are complete (Cts or
// Credit; they may arrive out of order): their eager slots are free.
void Plugin::credit_locked(SendComm &c, uint32_t done_upto)
{
	if (seq_before(c.eager.done_upto, done_upto))
		c.eager.done_upto = done_upto;
}

namespace {

// A request's entry in Plugin::requests_, made before the engine may take
// the request (once it did, its callback will come and nothing may throw):
// erased again unless kept.
struct RequestSlot {
	std::unordered_map<void *, std::shared_ptr<Request>> &map;
	std::unordered_map<void *, std::shared_ptr<Request>>::iterator it;
	bool keep = false;
	~RequestSlot()
	{
		if (!keep)
			map.erase(it);
	}
};

} // namespace

// How the next send of c goes: inline, into an eager slot, into its
// advertised buffer (has_cts), or not yet (Wait).
Plugin::SendRoute Plugin::send_route_locked(const SendComm &c, const MemHandle *mh, size_t size, bool has_cts) const
{
	const uint32_t seq = c.next_seq;
	// Small: the data goes in a control message, Cts or not (one message
	// instead of a write, its Announce and the wait for a Cts).
	// Device memory never goes inline or eager: both read the data on the CPU.
	const bool host = !mh || mh->landing == Landing::Cpu;
	if (host && cfg_.inline_max && size <= cfg_.inline_max && c.remote_id)
		return SendRoute::Inline;
	// No Cts yet (the receiver is behind): into an eager slot if one is
	// free, as NCCL's socket transport lets the kernel buffer it.
	// While earlier sends are outstanding, only small ones (Config::
	// eager_busy_max): a larger one's advertisement comes while they flow,
	// and an eager receive costs the receiver one more copy.
	if (host && !has_cts && size && size <= c.eager.slot_size && c.eager.slots &&
	    (c.outstanding == 0 || size <= cfg_.eager_busy_max) && seq_before(seq, c.eager.done_upto + c.eager.slots))
		return SendRoute::Eager;
	return has_cts ? SendRoute::Advertised : SendRoute::Wait;
}

// The receive advertised by *ct cannot take this send (tag or size): fail
// both ends of it.
ncclResult_t Plugin::fail_unmatched_send_locked(SendComm &c, std::unordered_map<uint32_t, proto::Cts>::iterator ct,
						int tag, size_t size)
{
	const proto::Cts &cts = ct->second;
	const uint32_t seq = c.next_seq;
	proto::Fail f;
	f.recv_id = cts.recv_id;
	f.seq = seq;
	f.result = ncclInvalidUsage;
	char why[160];
	if (cts.tag != tag)
		std::snprintf(why, sizeof(why), "send #%u has tag %d, the matching receive tag %d", seq, tag, cts.tag);
	else
		std::snprintf(why, sizeof(why), "send #%u of %zu bytes exceeds the posted receive of %llu bytes", seq,
			      size, static_cast<unsigned long long>(cts.size));
	f.why = why;
	c.cts.erase(ct);
	c.next_seq++;
	try {
		send_control_locked(c.peer, proto::encode(f));
	} catch (const Error &e) {
		NWARN("isend: telling the receiver failed too: %s", e.what());
		if (!c.fail_lost)
			c.fail_lost = seq;
	}
	NWARN("isend: %s", why);
	return ncclInvalidUsage;
}

// The data goes from NCCL's buffer (borrowed: NCCL keeps it until test()
// says done, which waits for send_done), copied only into a bundle. Done
// when it left, as NCCL asks of a send (its buffer is free): delivery-
// complete costs shm a round trip per message.
int Plugin::post_inline_locked(const SendComm &c, Request &rq, int tag, const void *data)
{
	proto::Inline m;
	m.recv_id = c.remote_id;
	m.seq = rq.seq;
	m.tag = tag;
	m.data = std::span(static_cast<const uint8_t *>(rq.size ? data : nullptr), rq.size);
	proto::encode_head_into(m, wire_);
	const hmemreg_iov iov[2] = {{wire_.data(), wire_.size()}, {m.data.data(), m.data.size()}};
	return hmemreg_engine_sendv_flags(engine_->handle(), c.peer, iov, rq.size ? 2 : 1,
					  HMEMREG_SEND_TRANSMIT_COMPLETE | (rq.size ? HMEMREG_SEND_BORROW : 0),
					  &Plugin::send_done, &rq, nullptr);
}

int Plugin::post_empty_locked(const SendComm &c, Request &rq, const proto::Cts &cts)
{
	proto::Empty e;
	e.recv_id = cts.recv_id;
	e.seq = rq.seq;
	const auto msg = proto::encode(e);
	return hmemreg_engine_send(engine_->handle(), c.peer, msg.data(), msg.size(), &Plugin::send_done, &rq, nullptr);
}

// Into the advertised buffer, or (cts null) into the eager slot of rq's seq.
int Plugin::post_write_locked(const SendComm &c, Request &rq, const proto::Cts *cts, const void *data,
			      const MemHandle &mh)
{
	const bool eager = !cts;
	const uint32_t seq = rq.seq;
	Chunk ch;
	ch.local = mh.region->handle();
	ch.local_offset = reinterpret_cast<uintptr_t>(data) - reinterpret_cast<uintptr_t>(mh.region->addr());
	ch.len = rq.size;
	const std::vector<uint8_t> &desc = eager ? c.eager.descriptor : cts->descriptor;
	const uint64_t ntag =
		eager ? proto::kEagerTag | proto::notify_tag(c.remote_id, seq) : proto::notify_tag(cts->recv_id, seq);
	ch.remote_offset = eager ? static_cast<size_t>(seq % c.eager.slots) * c.eager.slot_size : cts->offset;
	return hmemreg_engine_write(engine_->handle(), c.peer, &ch, 1, desc.data(), desc.size(), ntag,
				    &Plugin::send_done, &rq, nullptr);
}

// A send of c went to the engine: its sequence number is used, and the
// close-time figures count it (and how long it waited for a Cts).
void Plugin::count_send_locked(SendComm &c, SendRoute route, size_t size)
{
	c.next_seq++;
	c.outstanding++;
	c.sends++;
	c.bytes += size;
	c.eager_sends += route == SendRoute::Eager;
	c.inline_sends += route == SendRoute::Inline;
	if (c.waiting_since != std::chrono::steady_clock::time_point{}) {
		const auto now = std::chrono::steady_clock::now();
		auto ns = [now](std::chrono::steady_clock::time_point t) {
			return static_cast<uint64_t>(
				std::chrono::duration_cast<std::chrono::nanoseconds>(now - t).count());
		};
		c.waited++;
		c.wait_ns += ns(c.waiting_since);
		if (c.cts_came != std::chrono::steady_clock::time_point{})
			c.after_cts_ns += ns(c.cts_came);
		c.waiting_since = c.cts_came = {};
	}
}

ncclResult_t Plugin::try_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request,
			       bool &missing_cts, bool &behind)
{
	missing_cts = false;
	behind = false;
	std::lock_guard l(mu_);
	auto *c = find_locked<SendComm>(send_comm, Comm::Kind::Send);
	if (!c) {
		NWARN("isend: %p is not a send comm of this plugin", send_comm);
		return ncclInternalError;
	}
	if (c->peer_closed) {
		NWARN("isend: the receiver closed this connection");
		return ncclRemoteError;
	}
	MemHandle *mh = nullptr;
	if (ncclResult_t res = buffer_handle_locked("isend", data, size, mhandle, mh); res != ncclSuccess)
		return res;
	if (c->outstanding >= cfg_.max_requests)
		return ncclSuccess; // *request stays NULL: NCCL retries
	auto ct = c->cts.find(c->next_seq);
	// Stays in c->cts (under mu_) until the write is posted: no copy.
	const proto::Cts *cts = ct == c->cts.end() ? nullptr : &ct->second;
	const SendRoute route = send_route_locked(*c, mh, size, cts);
	if (route == SendRoute::Wait) {
		missing_cts = true;
		if (c->waiting_since == std::chrono::steady_clock::time_point{}) {
			c->waiting_since = std::chrono::steady_clock::now();
			mark_send(HMEMREG_STEP_SEND_WAITS, *c, c->next_seq, size);
		}
		return ncclSuccess;
	}
	if (cts && (cts->tag != tag || size > cts->size))
		return fail_unmatched_send_locked(*c, ct, tag, size);
	auto rq = std::make_shared<Request>();
	if (cfg_.stall_ms)
		rq->posted = std::chrono::steady_clock::now();
	rq->send = true;
	rq->comm_id = c->id;
	rq->seq = c->next_seq;
	rq->size = size;
	rq->plugin = this;
	RequestSlot slot{requests_, requests_.emplace(rq.get(), nullptr).first};
	// The engine holds the request until its callback (send_done) ran.
	rq->engine_hold = rq;
	try {
		const int rc = route == SendRoute::Inline ? post_inline_locked(*c, *rq, tag, data)
			       : size == 0		  ? post_empty_locked(*c, *rq, *cts)
							  : post_write_locked(*c, *rq, cts, data, *mh);
		if (rc < 0)
			rq->engine_hold.reset(); // not taken: no callback comes
		engine_detail::check(rc);
	} catch (const Error &e) {
		rq->engine_hold.reset(); // (the engine says so only when it did not take it)
		if (e.code() == HMEMREG_EAGAIN)
			return ncclSuccess; // engine full: NCCL retries, the Cts stays
		NWARN("isend #%u (%zu bytes): %s", rq->seq, size, e.what());
		return result_of(e);
	} catch (const std::bad_alloc &) {
		rq->engine_hold.reset(); // thrown before the engine call: not taken
		NWARN("isend #%u (%zu bytes): out of memory", rq->seq, size);
		return ncclSystemError;
	}
	mark_send(route == SendRoute::Inline  ? HMEMREG_STEP_INLINE_POSTED
		  : route == SendRoute::Eager ? HMEMREG_STEP_EAGER_POSTED
					      : HMEMREG_STEP_WRITE_POSTED,
		  *c, rq->seq, size);
	if (cts)
		c->cts.erase(ct);
	// (a write gains nothing by waiting: writes are not bundled)
	behind = route == SendRoute::Inline && c->outstanding > 0;
	count_send_locked(*c, route, size);
	*request = rq.get();
	slot.it->second = std::move(rq);
	slot.keep = true;
	return ncclSuccess;
}

ncclResult_t Plugin::isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request)
{
	if (!request)
		return ncclInvalidArgument;
	*request = nullptr;
	bool missing = false, behind = false;
	ncclResult_t r = try_isend(send_comm, data, size, tag, mhandle, request, missing, behind);
	if (r == ncclSuccess && missing) {
		idle(); // the receive may be advertised by now
		r = try_isend(send_comm, data, size, tag, mhandle, request, missing, behind);
	}
	// The first send of a quiet comm goes out now. An Inline send behind
	// others waits for the turn of NCCL's next test(), which comes right
	// after and posts every message queued since in one go (a bundle): on
	// tcp each send costs a sendmsg and the provider's wake-up signal (a
	// write and a read), once per bundle instead of once per message.
	if (r == ncclSuccess && *request && !behind)
		progress_now();
	return r;
}

} // namespace hmemreg::nccl
