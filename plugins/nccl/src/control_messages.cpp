// SPDX-License-Identifier: MIT
// Control messages from the peer (protocol.hpp), as the engine delivers them:
// decoded, then one handler per message type, under the plugin's lock. A
// message for a comm that is closed, or that is not talking to its sender,
// is dropped.
#include "plugin.hpp"

#include "log.hpp"

namespace hmemreg::nccl {

void Plugin::on_message(const Message &msg)
{
	auto m = proto::decode(msg.data);
	if (!m) {
		NWARN("malformed control message (%zu bytes) from engine %llx dropped", msg.data.size(),
		      static_cast<unsigned long long>(msg.sender));
		return;
	}
	std::lock_guard l(mu_);
	switch (m->type) {
	case proto::Type::Connect:
		return on_connect_locked(m->connect, msg.sender);
	case proto::Type::Cts:
		return on_cts_locked(m->cts, msg.sender);
	case proto::Type::EagerRing:
		return on_eager_ring_locked(m->eager, msg.sender);
	case proto::Type::Credit:
		return on_credit_locked(m->credit, msg.sender);
	case proto::Type::Inline:
		return on_inline_locked(m->inl, msg.sender);
	case proto::Type::Empty:
		return on_empty_locked(m->empty, msg.sender);
	case proto::Type::Fail:
		return on_fail_locked(m->fail, msg.sender);
	case proto::Type::Close:
		return on_close_locked(m->close, msg.sender);
	}
	NWARN("control message of unknown type %u dropped", static_cast<unsigned>(m->type));
}

// A sender's connect(): queued on its listen comm for accept().
void Plugin::on_connect_locked(proto::Connect &m, uint64_t sender)
{
	auto it = listens_.find(m.listen_id);
	bool valid = false;
	try {
		valid = Engine::peer_engine_id(m.address) == sender;
	} catch (const Error &) {
	}
	if (it == listens_.end() || !valid) {
		NWARN("connection request for %s dropped", valid ? "a closed listen comm" : "a bad address");
		return;
	}
	it->second->pending.push_back({m.send_id, sender, std::move(m.address)});
}

// A posted receive's buffer, for the send of its seq.
void Plugin::on_cts_locked(proto::Cts &m, uint64_t sender)
{
	SendComm *c = send_comm_of_locked(m.send_id, sender);
	if (!c) {
		NINFO(NCCL_NET, "buffer advertisement for closed send comm %u dropped", m.send_id);
		return;
	}
	mark_send(HMEMREG_STEP_CTS_SEEN, *c, m.seq, m.size);
	c->remote_id = m.recv_id;
	credit_locked(*c, m.done_upto);
	if (seq_before(m.seq, c->next_seq))
		return; // that send went into an eager slot before this came
	const uint32_t seq = m.seq;
	if (!c->cts.emplace(seq, std::move(m)).second)
		NWARN("duplicate buffer advertisement on send comm %u dropped", c->id);
	else if (seq == c->next_seq && c->waiting_since != std::chrono::steady_clock::time_point{})
		c->cts_came = std::chrono::steady_clock::now(); // the clock only for a send that waits
}

// The receiver's id and eager slots (maybe none), once per connection.
void Plugin::on_eager_ring_locked(proto::EagerRing &m, uint64_t sender)
{
	SendComm *c = send_comm_of_locked(m.send_id, sender);
	if (!c) {
		NINFO(NCCL_NET, "eager slots for closed send comm %u dropped", m.send_id);
		return;
	}
	c->remote_id = m.recv_id;
	c->eager.slots = m.slots;
	c->eager.slot_size = m.slot_size;
	c->eager.descriptor = std::move(m.descriptor);
}

void Plugin::on_credit_locked(const proto::Credit &m, uint64_t sender)
{
	if (SendComm *c = send_comm_of_locked(m.send_id, sender))
		credit_locked(*c, m.done_upto);
}

// A small send's data: into its receive, or kept until that is posted.
void Plugin::on_inline_locked(const proto::Inline &m, uint64_t sender)
{
	auto it = recvs_.find(m.recv_id);
	if (it == recvs_.end() || it->second->peer_engine != sender) {
		NINFO(NCCL_NET, "inline data for receive #%u on closed comm %u dropped", m.seq, m.recv_id);
		return;
	}
	RecvComm &c = *it->second;
	mark_recv(HMEMREG_STEP_INLINE_LANDED, c, m.seq, m.data.size());
	auto p = c.pending.find(m.seq);
	if (p == c.pending.end()) {
		if (!seq_before(m.seq, c.next_seq)) // its irecv comes later
			c.inline_early[m.seq] = {m.tag, {m.data.begin(), m.data.end()}};
		return;
	}
	auto r = p->second;
	c.pending.erase(p);
	land_inline_locked(c, *r, m.tag, m.data);
}

void Plugin::on_empty_locked(const proto::Empty &m, uint64_t sender)
{
	auto it = recvs_.find(m.recv_id);
	if (it != recvs_.end() && it->second->peer_engine == sender)
		complete_recv_locked(m.recv_id, m.seq, 0, ncclSuccess, {});
}

// The send matching a receive could not go (tag or size): the receive fails.
void Plugin::on_fail_locked(const proto::Fail &m, uint64_t sender)
{
	auto it = recvs_.find(m.recv_id);
	if (it != recvs_.end() && it->second->peer_engine == sender)
		complete_recv_locked(m.recv_id, m.seq, 0, static_cast<ncclResult_t>(m.result ? m.result : ncclRemoteError),
				     "sender: " + m.why);
}

void Plugin::on_close_locked(const proto::Close &m, uint64_t sender)
{
	if (!m.to_recv) {
		auto it = sends_.find(m.comm_id);
		if (it != sends_.end() && it->second->peer_engine == sender) {
			it->second->peer_closed = true;
			peer_closes_++;
		}
		return;
	}
	auto it = recvs_.find(m.comm_id);
	if (it == recvs_.end() || it->second->peer_engine != sender)
		return;
	RecvComm *c = it->second;
	c->peer_closed = true;
	c->peer_sent = m.sent;
	c->closed_at = std::chrono::steady_clock::now();
	peer_closes_++;
	// Receives the sender made a send for still complete: their data went
	// before the Close (eager writes may land after it).
	std::erase_if(c->pending, [&](const auto &kv) {
		if (seq_before(kv.first, c->peer_sent))
			return false;
		kv.second->state = Request::State::Failed;
		kv.second->error = ncclRemoteError;
		kv.second->why = "the sender closed the connection";
		return true;
	});
}

} // namespace hmemreg::nccl
