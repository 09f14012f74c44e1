// SPDX-License-Identifier: MIT
// The plugin proper: one transfer engine per process (NCCL device 0), the
// comms, requests and memory handles NCCL holds (handles.hpp), and the
// control protocol (protocol.hpp) that turns NCCL's two-sided isend/irecv
// into receiver-advertised RDMA writes. The versioned tables (tables.cpp)
// are thin shims. Its members are defined one file per part, named below.
//
// Every handle NCCL passes back (comm, request, mhandle) is looked up in a
// registry before use, so a stale or foreign pointer is an error, not a
// crash. One mutex guards plugin state; it is never held while the engine
// makes progress, because engine callbacks take it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config.hpp"
#include "device_copies.hpp"
#include "handles.hpp"
#include "timeline.hpp"
#include <hmemreg/engine.hpp>
#include "nccl_abi.h"
#include "protocol.hpp"
#include "registrations.hpp"

namespace hmemreg::nccl {

// The NCCL result for an engine error (plugin.cpp).
ncclResult_t result_of(const Error &e);

// Sequence numbers wrap: a is before b.
inline bool seq_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

class Plugin {
public:
	// Reads the environment and opens the engine; logs and returns an
	// error NCCL understands on failure.
	static ncclResult_t create(std::unique_ptr<Plugin> &out);
	~Plugin();

	// plugin.cpp
	int devices() const { return 1; }
	ncclResult_t properties(int dev, ncclNetProperties_v11_t *props);
	void stats(struct hmemreg_nccl_counters &out);
	size_t live_comms();
	// connections.cpp
	ncclResult_t listen(int dev, void *handle, void **listen_comm);
	ncclResult_t connect(int dev, void *handle, void **send_comm);
	ncclResult_t accept(void *listen_comm, void **recv_comm);
	// flush.cpp
	void settle_read_backs_locked(Request &r);

	// memory_handles.cpp
	ncclResult_t reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
				   void **mhandle);
	ncclResult_t dereg_mr(void *comm, void *mhandle);
	// send.cpp
	ncclResult_t isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
	// recv.cpp
	ncclResult_t irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			   void **request);
	ncclResult_t iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
	// requests.cpp
	ncclResult_t test(void *request, int *done, int *sizes);
	// close.cpp
	ncclResult_t close_send(void *send_comm);
	ncclResult_t close_recv(void *recv_comm);
	ncclResult_t close_listen(void *listen_comm);

private:
	// plugin.cpp: setup, and what the other files share
	explicit Plugin(const Config &cfg);
	void choose_pointer_support(const EngineInfo &caps);
	template <typename T> T *find_locked(void *comm, Comm::Kind kind);
	PeerId peer_for_locked(uint64_t engine_id, std::span<const uint8_t> address);
	void progress_now(); // caller-driven mode: one engine progress turn
	void idle();         // nothing to do yet: progress turn, or yield to the progress thread
	void send_control_locked(PeerId peer, std::span<const uint8_t> msg);

	// memory_handles.cpp
	ncclResult_t register_buffer(const char *call, void *comm, void *data, size_t size, int type, int fd,
				     uint64_t offset, void **mhandle);
	ncclResult_t classify_device_handle(const char *call, MemHandle &h);
	ncclResult_t buffer_handle_locked(const char *call, const void *data, size_t size, void *mhandle,
					  MemHandle *&mh);

	// connections.cpp
	void introduce_recv_comm_locked(RecvComm &c);

	// send.cpp
	// behind: an Inline send with other sends of the comm outstanding (it
	// may wait for the next turn, going out with them).
	ncclResult_t try_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request,
			       bool &missing_cts, bool &behind);
	enum class SendRoute { Wait, Inline, Eager, Advertised };
	SendRoute send_route_locked(const SendComm &c, const MemHandle *mh, size_t size, bool has_cts) const;
	ncclResult_t fail_unmatched_send_locked(SendComm &c, std::unordered_map<uint32_t, proto::Cts>::iterator ct,
						int tag, size_t size);
	// The engine's return code; send_done runs exactly once if it is 0.
	int post_inline_locked(const SendComm &c, Request &rq, int tag, const void *data);
	int post_empty_locked(const SendComm &c, Request &rq, const proto::Cts &cts);
	int post_write_locked(const SendComm &c, Request &rq, const proto::Cts *cts, const void *data,
			      const MemHandle &mh);
	void count_send_locked(SendComm &c, SendRoute route, size_t size);
	// The engine's completion of a send made by try_isend (arg: its Request).
	static void send_done(void *arg, int status);
	// Settles send r (under mu_) from the engine's status.
	void settle_send_locked(Request &r, int status, const char *why);
	SendComm *send_comm_of_locked(uint32_t id, uint64_t sender);
	void credit_locked(SendComm &c, uint32_t done_upto);

	// recv.cpp
	ncclResult_t post_recv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			       void **request);
	std::shared_ptr<Request> recv_request_locked(const RecvComm &c, void *data, size_t size, int tag, void *mhandle,
						     const MemHandle *mh) const;
	void hand_out_recv_locked(RecvComm &c, std::shared_ptr<Request> rq, void **request);
	ncclResult_t advertise_recv_locked(RecvComm &c, Request &r, const MemHandle *mh, bool &later);
	proto::Cts cts_of_locked(const RecvComm &c, const Request &r, const MemHandle *mh) const;
	void send_deferred_cts_locked(Request &r);
	void mark_done_locked(RecvComm &c, uint32_t seq);
	void complete_recv_locked(uint32_t recv_id, uint32_t seq, size_t bytes, ncclResult_t err, const std::string &why);
	void on_notify(const Notification &n);

	// recv_landing.cpp
	void land_eager(const std::shared_ptr<Request> &r, const uint8_t *slot, size_t bytes);
	void land_inline_locked(RecvComm &c, Request &r, int32_t tag, std::span<const uint8_t> data);
	bool start_device_landing_locked(RecvComm &c, Request &r, std::span<const uint8_t> data);
	// A landing of r in device memory found done (or failed) by test().
	void settle_landing_locked(Request &r);
	void finish_landing_locked(Request &r, bool eager, uint64_t copy_ns);

	// close.cpp
	void expire_after_close_locked(Request &r);

	// control_messages.cpp: on_message, and a handler per message type
	void on_message(const Message &m);
	void on_connect_locked(proto::Connect &m, uint64_t sender);
	void on_cts_locked(proto::Cts &m, uint64_t sender);
	void on_eager_ring_locked(proto::EagerRing &m, uint64_t sender);
	void on_credit_locked(const proto::Credit &m, uint64_t sender);
	void on_inline_locked(const proto::Inline &m, uint64_t sender);
	void on_empty_locked(const proto::Empty &m, uint64_t sender);
	void on_fail_locked(const proto::Fail &m, uint64_t sender);
	void on_close_locked(const proto::Close &m, uint64_t sender);

	// Steps of a send and of a receive for the timeline (Config::timeline_dir).
	void mark_send(Step s, const SendComm &c, uint32_t seq, uint64_t bytes)
	{
		if (timeline_)
			timeline_->mark(s, engine_id_, c.id, seq, bytes);
	}
	void mark_recv(Step s, const RecvComm &c, uint32_t seq, uint64_t bytes)
	{
		if (timeline_)
			timeline_->mark(s, c.peer_engine, c.remote_id, seq, bytes);
	}

	// stall_watch.cpp
	void watch_stalls(); // the stall watch's thread (Config::stall_ms)
	void tell_stalls_locked(std::chrono::steady_clock::time_point now);

	Config cfg_;
	std::string dev_name_;
	std::string pci_path_; // rail 0's NIC (getProperties' pciPath), "" where none
	int speed_mbps_ = 0;   // getProperties' speed (port_speed.hpp)
	// NCCL_PTR_HOST, plus NCCL_PTR_CUDA | NCCL_PTR_DMABUF where the engine
	// takes device memory (Config::device_memory; Plugin::Plugin).
	int ptr_support_ = NCCL_PTR_HOST;
	std::string host_only_why_; // why not more, when HOST only
	// iflush reads back device buffers a NIC wrote (pointer_policy.hpp).
	bool read_back_ = false;
	std::mutex mu_;
	uint32_t next_comm_id_ = 1;
	std::unordered_map<void *, std::unique_ptr<Comm>> comms_;
	std::unordered_map<uint64_t, ListenComm *> listens_;
	std::unordered_map<uint32_t, SendComm *> sends_;
	std::unordered_map<uint32_t, RecvComm *> recvs_;
	std::unordered_map<void *, std::shared_ptr<Request>> requests_;
	std::unordered_map<void *, std::unique_ptr<MemHandle>> mhandles_;
	std::unordered_map<uint64_t, PeerId> peers_;
	// Encoded control messages on the hot paths (Cts, Inline heads), under
	// mu_: the engine copies them at once, the capacity stays.
	std::vector<uint8_t> wire_;
	uint64_t bytes_sent_ = 0, bytes_received_ = 0, eager_receives_ = 0, peer_closes_ = 0, nic_landings_ = 0;
	std::atomic<uint64_t> device_regs_{0}, flushes_{0};
	DeviceCopies copies_; // Inline and eager data into device buffers
	std::mutex watch_mu_;
	std::condition_variable watch_cv_;
	bool watch_stop_ = false;
	std::thread watch_; // joined first in ~Plugin
	// Eager slots of closed recv comms (8 MiB each by default), freed with the engine.
	std::vector<std::unique_ptr<uint8_t[]>> retired_eager_;
	// Outlives the engine: its callbacks mark sends done.
	std::unique_ptr<Timeline> timeline_;
	uint64_t engine_id_ = 0;

	// Last members: destroyed first, so no engine callback outlives the
	// state above.
	std::unique_ptr<Engine> engine_;
	std::unique_ptr<Registrations> regs_;
};

template <typename T> T *Plugin::find_locked(void *comm, Comm::Kind kind)
{
	auto it = comms_.find(comm);
	if (it == comms_.end() || it->second->kind != kind)
		return nullptr;
	return static_cast<T *>(it->second.get());
}

} // namespace hmemreg::nccl
