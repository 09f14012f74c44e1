// SPDX-License-Identifier: MIT
// MemoryKind: what the cache needs to know about a kind of memory other
// than host memory (CUDA device memory; the module's dma-buf exports): how
// its entries are watched, and how far one registration reaches. The
// cache core names no kind: it asks memory_kind(iface) (monitor_factory),
// as libfabric's cache picks a monitor per iface. A new kind is a class
// deriving from this and one line in the factory's table.
#pragma once

#include <memory>

#include "mrcache/monitor.hpp"
#include "mrcache/types.hpp"

namespace hmemreg::mr {

class MemoryKind {
public:
	virtual ~MemoryKind() = default;
	virtual Iface iface() const = 0;
	virtual const char *name() const = 0;

	// The monitor for one new cache's entries of this kind (attached to
	// that cache, detached when it goes; it may call back through the
	// MonitorSink, and keep a pending word the cache then syncs on its
	// slow path), or null when the kind is not usable in this process
	// (no driver): its entries are then registered uncached.
	virtual std::shared_ptr<Monitor> monitor() const = 0;

	// The range one registration of req covers, if this kind decides it
	// (CUDA: the whole allocation). false: the registrar's extent (the
	// pages the request touches).
	virtual bool extent(const Request &, Range &) const { return false; }
};

} // namespace hmemreg::mr
