// SPDX-License-Identifier: MIT
// Connections: listen, connect and accept make the comms (a recv comm offers
// its sender eager slots as it is made).
#include "plugin.hpp"

#include <random>

#include "log.hpp"

namespace hmemreg::nccl {

namespace {

uint64_t random_u64()
{
	std::random_device rd;
	uint64_t v = (uint64_t(rd()) << 32) ^ rd();
	return v ? v : 1;
}

} // namespace

ncclResult_t Plugin::listen(int dev, void *handle, void **listen_comm)
{
	if (dev != 0 || !handle || !listen_comm) {
		NWARN("listen: bad arguments (dev %d, handle %p, listenComm %p)", dev, handle, static_cast<void *>(listen_comm));
		return ncclInvalidArgument;
	}
	proto::Handle h;
	h.address = engine_->address();
	std::lock_guard l(mu_);
	do
		h.listen_id = random_u64();
	while (listens_.count(h.listen_id));
	if (!proto::encode_handle(h, handle, NCCL_NET_HANDLE_MAXSIZE)) {
		NWARN("listen: the engine address (%zu bytes, %u rails) does not fit NCCL's %d-byte handle",
		      h.address.size(), cfg_.rails, NCCL_NET_HANDLE_MAXSIZE);
		return ncclInternalError;
	}
	auto c = std::make_unique<ListenComm>(next_comm_id_++, h.listen_id);
	listens_[h.listen_id] = c.get();
	*listen_comm = c.get();
	comms_[c.get()] = std::move(c);
	return ncclSuccess;
}

ncclResult_t Plugin::connect(int dev, void *handle, void **send_comm)
{
	if (dev != 0 || !handle || !send_comm) {
		NWARN("connect: bad arguments (dev %d)", dev);
		return ncclInvalidArgument;
	}
	*send_comm = nullptr;
	auto h = proto::decode_handle(handle, NCCL_NET_HANDLE_MAXSIZE);
	if (!h) {
		NWARN("connect: the handle was not made by this plugin's listen()");
		return ncclInvalidArgument;
	}
	try {
		uint64_t peer_engine = Engine::peer_engine_id(h->address);
		if (peer_engine == engine_->id()) {
			NWARN("connect: a connection within one process is not supported (same engine)");
			return ncclInvalidUsage;
		}
		std::lock_guard l(mu_);
		PeerId peer = peer_for_locked(peer_engine, h->address);
		auto c = std::make_unique<SendComm>(next_comm_id_++, peer, peer_engine);
		proto::Connect m;
		m.listen_id = h->listen_id;
		m.send_id = c->id;
		m.address = engine_->address();
		send_control_locked(peer, proto::encode(m));
		sends_[c->id] = c.get();
		*send_comm = c.get();
		comms_[c.get()] = std::move(c);
	} catch (const Error &e) {
		NWARN("connect: %s", e.what());
		return result_of(e);
	}
	progress_now(); // get the request on the wire
	return ncclSuccess;
}

ncclResult_t Plugin::accept(void *listen_comm, void **recv_comm)
{
	if (!recv_comm)
		return ncclInvalidArgument;
	*recv_comm = nullptr;
	for (int attempt = 0; attempt < 2; attempt++) {
		{
			std::lock_guard l(mu_);
			auto *lc = find_locked<ListenComm>(listen_comm, Comm::Kind::Listen);
			if (!lc) {
				NWARN("accept: %p is not a listen comm of this plugin", listen_comm);
				return ncclInternalError;
			}
			if (!lc->pending.empty()) {
				PendingConnect pc = std::move(lc->pending.front());
				lc->pending.pop_front();
				try {
					PeerId peer = peer_for_locked(pc.engine_id, pc.address);
					auto c = std::make_unique<RecvComm>(next_comm_id_++, peer, pc.engine_id, pc.send_id);
					introduce_recv_comm_locked(*c);
					recvs_[c->id] = c.get();
					*recv_comm = c.get();
					comms_[c.get()] = std::move(c);
				} catch (const Error &e) {
					NWARN("accept: %s", e.what());
					return result_of(e);
				}
			}
		}
		if (*recv_comm) {
			progress_now(); // its introduction goes out now
			return ncclSuccess;
		}
		if (attempt == 0)
			idle();
	}
	return ncclSuccess; // not yet: NCCL calls again
}

// Tell the new recv comm's sender its id, so that small sends go inline
// before any Cts, and its eager slots where they are on (0 slots: off, or
// no memory for them; sends then wait for each Cts).
void Plugin::introduce_recv_comm_locked(RecvComm &c)
{
	proto::EagerRing m;
	m.send_id = c.remote_id;
	m.recv_id = c.id;
	EagerSlots &e = c.eager;
	if (cfg_.eager_max && cfg_.eager_slots) {
		try {
			e.slot_size = cfg_.eager_max;
			e.mem.reset(new uint8_t[e.slot_size * cfg_.eager_slots]);
			e.region = engine_->register_region(e.mem.get(), e.slot_size * cfg_.eager_slots);
			m.slots = static_cast<uint32_t>(cfg_.eager_slots);
			m.slot_size = e.slot_size;
			m.descriptor = engine_->descriptor(*e.region);
		} catch (const std::exception &x) {
			NWARN("recv comm %u: no eager slots (%s): sends will wait for each receive", c.id, x.what());
			e = EagerSlots{};
		}
	}
	try {
		send_control_locked(c.peer, proto::encode(m));
		e.slots = m.slots;
		c.told_id = true;
	} catch (const std::exception &x) {
		// Its first Cts tells the sender instead.
		NWARN("recv comm %u: telling the sender failed (%s): sends will wait for each receive", c.id, x.what());
		e = EagerSlots{};
	}
}

} // namespace hmemreg::nccl
