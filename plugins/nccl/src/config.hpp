// SPDX-License-Identifier: MIT
// The plugin's knobs: one table, read from the environment in NCCL's style
// (HMEMREG_NCCL_<NAME>), each with its default and what it does.
#pragma once

#include <cstddef>
#include <string>

namespace hmemreg::nccl {

struct Config {
	std::string provider = "";      // PROVIDER: libfabric provider ("tcp;ofi_rxm", "verbs;ofi_rxm"); "" = engine's choice
	std::string node = "";          // NODE: address/host to open endpoints on ("" = provider default)
	std::string domain = "";        // DOMAIN: NIC / domain name filter
	// RAILS: rails (NICs) striped per transfer. 0 (default) = 4 when the
	// provider names tcp and the process may run on kTcpRailsMinCpus CPUs
	// or more (a tcp rail is one TCP stream, and NCCL's own socket
	// transport runs several sockets and threads), else 1. On fewer CPUs
	// the streams' polling and copies only take turns (docs/nccl-plugin.md,
	// Against aws-ofi-nccl, has the two-CPU figures).
	static constexpr unsigned kTcpRailsMinCpus = 8;
	unsigned rails = 0;
	// PROGRESS_THREADS: engine progress threads (default: one per rail, at
	// most one fewer than the CPUs, so that NCCL's proxy thread keeps one:
	// each thread polls). With threads the network moves on its own, as
	// NCCL assumes (a connect or a close reaches the peer even if nothing
	// of ours is tested for a while). 0: only NCCL's calls
	// (test/isend/irecv/accept/connect/close) drive progress.
	static constexpr unsigned kPerRail = ~0u;
	unsigned progress_threads = kPerRail;
	// The CPUs the process may run on (its affinity), which the two
	// defaults above follow; 0: read at load().
	unsigned cpus = 0;
	int speed_mbps = 0;             // SPEED_MBPS: reported port speed (0: the NICs', port_speed.hpp)
	double latency_us = 0;          // LATENCY_US: reported latency
	size_t max_requests = 256;      // MAX_REQUESTS: outstanding requests per comm before isend/irecv say "later"
	size_t max_write = 0;           // MAX_WRITE: split writes above this (0 = the engine's default; k/m/g suffixes)
	// EAGER_MAX, EAGER_SLOTS: each recv comm registers EAGER_SLOTS buffers of
	// EAGER_MAX bytes; a send of at most EAGER_MAX whose receive is not
	// advertised yet goes into one and is copied out at the receiver, instead
	// of waiting a round trip for it. Off (0) by default: through NCCL itself
	// on one GPU, slots made broadcast slower, even with every send eager
	// (docs/nccl-plugin.md, Through NCCL itself, has the rounds).
	size_t eager_max = 0;
	size_t eager_slots = 16;
	// EAGER_BUSY_MAX: while earlier sends of the comm are still outstanding
	// (not yet found done by test()), only sends up to this size go eager;
	// larger ones wait for their advertisement, which comes while the earlier
	// data flows (an eager receive costs the receiver one more copy). An idle
	// comm's send still goes eager up to EAGER_MAX (a late receiver would
	// cost it a round trip of idle wire).
	size_t eager_busy_max = 64u << 10;
	// INLINE_MAX: a send of at most this many bytes goes as one control
	// message carrying the data (no RDMA write, no wait for the receive's
	// advertisement, copied once at the receiver): NCCL's LL/LL128 sizes.
	// 0: off (every send is a write). Over ofi_rxm, the plugin raises rxm's
	// eager size (FI_OFI_RXM_BUFFER_SIZE, unless set) so that an Inline
	// message of INLINE_MAX still goes in one eager message.
	size_t inline_max = 16u << 10;
	// FIRST_RAIL_MAX: with progress threads, a write of at most this many
	// bytes goes on rail 0 (with the control messages), which NCCL's own
	// calls poll every time: one stream driven by the caller, no thread in
	// between. Larger writes take the rails in turn (each polled by its
	// thread as well), and writes above MAX_WRITE stripe over them.
	size_t first_rail_max = 64u << 10;
	// NOTIFY: how a receive learns its data landed: "auto" (default: counted
	// writes with immediate data where the provider has it), "immediate", or
	// "message" (a Done message after delivery-complete writes).
	std::string notify = "auto";
	// DEVICE_MEMORY: whether NCCL may pass GPU buffers (ptrSupport CUDA,
	// NCCL's GDR): "staged" (the engine copies them through host memory
	// on its own streams; hangs under NCCL itself), "host" (no: NCCL copies
	// through host buffers), "auto" (where a NIC writes GPU memory itself
	// and iflush can read back, else as host; pointer_policy.hpp says why).
	std::string device_memory = "auto";
	// STALL_MS: a request NCCL has waited on this long gets the plugin's
	// state logged once (NCCL WARN: comms, waiting requests, the engine's
	// staged and immediate counters; or that a call has held the plugin's
	// lock that long). 0: off.
	unsigned stall_ms = 0;
	// PEER_TIMEOUT_MS: a peer with unfinished transfers and no completion for
	// this long is declared dead and its requests fail (test() reports an
	// error, as NCCL expects of a broken connection). 0: never; unset
	// (kEngineDefault): the engine's default, HMEMREG_PEER_TIMEOUT_MS, else
	// 10000 ms.
	static constexpr long long kEngineDefault = -1;
	long long peer_timeout_ms = kEngineDefault;
	// TIMELINE: a folder; each process writes the time of every request's
	// steps there (timeline.hpp), for hmemreg_bench timeline. "": off.
	std::string timeline_dir = "";

	// Defaults overridden by the environment. False (with `why`) on an
	// unparsable value.
	bool load(std::string &why);
	std::string describe() const;
};

} // namespace hmemreg::nccl
