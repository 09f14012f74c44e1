// SPDX-License-Identifier: MIT
// hmemreg_bench reg: its options, shared by host memory (bench_reg.cpp),
// CUDA memory (bench_reg_cuda.cpp) and hmemreg.ko exports
// (bench_reg_export.cpp), and the cold/miss/hit cases of host and exports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "bench.hpp"
#include "domain.hpp"
#include "hmemreg/hmemreg.h"

namespace hmemreg::bench {

struct RegOptions {
	std::string mem = "host";
	std::vector<std::string> providers{"tcp"};
	std::vector<uint64_t> sizes; // empty: the memory kind's default
	long iters = 0;		     // 0: per case default
};

// One size's three cases, ns per op: "cold" = the provider registers and
// deregisters straight on its domain, "miss" = a cache get that registers
// (after an invalidate) + put, "hit" = a cached get + put. -1: a call failed.
struct ColdMissHit {
	double cold = -1, miss = -1, hit = -1;
};

// Hit batches timed (the median is the figure) after one untimed batch.
constexpr int kHitBatches = 5;

// Measures them: cold() registers and closes on the domain, get(m) takes a
// cache registration of the range [addr, +len) of memory kind iface in the
// cache c. Warms the cache first (its first use starts the monitor: not
// part of a miss). n iterations of cold and of miss (one timed batch each:
// an operation of tens of microseconds or more, so a preemption moves the
// mean little). A hit costs tens of nanoseconds natively: one batch of
// `hits` is a millisecond or so, which one preemption of a busy host, or
// under emulation the first translation of the hit path's code (the first
// size measured paid it), visibly inflates. So the hit is timed over
// kHitBatches batches of `hits` each, after an untimed one, and the median
// batch is reported (not the best: the ratio to a mean cold must not be
// flattered by the luckiest batch). Each batch reads the clock twice only.
template <typename Cold, typename Get>
ColdMissHit measure_cold_miss_hit(hmemreg_cache *c, uint32_t iface, void *addr, uint64_t len, long n, long hits,
				  Cold cold, Get get)
{
	hmemreg_mr warm;
	if (get(warm) == 0)
		hmemreg_mr_put(c, &warm);
	ColdMissHit v;
	v.cold = ns_per(n, cold);
	v.miss = ns_per(n, [&] {
		hmemreg_cache_invalidate(c, iface, addr, len);
		hmemreg_mr m;
		return get(m) == 0 && hmemreg_mr_put(c, &m) == 0;
	});
	auto hit = [&] {
		hmemreg_mr m;
		return get(m) == 0 && hmemreg_mr_put(c, &m) == 0;
	};
	if (ns_per(hits, hit) < 0)
		return v;
	double batch[kHitBatches];
	for (double &b : batch)
		if ((b = ns_per(hits, hit)) < 0)
			return v;
	std::sort(std::begin(batch), std::end(batch));
	v.hit = batch[kHitBatches / 2];
	return v;
}

// Prints their rows (cold_over_this: the ratio to cold, same run); returns
// whether all three were measured.
inline bool print_cold_miss_hit(Printer &out, const std::string &prov, const char *mem, uint64_t bytes,
				const ColdMissHit &v)
{
	const char *cases[] = {"cold", "miss", "hit"};
	const double ns[] = {v.cold, v.miss, v.hit};
	for (int k = 0; k < 3; k++) {
		Row r;
		r.add("bench", "reg").add("impl", k == 0 ? "provider" : "hmemreg").add("provider", prov);
		r.add("mem", mem).add("bytes", static_cast<long long>(bytes)).add("case", cases[k]);
		r.add("ns_per_op", ns[k]).add("cold_over_this", ns[k] > 0 ? v.cold / ns[k] : -1.0);
		out.print(r);
	}
	return v.cold >= 0 && v.miss >= 0 && v.hit >= 0;
}

// bench_reg_cuda.cpp
int reg_cuda_main(const RegOptions &o, Printer &out);
// bench_reg_export.cpp: hmemreg.ko devmem exports (FI_MR_DMABUF)
int reg_export_main(const RegOptions &o, Printer &out);

} // namespace hmemreg::bench
