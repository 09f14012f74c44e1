// SPDX-License-Identifier: MIT
// The receive path: irecv advertises the buffer (a Cts, or deferred for a
// small one), a write's notification or a control message completes it, and
// completed receives free the sender's eager slots (done_upto, Credit).
#include "plugin.hpp"

#include "log.hpp"

namespace hmemreg::nccl {

ncclResult_t Plugin::irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			   void **request)
{
	// The advertisement goes out at the next turn: NCCL tests right after
	// (a turn here too would cost each small message a poll more).
	return post_recv(recv_comm, n, data, sizes, tags, mhandles, request);
}

// A new receive of c (its next sequence number) into [data, data + size) of
// memory handle mh (null for 0 bytes).
std::shared_ptr<Request> Plugin::recv_request_locked(const RecvComm &c, void *data, size_t size, int tag,
						     void *mhandle, const MemHandle *mh) const
{
	auto rq = std::make_shared<Request>();
	if (cfg_.stall_ms)
		rq->posted = std::chrono::steady_clock::now();
	rq->comm_id = c.id;
	rq->seq = c.next_seq;
	rq->size = size;
	rq->data = static_cast<uint8_t *>(size ? data : nullptr);
	rq->tag = tag;
	if (mh) {
		rq->device = mh->cuda_device;
		rq->route = mh->landing;
		if (rq->route == Landing::Nic)
			rq->region = mh->region;
		rq->mhandle = mhandle;
		rq->offset = reinterpret_cast<uintptr_t>(data) - reinterpret_cast<uintptr_t>(mh->region->addr());
	}
	return rq;
}

// Receive rq of c is posted: NCCL gets it, c's next receive is the next seq.
void Plugin::hand_out_recv_locked(RecvComm &c, std::shared_ptr<Request> rq, void **request)
{
	c.next_seq++;
	c.outstanding++;
	*request = rq.get();
	requests_[rq.get()] = std::move(rq);
}

// Receive r's advertisement (mh: its buffer's handle, null for 0 bytes): a
// Cts now, or deferred for a small one. later: the engine was full, NCCL
// posts the receive again.
ncclResult_t Plugin::advertise_recv_locked(RecvComm &c, Request &r, const MemHandle *mh, bool &later)
{
	later = false;
	// A closed sender made this send before closing: its data comes by an
	// eager write, nobody reads a Cts.
	if (c.peer_closed)
		return ncclSuccess;
	// (A device buffer's sender, in device memory too, will not go inline;
	// a host sender may, and recv_landing.cpp copies it in.)
	if (r.route == Landing::Cpu && cfg_.inline_max && r.size <= cfg_.inline_max && c.told_id) {
		// Every send that fits comes inline: no Cts unless it waits long
		// (made then: nothing to build or copy on a small message's path).
		r.deferred = true;
		r.deferred_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
		return ncclSuccess;
	}
	const proto::Cts m = cts_of_locked(c, r, nullptr);
	try {
		proto::encode_into(m, mh ? std::span<const uint8_t>(mh->descriptor) : std::span<const uint8_t>(), wire_);
		send_control_locked(c.peer, wire_);
	} catch (const Error &e) {
		if (e.code() == HMEMREG_EAGAIN) {
			later = true;
			return ncclSuccess;
		}
		NWARN("irecv: advertising the buffer failed: %s", e.what());
		return result_of(e);
	}
	mark_recv(HMEMREG_STEP_ADVERTISED, c, r.seq, r.size);
	c.credit_sent = m.done_upto; // the Cts carried it
	c.eager_uncredited = 0;
	c.told_id = true;
	r.advertised = std::chrono::steady_clock::now();
	return ncclSuccess;
}

ncclResult_t Plugin::post_recv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			       void **request)
{
	if (!request)
		return ncclInvalidArgument;
	*request = nullptr;
	std::unique_lock l(mu_);
	auto *c = find_locked<RecvComm>(recv_comm, Comm::Kind::Recv);
	if (!c) {
		NWARN("irecv: %p is not a recv comm of this plugin", recv_comm);
		return ncclInternalError;
	}
	if (n != 1 || !data || !sizes || !tags || !mhandles) {
		NWARN("irecv: %d buffers asked, this plugin groups at most 1 (maxRecvs)", n);
		return ncclInternalError;
	}
	if (c->peer_closed && !seq_before(c->next_seq, c->peer_sent)) {
		NWARN("irecv: the sender closed this connection after %u sends", c->peer_sent);
		return ncclRemoteError;
	}
	MemHandle *mh = nullptr;
	if (ncclResult_t res = buffer_handle_locked("irecv", data[0], sizes[0], mhandles[0], mh); res != ncclSuccess)
		return res;
	if (c->outstanding >= cfg_.max_requests)
		return ncclSuccess;
	auto rq = recv_request_locked(*c, data[0], sizes[0], tags[0], mhandles[0], mh);
	const uint32_t seq = rq->seq;
	mark_recv(HMEMREG_STEP_RECV_POSTED, *c, seq, sizes[0]);
	if (auto early = c->inline_early.find(seq); early != c->inline_early.end()) {
		// Its data came first, in an Inline message: no Cts, done now.
		RecvComm::Early e = std::move(early->second);
		c->inline_early.erase(early);
		hand_out_recv_locked(*c, rq, request);
		land_inline_locked(*c, *rq, e.tag, e.data);
		return ncclSuccess;
	}
	if (auto early = c->eager_early.find(seq); early != c->eager_early.end()) {
		// Its data came first, into an eager slot: no Cts, done after the copy.
		const size_t bytes = early->second;
		c->eager_early.erase(early);
		hand_out_recv_locked(*c, rq, request);
		const uint8_t *slot = c->eager.slot(seq);
		l.unlock();
		land_eager(rq, slot, bytes);
		return ncclSuccess;
	}
	bool later = false;
	if (ncclResult_t res = advertise_recv_locked(*c, *rq, mh, later); res != ncclSuccess || later)
		return res;
	c->pending[seq] = rq;
	hand_out_recv_locked(*c, std::move(rq), request);
	return ncclSuccess;
}

// The advertisement of receive r of c (mh: its buffer's handle, null for 0 bytes).
proto::Cts Plugin::cts_of_locked(const RecvComm &c, const Request &r, const MemHandle *mh) const
{
	proto::Cts m;
	m.send_id = c.remote_id;
	m.recv_id = c.id;
	m.seq = r.seq;
	m.tag = r.tag;
	m.size = r.size;
	m.offset = r.offset;
	m.done_upto = c.done_upto;
	if (mh)
		m.descriptor = mh->descriptor;
	return m;
}

// A small receive still waiting after 100 ms: its sender may hold a send too
// large for inline (an error) that waits for a Cts; send it, so both fail.
void Plugin::send_deferred_cts_locked(Request &r)
{
	auto it = recvs_.find(r.comm_id);
	const auto mh = r.size ? mhandles_.find(r.mhandle) : mhandles_.end();
	if (it == recvs_.end() || it->second->peer_closed || (r.size && mh == mhandles_.end())) {
		r.deferred = false; // closed, or its buffer deregistered under it: nothing to advertise
		return;
	}
	try {
		send_control_locked(it->second->peer,
				    proto::encode(cts_of_locked(*it->second, r, r.size ? mh->second.get() : nullptr)));
		r.deferred = false;
	} catch (const Error &) {
		// engine full: the next test() tries again
	}
}

// Receive seq of c is complete: its eager slot may be reused once every
// receive before it is complete too.
void Plugin::mark_done_locked(RecvComm &c, uint32_t seq)
{
	if (seq != c.done_upto) {
		c.done_ahead.insert(seq);
		return;
	}
	c.done_upto++;
	while (c.done_ahead.erase(c.done_upto))
		c.done_upto++;
	// Receives served from eager slots send no Cts: tell the sender its
	// slots are free again, every half ring and whenever no receive is
	// posted (no Cts will come to carry it).
	// Only slots taken need it: other receives cost the sender nothing.
	if (c.eager.slots && !c.peer_closed && c.eager_uncredited && c.done_upto != c.credit_sent &&
	    (c.done_upto - c.credit_sent >= (c.eager.slots + 1) / 2 || c.pending.empty())) {
		try {
			send_control_locked(c.peer, proto::encode(proto::Credit{c.remote_id, c.done_upto}));
			c.credit_sent = c.done_upto;
			c.eager_uncredited = 0;
		} catch (const Error &) {
			// engine full: the next Cts carries it
		}
	}
}

void Plugin::complete_recv_locked(uint32_t recv_id, uint32_t seq, size_t bytes, ncclResult_t err,
				  const std::string &why)
{
	auto it = recvs_.find(recv_id);
	if (it == recvs_.end()) {
		NINFO(NCCL_NET, "completion of receive #%u on closed comm %u dropped", seq, recv_id);
		return;
	}
	RecvComm *c = it->second;
	auto p = c->pending.find(seq);
	if (p == c->pending.end()) {
		NWARN("completion of receive #%u on comm %u that is not pending", seq, recv_id);
		return;
	}
	Request &r = *p->second;
	if (err == ncclSuccess && bytes > r.size) {
		err = ncclInternalError;
		r.why = "peer wrote " + std::to_string(bytes) + " bytes into a " + std::to_string(r.size) + "-byte receive";
	} else {
		r.why = why;
	}
	if (err == ncclSuccess) {
		r.state = Request::State::Done;
		r.bytes = bytes;
		bytes_received_ += bytes;
		if (r.advertised != std::chrono::steady_clock::time_point{}) {
			c->written++;
			c->written_ns += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
								   std::chrono::steady_clock::now() - r.advertised)
								   .count());
		}
	} else {
		r.state = Request::State::Failed;
		r.error = err;
	}
	c->pending.erase(p);
	mark_done_locked(*c, seq);
}

void Plugin::on_notify(const Notification &n)
{
	std::unique_lock l(mu_);
	const uint32_t recv_id = static_cast<uint32_t>((n.tag & ~proto::kEagerTag) >> 32);
	const uint32_t seq = static_cast<uint32_t>(n.tag);
	auto it = recvs_.find(recv_id);
	if (it != recvs_.end() && it->second->peer_engine != n.sender) {
		NWARN("notification for comm %u from engine %llx, not its peer: dropped", recv_id,
		      static_cast<unsigned long long>(n.sender));
		return;
	}
	if (it != recvs_.end())
		mark_recv(HMEMREG_STEP_DATA_LANDED, *it->second, seq, n.bytes);
	if (!(n.tag & proto::kEagerTag)) {
		complete_recv_locked(recv_id, seq, n.bytes, ncclSuccess, {});
		return;
	}
	if (it == recvs_.end()) {
		NINFO(NCCL_NET, "eager data for receive #%u on closed comm %u dropped", seq, recv_id);
		return;
	}
	RecvComm &c = *it->second;
	if (!c.eager.slots || n.bytes > c.eager.slot_size || !seq_before(seq, c.done_upto + c.eager.slots)) {
		NWARN("eager data for receive #%u on comm %u does not fit a free slot (%zu bytes): dropped", seq, c.id,
		      n.bytes);
		return;
	}
	auto p = c.pending.find(seq);
	if (p == c.pending.end()) {
		c.eager_early[seq] = n.bytes; // its irecv comes later
		return;
	}
	auto r = p->second;
	c.pending.erase(p);
	const uint8_t *slot = c.eager.slot(seq);
	l.unlock();
	land_eager(r, slot, n.bytes);
}

} // namespace hmemreg::nccl
