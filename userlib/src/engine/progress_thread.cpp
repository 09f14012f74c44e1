// SPDX-License-Identifier: MIT
#include "engine/progress_thread.hpp"

#include <algorithm>
#include <chrono>

namespace hmemreg::engine {

ProgressThreads::ProgressThreads(unsigned nthreads, const std::vector<const fi_info *> &rail_infos,
				 const Topology &topo, unsigned idle_spin, unsigned idle_sleep_us,
				 unsigned caller_backoff_us, Turn turn, Covered covered)
	: turn_(std::move(turn)), covered_(std::move(covered)), idle_spin_(idle_spin), idle_sleep_us_(idle_sleep_us),
	  caller_backoff_ns_(int64_t(caller_backoff_us) * 1000), topo_(topo)
{
	size_t n = std::min<size_t>(nthreads, rail_infos.size());
	groups_.resize(n);
	placement_.resize(n);
	kicked_ = std::vector<Line<bool>>(n);
	thread_rails_.assign(n, 0);
	for (unsigned r = 0; r < rail_infos.size(); r++) {
		groups_[r % n].push_back(r);
		thread_rails_[r % n] |= rail_bit(r);
	}
	for (size_t t = 0; t < n; t++)
		threads_.emplace_back([this, t, near = rail_infos[groups_[t].front()]] { run(t, near); });
	// describe() reports the placement each thread chose.
	while (started_.load(std::memory_order_acquire) < n)
		std::this_thread::yield();
}

ProgressThreads::~ProgressThreads()
{
	stop_.store(true, std::memory_order_release);
	for (auto &t : threads_)
		t.join();
}

void ProgressThreads::run(size_t t, const fi_info *near)
{
	placement_[t] = topo_.pin_thread_near(near);
	started_.fetch_add(1, std::memory_order_acq_rel);
	unsigned idle = 0;
	unsigned naps = 0;	  // sleeps since this thread last found work
	unsigned backoffs = 0;	  // back-offs since the caller was last found away
	uint64_t caller_seen = 0; // caller_turns_ when this thread last looked
	// Rail 0 alone is polled by every caller turn and is never bulk-only:
	// its thread backs off longer while the caller stays (up to 8x), so it
	// wakes about 125 times a second, not 1000, each a context switch. A
	// thread with other rails looks every caller_backoff_us: bulk traffic
	// there needs it polling soon.
	const unsigned max_backoff_doublings = groups_[t].size() == 1 && groups_[t][0] == 0 ? 3 : 0;
	while (!stop_.load(std::memory_order_acquire)) {
		const uint64_t caller = caller_backoff_ns_ ? caller_turns_.v.load(std::memory_order_relaxed) : 0;
		const bool caller_active = caller != caller_seen;
		caller_seen = caller;
		if (caller_active && (!covered_ || covered_(groups_[t]))) {
			// A caller polls every rail itself: stay out of its way (and
			// off the CPU: waking every idle_sleep_us costs a core's worth
			// of context switches with a few threads).
			std::this_thread::sleep_for(
				std::chrono::nanoseconds(caller_backoff_ns_ << std::min(backoffs, max_backoff_doublings)));
			backoffs++;
			continue;
		}
		backoffs = 0;
		if (turn_(groups_[t]) > 0 ||
		    (kicked_[t].v.load(std::memory_order_relaxed) && kicked_[t].v.exchange(false, std::memory_order_acq_rel))) {
			idle = naps = 0;
			continue;
		}
		if (++idle < idle_spin_) {
			// Give the core away now and then: where threads outnumber cores,
			// the peer's progress (or a copy) may be what we wait for. Not on
			// every empty turn: the target of RMA writes sees no completions
			// while it receives, and a yield on a busy machine costs a slice.
			if (idle % 64 == 0)
				std::this_thread::yield();
			continue;
		}
		// Each sleep of a quiet spell twice the last, up to kMaxNapDoublings
		// doublings (50 us -> 800 us): a thread of a rail that stays quiet
		// (its peer idle, or the caller doing the work) wakes a thousand or
		// so times a second instead of twenty thousand, each a context
		// switch; work or a kick starts the next spell at idle_sleep_us again.
		std::this_thread::sleep_for(
			std::chrono::microseconds(int64_t(idle_sleep_us_) << std::min(naps, kMaxNapDoublings)));
		naps++;
	}
}

std::string ProgressThreads::describe() const
{
	std::string s = std::to_string(threads_.size()) + " progress thread(s)";
	for (size_t t = 0; t < threads_.size(); t++) {
		s += "; thread " + std::to_string(t) + " rails";
		for (unsigned r : groups_[t])
			s += " " + std::to_string(r);
		s += ": " + placement_[t];
	}
	return s;
}

} // namespace hmemreg::engine
