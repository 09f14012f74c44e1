// SPDX-License-Identifier: MIT
// What NCCL's opaque handles point to: comms (listen, send, recv), requests
// and memory handles. The Plugin (plugin.hpp) owns them all, under its mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "device_copies.hpp"
#include <hmemreg/engine.hpp>
#include "nccl_abi.h"
#include "protocol.hpp"

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
	// long they waited in all; of that, how long after the Cts came (NCCL
	// calling isend again). Said at close: NCCL_DEBUG=INFO NET.
	uint64_t sends = 0, bytes = 0, eager_sends = 0, inline_sends = 0, waited = 0, wait_ns = 0, after_cts_ns = 0;
	std::chrono::steady_clock::time_point waiting_since{}, cts_came{};
};

// How Inline and eager data (which come through host memory) reach a
// receive buffer: the CPU copies into host memory; CUDA copies on the
// plugin's streams into staged device memory (the staged hang: README);
// the NIC copies into device memory it registered (Engine::nic_copy), with
// no CPU access and no CUDA call.
enum class Landing { Cpu, Cuda, Nic };

// A recv comm's eager slots: one registered buffer, slot i at i * slot_size.
struct EagerSlots {
	std::unique_ptr<uint8_t[]> mem;
	RegionRef region;
	uint32_t slots = 0;
	size_t slot_size = 0;
	uint8_t *slot(uint32_t seq) const { return mem.get() + static_cast<size_t>(seq % slots) * slot_size; }
};

// A recv comm's registered host entries for Inline data that the NIC
// copies into device memory (Landing::Nic), made at the first such
// landing: one entry per receive the comm may have outstanding
// (MAX_REQUESTS), so one is always free for a posted receive.
struct InlineEntries {
	std::unique_ptr<uint8_t[]> mem;
	RegionRef region;
	size_t entry_size = 0;
	std::vector<uint32_t> free;
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
	InlineEntries inline_entries;                     // Landing::Nic only
	uint64_t nic_landings = 0;                        // receives landed that way (said at close)
	// Receives whose data came by a write after their Cts, and how long
	// after it in all: set beside the senders' wait for a Cts, it tells a
	// receive NCCL posted late from a Cts slow to arrive (said at close).
	uint64_t written = 0, written_ns = 0;
	// Receives served from eager slots, and the CPU's time copying host
	// buffers out of them: the price of the wait they saved (said at close).
	uint64_t eager_landed = 0, eager_copy_ns = 0;
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
	uint32_t tests = 0; // test() calls on it; every 64th reads the clock into last_test
	std::chrono::steady_clock::time_point last_test{};
	std::chrono::steady_clock::time_point deferred_until{};
	void *mhandle = nullptr; // receive: its buffer's handle (a key of mhandles_), and the
	uint64_t offset = 0;     // buffer's offset in that region
	uint8_t *data = nullptr; // receive buffer (Inline and eager data are copied there)
	int device = -1;         // its CUDA device, -1: host memory
	Landing route = Landing::Cpu; // how Inline and eager data reach it
	RegionRef region;             // Landing::Nic: its buffer's registration
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
	// source stays until then: an eager slot, or the Inline data (here for
	// a CUDA copy, in an entry of the comm's InlineEntries for the NIC's).
	struct PendingLanding {
		DeviceCopies::Event cuda;
		TransferRef nic;
		std::vector<uint8_t> src;
		int64_t inline_entry = -1;
		size_t bytes = 0;
		bool eager = false;
		explicit operator bool() const { return cuda || nic; }
	} landing;
	// An iflush (flush.cpp): the read-backs it waits for.
	bool flush = false;
	std::vector<TransferRef> read_backs;
	std::chrono::steady_clock::time_point posted{}; // for Config::stall_ms
	std::chrono::steady_clock::time_point advertised{}; // its Cts went out (RecvComm::written_ns)
	bool stall_told = false;
};

struct MemHandle {
	RegionRef region; // null for a zero-length registration
	uintptr_t addr = 0;
	size_t size = 0;
	int cuda_device = -1;     // CUDA device memory of this ordinal, else -1
	// Device memory (CUDA, or a DMA-BUF such as an hmemreg.ko export): the
	// CPU neither reads it for an Inline or eager send nor writes it.
	Landing landing = Landing::Cpu;
	// A NIC writes it itself (device memory on the GPUDirect RDMA path, an
	// hmemreg.ko export): iflush reads a receive's last bytes back.
	bool read_back = false;
	std::vector<uint8_t> descriptor;
};

} // namespace hmemreg::nccl
