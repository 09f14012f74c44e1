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
	// RAILS: rails striped per transfer. 2 by default: where the host has one
	// NIC, two endpoints (two TCP connections for tcp) still move a message in
	// parallel; measured on 2 H200s over loopback TCP, 1.0-1.2x NCCL's socket
	// transport at 1 MiB+ with 2 rails and 256 KiB writes, 0.7-0.9x with 1.
	unsigned rails = 2;
	// PROGRESS_THREADS: engine progress threads. 1 (default): the network
	// moves on its own, as NCCL assumes (a connect or a close reaches the
	// peer even if nothing of ours is tested for a while). 0: only NCCL's
	// calls (test/isend/irecv/accept/connect/close) drive progress.
	unsigned progress_threads = 1;
	int speed_mbps = 100000;        // SPEED_MBPS: reported port speed
	double latency_us = 0;          // LATENCY_US: reported latency
	size_t max_requests = 256;      // MAX_REQUESTS: outstanding requests per comm before isend/irecv say "later"
	// MAX_WRITE: split writes above this, so that one of NCCL's steps (512 KiB
	// by default) is striped over the rails (0 = provider limit).
	size_t max_write = 256u << 10;

	// Defaults overridden by the environment. False (with `why`) on an
	// unparsable value.
	bool load(std::string &why);
	std::string describe() const;
};

} // namespace hmemreg::nccl
