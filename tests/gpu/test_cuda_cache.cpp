// SPDX-License-Identifier: MIT
// The registration cache on CUDA memory: whole-allocation entries, hits,
// and no stale hit after cuMemFree + cuMemAlloc at the same address.
#include "gpu_test.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "hmem/cuda_driver.hpp"
#include "hmem/cuda_memory.hpp"
#include "hmemreg/hmemreg.h"

using namespace hmemreg::cuda;

static const Driver &drv()
{
	const Driver &d = Driver::get();
	GPU_ASSERT(d.loaded, "%s", d.why_not.c_str());
	GPU_ASSERT(use_device(0) == 0);
	return d;
}

static hmemreg_cache *memory_cache()
{
	hmemreg_cache_config cfg;
	GPU_ASSERT(hmemreg_cache_config_init(&cfg) == 0);
	cfg.monitor = HMEMREG_MONITOR_NONE; // host memory is not used here
	hmemreg_cache *c = nullptr;
	GPU_ASSERT(hmemreg_cache_create_memory(&cfg, &c) == 0);
	return c;
}

static int get_cuda(hmemreg_cache *c, CUdeviceptr p, size_t len, hmemreg_mr &mr)
{
	hmemreg_mr_request rq{};
	rq.size = sizeof(rq);
	rq.iface = HMEMREG_IFACE_CUDA;
	rq.addr = reinterpret_cast<const void *>(static_cast<uintptr_t>(p));
	rq.len = len;
	rq.device = 0;
	rq.dmabuf_fd = -1;
	return hmemreg_mr_get_req(c, &rq, &mr);
}

GPU_TEST(cuda_cache, whole_allocation_then_hits)
{
	const Driver &d = drv();
	const size_t n = 16 << 20;
	CUdeviceptr p;
	GPU_ASSERT(d.cuMemAlloc(&p, n) == CUDA_SUCCESS);
	hmemreg_cache *c = memory_cache();
	hmemreg_mr a{}, b{};
	GPU_ASSERT(get_cuda(c, p + 4096, 8192, a) == 0);
	GPU_ASSERT(a.start == p && a.end >= p + n, "entry [%#llx, %#llx) is not the allocation",
		   (unsigned long long)a.start, (unsigned long long)a.end);
	GPU_ASSERT(a.flags & HMEMREG_MR_CACHED, "CUDA entries must be cached when the driver is here");
	GPU_ASSERT(get_cuda(c, p + n - 100, 100, b) == 0);
	GPU_ASSERT(b.key == a.key, "a second buffer in the same allocation must hit");
	hmemreg_cache_stats st;
	GPU_ASSERT(hmemreg_cache_get_stats(c, &st) == 0);
	GPU_ASSERT(st.hits == 1 && st.misses == 1, "hits %llu misses %llu", (unsigned long long)st.hits,
		   (unsigned long long)st.misses);
	GPU_ASSERT(hmemreg_mr_put(c, &a) == 0 && hmemreg_mr_put(c, &b) == 0);
	GPU_ASSERT(hmemreg_cache_destroy(c) == 0);
	d.cuMemFree(p);
}

GPU_TEST(cuda_cache, free_and_realloc_same_address_misses)
{
	const Driver &d = drv();
	const size_t n = 32 << 20;
	hmemreg_cache *c = memory_cache();
	int same = 0;
	for (int round = 0; round < 8; round++) {
		CUdeviceptr p;
		GPU_ASSERT(d.cuMemAlloc(&p, n) == CUDA_SUCCESS);
		hmemreg_mr m{};
		GPU_ASSERT(get_cuda(c, p, n, m) == 0);
		uint64_t key = m.key;
		GPU_ASSERT(hmemreg_mr_put(c, &m) == 0);
		d.cuMemFree(p);
		CUdeviceptr q;
		GPU_ASSERT(d.cuMemAlloc(&q, n) == CUDA_SUCCESS);
		GPU_ASSERT(get_cuda(c, q, n, m) == 0);
		if (q == p) {
			same++;
			GPU_ASSERT(m.key != key, "stale registration returned for a new allocation at %#llx",
				   (unsigned long long)q);
		}
		GPU_ASSERT(hmemreg_mr_put(c, &m) == 0);
		d.cuMemFree(q);
	}
	hmemreg_cache_stats st;
	GPU_ASSERT(hmemreg_cache_get_stats(c, &st) == 0);
	GPU_LOG("address reused in %d of 8 rounds; stale entries dropped: %llu", same,
		(unsigned long long)st.invalidations[HMEMREG_INVAL_STALE]);
	GPU_ASSERT(same > 0, "the driver never reused an address: the test proved nothing");
	GPU_ASSERT(st.invalidations[HMEMREG_INVAL_STALE] >= static_cast<uint64_t>(same));
	GPU_ASSERT(st.hits == 0, "no get may hit across a free");
	GPU_ASSERT(hmemreg_cache_destroy(c) == 0);
}

GPU_TEST(cuda_cache, tcp_provider_refuses_cuda_memory_clearly)
{
	const Driver &d = drv();
	fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_MSG;
	hints->fabric_attr->prov_name = strdup("tcp");
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	fi_info *info = nullptr;
	GPU_ASSERT(fi_getinfo(hmemreg_fabric_api_version(), nullptr, nullptr, 0, hints, &info) == 0);
	fid_fabric *fab;
	fid_domain *dom;
	GPU_ASSERT(fi_fabric(info->fabric_attr, &fab, nullptr) == 0);
	GPU_ASSERT(fi_domain(fab, info, &dom, nullptr) == 0);
	GPU_LOG("libfabric %u.%u, provider %s, FI_HMEM in caps: %s", FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
		info->fabric_attr->prov_name, (info->caps & FI_HMEM) ? "yes" : "no");
	hmemreg_cache *c = nullptr;
	GPU_ASSERT(hmemreg_cache_create_fabric_info(dom, info, nullptr, &c) == 0);
	CUdeviceptr p;
	GPU_ASSERT(d.cuMemAlloc(&p, 4 << 20) == CUDA_SUCCESS);
	hmemreg_mr m{};
	int rc = get_cuda(c, p, 4 << 20, m);
	GPU_LOG("fi_mr_regattr of CUDA memory through the cache: %d (%s)", rc, hmemreg_strerror(rc));
	// Without FI_HMEM the cache refuses device memory itself (2.x tcp would
	// take the pointer for host memory and "succeed").
	if (info->caps & FI_HMEM)
		GPU_ASSERT(rc == 0);
	else
		GPU_ASSERT(rc == -HMEMREG_ENOTSUP, "got %d", rc);
	if (rc == 0)
		hmemreg_mr_put(c, &m);
	GPU_ASSERT(hmemreg_cache_destroy(c) == 0);
	d.cuMemFree(p);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	fi_freeinfo(hints);
	fi_freeinfo(info);
}

// libhmemreg is loaded here: it must not stop shm from opening an FI_HMEM
// domain (a process-wide FI_MR_CACHE_MAX_COUNT=0 made shm's CUDA IPC cache
// refuse to start: fi_domain -28). Then CUDA memory registers directly
// through the cache, by DMA-BUF where the API version allows it.
GPU_TEST(cuda_cache, shm_hmem_domain_opens_with_libhmemreg_loaded)
{
	const Driver &d = drv();
	fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_MSG | FI_HMEM;
	hints->fabric_attr->prov_name = strdup("shm");
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM;
	fi_info *info = nullptr;
	const uint32_t v = hmemreg_fabric_api_version();
	int rc = fi_getinfo(v, nullptr, nullptr, 0, hints, &info);
	fi_freeinfo(hints);
	GPU_LOG("libfabric %u.%u (API %u.%u): shm with FI_HMEM: %s", FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
		FI_MAJOR(v), FI_MINOR(v), rc ? fi_strerror(-rc) : "offered");
	if (rc) {
		GPU_ASSERT(!std::getenv("HMEMREG_GPU_DIRECT"), "HMEMREG_GPU_DIRECT is set but shm offers no FI_HMEM");
		GPU_LOG("SKIP: this libfabric's shm has no FI_HMEM (libfabric 1.17 has no CUDA)");
		return;
	}
	GPU_ASSERT(std::getenv("FI_MR_CACHE_MONITOR") && std::string(std::getenv("FI_MR_CACHE_MONITOR")) == "disabled");
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	GPU_ASSERT(fi_fabric(info->fabric_attr, &fab, nullptr) == 0);
	rc = fi_domain(fab, info, &dom, nullptr);
	GPU_ASSERT(rc == 0, "fi_domain(shm, FI_HMEM) with libhmemreg loaded: %d (%s)", rc, fi_strerror(-rc));
	hmemreg_cache *c = nullptr;
	GPU_ASSERT(hmemreg_cache_create_fabric_info(dom, info, nullptr, &c) == 0);
	CUdeviceptr p;
	GPU_ASSERT(d.cuMemAlloc(&p, 4 << 20) == CUDA_SUCCESS);
	hmemreg_mr a{}, b{};
	rc = get_cuda(c, p, 4 << 20, a);
	GPU_LOG("CUDA memory through the cache on shm: %d (%s)", rc, hmemreg_strerror(rc));
	const char *direct = std::getenv("HMEMREG_GPU_DIRECT");
	if (rc != 0 && !(direct && std::strstr(direct, "shm"))) {
		// FI_HMEM without CUDA in this libfabric (1.17): refused clearly.
		GPU_ASSERT(rc == -HMEMREG_ENOTSUP, "got %d", rc);
		GPU_ASSERT(hmemreg_cache_destroy(c) == 0);
		d.cuMemFree(p);
		GPU_ASSERT(fi_close(&dom->fid) == 0);
		fi_close(&fab->fid);
		fi_freeinfo(info);
		return;
	}
	GPU_ASSERT(rc == 0);
	GPU_ASSERT(a.mr && a.desc, "a direct registration has a descriptor (FI_MR_HMEM)");
	GPU_ASSERT(get_cuda(c, p + 4096, 4096, b) == 0 && b.key == a.key, "a second get must hit");
	hmemreg_mr_put(c, &b);
	hmemreg_mr_put(c, &a);
	// cuMemFree + cuMemAlloc: the buffer-ID check drops the entry on the next get.
	GPU_ASSERT(d.cuMemFree(p) == CUDA_SUCCESS);
	CUdeviceptr q;
	GPU_ASSERT(d.cuMemAlloc(&q, 4 << 20) == CUDA_SUCCESS);
	hmemreg_cache_stats st0, st1;
	GPU_ASSERT(hmemreg_cache_get_stats(c, &st0) == 0);
	GPU_ASSERT(get_cuda(c, q, 4 << 20, a) == 0);
	GPU_ASSERT(hmemreg_cache_get_stats(c, &st1) == 0);
	GPU_LOG("realloc at %s address: hits %llu -> %llu", q == p ? "the same" : "another",
		(unsigned long long)st0.hits, (unsigned long long)st1.hits);
	GPU_ASSERT(st1.hits == st0.hits, "no hit across a free");
	hmemreg_mr_put(c, &a);
	GPU_ASSERT(hmemreg_cache_destroy(c) == 0);
	d.cuMemFree(q);
	GPU_ASSERT(fi_close(&dom->fid) == 0);
	fi_close(&fab->fid);
	fi_freeinfo(info);
}

GPU_TEST_MAIN()
