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
	// Counter against CLOCK_MONOTONIC over at least 100 us, the counter
	// read between two clock reads at each end.
	uint64_t a0 = monotonic_ns(), t0 = raw_counter(), a1 = monotonic_ns();
	uint64_t b0, t1, b1;
	do {
		b0 = monotonic_ns();
		t1 = raw_counter();
		b1 = monotonic_ns();
	} while (b0 - a1 < 100000);
	const uint64_t ns = (b0 + b1) / 2 - (a0 + a1) / 2, d = t1 - t0;
	if (d == 0 || ns == 0)
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
