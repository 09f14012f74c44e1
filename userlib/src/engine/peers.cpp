// SPDX-License-Identifier: MIT
#include "engine/peers.hpp"

#include <algorithm>
#include <cstdio>

#include "fabric/error.hpp"

namespace hmemreg::engine {

std::string engine_hex(uint64_t v)
{
	char b[20];
	std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(v));
	return b;
}

std::shared_ptr<PeerState> Peers::find(PeerId p) const
{
	std::lock_guard l(mu_);
	auto it = peers_.find(p);
	if (it == peers_.end())
		throw Error(HMEMREG_ENOENT, "unknown peer " + std::to_string(p));
	return it->second;
}

std::shared_ptr<PeerState> Peers::of_engine(uint64_t engine_id) const
{
	std::lock_guard l(mu_);
	auto it = by_engine_.find(engine_id);
	return it == by_engine_.end() ? nullptr : peers_.at(it->second);
}

PeerId Peers::id_of(uint64_t engine_id) const
{
	std::lock_guard l(mu_);
	auto it = by_engine_.find(engine_id);
	return it == by_engine_.end() ? kUnknownPeer : it->second;
}

size_t Peers::count() const
{
	std::lock_guard l(mu_);
	return peers_.size();
}

std::shared_ptr<PeerState> Peers::add(const wire::PeerAddress &a, std::span<const std::unique_ptr<Rail>> rails,
				      const std::function<void(PeerState &)> &setup)
{
	{
		// Added again while its old incarnation is retiring: the AV may hand
		// back the same entry, which must then not be removed.
		std::lock_guard l(mu_);
		std::erase_if(retiring_, [&](const auto &old) { return old->engine_id == a.engine_id; });
	}
	auto p = std::make_shared<PeerState>();
	p->engine_id = a.engine_id;
	for (size_t r = 0; r < rails.size(); r++) {
		try {
			p->addr.push_back(rails[r]->insert_peer(a.rails[r % a.rails.size()]));
		} catch (...) {
			for (size_t k = 0; k < p->addr.size(); k++)
				rails[k]->remove_peer(p->addr[k]);
			throw;
		}
	}
	std::lock_guard l(mu_);
	if (by_engine_.count(a.engine_id)) {
		PeerId old = by_engine_[a.engine_id];
		for (size_t r = 0; r < rails.size(); r++)
			rails[r]->remove_peer(p->addr[r]);
		throw Error(HMEMREG_EBUSY, "engine " + engine_hex(a.engine_id) + " is already peer " + std::to_string(old));
	}
	p->id = next_++;
	setup(*p);
	peers_[p->id] = p;
	by_engine_[a.engine_id] = p->id;
	return p;
}

std::shared_ptr<PeerState> Peers::remove(PeerId peer)
{
	std::lock_guard l(mu_);
	auto it = peers_.find(peer);
	if (it == peers_.end())
		throw Error(HMEMREG_ENOENT, "remove_peer: unknown peer " + std::to_string(peer));
	auto p = it->second;
	p->removed = true;
	peers_.erase(it);
	by_engine_.erase(p->engine_id);
	retiring_.push_back(p);
	has_retiring_ = true;
	return p;
}

// Drops the addresses of removed peers once nothing is in flight to them.
void Peers::retire(std::span<const std::unique_ptr<Rail>> rails)
{
	std::vector<std::shared_ptr<PeerState>> done;
	{
		std::unique_lock l(mu_, std::try_to_lock);
		if (!l)
			return;
		auto keep = std::partition(retiring_.begin(), retiring_.end(),
					   [](const auto &p) { return p->inflight.load() != 0; });
		done.assign(keep, retiring_.end());
		retiring_.erase(keep, retiring_.end());
		has_retiring_ = !retiring_.empty();
	}
	for (auto &p : done)
		for (size_t r = 0; r < rails.size(); r++) {
			try {
				rails[r]->remove_peer(p->addr[r]);
			} catch (const Error &) {
				// Another peer may share the address entry; nothing to undo.
			}
		}
}

std::vector<std::shared_ptr<PeerState>> Peers::watchdog()
{
	std::vector<std::shared_ptr<PeerState>> dead;
	int64_t now = PeerState::now_ns();
	int64_t last = last_watchdog_.load(std::memory_order_relaxed);
	if (now - last < 50'000'000 || !last_watchdog_.compare_exchange_strong(last, now))
		return dead;
	const int64_t limit = static_cast<int64_t>(timeout_ms_) * 1'000'000;
	std::lock_guard l(mu_);
	for (auto &[id, p] : peers_) {
		// Only a peer with operations posted and none completing, or whose
		// posts the provider keeps refusing, is blamed (one merely waiting
		// behind other peers' work is not).
		bool stuck = p->inflight.load() > 0 || p->refused.load();
		if (p->dead || !stuck || p->active.load() == 0 || now - p->last_progress.load() < limit)
			continue;
		p->dead_reason = "peer " + std::to_string(id) + " (engine " + engine_hex(p->engine_id) +
				 ") made no progress for " + std::to_string(timeout_ms_) + " ms: dead or unreachable";
		p->dead.store(true, std::memory_order_release);
		dead.push_back(p);
	}
	return dead;
}

} // namespace hmemreg::engine
