// SPDX-License-Identifier: MIT
// UffdMonitor: userfaultfd UNMAP/REMOVE/REMAP events for host memory.
//
// One per process (a VMA can be registered with one userfaultfd only), shared
// by every cache that uses it. Ranges are registered in write-protect mode
// without protecting anything, so no page fault is ever delivered to us:
// only the events. The kernel holds the thread that unmaps until our thread
// has read the event; the thread raises busy_ before reading, and gets wait
// (sync) until busy_ drops, i.e. until the invalidation was applied. So a
// munmap() that returned is always seen by the next get in any thread.
// The thread never allocates or unmaps memory while dispatching.
//
// What it cannot see, and how that is handled (hmemreg(3) lists it):
// - pages of shared or file-backed mappings can go through the file
//   (fallocate, ftruncate, madvise or a write through another mapping or
//   process): such ranges are not watched (subscribe says kUnwatchable, the
//   cache registers them uncached); only private anonymous memory is;
// - shmat(SHM_REMAP) and remap_file_pages() replace mappings without an
//   event: libhmemreg defines both (mapping_hooks.cpp) and reports the
//   range through replaced(); a raw system call bypasses that;
// - the mapping such a call left is not registered with the userfaultfd:
//   the ranges known registered (and private anonymous) are forgotten at
//   every unmap or remap event and at every interposed call, so the next
//   subscribe there registers and checks again.
#pragma once

#include <array>
#include <map>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "mrcache/monitor.hpp"
#include "unique_fd.hpp"

namespace hmemreg::mr {

class UffdMonitor final : public Monitor {
public:
	static int instance(std::shared_ptr<Monitor> &out);
	static const char *unavailable_reason();
	~UffdMonitor() override;

	hmemreg_monitor kind() const override { return HMEMREG_MONITOR_UFFD; }
	const char *name() const override { return "uffd"; }
	int attach(MonitorSink &c) override;
	void detach(MonitorSink &c) noexcept override;
	int subscribe(Entry &e) override;
	void sync(MonitorSink &c) override;

	UffdMonitor(UniqueFd uffd, UniqueFd stop);

	// The process's monitor if one runs (for the interposed calls).
	static std::shared_ptr<UffdMonitor> running();
	// Around a mapping change userfaultfd does not report: hold() before
	// the system call makes gets wait (as for an event being applied);
	// replaced() invalidates [start, end) in every cache; unhold() ends it.
	void hold() { busy_.fetch_add(1, std::memory_order_seq_cst); }
	void replaced(uintptr_t start, uintptr_t end);
	void unhold() { busy_.fetch_sub(1, std::memory_order_release); }

private:
	void run();
	void dispatch(uintptr_t start, uintptr_t end, int cause);

	static constexpr unsigned kMaxCaches = 64;
	UniqueFd uffd_, stop_;
	std::atomic<uint64_t> busy_{0};
	std::mutex cb_mu_; // guards caches_ against dispatch
	std::array<MonitorSink *, kMaxCaches> caches_{};
	// Ranges registered with the userfaultfd and found private anonymous
	// since the last unmap/remap event or interposed call: a miss there
	// (after an eviction) skips the ioctl and the probe. Only those can
	// change what is mapped there, and each bumps unmap_gen_ (the reader
	// thread never takes reg_mu_); the next subscribe forgets the set.
	std::mutex reg_mu_;
	std::map<uintptr_t, uintptr_t> registered_; // start -> end, disjoint
	// The same ranges as subscribed (start -> furthest end), unmerged: a
	// miss on a range registered before (the usual case after an
	// eviction) is one hash probe instead of a search of registered_.
	std::unordered_map<uintptr_t, uintptr_t> registered_exact_;
	uint64_t registered_gen_ = 0;
	std::atomic<uint64_t> unmap_gen_{0};
	std::thread thread_;
	pid_t owner_; // the process whose thread serves this monitor
};

} // namespace hmemreg::mr
