// SPDX-License-Identifier: MIT
// Running the reference tools (iperf3, ib_write_bw) and reading their
// machine-readable output.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <sys/types.h>

namespace hmemreg::bench {

// What a shell command prints on stdout (popen: glibc starts it with
// posix_spawn, so it is safe with libfabric's threads and pinned memory).
std::string capture(const std::string &cmd);

// One iperf3 client against an iperf3 server at HOST:PORT for SECONDS with
// WRITE_LEN-byte writes: the receiver's Gbps from its JSON report (-J),
// 0 when it did not run or reported nothing.
double iperf3_client_gbps(const std::string &host, int port, double seconds, size_t write_len);

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

} // namespace hmemreg::bench
