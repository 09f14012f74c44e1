// SPDX-License-Identifier: MIT
// The engine's core: the rails, admission of transfers (max_transfers, dead
// peers), their completion (report once, release), control messages and
// planned writes handed to the rails, and each rail's progress turn. It
// knows no notification scheme and no staging: those sit above it and use
// plan()/submit() and send(); what the rails receive goes up through the
// dispatcher (facade.cpp's turn).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "engine/facade.hpp"
#include "engine/progress_thread.hpp"
#include "engine/rail.hpp"
#include "engine/region.hpp"
#include "engine/topology.hpp"
#include "engine/transfer.hpp"
#include "engine/transfer_pool.hpp"
#include "engine/wire.hpp"

namespace hmemreg::engine {

// A random engine id (nonzero low 32 bits; see wire::kVersion).
uint64_t random_id();

struct Core {
	Config cfg;
	Capabilities caps;
	uint64_t id;
	bool virt_addr = false;
	Topology topo;
	std::vector<std::unique_ptr<Rail>> rails;
	std::vector<RailCache *> caches;
	std::unique_ptr<ProgressThreads> threads; // stopped first on destruction
	std::atomic<bool> closing{false};

	// Admitted, not yet finished: an intrusive list (links in each
	// TransferImpl), under active_mu.
	class ActiveList {
	public:
		void insert(TransferImpl *x);
		void erase(TransferImpl *x); // no-op when not linked
		size_t size() const { return n_; }
		template <class F> void for_each(F &&f) const
		{
			for (TransferImpl *x = head_; x; x = x->active_next)
				f(x);
		}

	private:
		TransferImpl *head_ = nullptr;
		size_t n_ = 0;
	};
	std::mutex active_mu;
	ActiveList active;
	// Where make_send() and plan() take their transfers (recycled).
	std::shared_ptr<TransferPool> pool;
	std::atomic<unsigned> next_rail{0};
	// Bumped when a peer is removed or declared dead: rails then drain its
	// queued items even with their queue depth used up.
	std::atomic<uint64_t> doom_epoch{0};

	// Chooses the provider, fills caps and opens the rails (provider.cpp).
	Core(const Config &c, uint64_t engine_id);
	~Core();

	// internal: a piece of an admitted staged write, or the engine's own
	// handshake (never refused for max_transfers or a dead peer).
	void admit(const std::shared_ptr<TransferImpl> &x, bool internal = false);
	// Tells the caller (status, callback, waiters), once.
	void report(TransferImpl &x);
	// Every operation of x resolved: report (unless done) and release it.
	void finish(const std::shared_ptr<TransferImpl> &x);
	// Undoes admit() of x, which no rail will finish (out of memory while
	// queueing it). True: nobody was told, the caller gets the exception and
	// no callback comes; false: x was reported meanwhile (a dead peer's).
	bool take_back(const std::shared_ptr<TransferImpl> &x) noexcept;
	// Newly dead peers: their transfers are reported failed now.
	void fail_dead(std::span<const std::shared_ptr<PeerState>> dead);
	// The progress threads of the rails in `rails` (bit r: rail r) look now.
	void kick(uint64_t rails);
	static uint64_t rail_bit(unsigned r) { return ProgressThreads::rail_bit(r); }

	// A control message of `type` (header + data + body) for `rail`, not
	// yet admitted. borrow_body: body is not copied (the caller keeps it
	// until the callback; TransferImpl::borrowed).
	std::shared_ptr<TransferImpl> make_send(const std::shared_ptr<PeerState> &peer, wire::MsgType type,
						std::span<const uint8_t> data, unsigned rail, TransferCallback cb,
						std::span<const uint8_t> body = {}, bool borrow_body = false);
	// make_send, admitted (internal: see admit) and queued.
	std::shared_ptr<TransferImpl> send(const std::shared_ptr<PeerState> &peer, wire::MsgType type,
					   std::span<const uint8_t> data, unsigned rail, TransferCallback cb,
					   bool internal = false, bool handshake = false);
	// Queues x's control message (set by its owner) on x->send_rail.
	void send_message(const std::shared_ptr<TransferImpl> &x);
	// The rail for the next message: rail 0 with sends_on_first_rail, else round-robin.
	unsigned message_rail();

	// The planned writes of chunks already validated against `d`; not yet
	// admitted (internal: a piece of a staged write, nobody notified).
	std::shared_ptr<TransferImpl> plan(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
					   const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done,
					   bool internal);
	// Admits the planned write and queues its writes (and, immediate, its
	// Announce on x->send_rail) on the rails. Throws (out of memory) only
	// if no callback will come; once a rail holds a part of x, a failure
	// is reported through x (status, callback) instead.
	void submit(const std::shared_ptr<TransferImpl> &x, bool internal);

	// One rail's progress turn: returns the events it handled (0 when
	// another thread's turn was on the rail).
	size_t progress_rail(unsigned r, Events &ev);
	// The rails a caller's turn polls (Config::sends_on_first_rail), and
	// those of `also` (bit r: rail r; bit 31 for rails 31 and up); ids has
	// room for every rail.
	std::span<const unsigned> caller_rails(unsigned *ids, uint32_t also = 0);
	bool caller_covers(std::span<const unsigned> rail_ids) const;
	std::vector<unsigned> all_rails; // 0..rails-1
	static constexpr size_t kMaxCallerRails = 64;

private:
	void open_rails();
	void open_rails_once();
	bool hmem_endpoints_ = false; // the rails' endpoints were opened with FI_HMEM
	// Per rail: turns since one last handled an event (Config::sends_on_first_rail).
	std::unique_ptr<std::atomic<uint32_t>[]> rail_quiet_;
	std::atomic<uint32_t> caller_turns_{0};
	static constexpr uint32_t kActiveTurns = 256; // a rail is active this many turns after an event
};

} // namespace hmemreg::engine
