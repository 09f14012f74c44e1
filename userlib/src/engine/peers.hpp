// SPDX-License-Identifier: MIT
// The peer table: peers by id and by engine id, removed peers retiring
// until nothing is in flight to them, and the no-progress watchdog that
// declares a stuck peer dead.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/rail.hpp"
#include "engine/transfer.hpp"
#include "engine/wire.hpp"

namespace hmemreg::engine {

class Peers {
public:
	explicit Peers(unsigned timeout_ms) : timeout_ms_(timeout_ms) {}

	// Throws HMEMREG_ENOENT.
	std::shared_ptr<PeerState> find(PeerId p) const;
	// nullptr / kUnknownPeer when the engine is not a peer here.
	std::shared_ptr<PeerState> of_engine(uint64_t engine_id) const;
	PeerId id_of(uint64_t engine_id) const;
	size_t count() const;

	// A new peer at addresses on every rail (inserted in each rail's AV);
	// `setup` runs on it before it is visible. Throws HMEMREG_EBUSY when the
	// engine is a peer already.
	std::shared_ptr<PeerState> add(const wire::PeerAddress &a, std::span<const std::unique_ptr<Rail>> rails,
				       const std::function<void(PeerState &)> &setup);
	// Out of the table; its addresses are dropped once nothing is in flight
	// to it (retire). Throws HMEMREG_ENOENT.
	std::shared_ptr<PeerState> remove(PeerId p);
	void retire(std::span<const std::unique_ptr<Rail>> rails);
	bool retiring() const { return has_retiring_.load(std::memory_order_relaxed); }

	// Peers with unfinished transfers and no completion for the timeout
	// are marked dead (at most one look per 50 ms): the newly dead.
	std::vector<std::shared_ptr<PeerState>> watchdog();

private:
	const unsigned timeout_ms_;
	mutable std::mutex mu_;
	std::unordered_map<PeerId, std::shared_ptr<PeerState>> peers_;
	std::unordered_map<uint64_t, PeerId> by_engine_;
	std::vector<std::shared_ptr<PeerState>> retiring_;
	std::atomic<bool> has_retiring_{false};
	PeerId next_ = 1;
	std::atomic<int64_t> last_watchdog_{0};
};

std::string engine_hex(uint64_t v);

} // namespace hmemreg::engine
