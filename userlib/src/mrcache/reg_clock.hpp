// SPDX-License-Identifier: MIT
// The clock that times registrations for the stats (registration_ns and
// its histogram): two vDSO clock_gettime() calls were 5-12% of a miss
// with a cheap registration. Where the kernel's own clock source is the
// CPU's counter (x86 "tsc": invariant and synchronised across CPUs, the
// kernel checked; arm64: the generic timer, always) the counter is read
// directly, one instruction, and converted to ns with a factor: arm64's
// counter states its frequency; the TSC's is measured once per process
// against CLOCK_MONOTONIC (200 us, at the first cache's creation, each end
// bracketed by clock reads at most 1 us apart: error below 1%; a process
// that cannot get such brackets uses clock_gettime). Anywhere else,
// clock_gettime(CLOCK_MONOTONIC). Every registration is still timed: the
// totals stay exact sums, not samples.
#pragma once

#include <cstdint>
#include <ctime>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace hmemreg::mr::reg_clock {

struct Calibration {
	bool counter = false; // read the CPU's counter (else clock_gettime)
	uint64_t mult = 0;    // ns = ticks * mult >> 32
};
// Decided once (thread-safe); call before the first ticks() (Cache's
// constructor does).
const Calibration &calibration();

inline uint64_t monotonic_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t raw_counter()
{
#if defined(__x86_64__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	asm volatile("isb; mrs %0, cntvct_el0" : "=r"(v)::"memory");
	return v;
#else
	return 0;
#endif
}

// A point in time, in the clock's own unit.
inline uint64_t ticks(const Calibration &c)
{
	return c.counter ? raw_counter() : monotonic_ns();
}

inline uint64_t to_ns(const Calibration &c, uint64_t d)
{
	return c.counter ? static_cast<uint64_t>((static_cast<unsigned __int128>(d) * c.mult) >> 32) : d;
}

} // namespace hmemreg::mr::reg_clock
