// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: the engines writes land in, either in the bench's own
// process, in a child process (--procs 2) that serves them over a socket
// pair, or in a bench server on another host (--serve on it, --connect
// here) that serves them over TCP: the way a transfer engine's client and
// server really run. The wire between them: xfer_wire.hpp; the target
// side: xfer_server.hpp, xfer_served.hpp.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <hmemreg/engine.hpp>

#include "reference_tools.hpp"
#include "xfer_payload.hpp"

namespace hmemreg::bench {

// What the writer needs of one target engine.
struct TargetEngine {
	unsigned slot = 0;
	Bytes address;                  // its peer blob
	std::vector<Bytes> descriptors; // one per region passed to make()
	std::function<size_t()> notes;          // notifications it received so far
	bool staged = false; // a region is staged through host memory at the target
};

class Targets {
public:
	using Span = std::pair<void *, size_t>;

	static std::unique_ptr<Targets> in_process();
	// Forks the server now: call it before this process touches libfabric.
	// `shared_bytes` of memory shared with the child (same address in both)
	// hold the target buffers, so the writer can verify what landed.
	static std::unique_ptr<Targets> child_process(size_t shared_bytes);
	// A bench server (serve()) at HOST:PORT. It owns the target buffers:
	// make() takes their sizes only, and zero()/verify() reach them.
	static std::unique_ptr<Targets> remote(const std::string &host_port);
	virtual ~Targets() = default;

	// A target engine with the writer's configuration, `regions` registered.
	virtual TargetEngine make(const EngineConfig &cfg, std::span<const Span> regions) = 0;
	// The target adds the writer as a peer (4-byte keys need it).
	virtual void add_peer(unsigned slot, const Bytes &writer) = 0;
	// Drops every target engine and its regions; never throws.
	virtual void clear() noexcept = 0;
	// Ends the targets (the child process drops its engines and exits);
	// false when they did not end cleanly. Idempotent; the destructor calls it too.
	virtual bool finish() noexcept { return true; }
	// The shared target memory (child process), or nullptr.
	virtual void *shared() const { return nullptr; }
	virtual const char *where() const = 0;

	// Remote targets only: the server owns the buffers.
	virtual bool remote_buffers() const { return false; }
	// Zeroes the first n bytes of a target region.
	virtual void zero(unsigned slot, unsigned region, size_t n);
	// Whether the region's first `size` bytes are expected_target(size,
	// nchunks); `why` says where not.
	virtual bool verify(unsigned slot, unsigned region, size_t size, size_t nchunks, std::string &why);
	// Starts `streams` one-shot iperf3 servers on ports port0.. at the
	// target's host, for the tcp reference across hosts; the host to reach.
	virtual std::string start_iperf3(int port0, unsigned streams);
};

} // namespace hmemreg::bench
