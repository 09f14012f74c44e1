// SPDX-License-Identifier: MIT
// Control messages from the peer (protocol.hpp), as the engine delivers them.
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
	case proto::Type::Connect: {
		auto it = listens_.find(m->connect.listen_id);
		bool valid = false;
		try {
			valid = Engine::peer_engine_id(m->connect.address) == msg.sender;
		} catch (const Error &) {
		}
		if (it == listens_.end() || !valid) {
			NWARN("connection request for %s dropped", valid ? "a closed listen comm" : "a bad address");
			return;
		}
		it->second->pending.push_back({m->connect.send_id, msg.sender, std::move(m->connect.address)});
		return;
	}
	case proto::Type::Cts: {
		SendComm *c = send_comm_of_locked(m->cts.send_id, msg.sender);
		if (!c) {
			NINFO(NCCL_NET, "buffer advertisement for closed send comm %u dropped", m->cts.send_id);
			return;
		}
		c->remote_id = m->cts.recv_id;
		credit_locked(*c, m->cts.done_upto);
		if (seq_before(m->cts.seq, c->next_seq))
			return; // that send went into an eager slot before this came
		if (!c->cts.emplace(m->cts.seq, std::move(m->cts)).second)
			NWARN("duplicate buffer advertisement on send comm %u dropped", c->id);
		return;
	}
	case proto::Type::EagerRing: {
		SendComm *c = send_comm_of_locked(m->eager.send_id, msg.sender);
		if (!c) {
			NINFO(NCCL_NET, "eager slots for closed send comm %u dropped", m->eager.send_id);
			return;
		}
		c->remote_id = m->eager.recv_id;
		c->eager.slots = m->eager.slots;
		c->eager.slot_size = m->eager.slot_size;
		c->eager.descriptor = std::move(m->eager.descriptor);
		return;
	}
	case proto::Type::Credit:
		if (SendComm *c = send_comm_of_locked(m->credit.send_id, msg.sender))
			credit_locked(*c, m->credit.done_upto);
		return;
	case proto::Type::Inline: {
		auto it = recvs_.find(m->inl.recv_id);
		if (it == recvs_.end() || it->second->peer_engine != msg.sender) {
			NINFO(NCCL_NET, "inline data for receive #%u on closed comm %u dropped", m->inl.seq, m->inl.recv_id);
			return;
		}
		RecvComm &c = *it->second;
		auto p = c.pending.find(m->inl.seq);
		if (p == c.pending.end()) {
			if (!seq_before(m->inl.seq, c.next_seq)) // its irecv comes later
				c.inline_early[m->inl.seq] = {m->inl.tag, {m->inl.data.begin(), m->inl.data.end()}};
			return;
		}
		auto r = p->second;
		c.pending.erase(p);
		land_inline_locked(c, *r, m->inl.tag, m->inl.data);
		return;
	}
	case proto::Type::Empty: {
		auto it = recvs_.find(m->empty.recv_id);
		if (it != recvs_.end() && it->second->peer_engine == msg.sender)
			complete_recv_locked(m->empty.recv_id, m->empty.seq, 0, ncclSuccess, {});
		return;
	}
	case proto::Type::Fail: {
		auto it = recvs_.find(m->fail.recv_id);
		if (it != recvs_.end() && it->second->peer_engine == msg.sender)
			complete_recv_locked(m->fail.recv_id, m->fail.seq, 0,
					     static_cast<ncclResult_t>(m->fail.result ? m->fail.result : ncclRemoteError),
					     "sender: " + m->fail.why);
		return;
	}
	case proto::Type::Close: {
		if (m->close.to_recv) {
			auto it = recvs_.find(m->close.comm_id);
			if (it == recvs_.end() || it->second->peer_engine != msg.sender)
				return;
			RecvComm *c = it->second;
			c->peer_closed = true;
			c->peer_sent = m->close.sent;
			c->closed_at = std::chrono::steady_clock::now();
			peer_closes_++;
			// Receives the sender made a send for still complete: their
			// data went before the Close (eager writes may land after it).
			std::erase_if(c->pending, [&](const auto &kv) {
				if (seq_before(kv.first, c->peer_sent))
					return false;
				kv.second->state = Request::State::Failed;
				kv.second->error = ncclRemoteError;
				kv.second->why = "the sender closed the connection";
				return true;
			});
		} else {
			auto it = sends_.find(m->close.comm_id);
			if (it != sends_.end() && it->second->peer_engine == msg.sender) {
				it->second->peer_closed = true;
				peer_closes_++;
			}
		}
		return;
	}
	}
	NWARN("control message of unknown type %u dropped", static_cast<unsigned>(m->type));
}

} // namespace hmemreg::nccl
