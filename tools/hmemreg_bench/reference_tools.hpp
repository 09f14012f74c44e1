// SPDX-License-Identifier: MIT
// Running the reference tools (iperf3, ib_write_bw) and reading their
// machine-readable output.
#pragma once

#include <cstddef>
#include <string>

namespace hmemreg::bench {

// What a shell command prints on stdout (popen: glibc starts it with
// posix_spawn, so it is safe with libfabric's threads and pinned memory).
std::string capture(const std::string &cmd);

// One iperf3 client against an iperf3 server at HOST:PORT for SECONDS with
// WRITE_LEN-byte writes: the receiver's Gbps from its JSON report (-J),
// 0 when it did not run or reported nothing.
double iperf3_client_gbps(const std::string &host, int port, double seconds, size_t write_len);

} // namespace hmemreg::bench
