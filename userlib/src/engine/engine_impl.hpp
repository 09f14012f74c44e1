// SPDX-License-Identifier: MIT
// The engine's state, shared by engine.cpp (rails, peers, host-memory writes)
// and staging.cpp (device memory through pinned host mirrors).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/engine.hpp"
#include "engine/progress_thread.hpp"
#include "engine/rail.hpp"
#include "engine/registrar.hpp"
#include "engine/topology.hpp"
#include "engine/transfer.hpp"
#include "engine/wire.hpp"
#include "hmem/cuda_memory.hpp"

namespace hmemreg::engine {

struct StagedMemory;
struct Staging;

class RegionImpl final : public Region, public std::enable_shared_from_this<RegionImpl> {
public:
	RegionImpl(uint64_t engine, void *addr, size_t len, std::vector<std::shared_ptr<DomainHolder>> domains,
		   std::unique_ptr<LocalRegistration> reg, std::unique_ptr<StagedMemory> staged = nullptr);
	~RegionImpl() override;
	void *addr() const override { return addr_; }
	size_t length() const override { return len_; }
	bool staged() const override { return staged_ != nullptr; }
	// What the NIC reads and writes: the memory itself, or its host mirror.
	uint8_t *io_addr() const;
	StagedMemory *staging() const { return staged_.get(); }

	const uint64_t engine_id;

private:
	void *addr_;
	size_t len_;
	std::unique_ptr<StagedMemory> staged_; // freed last, after the MR of its mirror (reg)
	std::vector<std::shared_ptr<DomainHolder>> domains_; // outlive the registration

public:
	std::unique_ptr<LocalRegistration> reg;
};

struct Engine::Impl {
	Config cfg;
	Capabilities caps;
	uint64_t id;
	bool virt_addr = false;
	Topology topo;
	std::vector<std::unique_ptr<Rail>> rails;
	std::vector<RailCache *> caches;

	mutable std::mutex peers_mu;
	std::unordered_map<PeerId, std::shared_ptr<PeerState>> peers;
	std::unordered_map<uint64_t, PeerId> by_engine;
	std::vector<std::shared_ptr<PeerState>> retiring;
	// 4-byte keys: a removed target's next sequence, so that adding it again
	// carries on after the keys its old incarnation used (a fresh random
	// start could land on a key whose partial arrival the target still
	// holds), with when it was removed (entries older than any arrival's
	// life are pruned).
	struct SeqKept {
		uint32_t next;
		int64_t removed_ns;
	};
	std::unordered_map<uint64_t, SeqKept> imm4_seq_kept;
	std::atomic<bool> has_retiring{false};
	PeerId next_peer = 1;

	std::mutex handlers_mu;
	std::function<void(const Message &)> on_message;
	std::function<void(const Notification &)> on_notify;

	std::mutex active_mu;
	std::unordered_set<TransferImpl *> active;
	std::atomic<unsigned> next_rail{0};
	std::vector<unsigned> all_rails; // 0..rails-1
	// Per rail: turns since one last handled an event (Config::sends_on_first_rail).
	std::unique_ptr<std::atomic<uint32_t>[]> rail_quiet;
	std::atomic<uint32_t> caller_turns{0};
	size_t caller_turn(); // progress() of a caller
	bool caller_covers(std::span<const unsigned> rail_ids) const;
	static constexpr uint32_t kActiveTurns = 256; // a rail is active this many turns after an event
	std::atomic<uint64_t> direct_writes{0};
	// CUDA devices (bit = ordinal < 64) with regions registered directly:
	// before notifying, the target waits for the device copies a CPU-driven
	// provider (shm: cudaMemcpy, which returns early device to device) queued
	// on this process's legacy stream, so a notification means the bytes are
	// in device memory for any stream.
	std::atomic<uint64_t> direct_devices{0};

	// Immediate notification, writer side: the next key's sequence.
	std::atomic<uint32_t> next_imm_seq{0};
	// Target side: writes counted per key until the Announce's count is met.
	struct Arrival {
		uint32_t seen = 0;
		uint32_t expected = 0;
		bool announced = false;
		Notification note{};
		int64_t touched = 0; // steady_clock ns of the last event
	};
	std::mutex arrivals_mu;
	std::unordered_map<uint64_t, Arrival> arrivals;
	std::atomic<uint64_t> imm_notices{0}, imm_abandoned{0};
	std::atomic<uint64_t> imm_expired{0}; // of those abandoned: idle for peer_timeout (the writer broke)
	std::atomic<uint64_t> imm_writes{0}, msg_writes{0};
	// 4-byte keys, target side (under arrivals_mu): the engine id owning each
	// writer index (0: free; index 0 unused), the reverse, and writers that
	// asked before being added as peers (answered by add_peer).
	std::vector<uint64_t> imm4_writer;
	std::vector<uint32_t> imm4_latest; // per index: latest sequence announced
	static constexpr uint32_t kNoSeq = UINT32_MAX;
	void imm4_advance(uint32_t idx, uint32_t seq);
	std::unordered_map<uint64_t, uint32_t> imm4_index_of;
	std::unordered_set<uint64_t> imm4_waiting;
	void notify_app(std::span<const Notification> notes);
	void on_immediate(std::span<const uint64_t> keys);
	void on_announce(const Events::Msg &m);
	void on_imm_join(uint64_t writer);
	void on_imm_index(const Events::Msg &m);
	void send_imm_index(const std::shared_ptr<PeerState> &p);
	void send_imm_join(const std::shared_ptr<PeerState> &p);
	void choose_notify(size_t cq_data_size, const std::string &prov);
	void expire_arrivals();
	// Teardown: progress turns until the rails are quiet (bounded).
	void settle();
	// Whether closing the endpoints may meet a remote write half received
	// from a writer that broke (engine.cpp, ~Engine).
	bool writer_broke();
	std::atomic<int64_t> last_expiry{0};

	std::unique_ptr<Staging> staging; // device memory without FI_HMEM
	std::atomic<bool> closing{false};
	std::unique_ptr<ProgressThreads> threads; // stopped first on destruction

	explicit Impl(const Config &c);
	~Impl();
	void open_rails();
	std::shared_ptr<PeerState> find_peer(PeerId p) const;
	// internal: a piece of an admitted staged write (not counted against max_transfers)
	void admit(const std::shared_ptr<TransferImpl> &x, bool internal = false);
	void report(TransferImpl &x);
	void finish(const std::shared_ptr<TransferImpl> &x);
	void watchdog();
	std::atomic<int64_t> last_watchdog{0};
	std::atomic<uint64_t> doom_epoch{0};
	void dispatch(Events &ev);
	size_t turn(std::span<const unsigned> rail_ids);
	void retire_peers();
	void kick();
	std::shared_ptr<TransferImpl> make_send(const std::shared_ptr<PeerState> &peer, wire::MsgType type,
						std::span<const uint8_t> data, unsigned rail, TransferCallback cb,
						std::span<const uint8_t> body = {});
	// Segments of the chunks (already validated against `d`), admitted and queued.
	std::shared_ptr<TransferImpl> post_write(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
						 const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done,
						 bool internal);
	PeerId peer_of(uint64_t engine_id) const;

	// staging.cpp
	void describe_device_memory();
	RegionRef register_staged(void *addr, size_t len, const cuda::PointerInfo &info);
	TransferRef write_staged(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
				 const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done);
	size_t poll_staging();
	void on_landed(const Events::Msg &m);
	void on_staged_done(const Events::Msg &m, PeerId from);
	void drain_staging();
};

// Tests only: the engine's internals (e.g. to send forged control messages).
struct TestAccess {
	static Engine::Impl &impl(Engine &e) { return *e.impl_; }
};

} // namespace hmemreg::engine
