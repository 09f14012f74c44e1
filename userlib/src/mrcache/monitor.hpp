// SPDX-License-Identifier: MIT
// Monitor: how a cache learns that memory behind its entries went away.
// Implementations: KmodMonitor (hmemreg.ko watches + generation words),
// UffdMonitor (userfaultfd events), NoneMonitor (the caller invalidates).
// Other memory kinds bring their own (the CUDA buffer-id monitor) through
// the memory kind table (monitor_factory.hpp), as do the module's exports
// (export_table.cpp). A monitor knows the cache
// only as a MonitorSink: calls go cache -> monitor, and back only through
// that interface.
#pragma once

#include <atomic>
#include <cstdint>

#include "hmemreg/cache.h"
#include "mrcache/entry.hpp"

namespace hmemreg::mr {

// What a monitor may ask of a cache it watches for (the cache implements
// it). Called from monitor context: a monitor's thread, or its sync().
class MonitorSink {
public:
	// Unlink the entries of iface (any device) overlapping [start, end);
	// their deregistration waits for the next cache call.
	virtual void notify(Iface iface, uintptr_t start, uintptr_t end, Cause cause) = 0;
	// Drop the one entry a watch was armed for (as subscribe() saw it:
	// e.iface, e.device, e.range.start, e.serial), if still cached.
	virtual void notify_entry(Iface iface, uint64_t device, uintptr_t start, uint64_t serial, Cause cause) = 0;
	// Drop every entry whose generation word moved (events were lost).
	virtual void revalidate(Cause cause) = 0;
	// Drop every entry of (iface, device) now (an hmemreg.ko export that
	// goes away); unused ones are deregistered before it returns. Returns
	// how many are still held (released at their last put).
	virtual uint64_t drop_device(Iface iface, uint64_t device, Cause cause) = 0;
	// Events received (the stats' monitor_events).
	virtual void count_events(uint64_t n) = 0;
	// The monitor stopped watching iface for good (its thread failed): drop
	// every entry of iface and count it (monitor_failures). Its subscribe()
	// refuses from then on, so nothing of iface is cached any more.
	virtual void monitor_stopped(Iface iface) = 0;

protected:
	~MonitorSink() = default;
};

inline constexpr int kUnwatchable = 1; // Monitor::subscribe(): see there
inline constexpr int kWatchedAlone = 2; // Monitor::subscribe(): see there

class Monitor {
public:
	virtual ~Monitor() = default;
	virtual hmemreg_monitor kind() const = 0;
	virtual const char *name() const = 0;

	// A cache starts/stops using this monitor. detach() returns only once
	// no callback into that cache is running or will run.
	virtual int attach(MonitorSink &) { return 0; }
	virtual void detach(MonitorSink &) noexcept {}

	// Watch e.range before e becomes visible (may set e.gen_word/e.gen and
	// e.validate). 0: watched; kWatchedAlone: watched, but only e.range was
	// armed where the monitor arms whole mappings (counted:
	// monitor_fallbacks); kUnwatchable: the memory is of a kind whose
	// changes this monitor cannot see (uffd: shared or file-backed
	// mappings); negative: this monitor cannot watch it (these two keep e
	// uncached). Called without cache locks.
	virtual int subscribe(Entry &e) = 0;
	// e is being released (no cache lock held): drop its watch if any.
	virtual void unsubscribe(Entry &) noexcept {}

	// Non-null: the cache calls sync() before a lookup while *pending_word()
	// is non-zero (uffd: an event is being applied; kmod: events queued).
	const std::atomic<uint64_t> *pending_word() const { return pending_; }
	virtual void sync(MonitorSink &) {}

	// Per-hit check for entries with e.validate set (device buffer ids).
	// Called after the entry was referenced, without cache locks.
	virtual bool valid(const Entry &) { return true; }

protected:
	const std::atomic<uint64_t> *pending_ = nullptr;
};

// The caller manages lifetimes: everything is watched, nothing fires.
class NoneMonitor final : public Monitor {
public:
	hmemreg_monitor kind() const override { return HMEMREG_MONITOR_NONE; }
	const char *name() const override { return "none"; }
	int subscribe(Entry &) override { return 0; }
};

// Nothing usable here: nothing can be watched, so nothing is cached.
class UnavailableMonitor final : public Monitor {
public:
	hmemreg_monitor kind() const override { return HMEMREG_MONITOR_UNAVAILABLE; }
	const char *name() const override { return "unavailable"; }
	int subscribe(Entry &) override { return -HMEMREG_ENOTSUP; }
};

} // namespace hmemreg::mr
