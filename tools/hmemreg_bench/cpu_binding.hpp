// SPDX-License-Identifier: MIT
// Where a benchmark's threads run (--cpus): thread t of a run on the t-th
// CPU of a list (round the list when there are more threads), the main
// thread as thread 0. Every implementation's thread t, in this process or
// in a child given the same list, then runs where the others' did, never
// migrates, and t threads take t distinct CPUs where the list has them.
// (It does not remove the H200 host's drift between processes: that host
// has one NUMA node, and bound runs drifted as much. Taking turns does.)
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hmemreg::bench {

class CpuBinding {
public:
	CpuBinding();
	~CpuBinding();
	CpuBinding(const CpuBinding &) = delete;
	CpuBinding &operator=(const CpuBinding &) = delete;

	// "auto": the CPUs this process may run on, in order; "none": no
	// binding; else a list such as 0-3,8 (each CPU one this process may
	// use). False with err saying what was wrong.
	bool set(const std::string &arg, std::string &err);
	// Binds the calling thread as thread t (nothing under "none"); false
	// with err if the kernel refused.
	bool bind(int t, std::string &err) const;
	// The resolved list ("0-3,8"), or "none": what a child should be given.
	std::string list() const;

private:
	struct Impl;
	std::unique_ptr<Impl> impl_;
	std::vector<unsigned> cpus_; // empty: none
};

} // namespace hmemreg::bench
