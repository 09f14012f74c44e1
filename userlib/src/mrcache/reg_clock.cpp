// SPDX-License-Identifier: MIT
#include <cstdio>
#include <cstring>

#include "mrcache/reg_clock.hpp"

namespace hmemreg::mr::reg_clock {

namespace {

#if defined(__x86_64__)
// The kernel's clock source is the TSC: it found it invariant and in step
// across CPUs (else it would have picked another), and vDSO time reads it.
bool kernel_uses_tsc()
{
	FILE *f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (!f)
		return false;
	char b[32] = {};
	bool tsc = std::fgets(b, sizeof(b), f) && std::strcmp(b, "tsc\n") == 0;
	std::fclose(f);
	return tsc;
}
#endif

Calibration detect()
{
	Calibration c;
#if defined(__x86_64__)
	if (!kernel_uses_tsc())
		return c;
	// Counter against CLOCK_MONOTONIC over at least 200 us. At each end
	// the counter is read between two clock reads no more than 1 us apart
	// (a preemption or a VM's stolen time there would skew the factor by
	// as much): the tightest of up to 64 tries; none that tight, no counter.
	struct Reading {
		uint64_t ns = 0, tick = 0, width = ~0ULL;
	};
	auto read_both = [] {
		Reading best;
		for (int i = 0; i < 64 && best.width > 1000; i++) {
			const uint64_t a = monotonic_ns(), t = raw_counter(), b = monotonic_ns();
			if (b - a < best.width)
				best = {a + (b - a) / 2, t, b - a};
		}
		return best;
	};
	const Reading r0 = read_both();
	while (monotonic_ns() - r0.ns < 200000) {
	}
	const Reading r1 = read_both();
	if (r0.width > 1000 || r1.width > 1000 || r1.tick <= r0.tick)
		return c;
	const uint64_t ns = r1.ns - r0.ns, d = r1.tick - r0.tick;
	if (ns == 0)
		return c;
	c.mult = static_cast<uint64_t>((static_cast<unsigned __int128>(ns) << 32) / d);
	c.counter = c.mult != 0;
#elif defined(__aarch64__)
	uint64_t f;
	asm volatile("mrs %0, cntfrq_el0" : "=r"(f));
	if (f) {
		c.mult = static_cast<uint64_t>((static_cast<unsigned __int128>(1000000000ULL) << 32) / f);
		c.counter = true;
	}
#endif
	return c;
}

} // namespace

const Calibration &calibration()
{
	static const Calibration c = detect();
	return c;
}

} // namespace hmemreg::mr::reg_clock
