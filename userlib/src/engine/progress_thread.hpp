// SPDX-License-Identifier: MIT
// Progress threads: each owns a group of rails, pins itself near their NIC
// (first rail's locality) before its first turn, and polls. After
// `idle_spin` empty turns it sleeps `idle_sleep_us` between turns until work
// shows up or kick() is called (new work queued by a caller).
#pragma once

#include <atomic>
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

	ProgressThreads(unsigned nthreads, const std::vector<const fi_info *> &rail_infos, const Topology &topo,
			unsigned idle_spin, unsigned idle_sleep_us, Turn turn);
	~ProgressThreads();

	void kick() { kicked_.store(true, std::memory_order_release); }
	std::string describe() const;

private:
	void run(size_t t, const fi_info *near);

	Turn turn_;
	unsigned idle_spin_, idle_sleep_us_;
	std::vector<std::vector<unsigned>> groups_;
	std::vector<std::string> placement_;
	std::atomic<bool> stop_{false};
	std::atomic<bool> kicked_{false};
	std::atomic<unsigned> started_{0};
	const Topology &topo_;
	std::vector<std::thread> threads_;
};

} // namespace hmemreg::engine
