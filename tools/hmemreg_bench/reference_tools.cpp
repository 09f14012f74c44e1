// SPDX-License-Identifier: MIT
#include "reference_tools.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace hmemreg::bench {

std::string capture(const std::string &cmd)
{
	std::string out;
	FILE *p = popen(cmd.c_str(), "r");
	if (!p)
		return out;
	char b[4096];
	size_t n;
	while ((n = fread(b, 1, sizeof(b), p)) > 0)
		out.append(b, n);
	pclose(p);
	return out;
}

double iperf3_client_gbps(const std::string &host, int port, double seconds, size_t write_len)
{
	char cmd[512];
	std::snprintf(cmd, sizeof(cmd), "iperf3 -J -c '%s' -p %d -t %.1f -l %zu 2>/dev/null", host.c_str(), port,
		      seconds, write_len);
	const auto report = nlohmann::json::parse(capture(cmd), nullptr, false);
	if (report.is_discarded() || report.contains("error"))
		return 0;
	// The receiver's side of the whole run (TCP: sum_received).
	const auto bps = report.value(nlohmann::json::json_pointer("/end/sum_received/bits_per_second"), 0.0);
	return bps > 0 ? bps / 1e9 : 0;
}

} // namespace hmemreg::bench
