// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: the target side of the wire protocol (xfer_wire.hpp),
// in a child process or as a bench server on another host.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace hmemreg::bench {

// The child's whole life: it never returns, so nothing it throws can unwind
// into the parent's code (which would run the bench a second time here).
// Serves the writer on fd; counters: the notifications of each target
// engine, in memory shared with the writer.
[[noreturn]] void serve_child(int fd, std::atomic<size_t> *counters, size_t ncounters) noexcept;

// Runs a bench server: listens on [HOST:]PORT, serves one client's target
// engines (host memory, `node` as their fabric address if not empty), and
// returns the exit status once the client is done.
int serve(const std::string &host_port, const std::string &node);

} // namespace hmemreg::bench
