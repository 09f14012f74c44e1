// SPDX-License-Identifier: MIT
#include "port_speed.hpp"

#include <climits>
#include <set>

namespace hmemreg::nccl {

PortSpeed choose_port_speed(int setting_mbps, const std::vector<std::string> &rail_domains,
			    const std::vector<uint64_t> &rail_link_bps)
{
	if (setting_mbps > 0)
		return {setting_mbps, "HMEMREG_NCCL_SPEED_MBPS"};
	std::set<std::string> seen;
	uint64_t mbps = 0;
	size_t unknown = 0;
	for (size_t r = 0; r < rail_link_bps.size(); r++) {
		const std::string domain = r < rail_domains.size() ? rail_domains[r] : std::to_string(r);
		if (!seen.insert(domain).second)
			continue;
		if (rail_link_bps[r] >= 1000000)
			mbps += rail_link_bps[r] / 1000000;
		else
			unknown++;
	}
	if (seen.empty())
		unknown = 1;
	mbps += unknown * kUnknownLinkMbps;
	std::string why = "link speed of " + std::to_string(seen.size() - unknown) + " NIC(s)";
	if (unknown)
		why = std::to_string(unknown) + " NIC(s) with no link speed from the provider at NCCL Socket's 10 Gbps" +
		      (seen.size() > unknown ? ", " + why : "");
	return {mbps > INT_MAX ? INT_MAX : static_cast<int>(mbps), why};
}

} // namespace hmemreg::nccl
