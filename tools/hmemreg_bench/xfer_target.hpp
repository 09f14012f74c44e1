// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: the engines writes land in, either in the bench's own
// process, in a child process (--procs 2) that serves them over a socket
// pair, or in a bench server on another host (--serve on it, --connect
// here) that serves them over TCP: the way a transfer engine's client and
// server really run.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

#include <hmemreg/engine.hpp>

namespace hmemreg::bench {

// The bench's source bytes, and where each chunk of a size-byte transfer in
// `nchunks` chunks goes (scattered: chunk k lands in reverse order).
uint8_t pattern(size_t i);
struct Placement {
	size_t local, len, remote;
};
std::vector<Placement> placements(size_t size, size_t nchunks);
// The target's first `size` bytes once such a transfer landed.
std::vector<uint8_t> expected_target(size_t size, size_t nchunks);

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

// Starts argv[0] (searched in PATH) with argv, its output to /dev/null:
// spawned, not forked, from a process with libfabric's threads and
// registered memory (a fork would copy them and run our code in the child).
pid_t spawn_quiet(std::vector<std::string> argv);

// Processes started quiet, ended (SIGTERM, reaped) by stop() and at the
// latest on destruction: servers that may never get their client.
class Spawned {
public:
	Spawned() = default;
	Spawned(const Spawned &) = delete;
	Spawned &operator=(const Spawned &) = delete;
	~Spawned() { stop(); }
	void start(std::vector<std::string> argv); // throws when it cannot start
	void stop() noexcept;

private:
	std::vector<pid_t> pids_;
};

// `streams` one-shot iperf3 servers on ports port0.., bound to `bind` if set.
void start_iperf3_servers(Spawned &s, int port0, unsigned streams, const std::string &bind);

// Runs a bench server: listens on [HOST:]PORT, serves one client's target
// engines (host memory, `node` as their fabric address if not empty), and
// returns the exit status once the client is done.
int serve(const std::string &host_port, const std::string &node);

} // namespace hmemreg::bench
