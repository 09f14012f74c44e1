// SPDX-License-Identifier: MIT
// The port speed the plugin reports to NCCL (getProperties' speed, Mbps).
//
// NCCL's tuner picks the protocol and channel count from it. A made-up fast
// speed on a slow transport makes it pick LL where Simple is faster: at
// 100 Gbps over shm on the H200, broadcasts of 32-128 KiB ran LL at
// 0.11-0.18x NCCL's Socket, which reports 10 Gbps and ran Simple (reported
// 10 Gbps: Simple, 32 KiB in 56 us instead of 1307). So the speed is the
// NICs' own (fi_nic's link speed, summed over the distinct NICs of the
// rails, as one NCCL device stands for them all); a NIC that reports none
// counts what NCCL's Socket transport assumes of such a link.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hmemreg::nccl {

inline constexpr int kUnknownLinkMbps = 10000;

struct PortSpeed {
	int mbps = kUnknownLinkMbps;
	std::string why; // said in NCCL's INFO log
};

// setting_mbps: HMEMREG_NCCL_SPEED_MBPS (0: from the NICs). rail_domains and
// rail_link_bps: one entry per rail (a domain may repeat; 0: unknown).
PortSpeed choose_port_speed(int setting_mbps, const std::vector<std::string> &rail_domains,
			    const std::vector<uint64_t> &rail_link_bps);

} // namespace hmemreg::nccl
