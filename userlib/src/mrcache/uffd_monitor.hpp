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
//   the mappings known registered (and private anonymous) are forgotten at
//   every unmap or remap event and at every interposed call, so the next
//   subscribe there registers and checks again.
//
// Whole mappings: the first miss inside a private anonymous mapping
// registers the whole mapping (the bounds the probe learns), not the
// entry's range; later misses anywhere in it need neither ioctl nor probe,
// one look at a small table (no lock). Registering a part would split the
// VMA: past about vm.max_map_count/2 cached ranges the ioctl failed, gets
// became uncached and the cache had eaten the application's mapping
// budget. The price: the kernel reports every munmap, mremap and
// madvise(DONTNEED/REMOVE/FREE) anywhere in such a mapping, also of pages
// no entry covers; each blocks the unmapping thread until this thread has
// read the event (gets then wait until it is applied: an index search per
// cache, nothing unlinked when no entry overlaps); the whole mapping is
// armed (no mTHP at fault, no khugepaged collapse, the application's own
// UFFDIO_REGISTER there gets EBUSY); and an unmap or remap makes the next
// miss register and probe again. Such a mapping may hold memory of others
// (anonymous neighbours merge into one VMA: an allocator's, a sanitizer's,
// a thread's stack), so this thread must never unmap or discard memory
// itself while the userfaultfd is open: it closes it before it ends.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

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
	// In a fork child (the one thread there): close the inherited copy of
	// the userfaultfd (see close_inherited_uffd in the .cpp).
	void close_in_fork_child() noexcept { uffd_.reset(); }
	// The thread stopped on an error (fail()): nothing is watched any more,
	// subscribe() refuses, and instance() opens a new monitor.
	bool dead() const { return dead_.load(std::memory_order_acquire); }

private:
	void run();
	void dispatch(uintptr_t start, uintptr_t end, int cause);
	void fail(const char *call, int err) noexcept;

	static constexpr unsigned kMaxCaches = 64;
	UniqueFd uffd_, stop_;
	std::atomic<uint64_t> busy_{0};
	std::atomic<bool> dead_{false};
	std::mutex cb_mu_; // guards caches_ against dispatch
	std::array<MonitorSink *, kMaxCaches> caches_{};
	// Mappings registered whole with the userfaultfd and found private
	// anonymous since the last unmap/remap event or interposed call (each
	// bumps unmap_gen_; the reader thread never takes reg_mu_). Read
	// without a lock, as a seqlock (wide_ver_ odd while reg_mu_'s holder
	// writes); at most kWide, replaced in turn when full. A gen other than
	// wide_gen_ means all of them may be gone: the next registering
	// subscribe forgets them.
	bool known_registered(uintptr_t s, uintptr_t e) const;
	void remember_locked(uintptr_t s, uintptr_t e, uint64_t gen);
	static constexpr unsigned kWide = 64;
	std::mutex reg_mu_;
	std::atomic<uint64_t> wide_ver_{0};
	std::atomic<uint64_t> wide_gen_{0};
	std::atomic<unsigned> wide_n_{0};
	unsigned wide_next_ = 0; // the slot the next mapping replaces when full
	std::array<std::atomic<uintptr_t>, kWide> wide_start_{}, wide_end_{};
	std::atomic<uint64_t> unmap_gen_{0};
	std::thread thread_;
	pid_t owner_; // the process whose thread serves this monitor
};

} // namespace hmemreg::mr
