// SPDX-License-Identifier: MIT
// hmemreg_bench timeline DIR: where each message's time went, from the files
// the NCCL plugin writes with HMEMREG_NCCL_TIMELINE=DIR (one per process;
// plugins/nccl/include/nccl_timeline.h has the format). Each message's
// marks from both sides are joined by (sending engine, send comm,
// sequence); the ranks must share a host (one CLOCK_MONOTONIC). A row per
// route (write, inline, eager) and size, with the median of each piece in
// microseconds.
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "bench.hpp"
#include "cli.hpp"
#include "nccl_timeline.h"

namespace hmemreg::bench {

namespace {

constexpr unsigned kSteps = HMEMREG_STEP_COUNT;

using Key = std::tuple<unsigned long long, unsigned, unsigned>; // sending engine, send comm, seq

struct Message {
	std::optional<unsigned long long> at[kSteps];
	unsigned long long bytes = 0;
};

bool read_file(const std::string &path, std::map<Key, Message> &msgs, std::string &why)
{
	std::ifstream f(path);
	if (!f) {
		why = "cannot read " + path + ": " + std::strerror(errno);
		return false;
	}
	std::string line;
	for (size_t n = 1; std::getline(f, line); n++) {
		std::istringstream in(line);
		unsigned long long ns = 0, engine = 0, bytes = 0;
		unsigned step = 0, comm = 0, seq = 0;
		if (!(in >> ns >> step >> std::hex >> engine >> std::dec >> comm >> seq >> bytes) || step >= kSteps) {
			why = path + ":" + std::to_string(n) + ": not a timeline line: " + line.substr(0, 80);
			return false;
		}
		Message &m = msgs[{engine, comm, seq}];
		if (!m.at[step])
			m.at[step] = ns;
		if (step == HMEMREG_STEP_WRITE_POSTED || step == HMEMREG_STEP_INLINE_POSTED ||
		    step == HMEMREG_STEP_EAGER_POSTED)
			m.bytes = bytes;
	}
	return true;
}

double median(std::vector<double> v)
{
	if (v.empty())
		return NAN; // no message of the group had both marks
	std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
	return v[v.size() / 2];
}

int bench_timeline(int argc, char **argv)
{
	std::string dir;
	cli::Parser p("timeline", "where each message's time went, from the files of HMEMREG_NCCL_TIMELINE=DIR (both "
				  "ranks on one host): a row per route and size, medians in microseconds");
	p.app().add_option("dir", dir, "the folder HMEMREG_NCCL_TIMELINE named")->required();
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	std::vector<std::string> files;
	std::error_code ec;
	for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
		if (it->path().filename().string().starts_with("timeline."))
			files.push_back(it->path().string());
	if (ec) {
		std::fprintf(stderr, "hmemreg_bench timeline: cannot read %s: %s\n", dir.c_str(), ec.message().c_str());
		return 1;
	}
	std::map<Key, Message> msgs;
	std::string why;
	for (const std::string &f : files)
		if (!read_file(f, msgs, why)) {
			std::fprintf(stderr, "hmemreg_bench timeline: %s\n", why.c_str());
			return 1;
		}
	// Per route and size: each piece's samples (us), where both ends were marked.
	static const char *const kPieces[] = {"recv_behind", "cts_to_sender", "cts_to_post", "post_to_land",
					       "land_to_test", "recv_to_done"};
	constexpr size_t kN = sizeof(kPieces) / sizeof(kPieces[0]);
	struct Group {
		unsigned long long messages = 0;
		std::vector<double> us[kN];
	};
	std::map<std::pair<std::string, unsigned long long>, Group> groups;
	for (const auto &[key, m] : msgs) {
		const auto &a = m.at;
		unsigned posted_step = 0;
		for (unsigned st : {HMEMREG_STEP_WRITE_POSTED, HMEMREG_STEP_INLINE_POSTED, HMEMREG_STEP_EAGER_POSTED})
			if (!posted_step && a[st])
				posted_step = st;
		if (!posted_step || !a[HMEMREG_STEP_RECV_POSTED])
			continue; // one side only (its peer's file missing, or a message cut by a close)
		const std::string route = posted_step == HMEMREG_STEP_WRITE_POSTED    ? "write"
					  : posted_step == HMEMREG_STEP_INLINE_POSTED ? "inline"
										      : "eager";
		Group &grp = groups[{route, m.bytes}];
		grp.messages++;
		auto &g = grp.us;
		const unsigned long long posted = *a[posted_step];
		const auto &waits = a[HMEMREG_STEP_SEND_WAITS];
		const unsigned long long first = waits ? std::min(*waits, posted) : posted;
		const auto &landed = a[HMEMREG_STEP_DATA_LANDED] ? a[HMEMREG_STEP_DATA_LANDED] : a[HMEMREG_STEP_INLINE_LANDED];
		auto us = [](unsigned long long from, unsigned long long to) {
			return (static_cast<double>(to) - static_cast<double>(from)) / 1e3;
		};
		g[0].push_back(us(first, *a[HMEMREG_STEP_RECV_POSTED]));
		if (a[HMEMREG_STEP_ADVERTISED] && a[HMEMREG_STEP_CTS_SEEN])
			g[1].push_back(us(*a[HMEMREG_STEP_ADVERTISED], *a[HMEMREG_STEP_CTS_SEEN]));
		const auto &cts = a[HMEMREG_STEP_CTS_SEEN];
		if (cts && posted_step == HMEMREG_STEP_WRITE_POSTED && *cts <= posted)
			g[2].push_back(us(*cts, posted));
		if (landed)
			g[3].push_back(us(posted, *landed));
		if (landed && a[HMEMREG_STEP_RECV_DONE])
			g[4].push_back(us(std::max(*landed, *a[HMEMREG_STEP_RECV_POSTED]), *a[HMEMREG_STEP_RECV_DONE]));
		if (a[HMEMREG_STEP_RECV_DONE])
			g[5].push_back(us(*a[HMEMREG_STEP_RECV_POSTED], *a[HMEMREG_STEP_RECV_DONE]));
	}
	if (groups.empty()) {
		std::fprintf(stderr,
			     "hmemreg_bench timeline: no message in %s has both sides' marks (%zu file(s), %zu "
			     "message(s)): both ranks need HMEMREG_NCCL_TIMELINE, on one host\n",
			     dir.c_str(), files.size(), msgs.size());
		return 1;
	}
	Printer out(p.json);
	out.section("NCCL plugin timeline: median microseconds per message piece");
	for (const auto &[k, g] : groups) {
		Row r;
		r.add("route", k.first).add("bytes", k.second).add("messages", g.messages);
		for (size_t i = 0; i < kN; i++)
			r.add(kPieces[i], median(g.us[i]), 1);
		out.print(r);
	}
	return 0;
}

} // namespace

HMEMREG_BENCH("timeline", bench_timeline, "where NCCL plugin messages' time went (HMEMREG_NCCL_TIMELINE files)");

} // namespace hmemreg::bench
