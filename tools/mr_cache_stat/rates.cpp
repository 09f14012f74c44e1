// SPDX-License-Identifier: MIT
// Rates between samples, keyed by cache (never by name: every cache of the
// C API is called "default" unless told otherwise). A counter smaller than
// last time makes the rate unknown rather than a wrapped unsigned difference.
#include "sample.hpp"

namespace mr_cache_stat {

namespace {

bool per_second(uint64_t now, uint64_t before, double dt, double &out)
{
	if (now < before)
		return false;
	out = static_cast<double>(now - before) / dt;
	return true;
}

} // namespace

void RateBook::update(const Sample &s)
{
	std::map<CacheKey, Seen> seen;
	now_.clear();
	for (const auto &p : s.scan.live) {
		for (const auto &c : p.caches) {
			CacheKey k{p.pid, p.start_time, c.id};
			seen[k] = {s.monotonic, c.sum};
			auto it = prev_.find(k);
			if (it == prev_.end())
				continue;
			const double dt = s.monotonic - it->second.monotonic;
			const hmemreg_cache_stats &o = it->second.sum;
			Rates r;
			r.seconds = dt;
			r.known = dt > 0 && per_second(c.sum.hits, o.hits, dt, r.hits) &&
				  per_second(c.sum.misses, o.misses, dt, r.misses) &&
				  per_second(c.sum.registrations, o.registrations, dt, r.registrations) &&
				  per_second(c.sum.uncached_registrations, o.uncached_registrations, dt, r.uncached);
			now_[k] = r;
		}
	}
	prev_ = std::move(seen); // caches gone since are forgotten
}

Rates RateBook::of(const CacheKey &k) const
{
	auto it = now_.find(k);
	return it == now_.end() ? Rates{} : it->second;
}

} // namespace mr_cache_stat
