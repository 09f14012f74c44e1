// SPDX-License-Identifier: MIT
// The engine's rooms, composed. Calls run one way:
//   write -> (staging ->) notifier's writer side -> core: plan -> rails
//   rail progress -> dispatcher -> notifier or staging -> delivery -> application
// Facade (facade.cpp) validates and routes.
#pragma once

#include <atomic>
#include <memory>
#include <span>

#include "engine/core.hpp"
#include "engine/delivery.hpp"
#include "engine/dispatch.hpp"
#include "engine/facade.hpp"
#include "engine/notify_immediate.hpp"
#include "engine/notify_message.hpp"
#include "engine/peers.hpp"
#include "engine/region.hpp"
#include "engine/remote_regions.hpp"
#include "engine/staging.hpp"

namespace hmemreg::engine {

struct Facade::Impl {
	Core core;               // rails, admission, completion, progress of a rail
	Peers peers;             // table, retiring, watchdog
	Delivery delivery;       // the application's handlers
	Dispatcher dispatcher;   // received messages -> the room registered for their type
	MessageNotifier message; // Done after delivery-complete writes
	ImmediateNotifier immediate; // counted writes with remote CQ data
	Staging staging;         // device memory through pinned host mirrors, above the core
	RemoteRegions remotes;   // descriptors decoded once
	std::atomic<uint64_t> direct_writes{0};
	std::atomic<uint32_t> timer_turns{0}; // turns: the timers run one in 16

	explicit Impl(const Config &c);
	// One progress turn over these rails, then the rooms' own timers.
	size_t turn(std::span<const unsigned> rail_ids);
	size_t caller_turn(); // progress() of a caller
	// Teardown: progress turns until the rails are quiet (bounded).
	void settle();
	// A host-memory write: the notifier's writer side, then the core.
	TransferRef write_direct(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
				 const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done);
	std::shared_ptr<PeerState> find_peer(PeerId p) const { return peers.find(p); }
};

// Tests only: the engine's internals (e.g. to send forged control messages).
struct TestAccess {
	static Facade::Impl &impl(Facade &e) { return *e.impl_; }
};

} // namespace hmemreg::engine
