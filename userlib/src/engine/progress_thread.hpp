// SPDX-License-Identifier: MIT
// Progress threads: each owns a group of rails, pins itself near their NIC
// (first rail's locality) before its first turn, and polls. After
// `idle_spin` empty turns it sleeps between turns, `idle_sleep_us` first and
// twice as long each time after (up to 16x), until work shows up or kick()
// is called (new work queued by a caller). While a caller
// drives progress itself (caller_turn() since a thread last looked, at most
// `caller_backoff_us` ago; for the thread of rail 0 alone, up to 8x that once
// the caller stayed), the threads sleep between turns instead of polling.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <rdma/fabric.h>

#include "engine/topology.hpp"

namespace hmemreg::engine {

class ProgressThreads {
public:
	using Turn = std::function<size_t(std::span<const unsigned>)>;
	// Whether a caller's turns cover these rails well enough (else a thread
	// polls them even while a caller does: bulk transfers on many rails).
	using Covered = std::function<bool(std::span<const unsigned>)>;

	ProgressThreads(unsigned nthreads, const std::vector<const fi_info *> &rail_infos, const Topology &topo,
			unsigned idle_spin, unsigned idle_sleep_us, unsigned caller_backoff_us, Turn turn,
			Covered covered = {});
	~ProgressThreads();

	// New work queued on the rails of `rails` (bit r: rail r; rails past 63
	// share bit 63): their threads look now. Only theirs: a kick that woke
	// any thread had the threads of idle rails spinning on every small send.
	// A flag already set is not written again (its line stays shared).
	void kick(uint64_t rails)
	{
		for (size_t t = 0; t < kicked_.size(); t++)
			if ((rails & thread_rails_[t]) && !kicked_[t].v.load(std::memory_order_relaxed))
				kicked_[t].v.store(true, std::memory_order_release);
	}
	static constexpr uint64_t kAllRails = ~uint64_t{0};
	static uint64_t rail_bit(unsigned r) { return uint64_t{1} << std::min(r, 63u); }
	// A caller just made a progress turn of its own. A count, not a time: a
	// caller spinning on test() makes a turn every microsecond or so, and a
	// clock read is a good part of an idle turn's cost. Not a locked add:
	// the threads only look for a change, and two callers that lose one
	// of their counts still change it.
	void caller_turn()
	{
		caller_turns_.v.store(caller_turns_.v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
	}
	bool backs_off() const { return caller_backoff_ns_ != 0; }
	static int64_t now_ns()
	{
		return std::chrono::duration_cast<std::chrono::nanoseconds>(
			       std::chrono::steady_clock::now().time_since_epoch())
			.count();
	}
	std::string describe() const;

private:
	void run(size_t t, const fi_info *near);
	static constexpr unsigned kMaxNapDoublings = 4;

	Turn turn_;
	Covered covered_;
	unsigned idle_spin_, idle_sleep_us_;
	std::vector<std::vector<unsigned>> groups_;
	std::vector<std::string> placement_;
	std::atomic<bool> stop_{false};
	std::atomic<unsigned> started_{0};
	const int64_t caller_backoff_ns_;
	// Each on a line of its own: the caller writes them at every send and
	// turn, each thread polls its own.
	template <typename T>
	struct alignas(64) Line {
		std::atomic<T> v{};
	};
	std::vector<Line<bool>> kicked_;      // per thread
	std::vector<uint64_t> thread_rails_;  // per thread: its rails' bits
	Line<uint64_t> caller_turns_;
	const Topology &topo_;
	std::vector<std::thread> threads_;
};

} // namespace hmemreg::engine
