// SPDX-License-Identifier: MIT
// The engine behind the C API (c_api.cpp); what it does: hmemreg/engine.h.
// It throws hmemreg::Error where the C API returns the code.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fabric/error.hpp"
#include "hmemreg/engine_types.hpp"

struct hmemreg_export_handle; // hmemreg/export.h

namespace hmemreg::engine {

using hmemreg::Bytes;
using hmemreg::kUnknownPeer;
using hmemreg::PeerId;

struct Config {
	// libfabric provider, e.g. "tcp;ofi_rxm", "shm", "verbs;ofi_rxm". Empty:
	// the first RDM provider offering FI_MSG|FI_RMA (reported in caps()).
	std::string provider;
	// Optional node (address or host name) to open the endpoints on, e.g. a
	// veth address; empty: the provider's default.
	std::string node;
	// Optional domain (NIC) name filter, e.g. "lo", "rxe0".
	std::string domain;
	// Rails to open. Distinct NICs are used first; when fewer NICs than rails
	// exist, rails share a NIC (reported in caps().notes).
	unsigned rails = 1;
	// 0: no threads, the caller drives progress()/wait(). N: N progress threads.
	unsigned progress_threads = 1;
	// In-flight operations per rail; 0 = the provider's tx queue size.
	size_t queue_depth = 0;
	// In-flight operations per peer per rail, so one stalled peer cannot
	// take the whole queue; 0 = half the queue depth.
	size_t peer_queue_depth = 0;
	// Largest control message payload; receive buffers are this + header.
	size_t max_message = 4096;
	// Receive buffers pre-posted per rail and send buffers per rail.
	size_t recv_buffers = 64;
	size_t send_buffers = 64;
	// Split writes larger than this (0: per provider, hmemreg/engine.h;
	// provider.cpp says why).
	size_t max_write = 0;
	// Small chunks going to the same rail share one RDMA write (a local and a
	// remote iov each) up to this many, and max_write bytes together. 0: the
	// provider's limit (min of iov_limit and rma_iov_limit; tcp and shm: 4);
	// 1: one write per chunk.
	size_t write_iov = 0;
	// Post writes of a batch with FI_MORE (all but the last one).
	bool post_more = false;
	// Control messages queued together for one peer go as one send (and
	// one receive at the target) while they fit a receive buffer.
	// HMEMREG_ENGINE_BUNDLE=0 turns it off (a comparison, not a setting).
	bool bundle_messages = true;
	// Active transfers (writes and sends) before write()/send() say EAGAIN.
	size_t max_transfers = 4096;
	// Posts per rail per progress turn.
	size_t post_batch = 32;
	// A progress thread that found nothing to do for idle_spin turns sleeps
	// between turns until work shows up again: idle_sleep_us, then twice as
	// long each time, up to 16x (a quiet rail's thread wakes about a
	// thousand times a second, not twenty thousand).
	unsigned idle_spin = 20000;
	unsigned idle_sleep_us = 50;
	// A progress thread that sees a caller drove progress() since it last
	// looked sleeps this many microseconds instead of polling: the caller
	// (e.g. NCCL spinning on test()) already polls every rail, and on a host
	// with few cores spinning threads only take the CPU the caller and the
	// peer need. It counts the caller's turns, reading no clock. 0: threads
	// always poll.
	unsigned caller_backoff_us = 0;
	// Control messages (send()) all on rail 0 instead of round-robin over
	// the rails. With it, a caller's progress() polls rail 0 on every turn
	// but a rail with nothing of ours in flight and nothing arrived for a
	// while only one turn in 16 (each rail's poll is a system call on tcp):
	// small messages cost one poll, not one per rail.
	bool sends_on_first_rail = false;
	// With sends_on_first_rail: a write of at most this many bytes in all
	// goes on rail 0 too (with its Announce), where the target's caller
	// looks first; larger ones stripe over the rails. 0: none.
	size_t first_rail_write_max = 0;
	// A peer with unfinished transfers and no completion for this long is
	// declared dead: its transfers fail (HMEMREG_EFABRIC) and new ones are
	// refused until it is removed and added again. 0: never.
	// kPeerTimeoutDefault: HMEMREG_PEER_TIMEOUT_MS from the environment
	// (milliseconds, 0 = never; a value that does not parse fails creation
	// with HMEMREG_EINVAL), else kPeerTimeoutDefaultMs. caps() says which.
	static constexpr unsigned kPeerTimeoutDefault = ~0u;
	static constexpr unsigned kPeerTimeoutDefaultMs = 10000;
	static constexpr unsigned kPeerTimeoutMaxMs = 86'400'000; // a day
	unsigned peer_timeout_ms = kPeerTimeoutDefault;
	// How the target learns a write is complete (hmemreg/engine.h). Auto:
	// immediate where the provider has remote CQ data (8 B: writer-stamped
	// keys; 4 B: target-assigned writer index), else message. Immediate on a
	// provider with less than 4 B fails creation (HMEMREG_ENOTSUP).
	enum class Notify { Auto, Immediate, Message };
	Notify notify = Notify::Auto;
	// Remote CQ data bytes the immediate keys use: 0 = auto (8 where the
	// provider has 8, else 4 where it has 4), 4 or 8 (more than the provider
	// has fails creation with HMEMREG_ENOTSUP). 4 on an 8-byte provider tests
	// the 4-byte scheme. Any other value: HMEMREG_EINVAL.
	size_t imm_data_bytes = 0;
	// Fail creation unless the provider offers these.
	bool require_hmem = false;
	// Where a CUDA driver is loaded, ask the chosen provider for FI_HMEM too
	// (device memory then registers directly), and go on without it where
	// the provider does not offer it (device memory is then staged).
	bool ask_hmem = true;
	bool require_remote_cq_data = false;
	// Device memory where the provider has no FI_HMEM: stage it through pinned
	// host mirrors (true), or refuse it with HMEMREG_ENOTSUP (false).
	bool stage_device_memory = true;
	// HMEMREG_ENGINE_NO_PROVIDER_CUDA (engine.h says why): false asks every
	// rail's endpoint for FI_OPT_CUDA_API_PERMITTED = false.
	bool provider_cuda_calls = true;
	// Bytes per pipeline piece of a staged write.
	size_t staging_piece = 4u << 20;
};

// What the engine chose; describe() prints it.
struct Capabilities {
	std::string provider;
	std::string fabric;
	std::vector<std::string> rail_domains; // one per rail
	std::vector<std::string> rail_pci_paths; // one per rail: the NIC's sysfs path, or ""
	std::vector<uint64_t> rail_link_bps;     // one per rail: fi_nic's link speed, 0 where unknown
	bool rma = false;
	bool read_back = false;          // RDMA READ from a rail's own endpoint (read_back())
	uint32_t api_version = 0;        // libfabric API version asked for (FI_VERSION)
	bool hmem = false;               // FI_HMEM offered (and used)
	std::string hmem_why_not;        // why not, when not required
	bool dmabuf = false;             // device memory may register through FI_MR_DMABUF (FI_HMEM, API >= 1.20)
	bool remote_cq_data = false;     // cq_data_size > 0
	size_t cq_data_size = 0;
	bool delivery_complete = false;  // writes complete once data is at the target
	bool notify_immediate = false;   // targets learn completion from remote CQ data
	size_t imm_key_bytes = 0;        // 8: writer-stamped keys; 4: target-assigned writer index; 0: message
	std::string notify;              // the scheme chosen and why
	size_t queue_depth = 0;          // in-flight ops per rail actually used
	size_t peer_queue_depth = 0;     // of which one peer may use
	size_t max_write = 0;
	size_t write_iov = 1;            // chunks per RDMA write at most
	size_t inject_size = 0;
	std::string progress;            // who drives progress, and thread pinning
	std::string device_memory;       // how CUDA memory is moved (direct, staged, or why not)
	unsigned peer_timeout_ms = 0;    // the no-progress peer timeout in force (0: never)
	std::string peer_timeout;        // it, and where it came from (config, environment, default)
	std::vector<std::string> notes;  // capping and other decisions worth knowing
	std::string describe() const;
};

class Facade;
class Region;
class Transfer;
using RegionRef = std::shared_ptr<Region>;
using TransferRef = std::shared_ptr<Transfer>;

// Local memory registered on every rail of one engine. Deregistered when the
// last reference (the application's and those of transfers using it) goes.
class Region {
public:
	virtual ~Region() = default;
	virtual void *addr() const = 0;
	virtual size_t length() const = 0;
	// Device memory moved through a pinned host mirror (hmemreg/engine.h).
	virtual bool staged() const = 0;
};

// One chunk of a write: [local_offset, +len) of `local` goes to
// [remote_offset, +len) of the remote descriptor.
struct Chunk {
	const Region *local = nullptr;
	size_t local_offset = 0;
	size_t len = 0;
	size_t remote_offset = 0;
};

// A transfer (write or send). Completes exactly once.
class Transfer {
public:
	virtual ~Transfer() = default;
	// -HMEMREG_EAGAIN while in progress, 0 on success, -HMEMREG_E* on failure.
	virtual int status() const = 0;
	// Why it failed (empty on success or while pending).
	virtual std::string error() const = 0;
	virtual size_t bytes() const = 0;
	// True when either side of the write is staged device memory.
	virtual bool staged() const = 0;
};

using TransferCallback = std::function<void(const Transfer &)>;

struct Message {
	PeerId from;          // kUnknownPeer when the sender was not added here
	uint64_t sender;      // the sender engine's id (peer_engine_id(blob))
	std::span<const uint8_t> data;
};

struct Notification {
	PeerId from;
	uint64_t sender;
	uint64_t tag;         // the tag the writer passed to write()
	uint64_t bytes;
	uint32_t chunks;
};

// Per-rail counters (a snapshot).
struct RailStats {
	uint64_t writes_posted = 0, sends_posted = 0, recvs = 0; // sends and recvs: messages
	uint64_t sends_bundled = 0; // of sends_posted, those that went behind another in one send
	uint64_t completions = 0, errors = 0;
	uint64_t eagain = 0;       // posts the provider refused with -FI_EAGAIN
	uint64_t deferred = 0;     // progress turns that left queued work for later
	uint64_t queued = 0;       // ops waiting in the rail queue now
	uint64_t inflight = 0;     // ops posted and not yet completed now
};

// Which path writes took, engine-wide (a snapshot).
struct PathStats {
	uint64_t direct_writes = 0;        // write() calls (transfers): host memory, or device memory the NIC reaches
	uint64_t staged_writes = 0;        // from and/or to a staged region
	uint64_t staged_to_host_bytes = 0; // copied device -> mirror before sending
	uint64_t staged_to_device_bytes = 0; // copied mirror -> device after landing
	uint64_t staged_landings = 0;      // staged writes delivered to device memory here
	uint64_t staged_errors = 0;        // notices naming an unknown region or a bad range, failed
	                                   // copies, arrivals abandoned by their writer
	// Immediate notification, target side.
	uint64_t immediate_notices = 0;    // transfers notified from counted writes
	uint64_t immediate_abandoned = 0;  // partial arrivals dropped after peer_timeout_ms (60 s if 0), or
	                                   // inconsistent (more writes than announced, foreign key), or
	                                   // 4-byte keys left a quarter of the sequence space behind
	uint64_t immediate_pending = 0;    // transfers partly arrived now (writes or Announce missing)
	uint64_t immediate_writers = 0;    // writers holding a 4-byte key index assigned here
	// Writer side, host-memory writes: the target told by immediate data, or
	// by a Done message (message mode, or 4-byte keys with no index from the peer yet).
	uint64_t immediate_writes = 0;
	uint64_t message_writes = 0;
	// Device memory registered directly (FI_HMEM), all rails: through
	// FI_MR_DMABUF, or by address with iface and device (API < 1.20, the
	// provider refused DMA-BUF, or the export failed: device_address_why).
	uint64_t device_regs_dmabuf = 0;
	uint64_t device_regs_address = 0;
	std::string device_address_why;
	// Of the DMA-BUF ones, wrapped by hmemreg.ko's DMABUF provider (in its
	// pin ledger); device_wrap_why: why the last one was not.
	uint64_t device_regs_wrapped = 0;
	std::string device_wrap_why;
};

class Facade {
public:
	explicit Facade(const Config &config);
	// Stops the progress threads, then fails every unfinished transfer
	// (HMEMREG_EBUSY) and runs its callback here: once it returns, no callback
	// of this engine runs any more, and none is still running. Over ofi_rxm,
	// an engine that still had partial arrivals from a writer, or dropped one
	// after peer_timeout_ms, keeps its endpoints open (unprogressed) until the
	// process ends: closing them can crash libfabric (see facade.cpp).
	~Facade();
	Facade(const Facade &) = delete;
	Facade &operator=(const Facade &) = delete;

	const Capabilities &caps() const;
	uint64_t id() const;               // random, unique per engine instance
	Bytes address() const;             // this engine's peer blob

	// Adds a peer from its address blob; with warmup, also establishes the
	// connections on every rail before returning (bounded by `timeout`).
	PeerId add_peer(std::span<const uint8_t> address, bool warmup = false,
			std::chrono::milliseconds timeout = std::chrono::seconds(10));
	// Fails the peer's queued operations (HMEMREG_ENOENT), lets posted ones
	// finish, then drops its addresses. Unknown id: throws HMEMREG_ENOENT.
	// A dead peer (see Config::peer_timeout_ms) must be removed before it can
	// be added again.
	void remove_peer(PeerId peer);
	size_t peer_count() const;
	// Waits until the peer has no unfinished transfer: each completed or
	// failed, and its callback returned (one that posts more keeps it busy).
	// Then nothing the callbacks captured is still in use by the engine for
	// that peer. With peer_timeout_ms set, a dead or unreachable peer's
	// transfers fail within it, so this returns within about that long.
	// Drives progress itself when there are no progress threads. False on
	// timeout; unknown peer: HMEMREG_ENOENT; called from a callback of this
	// engine (which would wait for itself): HMEMREG_EBUSY.
	bool drain(PeerId peer, std::chrono::milliseconds timeout);
	// Whether writes to the peer now notify it with immediate data (false in
	// message mode, and with 4-byte keys until the peer assigned an index).
	bool immediate_to(PeerId peer) const;

	RegionRef register_region(void *addr, size_t len);
	// [offset, +len) of an hmemreg.ko export (hmemreg/export.h): its
	// DMA-BUF goes to the provider with FI_MR_DMABUF where it can (see
	// describe()). The export must outlive the region.
	RegionRef register_export(const ::hmemreg_export_handle *exp, size_t offset, size_t len);
	// [addr, +len) registered through the caller's DMA-BUF of it (`fd`,
	// addr at `offset` in it; NCCL's regMrDmaBuf): CUDA device memory by
	// that fd as given on a cache miss (staged regions ignore it), or one
	// of this process's hmemreg.ko exports named by its fd (or a dup). The
	// fd may be closed once this returns.
	RegionRef register_dmabuf(void *addr, size_t len, int fd, uint64_t offset);
	Bytes descriptor(const Region &region) const;
	// Reads len (1 to 64) bytes at offset of the region back through every
	// rail's NIC (read_back.hpp): once complete, what the NICs wrote into
	// the region before is in place for its device (GPUDirect RDMA's
	// flush). A staged region needs none (the engine landed it): done at once.
	TransferRef read_back(const Region &region, size_t offset, size_t len);
	// Copies [src_offset, +len) of src into dst at dst_offset through rail
	// 0's NIC (an RDMA READ from its own endpoint into dst): how data
	// reaches device memory the NIC registered without a CPU or CUDA call,
	// none of which may wait behind a GPU's kernels. Both regions this
	// engine's, neither staged; needs FI_READ (read_back in the caps).
	TransferRef nic_copy(const Region &dst, size_t dst_offset, const Region &src, size_t src_offset, size_t len);

	// Writes the chunks to the peer's region described by `remote`. `tag` is
	// handed to the target's on_notify once every byte is in place.
	TransferRef write(PeerId peer, std::span<const Chunk> chunks, std::span<const uint8_t> remote,
			  uint64_t tag = 0, TransferCallback done = {});
	// A control message of at most Config::max_message bytes.
	TransferRef send(PeerId peer, std::span<const uint8_t> data, TransferCallback done = {});
	// What a send's completion means: the target has the message
	// (Delivered, the default), or only that it left this engine
	// (Transmitted: no wait for the target, e.g. no round trip on shm; the
	// message is the engine's copy either way, and messages to one peer
	// stay in order).
	enum class SendCompletion { Delivered, Transmitted };
	// Whether the body is copied (the caller's memory is free when send
	// returns) or Borrowed: sent from where it lies where the provider
	// allows, so the caller keeps it valid and unchanged until `done` ran
	// (or send threw).
	enum class SendBody { Copied, Borrowed };
	// The message head + body (one copy of each: e.g. a header and the
	// caller's small payload), at most Config::max_message bytes together.
	TransferRef send(PeerId peer, std::span<const uint8_t> head, std::span<const uint8_t> body,
			 TransferCallback done = {}, SendCompletion completion = SendCompletion::Delivered,
			 SendBody how = SendBody::Copied);

	// Set before adding peers; called from progress context.
	void on_message(std::function<void(const Message &)> fn);
	void on_notify(std::function<void(const Notification &)> fn);

	// One progress turn over every rail (any mode); returns events handled.
	size_t progress();
	// Until the transfer completes or the timeout passes; drives progress
	// itself when there are no progress threads. True when complete.
	bool wait(const Transfer &t, std::chrono::milliseconds timeout);

	std::vector<RailStats> stats() const;
	PathStats path_stats() const;

	struct Impl;

private:
	friend struct TestAccess; // engine_impl.hpp: tests reach the internals
	std::unique_ptr<Impl> impl_;
};

// The engine id inside an address blob (throws HMEMREG_EINVAL on a bad blob).
uint64_t peer_engine_id(std::span<const uint8_t> address);

} // namespace hmemreg::engine
