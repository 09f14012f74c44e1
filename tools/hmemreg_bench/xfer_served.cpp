// SPDX-License-Identifier: MIT
#include "xfer_served.hpp"

#include <cstring>

#include <unistd.h>

namespace hmemreg::bench {

TargetEngine Served::make(const EngineConfig &cfg, std::span<const Targets::Span> regions)
{
	const unsigned slot = static_cast<unsigned>(engines_.size());
	if (slot >= (counters_ ? ncounters_ : kMaxEngines))
		throw Error(HMEMREG_ENOMEM, "xfer: more than " +
						    std::to_string(counters_ ? ncounters_ : kMaxEngines) +
						    " target engines");
	// What this side allocates: bounded, whoever asks (a remote client
	// may be anything that reached the port).
	size_t alloc = 0;
	for (const auto &[p, n] : regions)
		if (!p && (n == 0 || n > max_owned() - owned_ - alloc))
			throw Error(HMEMREG_ENOMEM, "xfer: a target buffer of " + std::to_string(n) +
							    " bytes (" + std::to_string(owned_ + alloc) +
							    " held, at most " + std::to_string(max_owned()) +
							    ": half this host's memory)");
		else if (!p)
			alloc += n;
	if (!counters_ && own_.size() <= slot)
		own_.emplace_back(0); // kept by a failed make(), for the next one
	std::atomic<size_t> *c = counters_ ? &counters_[slot] : &own_[slot];
	c->store(0);
	auto e = std::make_unique<Engine>(cfg);
	e->on_notify([c](const Notification &) { c->fetch_add(1, std::memory_order_relaxed); });
	TargetEngine t{slot, e->address(), {}, [c] { return c->load(); }};
	// Kept only once all are registered: a failure midway drops this
	// engine's regions (before it) and leaves the others as they were.
	std::vector<std::unique_ptr<void, FreeDeleter>> mem;
	std::vector<Targets::Span> spans;
	std::vector<RegionRef> regs;
	for (auto [p, n] : regions) {
		if (!p) {
			if (posix_memalign(&p, 4096, n))
				throw Error(HMEMREG_ENOMEM, "xfer: cannot allocate a target buffer of " +
								    std::to_string(n) + " bytes");
			mem.emplace_back(p);
			std::memset(p, 0, n);
		}
		spans.push_back({p, n});
		regs.push_back(e->register_region(p, n));
		t.descriptors.push_back(e->descriptor(*regs.back()));
		t.staged = t.staged || regs.back()->staged();
	}
	regions_.reserve(regions_.size() + regs.size());
	engines_.reserve(engines_.size() + 1);
	spans_.reserve(spans_.size() + 1);
	mem_.reserve(mem_.size() + mem.size());
	regions_.insert(regions_.end(), regs.begin(), regs.end());
	for (auto &m : mem)
		mem_.push_back(std::move(m));
	spans_.push_back(std::move(spans));
	engines_.push_back(std::move(e));
	owned_ += alloc;
	return t;
}

size_t Served::max_owned()
{
	const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	return pages > 0 && page > 0 ? static_cast<size_t>(pages) / 2 * static_cast<size_t>(page) : size_t{1} << 30;
}

} // namespace hmemreg::bench
