// SPDX-License-Identifier: MIT
// Closing comms, and what a peer's close does to receives still waiting.
#include "plugin.hpp"

#include "log.hpp"

namespace hmemreg::nccl {

// After its sender closed, a receive before the sender's count still waits
// for its data (an eager write on the way); if it has not come long after
// (the sender died with it in flight), the receive fails instead of hanging.
void Plugin::expire_after_close_locked(Request &r)
{
	constexpr auto kDataAfterClose = std::chrono::seconds(30);
	auto it = recvs_.find(r.comm_id);
	if (it == recvs_.end() || !it->second->peer_closed ||
	    std::chrono::steady_clock::now() - it->second->closed_at < kDataAfterClose)
		return;
	it->second->pending.erase(r.seq);
	r.state = Request::State::Failed;
	r.error = ncclRemoteError;
	r.why = "the sender closed, and this receive's data did not come within 30 s";
}

ncclResult_t Plugin::close_send(void *send_comm)
{
	std::unique_ptr<Comm> owned;
	{
		std::lock_guard l(mu_);
		auto *c = find_locked<SendComm>(send_comm, Comm::Kind::Send);
		if (!c) {
			NWARN("closeSend: %p is not a send comm of this plugin", send_comm);
			return ncclInternalError;
		}
		NINFO(NCCL_NET,
		      "send comm %u: %llu sends (%.0f KiB on average), %llu inline, %llu into eager slots, %llu waited for the "
		      "receiver's buffer (%.1f us each on average, %.1f us of it after the buffer's advertisement came)",
		      c->id, static_cast<unsigned long long>(c->sends),
		      c->sends ? static_cast<double>(c->bytes) / 1024.0 / static_cast<double>(c->sends) : 0.0,
		      static_cast<unsigned long long>(c->inline_sends), static_cast<unsigned long long>(c->eager_sends),
		      static_cast<unsigned long long>(c->waited),
		      c->waited ? static_cast<double>(c->wait_ns) / 1e3 / static_cast<double>(c->waited) : 0.0,
		      c->waited ? static_cast<double>(c->after_cts_ns) / 1e3 / static_cast<double>(c->waited) : 0.0);
		if (!c->peer_closed && c->remote_id) {
			try {
				const uint32_t sent = c->fail_lost ? *c->fail_lost : c->next_seq;
				send_control_locked(c->peer, proto::encode(proto::Close{c->remote_id, 1, sent}));
			} catch (const Error &) {
				// the peer is gone already: nothing to tell
			}
		}
		std::erase_if(requests_, [&](const auto &kv) { return kv.second->send && kv.second->comm_id == c->id; });
		sends_.erase(c->id);
		auto it = comms_.find(send_comm);
		owned = std::move(it->second);
		comms_.erase(it);
	}
	progress_now(); // send the close now
	if (timeline_)
		timeline_->flush();
	return ncclSuccess;
}

ncclResult_t Plugin::close_recv(void *recv_comm)
{
	std::unique_ptr<Comm> owned;
	{
		std::lock_guard l(mu_);
		auto *c = find_locked<RecvComm>(recv_comm, Comm::Kind::Recv);
		if (!c) {
			NWARN("closeRecv: %p is not a recv comm of this plugin", recv_comm);
			return ncclInternalError;
		}
		NINFO(NCCL_NET,
		      "recv comm %u: %llu receives written after their advertisement (the data came %.1f us after it "
		      "on average), %llu from eager slots (%.1f us each to copy out on average)",
		      c->id, static_cast<unsigned long long>(c->written),
		      c->written ? static_cast<double>(c->written_ns) / 1e3 / static_cast<double>(c->written) : 0.0,
		      static_cast<unsigned long long>(c->eager_landed),
		      c->eager_landed ? static_cast<double>(c->eager_copy_ns) / 1e3 / static_cast<double>(c->eager_landed)
				      : 0.0);
		if (c->nic_landings)
			NINFO(NCCL_NET, "recv comm %u: %llu Inline or eager receives copied into device memory by the NIC",
			      c->id, static_cast<unsigned long long>(c->nic_landings));
		if (!c->peer_closed) {
			try {
				send_control_locked(c->peer, proto::encode(proto::Close{c->remote_id, 0}));
			} catch (const Error &) {
			}
		}
		std::erase_if(requests_, [&](const auto &kv) { return !kv.second->send && kv.second->comm_id == c->id; });
		// Its sender may still have eager writes on the way: the slots'
		// memory stays until the engine is gone (the registration goes now).
		if (c->eager.mem)
			retired_eager_.push_back(std::move(c->eager.mem));
		if (c->inline_entries.mem) // NIC copies out of it may be in flight
			retired_eager_.push_back(std::move(c->inline_entries.mem));
		recvs_.erase(c->id);
		auto it = comms_.find(recv_comm);
		owned = std::move(it->second);
		comms_.erase(it);
	}
	progress_now(); // send the close now
	if (timeline_)
		timeline_->flush();
	return ncclSuccess;
}

ncclResult_t Plugin::close_listen(void *listen_comm)
{
	std::lock_guard l(mu_);
	auto *c = find_locked<ListenComm>(listen_comm, Comm::Kind::Listen);
	if (!c) {
		NWARN("closeListen: %p is not a listen comm of this plugin", listen_comm);
		return ncclInternalError;
	}
	// Senders that connected but were never accepted learn it now.
	for (auto &pc : c->pending) {
		try {
			PeerId p = peer_for_locked(pc.engine_id, pc.address);
			send_control_locked(p, proto::encode(proto::Close{pc.send_id, 0}));
		} catch (const Error &) {
		}
	}
	listens_.erase(c->listen_id);
	comms_.erase(listen_comm);
	return ncclSuccess;
}

} // namespace hmemreg::nccl
