// SPDX-License-Identifier: MIT
// The port speed reported to NCCL (plugins/nccl/src/port_speed.cpp): the
// setting when given, else the rails' NICs' link speeds, each NIC once, a NIC
// with none at the 10 Gbps NCCL's Socket transport assumes. NCCL's tuner picks protocols
// from it, so a made-up speed changes what NCCL runs.
#include <string>
#include <vector>

#include <criterion/criterion.h>

#include "port_speed.hpp"

using hmemreg::nccl::choose_port_speed;
using hmemreg::nccl::kUnknownLinkMbps;

Test(port_speed, setting_wins)
{
	const auto s = choose_port_speed(25000, {"efa0"}, {100000000000ull});
	cr_expect_eq(s.mbps, 25000);
	cr_expect(s.why.find("HMEMREG_NCCL_SPEED_MBPS") != std::string::npos, "%s", s.why.c_str());
}

Test(port_speed, one_nic_per_rail_is_summed)
{
	const auto s = choose_port_speed(0, {"efa0", "efa1"}, {100000000000ull, 100000000000ull});
	cr_expect_eq(s.mbps, 200000);
	cr_expect(s.why.find("2 NIC") != std::string::npos, "%s", s.why.c_str());
}

Test(port_speed, rails_on_one_nic_count_it_once)
{
	// Four rails over one NIC (tcp's rails share the interface): its speed once.
	const auto s = choose_port_speed(0, {"eth0", "eth0", "eth0", "eth0"},
					 {25000000000ull, 25000000000ull, 25000000000ull, 25000000000ull});
	cr_expect_eq(s.mbps, 25000);
}

Test(port_speed, no_link_speed_is_sockets_10_gbps)
{
	// shm has no NIC; tcp on loopback reports none.
	for (const auto &rails : {std::vector<uint64_t>{0}, std::vector<uint64_t>{}}) {
		const auto s = choose_port_speed(0, {"shm"}, rails);
		cr_expect_eq(s.mbps, kUnknownLinkMbps);
		cr_expect(s.why.find("no link speed") != std::string::npos, "%s", s.why.c_str());
	}
	cr_expect_eq(kUnknownLinkMbps, 10000);
}

Test(port_speed, a_nic_without_speed_counts_10_gbps)
{
	const auto s = choose_port_speed(0, {"mlx5_0", "mlx5_1"}, {200000000000ull, 0});
	cr_expect_eq(s.mbps, 200000 + kUnknownLinkMbps);
	cr_expect(s.why.find("1 NIC(s) with no link speed") != std::string::npos, "%s", s.why.c_str());
}
