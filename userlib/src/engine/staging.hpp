// SPDX-License-Identifier: MIT
// The staged path for device memory the provider cannot reach (no FI_HMEM):
// each staged region has a pinned host mirror registered with the NIC.
//
// Writer: the chunks are cut into pieces of Config::staging_piece bytes.
// Every piece's staged sources are copied device -> mirror on a CUDA stream
// (one per device and direction) when write() is called, each piece followed
// by a fence; a progress turn posts a piece's RDMA writes (from the mirror)
// as soon as its fence is reached, so the wire carries piece k while the
// copy engine fetches piece k+1. Once a piece's writes are delivered, a
// Landed notice lists its target ranges (to a staged target). When every
// piece and notice completed, a StagedDone (or, to host memory, the usual
// Done) ends the transfer.
//
// Target: each Landed notice queues mirror -> device copies of its ranges on
// the target's stream; the application is notified once StagedDone arrived,
// as many notices as it announced were handled, and every copy finished.
#pragma once

#include <atomic>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <span>
#include <vector>

#include "engine/core.hpp"
#include "engine/delivery.hpp"
#include "engine/dispatch.hpp"
#include "engine/peers.hpp"
#include "engine/region.hpp"
#include "hmem/cuda_copy.hpp"
#include "hmem/cuda_memory.hpp"

namespace hmemreg::engine {

struct StagedPiece {
	std::vector<Chunk> chunks;
	std::vector<cuda::Fence> copied; // device -> mirror of its staged sources, one per device
};

struct StagedWrite {
	std::shared_ptr<TransferImpl> outer; // what the caller holds
	wire::RegionDescriptor remote;
	uint64_t seq = 0;
	std::vector<StagedPiece> pieces;
	size_t next = 0;       // first piece not yet posted
	size_t unfinished = 0; // pieces and notices not yet complete (Staging::mu)
	uint32_t notices = 0;  // Landed notices sent (Staging::mu)
};

struct Landing {
	PeerId from = kUnknownPeer;
	uint64_t sender = 0;
	uint32_t received = 0; // Landed notices handled
	int64_t expected = -1; // announced by StagedDone
	uint64_t tag = 0, bytes = 0;
	uint32_t chunks = 0;
	std::deque<cuda::Fence> copies; // mirror -> device, in stream order
	std::vector<RegionRef> hold;    // the regions copied into
	int64_t last = 0;               // steady ns of its last notice: a writer that
					// died midway leaves it unfinished; dropped after
					// Config::peer_timeout_ms
};

struct Staging {
	Staging(Core &core, Peers &peers, Delivery &delivery, Dispatcher &d);
	// caps.device_memory: how device memory moves (direct, staged, or why not).
	void describe_device_memory();
	RegionRef register_region(void *addr, size_t len, const cuda::PointerInfo &info);
	TransferRef write(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
			  const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done);
	// Posts the pieces whose copies are done; notifies finished landings.
	size_t poll();
	// No copy into or out of a mirror outlives this.
	void drain();
	PathStats path_stats();
	void on_landed(const Events::Msg &m);
	void on_staged_done(const Events::Msg &m, PeerId from);

	Core &core;
	Peers &peers;
	Delivery &delivery;
	std::mutex mu;
	std::map<int, std::unique_ptr<cuda::CopyStream>> to_host, to_device; // per device
	std::unordered_map<uint64_t, std::weak_ptr<RegionImpl>> regions;       // by staged id
	std::list<std::shared_ptr<StagedWrite>> writes; // with pieces left to post
	std::map<std::pair<uint64_t, uint64_t>, Landing> landings; // (sender engine, seq)
	std::atomic<uint64_t> next_id{1}, next_seq{1};
	std::atomic<size_t> pending{0}; // writes + landings: something to poll
	PathStats stats;                // under mu
};

} // namespace hmemreg::engine
