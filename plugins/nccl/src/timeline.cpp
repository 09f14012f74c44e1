// SPDX-License-Identifier: MIT
#include "timeline.hpp"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "log.hpp"

namespace hmemreg::nccl {

Timeline::Timeline(const std::string &dir) : path_(dir + "/timeline." + std::to_string(getpid()) + ".txt")
{
	// Made here if missing (both ranks may race: an existing one is fine),
	// so a bad folder is reported at init, not at the first flush.
	std::error_code ec;
	std::filesystem::create_directories(dir, ec);
	if (ec) {
		failed_ = true;
		NWARN("HMEMREG_NCCL_TIMELINE: cannot make folder %s: %s (no timeline)", dir.c_str(),
		      ec.message().c_str());
		return;
	}
	marks_.reserve(kFlushAt);
}

Timeline::~Timeline()
{
	flush();
}

void Timeline::mark(Step s, uint64_t sender_engine, uint32_t send_comm, uint32_t seq, uint64_t bytes)
{
	timespec t{};
	clock_gettime(CLOCK_MONOTONIC, &t);
	const uint64_t ns = uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
	bool full;
	{
		std::lock_guard l(mu_);
		marks_.push_back({ns, sender_engine, send_comm, seq, bytes, s});
		full = marks_.size() >= kFlushAt;
	}
	if (full)
		flush();
}

void Timeline::flush()
{
	std::vector<Mark> out;
	{
		std::lock_guard l(mu_);
		out.swap(marks_);
		if (failed_ || out.empty())
			return;
	}
	std::lock_guard w(file_mu_);
	FILE *f = std::fopen(path_.c_str(), "a");
	if (!f) {
		std::lock_guard l(mu_);
		failed_ = true;
		NWARN("HMEMREG_NCCL_TIMELINE: cannot write %s: %s", path_.c_str(), std::strerror(errno));
		return;
	}
	// ns step sender-engine send-comm seq bytes
	for (const Mark &m : out)
		std::fprintf(f, "%llu %u %llx %u %u %llu\n", static_cast<unsigned long long>(m.ns),
			     static_cast<unsigned>(m.step), static_cast<unsigned long long>(m.engine), m.comm, m.seq,
			     static_cast<unsigned long long>(m.bytes));
	std::fclose(f);
}

} // namespace hmemreg::nccl
