// SPDX-License-Identifier: MIT
// hmemreg_bench reg: its options, shared by host memory (bench_reg.cpp),
// CUDA memory (bench_reg_cuda.cpp) and hmemreg.ko exports
// (bench_reg_export.cpp), and the cold/miss/hit cases of host and exports.
#pragma once

#include <cstdint>
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

// Measures them: cold() registers and closes on the domain, get(m) takes a
// cache registration of the range [addr, +len) of memory kind iface in the
// cache c. Warms the cache first (its first use starts the monitor: not
// part of a miss). n iterations of cold and of miss, `hits` of hit.
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
	v.hit = ns_per(hits, [&] {
		hmemreg_mr m;
		return get(m) == 0 && hmemreg_mr_put(c, &m) == 0;
	});
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
