// SPDX-License-Identifier: MIT
// Immediate notification (providers with remote CQ data; see engine.hpp):
// every write of a transfer carries a key as remote CQ data and an Announce
// (tag, key, number of writes) goes out beside them; the target counts the
// key's writes and notifies once it has the Announce and that many.
// Writer side: keys (8 bytes: this engine's id stamp and a sequence; 4
// bytes: the index the target assigned this writer and a per-target
// sequence), the ImmJoin/ImmIndex handshake that gets such an index.
// Target side: the arrivals being counted, the writer index table.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/core.hpp"
#include "engine/delivery.hpp"
#include "engine/dispatch.hpp"
#include "engine/peers.hpp"

namespace hmemreg::engine {

class ImmediateNotifier {
public:
	ImmediateNotifier(Core &core, Peers &peers, Delivery &delivery, Dispatcher &d);

	// Writer. Whether x (planned, not internal) is notified with immediate
	// data; if so, x carries its key and Announce.
	bool prepare(TransferImpl &x);
	// After x was submitted: a writer with 4-byte keys and still no index
	// asks its target again now and then.
	void submitted(const std::shared_ptr<PeerState> &p);
	bool immediate_to(const PeerState &p) const;
	// Peers: a new one's first 4-byte sequence (before it is visible),
	// then the handshake once it is; a removed one's sequence kept.
	void setup_peer(PeerState &p);
	void peer_added(const std::shared_ptr<PeerState> &p);
	void peer_removed(const PeerState &p);

	// Target. Partial arrivals idle for peer_timeout (60 s without one).
	void expire();
	// Writes announced (or some of their data seen) and not all in place,
	// and one of them touched within kLiveNs (see expire): on tcp the data
	// moves only while its rail is polled, whichever it is.
	bool expecting() const { return expecting_.load(std::memory_order_relaxed) != 0; }
	// The rails those writes still take (bit r: rail r; all bits where an
	// Announce did not say, or has not come yet).
	uint32_t expecting_rails() const { return expecting_.load(std::memory_order_relaxed); }
	static constexpr uint32_t kAnyRail = ~0u;
	static constexpr int64_t kLiveNs = 100'000'000;
	// Whether closing the endpoints may meet a remote write half received
	// from a writer that broke (facade.cpp, ~Facade).
	bool writer_broke();
	void stats(PathStats &s);

	// Target side, under mu (tests reach it through TestAccess).
	std::mutex mu;
	struct Arrival {
		uint32_t seen = 0;
		uint32_t expected = 0;
		bool announced = false;
		uint32_t rails = kAnyRail; // of its writes, once announced
		Notification note{};
		int64_t touched = 0; // steady_clock ns of the last event
	};
	std::unordered_map<uint64_t, Arrival> arrivals;
	// 4-byte keys: the engine id owning each writer index (0: free; index 0
	// unused), the latest sequence announced per index, the reverse map,
	// and writers that asked before being added as peers (answered by
	// peer_added).
	std::vector<uint64_t> imm4_writer;
	std::vector<uint32_t> imm4_latest;
	static constexpr uint32_t kNoSeq = UINT32_MAX;
	std::unordered_map<uint64_t, uint32_t> imm4_index_of;
	std::unordered_set<uint64_t> imm4_waiting;

private:
	void on_data(std::span<const uint64_t> keys);
	void on_announce(const Events::Msg &m);
	void on_join(uint64_t writer);
	void on_index(const Events::Msg &m);
	void send_index(const std::shared_ptr<PeerState> &p);
	void send_join(const std::shared_ptr<PeerState> &p);
	void imm4_advance(uint32_t idx, uint32_t seq);

	Core &core_;
	Peers &peers_;
	Delivery &delivery_;
	// Writer: the next 8-byte key's sequence.
	std::atomic<uint32_t> next_seq_{0};
	// 4-byte keys: a removed target's next sequence, so that adding it again
	// carries on after the keys its old incarnation used (a fresh random
	// start could land on a key whose partial arrival the target still
	// holds), with when it was removed (entries older than any arrival's
	// life are pruned).
	struct SeqKept {
		uint32_t next;
		int64_t removed_ns;
	};
	std::mutex kept_mu_;
	std::unordered_map<uint64_t, SeqKept> seq_kept_;
	std::atomic<uint64_t> notices_{0}, abandoned_{0};
	std::atomic<uint64_t> expired_{0}; // of those abandoned: idle for peer_timeout (the writer broke)
	std::atomic<uint64_t> writes_{0};
	std::atomic<int64_t> last_expiry_{0};
	// The rails of the arrivals (expire: of the live ones), set under mu.
	std::atomic<uint32_t> expecting_{0};
	static constexpr size_t kMaxMaskArrivals = 64;
	template <class Counts> void set_expecting(Counts counts);
	// Sets expecting_ as the scope that changed arrivals (under mu) ends.
	struct Expecting {
		ImmediateNotifier &n;
		void update();
		~Expecting() { update(); }
	};
};

} // namespace hmemreg::engine
