// SPDX-License-Identifier: MIT
// hmemreg_bench reg: what the cache saves per provider. For each provider
// and size: "cold" = fi_mr_regattr + fi_close straight on the domain (the
// provider's own cache is off: libhmemreg disables its monitors at load),
// "miss" = a cache get that registers (after an explicit invalidate, so it
// includes watching and deregistering), "hit" = a cached get+put (the
// median of several batches: bench_reg.hpp).
// speedup = cold / hit, from the same run. With --mem cuda: CUDA memory
// (bench_reg_cuda.cpp).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "bench.hpp"
#include "bench_reg.hpp"
#include "cli.hpp"
#include "domain.hpp"
#include "hmemreg/hmemreg.h"

namespace hmemreg::bench {

namespace {

int bench_reg(int argc, char **argv)
{
	RegOptions o;
	cli::Parser p("reg", "cold registration vs cache miss vs cache hit, per provider and memory kind");
	p.text("--mem", o.mem, "host, cuda or export (hmemreg.ko devmem, FI_MR_DMABUF)")
		->check(CLI::IsMember({"host", "cuda", "export"}));
	p.texts("--provider", o.providers, "libfabric providers (host: each in turn; cuda: the first)");
	p.sizes("--sizes", o.sizes, "buffer sizes (default host 4k,64k,1m,16m; cuda 2m,64m,1g)");
	p.count("--iters", o.iters,
		"operations per case (default 200 cold/miss; hits: 100x that a batch, the median of 5 batches)")
		->default_str("200");
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	if (o.providers.empty()) {
		std::fprintf(stderr, "hmemreg_bench reg: --provider: no provider named\n");
		return 2;
	}
	Printer pr(p.json);
	if (o.mem == "cuda")
		return reg_cuda_main(o, pr);
	if (o.mem == "export")
		return reg_export_main(o, pr);
	std::vector<uint64_t> sizes = o.sizes;
	if (sizes.empty())
		sizes = {4 << 10, 64 << 10, 1 << 20, 16 << 20};
	const long iters = o.iters ? o.iters : 200;
	const auto &provs = o.providers;

	pr.section("reg: cold registration vs cache miss vs cache hit (ns per op), host memory");
	int bad = 0;
	for (const auto &prov : provs) {
		CachedDomain cd;
		if (cd.open("hmemreg_bench reg", prov, "bench-reg")) {
			bad++;
			continue;
		}
		const Domain &f = cd.dom;
		hmemreg_cache *c = cd.cache;
		for (uint64_t sz : sizes) {
			void *p = ::mmap(nullptr, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED) {
				std::fprintf(stderr, "hmemreg_bench reg: cannot map %llu bytes: %s\n",
					     static_cast<unsigned long long>(sz), std::strerror(errno));
				bad++;
				continue;
			}
			std::memset(p, 1, sz); // fault in: registration cost, not page faults
			long n = sz >= (16 << 20) ? std::max(10L, iters / 10) : iters;
			const ColdMissHit v = measure_cold_miss_hit(
				c, HMEMREG_IFACE_HOST, p, sz, n, iters * 100,
				[&] {
					fid_mr *mr;
					if (fi_mr_reg(f.domain, p, sz,
						      FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV, 0, 0,
						      0, &mr, nullptr))
						return false;
					return fi_close(&mr->fid) == 0;
				},
				[&](hmemreg_mr &m) { return hmemreg_mr_get(c, p, sz, &m); });
			if (!print_cold_miss_hit(pr, prov, "host", sz, v))
				bad++;
			::munmap(p, sz);
		}
	}
	return bad ? 1 : 0;
}

} // namespace

HMEMREG_BENCH("reg", bench_reg, "cold registration vs cached, per provider (--provider tcp,verbs)");

} // namespace hmemreg::bench
