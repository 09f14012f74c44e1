// SPDX-License-Identifier: MIT
// Default extent and the in-memory registrar.
#include <unistd.h>

#include "mrcache/registrar.hpp"

namespace hmemreg::mr {

static uintptr_t page_size()
{
	static const uintptr_t ps = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
	return ps;
}

Range Registrar::extent(const Request &req) const
{
	uintptr_t ps = page_size();
	uintptr_t s = reinterpret_cast<uintptr_t>(req.addr);
	uintptr_t e = s + req.len;
	Range r{s & ~(ps - 1), (e + ps - 1) & ~(ps - 1)};
	if (r.end < e) // the last page reaches the top of the address space
		r.end = e;
	return r;
}

int MemoryRegistrar::reg(const Request &, Range range, Registration &out)
{
	uint32_t left = fail_left_.load();
	while (left && !fail_left_.compare_exchange_weak(left, left - 1)) {
	}
	if (left)
		return fail_code_.load();
	out.key = next_key_.fetch_add(1);
	out.handle = nullptr;
	out.desc = nullptr;
	out.cookie = range.start;
	if (track_) {
		std::lock_guard g(mu_);
		ranges_.emplace(range.start, range.end);
	}
	regs_.fetch_add(1);
	live_.fetch_add(1);
	return 0;
}

void MemoryRegistrar::dereg(Registration &r) noexcept
{
	if (track_) {
		std::lock_guard g(mu_);
		for (auto it = ranges_.lower_bound({r.cookie, 0}); it != ranges_.end() && it->first == r.cookie; ++it) {
			ranges_.erase(it);
			break;
		}
	}
	deregs_.fetch_add(1);
	live_.fetch_sub(1);
}

bool MemoryRegistrar::is_live_range(uintptr_t start, uintptr_t end) const
{
	std::lock_guard g(mu_);
	return ranges_.count({start, end}) > 0;
}

} // namespace hmemreg::mr
