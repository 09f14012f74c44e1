// SPDX-License-Identifier: MIT
// KmodMonitor: hmemreg.ko watches (mmu_interval_notifier in the kernel).
//
// One /dev/hmemreg fd per cache. Each cached entry arms a watch and keeps a
// pointer to its generation word in the fd's read-only generation page: a
// hit is valid while that word equals the generation the arm returned (the
// kernel zeroes it before the munmap that fired it returns), so validity
// never depends on reading events in time. Events are drained when the
// page's events_pending is non-zero (checked before each lookup) only to
// release dead entries promptly. A ring overflow makes the cache recheck
// every entry's generation word (the module keeps them exact).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>

#include "mrcache/monitor.hpp"
#include "unique_fd.hpp"

namespace hmemreg::mr {

// Why hmemreg.ko dropped a watch (an event's reason, HMEMREG_EV_*), as a
// cache invalidation cause (also the export table's events).
Cause event_cause(uint32_t reason);

class KmodMonitor final : public Monitor {
public:
	// 0, -HMEMREG_ENODEV/-HMEMREG_EACCES (no usable /dev/hmemreg),
	// -HMEMREG_ENOTSUP (module without watches), -HMEMREG_ESYS.
	static int open(std::shared_ptr<Monitor> &out);
	~KmodMonitor() override;

	hmemreg_monitor kind() const override { return HMEMREG_MONITOR_KMOD; }
	const char *name() const override { return "kmod"; }
	int attach(MonitorSink &c) override;
	void detach(MonitorSink &c) noexcept override;
	int subscribe(Entry &e) override;
	void unsubscribe(Entry &e) noexcept override;
	void sync(MonitorSink &c) override;

	uint32_t max_watches() const { return max_watches_; }
	KmodMonitor() = default;

private:
	UniqueFd fd_;
	void *map_ = nullptr;
	size_t map_size_ = 0;
	const std::atomic<uint64_t> *gen_ = nullptr;
	uint32_t max_watches_ = 0;
	std::mutex drain_mu_;
	std::atomic<MonitorSink *> cache_{nullptr};
};

} // namespace hmemreg::mr
