// SPDX-License-Identifier: MIT
// hmemreg_bench reg --mem cuda: what registering CUDA memory costs cold, and
// what the cache makes of it, in the same run (host memory: bench_reg.cpp).
//
//   hmemreg_bench reg --mem cuda [--provider NAME] [--sizes LIST] [--iters N] [--json]
//
// Cases per size (ns_per_op, and ratio = cold / this):
//   cold_register  fi_mr_regattr + fi_close on the provider's domain by
//                  address with FI_HMEM_CUDA (where the provider has FI_HMEM)
//   cold_dmabuf    export + fi_mr_regattr(FI_MR_DMABUF) + fi_close + close:
//                  what a miss costs on the direct path (API >= 1.20)
//   dmabuf_export  CUDA only: cuMemGetHandleForAddressRange(DMA_BUF_FD) of
//                  the whole allocation + close (the 20-40 us the cache hides)
// x_vs_cold is against the cold cost of the path a miss takes here
// (cold_dmabuf, else cold_register, else the export alone).
//   buffer_id      CUDA only: the per-hit validity check (one driver call)
//   cached_hit     hmemreg cache get + put of a registered buffer (CUDA: the
//                  hit includes the buffer-ID check)
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "bench_reg.hpp"
#include "domain.hpp"
#include "cuda_driver.hpp"
#include "hmemreg/fabric_compat.h"
#include "hmemreg/hmemreg.h"

namespace hmemreg::bench {

namespace {

using Options = RegOptions;

// The CUDA allocation holding p: [base, base + size).
struct Allocation {
	CUdeviceptr base = 0;
	size_t size = 0;
};

Allocation allocation_of(void *p)
{
	Allocation a;
	cuda::Driver::get().cuMemGetAddressRange(&a.base, &a.size, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)));
	return a;
}

// The allocation as a DMA-BUF (what the cache's FI_MR_DMABUF miss pays);
// -1 when the driver refuses. The caller closes it.
int export_dmabuf(const Allocation &a)
{
	int fd = -1;
	if (cuda::Driver::get().cuMemGetHandleForAddressRange(&fd, a.base, a.size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
							      0) != CUDA_SUCCESS)
		return -1;
	return fd;
}

// The allocation's buffer ID: what the cache checks on every CUDA hit.
uint64_t buffer_id(void *p)
{
	unsigned long long id = 0;
	cuda::Driver::get().cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
						  static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)));
	return id;
}

// fi_mr_regattr of one range of memory kind `iface` on d's domain, by
// address, or through the DMA-BUF fd (>= 0) that starts at `base`.
int reg_range(const Domain &d, void *p, size_t n, fi_hmem_iface iface, int device, fid_mr **mr, int fd = -1,
	      uintptr_t base = 0)
{
	iovec iov{p, n};
	hmemreg_fi_mr_attr storage{};
	fi_mr_attr &attr = storage.attr;
	hmemreg_fi_mr_dmabuf_t dmabuf{};
	uint64_t flags = 0;
	if (fd >= 0) {
		dmabuf.fd = fd;
		dmabuf.offset = reinterpret_cast<uintptr_t>(p) - base;
		dmabuf.len = n;
		dmabuf.base_addr = reinterpret_cast<void *>(base);
		hmemreg_fi_mr_attr_set_dmabuf(&storage, &dmabuf);
		flags = HMEMREG_FI_MR_DMABUF;
	} else {
		attr.mr_iov = &iov;
	}
	attr.iov_count = 1;
	attr.access = FI_REMOTE_WRITE | FI_REMOTE_READ | FI_WRITE | FI_READ | FI_SEND | FI_RECV;
	attr.iface = iface;
	attr.device.cuda = device;
	if (iface != FI_HMEM_SYSTEM)
		flags |= FI_HMEM_DEVICE_ONLY; // as the cache registers device allocations
	return fi_mr_regattr(d.domain, &attr, flags, mr);
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
	// FI_HMEM where the provider has it, else the domain without.
	std::optional<Domain> opened;
	opened.emplace();
	bool have_fab = opened->open(o.providers.front(), FI_EP_RDM, true) == 0;
	if (!have_fab) {
		opened.emplace();
		have_fab = opened->open(o.providers.front(), FI_EP_RDM) == 0;
	}
	Domain &fab = *opened;
	bool hmem = have_fab && (fab.info->caps & FI_HMEM);
	// FI_HMEM without CUDA in this libfabric (1.17's shm): measured like a
	// provider without FI_HMEM.
	if (hmem) {
		CUdeviceptr probe;
		fid_mr *mr = nullptr;
		if (d.cuMemAlloc(&probe, 2 << 20) != CUDA_SUCCESS)
			return 1;
		void *pp = reinterpret_cast<void *>(static_cast<uintptr_t>(probe));
		hmem = reg_range(fab, pp, 2 << 20, FI_HMEM_CUDA, 0, &mr) == 0;
		if (mr)
			fi_close(&mr->fid);
		d.cuMemFree(probe);
		if (!hmem)
			std::fprintf(stderr, "reg: provider %s offers FI_HMEM but does not register CUDA memory\n",
				     fab.info->fabric_attr->prov_name);
	}
	bool dmabuf = hmem && fab.info->fabric_attr->api_version >= HMEMREG_FI_API_DMABUF;
	const char *prov = have_fab ? fab.info->fabric_attr->prov_name : o.providers.front().c_str();
	// The cache over the in-memory registrar when the provider cannot reach
	// CUDA memory: what is measured is the cache and its buffer-ID check.
	hmemreg_cache *cache = nullptr;
	hmemreg_cache_config cfg;
	hmemreg_cache_config_init(&cfg);
	cfg.monitor = HMEMREG_MONITOR_NONE;
	int rc = hmem ? hmemreg_cache_create_fabric_info(fab.domain, fab.info, &cfg, &cache)
		      : hmemreg_cache_create_memory(&cfg, &cache);
	if (rc) {
		std::fprintf(stderr, "hmemreg_bench reg --mem cuda: provider %s: registration cache: %s (%d)\n", prov,
			     hmemreg_strerror(rc), rc);
		return 1;
	}
	for (size_t n : o.sizes) {
		CUdeviceptr p;
		if (d.cuMemAlloc(&p, n) != CUDA_SUCCESS) {
			std::fprintf(stderr, "reg: cuMemAlloc(%zu) failed\n", n);
			return 1;
		}
		void *ptr = reinterpret_cast<void *>(static_cast<uintptr_t>(p));
		const Allocation info = allocation_of(ptr);
		long it = o.iters ? o.iters : 200;
		double exp = ns_per(it, [&] {
			const int fd = export_dmabuf(info);
			return fd >= 0 && close(fd) == 0;
		});
		double cold = exp;
		if (hmem) {
			double r = ns_per(it, [&] {
				fid_mr *mr = nullptr;
				if (reg_range(fab, ptr, n, FI_HMEM_CUDA, 0, &mr))
					return false;
				return fi_close(&mr->fid) == 0;
			});
			emit(out, o, prov, n, "cold_register", r, r, "by address, FI_HMEM_CUDA");
			cold = r;
		}
		if (dmabuf) {
			bool refused = false;
			double r = ns_per(it, [&] {
				fid_mr *mr = nullptr;
				const int fd = export_dmabuf(info);
				if (fd < 0)
					return false;
				int rc = reg_range(fab, ptr, n, FI_HMEM_CUDA, 0, &mr, fd, info.base);
				if (rc == -FI_EOPNOTSUPP || rc == -FI_ENOSYS)
					refused = true;
				const bool ok = rc == 0 && fi_close(&mr->fid) == 0;
				close(fd);
				return ok;
			});
			if (refused)
				emit(out, o, prov, n, "cold_dmabuf", -1, cold, "provider refused FI_MR_DMABUF");
			else {
				emit(out, o, prov, n, "cold_dmabuf", r, r, "export + fi_mr_regattr(FI_MR_DMABUF)");
				cold = r;
			}
		}
		emit(out, o, prov, n, "dmabuf_export", exp, cold, hmem ? "" : "provider has no FI_HMEM: export is the cold cost");
		double bid = ns_per(o.iters ? o.iters : 1000000, [&] { return buffer_id(ptr) != 0; });
		emit(out, o, prov, n, "buffer_id", bid, cold);
		hmemreg_mr_request rq{};
		rq.size = sizeof(rq);
		rq.iface = HMEMREG_IFACE_CUDA;
		rq.addr = ptr;
		rq.len = n;
		rq.dmabuf_fd = -1;
		emit(out, o, prov, n, "cached_hit", cached_hit(cache, rq, o.iters ? o.iters : 1000000), cold,
		     !hmem ? "memory registrar (cache + buffer-ID check)"
		     : dmabuf ? "libfabric registrar, misses through FI_MR_DMABUF"
			      : "libfabric registrar, misses by address");
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
