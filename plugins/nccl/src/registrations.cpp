// SPDX-License-Identifier: MIT
#include "registrations.hpp"

#include <algorithm>

#include <unistd.h>

namespace hmemreg::nccl {

void Registrations::prune_locked()
{
	std::erase_if(entries_, [](const Entry &e) { return e.region.expired(); });
}

RegionRef Registrations::get(void *addr, size_t len)
{
	static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
	const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
	const uintptr_t start = a & ~(page - 1);
	const uintptr_t end = (a + len + page - 1) & ~(page - 1);
	{
		std::lock_guard l(mu_);
		for (auto &e : entries_) {
			if (e.start <= a && a + len <= e.end) {
				if (auto r = e.region.lock()) {
					hits_++;
					return r;
				}
			}
		}
	}
	// Register outside the lock (slow); a racing twin only costs a duplicate.
	RegionRef r = engine_.register_region(reinterpret_cast<void *>(start), end - start);
	misses_++;
	std::lock_guard l(mu_);
	prune_locked();
	entries_.push_back({start, end, r});
	return r;
}

uint64_t Registrations::live()
{
	std::lock_guard l(mu_);
	prune_locked();
	return entries_.size();
}

} // namespace hmemreg::nccl
