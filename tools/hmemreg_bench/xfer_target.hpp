// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: the engines writes land in, either in the bench's own
// process or in a child process (--procs 2) that serves them over a socket
// pair, the way a transfer engine's client and server really run.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <utility>

#include "engine/engine.hpp"

namespace hmemreg::bench {

// What the writer needs of one target engine.
struct TargetEngine {
	unsigned slot = 0;
	engine::Bytes address;                  // its peer blob
	std::vector<engine::Bytes> descriptors; // one per region passed to make()
	const std::atomic<size_t> *notes = nullptr; // notifications it received so far
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
	virtual ~Targets() = default;

	// A target engine with the writer's configuration, `regions` registered.
	virtual TargetEngine make(const engine::Config &cfg, std::span<const Span> regions) = 0;
	// The target adds the writer as a peer (4-byte keys need it).
	virtual void add_peer(unsigned slot, const engine::Bytes &writer) = 0;
	// Drops every target engine and its regions; never throws.
	virtual void clear() noexcept = 0;
	// Ends the targets (the child process drops its engines and exits);
	// false when they did not end cleanly. Idempotent; the destructor calls it too.
	virtual bool finish() noexcept { return true; }
	// The shared target memory (child process), or nullptr.
	virtual void *shared() const { return nullptr; }
	virtual const char *where() const = 0;
};

} // namespace hmemreg::bench
