// SPDX-License-Identifier: MIT
// The plugin proper: one transfer engine per process (NCCL device 0), the
// comms, requests and memory handles NCCL holds, and the control protocol
// (protocol.hpp) that turns NCCL's two-sided isend/irecv into receiver-
// advertised RDMA writes. The versioned tables (tables.cpp) are thin shims.
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
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config.hpp"
#include "device_copies.hpp"
#include <hmemreg/engine.hpp>
#include "nccl_abi.h"
#include "protocol.hpp"
#include "registrations.hpp"

namespace hmemreg::nccl {

struct Request;

struct Comm {
	enum class Kind : uint32_t { Listen, Send, Recv };
	explicit Comm(Kind k, uint32_t i) : kind(k), id(i) {}
	virtual ~Comm() = default;
	const Kind kind;
	const uint32_t id;
};

struct PendingConnect {
	uint32_t send_id;
	uint64_t engine_id;
	std::vector<uint8_t> address;
};

struct ListenComm final : Comm {
	ListenComm(uint32_t i, uint64_t lid) : Comm(Kind::Listen, i), listen_id(lid) {}
	const uint64_t listen_id;
	std::deque<PendingConnect> pending;
};

struct SendComm final : Comm {
	SendComm(uint32_t i, PeerId p, uint64_t e) : Comm(Kind::Send, i), peer(p), peer_engine(e) {}
	const PeerId peer;
	const uint64_t peer_engine;
	uint32_t next_seq = 0;
	uint32_t remote_id = 0;                          // the recv comm, learnt from its first Cts
	std::unordered_map<uint32_t, proto::Cts> cts;    // advertised, not yet sent into
	size_t outstanding = 0;
	bool peer_closed = false;
	// The first send whose Fail could not be sent: its receive, and those
	// after it, fail at our Close rather than wait for data that never comes.
	std::optional<uint32_t> fail_lost;
	// The receiver's eager slots (protocol.hpp), once its EagerRing came.
	struct {
		uint32_t slots = 0; // 0: not known (yet), no eager sends
		uint64_t slot_size = 0;
		std::vector<uint8_t> descriptor;
		uint32_t done_upto = 0; // latest Cts's: slots of seqs before it are free
	} eager;
	// Sends whose data was ready before the receiver's Cts came, and how
	// long they waited for it in all (said at close: NCCL_DEBUG=INFO NET).
	uint64_t sends = 0, bytes = 0, eager_sends = 0, inline_sends = 0, waited = 0, wait_ns = 0;
	std::chrono::steady_clock::time_point waiting_since{};
};

// A recv comm's eager slots: one registered buffer, slot i at i * slot_size.
struct EagerSlots {
	std::unique_ptr<uint8_t[]> mem;
	RegionRef region;
	uint32_t slots = 0;
	size_t slot_size = 0;
	uint8_t *slot(uint32_t seq) const { return mem.get() + static_cast<size_t>(seq % slots) * slot_size; }
};

struct RecvComm final : Comm {
	RecvComm(uint32_t i, PeerId p, uint64_t e, uint32_t r)
		: Comm(Kind::Recv, i), peer(p), peer_engine(e), remote_id(r)
	{
	}
	const PeerId peer;
	const uint64_t peer_engine;
	const uint32_t remote_id;                        // the send comm
	uint32_t next_seq = 0;
	std::unordered_map<uint32_t, std::shared_ptr<Request>> pending;
	size_t outstanding = 0;
	bool peer_closed = false;
	uint32_t peer_sent = 0; // once peer_closed: receives before it still get their data
	std::chrono::steady_clock::time_point closed_at{}; // when the sender's Close came
	EagerSlots eager;                                 // slots == 0: eager off
	std::unordered_map<uint32_t, size_t> eager_early; // seq -> bytes landed before its irecv
	struct Early {
		int32_t tag;
		std::vector<uint8_t> data;
	};
	std::unordered_map<uint32_t, Early> inline_early; // seq -> Inline data before its irecv
	uint32_t eager_uncredited = 0; // receives served from eager slots since the sender last heard done_upto
	// Receives complete before done_upto; those completed out of order after it.
	uint32_t done_upto = 0;
	std::unordered_set<uint32_t> done_ahead;
	uint32_t credit_sent = 0; // done_upto as the sender last heard it (Cts or Credit)
	bool told_id = false;     // the sender knows this comm's id (EagerRing or a Cts went out)
};

struct Request {
	enum class State { Pending, Done, Failed };
	bool send = false;
	uint32_t comm_id = 0;
	uint32_t seq = 0;
	size_t size = 0;     // send size, or posted capacity
	int tag = 0;         // receive: the posted tag
	// A small receive's Cts is not sent (its send comes inline) unless the
	// receive still waits at deferred_until (looked at every 64th test()).
	bool deferred = false;
	uint32_t tests = 0;
	std::chrono::steady_clock::time_point deferred_until{};
	void *mhandle = nullptr; // receive: its buffer's handle (a key of mhandles_), and the
	uint64_t offset = 0;     // buffer's offset in that region
	uint8_t *data = nullptr; // receive buffer (Inline and eager data are copied there)
	int device = -1;         // its CUDA device, -1: host memory
	State state = State::Pending;
	size_t bytes = 0;    // what test() reports
	ncclResult_t error = ncclSuccess;
	std::string why;
	// A send while the engine holds its completion callback (a C callback
	// with this request as its argument: no std::function, no handle): the
	// request itself, released by that callback, which runs exactly once
	// (failed, at the latest, when the engine goes). Under Plugin::mu_.
	std::shared_ptr<Request> engine_hold;
	class Plugin *plugin = nullptr;
	// A receive whose data (Inline or eager) is still being copied into its
	// device buffer: settled by the test() that finds the copy done. Its
	// source stays: Inline data here, an eager slot reserved until then.
	DeviceCopies::Event landing;
	std::vector<uint8_t> landing_src;
	size_t landing_bytes = 0;
	bool landing_eager = false;
	std::chrono::steady_clock::time_point posted{}; // for Config::stall_ms
	bool stall_told = false;
};

struct MemHandle {
	RegionRef region; // null for a zero-length registration
	uintptr_t addr = 0;
	size_t size = 0;
	int cuda_device = -1;     // CUDA device memory of this ordinal, else -1
	std::vector<uint8_t> descriptor;
};

class Plugin {
public:
	// Reads the environment and opens the engine; logs and returns an
	// error NCCL understands on failure.
	static ncclResult_t create(std::unique_ptr<Plugin> &out);
	~Plugin();

	int devices() const { return 1; }
	ncclResult_t properties(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t listen(int dev, void *handle, void **listen_comm);
	ncclResult_t connect(int dev, void *handle, void **send_comm);
	ncclResult_t accept(void *listen_comm, void **recv_comm);
	ncclResult_t reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
				   void **mhandle);
	ncclResult_t dereg_mr(void *comm, void *mhandle);
	ncclResult_t isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
	ncclResult_t irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			   void **request);
	ncclResult_t iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
	ncclResult_t test(void *request, int *done, int *sizes);
	ncclResult_t close_send(void *send_comm);
	ncclResult_t close_recv(void *recv_comm);
	ncclResult_t close_listen(void *listen_comm);

	void stats(struct hmemreg_nccl_counters &out);
	size_t live_comms();

private:
	explicit Plugin(const Config &cfg);
	template <typename T> T *find_locked(void *comm, Comm::Kind kind);
	PeerId peer_for_locked(uint64_t engine_id, std::span<const uint8_t> address);
	void progress_now(); // caller-driven mode: one engine progress turn
	void idle();         // nothing to do yet: progress turn, or yield to the progress thread
	void choose_pointer_support(const EngineInfo &caps);
	void watch_stalls(); // the stall watch's thread (Config::stall_ms)
	void tell_stalls_locked(std::chrono::steady_clock::time_point now);
	void on_message(const Message &m);
	void on_notify(const Notification &n);
	void complete_recv_locked(uint32_t recv_id, uint32_t seq, size_t bytes, ncclResult_t err, const std::string &why);
	void expire_after_close_locked(Request &r);
	void send_deferred_cts_locked(Request &r);
	proto::Cts cts_of_locked(const RecvComm &c, const Request &r, const MemHandle *mh) const;
	SendComm *send_comm_of_locked(uint32_t id, uint64_t sender);
	void credit_locked(SendComm &c, uint32_t done_upto);
	void offer_eager_locked(RecvComm &c);
	void mark_done_locked(RecvComm &c, uint32_t seq);
	void land_eager(const std::shared_ptr<Request> &r, const uint8_t *slot, size_t bytes);
	void land_inline_locked(RecvComm &c, Request &r, int32_t tag, std::span<const uint8_t> data);
	// A landing of r in device memory found done (or failed) by test().
	void settle_landing_locked(Request &r);
	void finish_landing_locked(Request &r, bool eager);
	void send_control_locked(PeerId peer, std::span<const uint8_t> msg);
	// The engine's completion of a send made by try_isend (arg: its Request).
	static void send_done(void *arg, int status);
	// Settles send r (under mu_) from the engine's status.
	void settle_send_locked(Request &r, int status, const char *why);
	ncclResult_t post_recv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			       void **request);
	// behind: an Inline send with other sends of the comm outstanding (it
	// may wait for the next turn, going out with them).
	ncclResult_t try_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request,
			       bool &missing_cts, bool &behind);

	Config cfg_;
	std::string dev_name_;
	std::string pci_path_; // rail 0's NIC (getProperties' pciPath), "" where none
	// NCCL_PTR_HOST, plus NCCL_PTR_CUDA | NCCL_PTR_DMABUF where the engine
	// takes device memory (Config::device_memory; Plugin::Plugin).
	int ptr_support_ = NCCL_PTR_HOST;
	std::string host_only_why_; // why not more, when HOST only
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
	uint64_t bytes_sent_ = 0, bytes_received_ = 0, eager_receives_ = 0, peer_closes_ = 0;
	std::atomic<uint64_t> device_regs_{0}, flushes_{0};
	DeviceCopies copies_; // Inline and eager data into device buffers
	std::mutex watch_mu_;
	std::condition_variable watch_cv_;
	bool watch_stop_ = false;
	std::thread watch_; // joined first in ~Plugin
	// Eager slots of closed recv comms (8 MiB each by default), freed with the engine.
	std::vector<std::unique_ptr<uint8_t[]>> retired_eager_;

	// Last members: destroyed first, so no engine callback outlives the
	// state above.
	std::unique_ptr<Engine> engine_;
	std::unique_ptr<Registrations> regs_;
};

} // namespace hmemreg::nccl
