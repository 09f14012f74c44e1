// SPDX-License-Identifier: MIT
// hmemreg_bench reg --mem cuda: what registering CUDA memory costs cold, and
// what the cache makes of it, in the same run (host memory: bench_reg.cpp).
//
//   hmemreg_bench reg --mem cuda [--provider NAME] [--sizes LIST] [--iters N] [--json]
//
// Cases per size (ns_per_op, and ratio = cold / this):
//   cold_register  fi_mr_regattr + fi_close on the provider's domain (host
//                  memory; CUDA memory only where the provider has FI_HMEM)
//   dmabuf_export  CUDA only: cuMemGetHandleForAddressRange(DMA_BUF_FD) of
//                  the whole allocation + close (the 20-40 us the cache hides)
//   buffer_id      CUDA only: the per-hit validity check (one driver call)
//   cached_hit     hmemreg cache get + put of a registered buffer (CUDA: the
//                  hit includes the buffer-ID check)
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench.hpp"
#include "bench_reg.hpp"
#include "domain.hpp"
#include "hmem/cuda_driver.hpp"
#include "hmem/cuda_memory.hpp"
#include "hmemreg/hmemreg.h"

namespace hmemreg::bench {

namespace {

using Options = RegOptions;

// fi_mr_regattr of one range of memory kind `iface` on d's domain.
int reg_range(const Domain &d, void *p, size_t n, fi_hmem_iface iface, int device, fid_mr **mr)
{
	iovec iov{p, n};
	fi_mr_attr attr{};
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = FI_REMOTE_WRITE | FI_REMOTE_READ | FI_WRITE | FI_READ | FI_SEND | FI_RECV;
	attr.iface = iface;
	attr.device.cuda = device;
	return fi_mr_regattr(d.domain, &attr, 0, mr);
}

void emit(Printer &out, const Options &o, const char *prov, size_t bytes, const char *c, double ns, double cold,
	  const char *note = "")
{
	Row r;
	r.add("bench", "reg").add("provider", prov).add("mem", o.mem.c_str()).add("bytes", bytes).add("case", c);
	r.add("ns_per_op", ns, 1).add("x_vs_cold", cold > 0 && ns > 0 ? cold / ns : 0.0, 1).add("note", note);
	out.print(r);
}

// get+put of one buffer through a cache: the hit path.
double cached_hit(hmemreg_cache *cache, const hmemreg_mr_request &rq, long iters)
{
	hmemreg_mr m{};
	if (hmemreg_mr_get_req(cache, &rq, &m)) // warm: the one miss
		return -1;
	hmemreg_mr_put(cache, &m);
	return ns_per(iters, [&] {
		if (hmemreg_mr_get_req(cache, &rq, &m))
			return false;
		return hmemreg_mr_put(cache, &m) == 0;
	});
}

int run_cuda(const Options &o, Printer &out)
{
	const cuda::Driver &d = cuda::Driver::get();
	if (!d.loaded) {
		std::fprintf(stderr, "reg --mem cuda: %s\n", d.why_not.c_str());
		return 77;
	}
	if (cuda::use_device(0))
		return 1;
	Domain fab;
	bool have_fab = fab.open(o.providers.front(), FI_EP_RDM) == 0;
	bool hmem = have_fab && (fab.info->caps & FI_HMEM);
	const char *prov = have_fab ? fab.info->fabric_attr->prov_name : o.providers.front().c_str();
	// The cache over the in-memory registrar when the provider cannot reach
	// CUDA memory: what is measured is the cache and its buffer-ID check.
	hmemreg_cache *cache = nullptr;
	hmemreg_cache_config cfg;
	hmemreg_cache_config_init(&cfg);
	cfg.monitor = HMEMREG_MONITOR_NONE;
	int rc = hmem ? hmemreg_cache_create_fabric(fab.domain, &cfg, &cache) : hmemreg_cache_create_memory(&cfg, &cache);
	if (rc) {
		std::fprintf(stderr, "reg: cache: %s\n", hmemreg_strerror(rc));
		return 1;
	}
	for (size_t n : o.sizes) {
		CUdeviceptr p;
		if (d.cuMemAlloc(&p, n) != CUDA_SUCCESS) {
			std::fprintf(stderr, "reg: cuMemAlloc(%zu) failed\n", n);
			return 1;
		}
		void *ptr = reinterpret_cast<void *>(static_cast<uintptr_t>(p));
		cuda::PointerInfo info;
		cuda::classify(ptr, n, info);
		long it = o.iters ? o.iters : 200;
		double exp = ns_per(it, [&] {
			UniqueFd fd;
			return cuda::export_dmabuf(info, fd) == 0;
		});
		double cold = exp;
		if (hmem) {
			double r = ns_per(it, [&] {
				fid_mr *mr = nullptr;
				if (reg_range(fab, ptr, n, FI_HMEM_CUDA, 0, &mr))
					return false;
				return fi_close(&mr->fid) == 0;
			});
			emit(out, o, prov, n, "cold_register", r, r);
			cold = r;
		}
		emit(out, o, prov, n, "dmabuf_export", exp, cold, hmem ? "" : "provider has no FI_HMEM: export is the cold cost");
		double bid = ns_per(o.iters ? o.iters : 1000000, [&] { return cuda::buffer_id(ptr) != 0; });
		emit(out, o, prov, n, "buffer_id", bid, cold);
		hmemreg_mr_request rq{};
		rq.size = sizeof(rq);
		rq.iface = HMEMREG_IFACE_CUDA;
		rq.addr = ptr;
		rq.len = n;
		rq.dmabuf_fd = -1;
		emit(out, o, prov, n, "cached_hit", cached_hit(cache, rq, o.iters ? o.iters : 1000000), cold,
		     hmem ? "" : "memory registrar (cache + buffer-ID check)");
		hmemreg_cache_invalidate(cache, HMEMREG_IFACE_CUDA, ptr, n);
		d.cuMemFree(p);
	}
	hmemreg_cache_destroy(cache);
	return 0;
}

} // namespace

int reg_cuda_main(const RegOptions &args, Printer &out)
{
	RegOptions o = args;
	if (o.sizes.empty())
		o.sizes = {2 << 20, 64 << 20, 1 << 30};
	out.section("registration: cold vs cached (cuda)");
	return run_cuda(o, out);
}


} // namespace hmemreg::bench
