// SPDX-License-Identifier: MIT
// Where a NIC sits (hwloc, from the PCI address libfabric reports in
// fi_info->nic): progress threads are pinned to the CPUs of the NIC's
// package/NUMA node and control buffers are allocated on its memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <rdma/fabric.h>

namespace hmemreg::engine {

class Topology {
public:
	Topology();
	~Topology();
	Topology(const Topology &) = delete;
	Topology &operator=(const Topology &) = delete;

	// True when the NIC's PCI locality is known (loopback, shm: false).
	bool has_locality(const fi_info *info) const;
	// Pins the calling thread near the NIC; returns a description of what was
	// done ("cpus 0-15 near 0000:17:00.0" or why nothing was).
	std::string pin_thread_near(const fi_info *info) const;

	// Memory near the NIC where locality is known, else ordinary pages. Zeroed.
	struct Free {
		const Topology *topo;
		size_t len;
		void operator()(uint8_t *p) const;
	};
	using Buffer = std::unique_ptr<uint8_t[], Free>;
	Buffer alloc_near(const fi_info *info, size_t len) const;

private:
	struct Impl;
	std::unique_ptr<Impl> impl_;
};

} // namespace hmemreg::engine
