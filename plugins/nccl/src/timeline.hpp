// SPDX-License-Identifier: MIT
// HMEMREG_NCCL_TIMELINE=DIR: the time of each step of each request, written
// to DIR/timeline.PID.txt as comms close (and at unload), for
// `hmemreg_bench timeline` to join the two sides of every message: where its
// time went between NCCL's isend, NCCL's irecv, the advertisement, the
// write, the landing and test(). Both sides read CLOCK_MONOTONIC, so the
// join holds for ranks on one host (the GPU lane's two ranks on one GPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_timeline.h"

namespace hmemreg::nccl {

using Step = hmemreg_nccl_step; // the file's step numbers (nccl_timeline.h)

class Timeline {
public:
	explicit Timeline(const std::string &dir);
	~Timeline();
	Timeline(const Timeline &) = delete;
	Timeline &operator=(const Timeline &) = delete;

	// A message is (the sending engine's id, its send comm's id, seq): the
	// sender passes its own engine and comm, the receiver its peer's.
	void mark(Step s, uint64_t sender_engine, uint32_t send_comm, uint32_t seq, uint64_t bytes);
	// Appends what was marked to the file (a failure is logged once); also
	// every kFlushAt marks, so a long job's memory stays bounded.
	static constexpr size_t kFlushAt = 1u << 16;
	void flush();
	const std::string &path() const { return path_; }

private:
	struct Mark {
		uint64_t ns;
		uint64_t engine;
		uint32_t comm, seq;
		uint64_t bytes;
		Step step;
	};
	std::mutex mu_;      // marks_, failed_
	std::mutex file_mu_; // one writer at a time: a line never splits
	std::vector<Mark> marks_;
	std::string path_;
	bool failed_ = false;
};

} // namespace hmemreg::nccl
