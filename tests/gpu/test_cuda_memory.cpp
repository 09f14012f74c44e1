// SPDX-License-Identifier: MIT
// CUDA memory kinds, allocation ranges, buffer IDs and DMA-BUF export on a
// real GPU. Runs in the gpu lane only (tests/gpu.d).
#include "gpu_test.hpp"

#include <cstdlib>
#include <fstream>
#include <string>

#include "hmem/cuda_driver.hpp"
#include "hmem/cuda_memory.hpp"
#include "hmemreg/common.h"

using namespace hmemreg;
using namespace hmemreg::cuda;

static const Driver &drv()
{
	const Driver &d = Driver::get();
	GPU_ASSERT(d.loaded, "CUDA driver not usable: %s", d.why_not.c_str());
	GPU_ASSERT((use_device(0)) == (0));
	return d;
}

static CUdeviceptr dev_alloc(size_t n)
{
	CUdeviceptr p = 0;
	GPU_ASSERT((drv().cuMemAlloc(&p, n)) == (CUDA_SUCCESS));
	return p;
}

static void *ptr(CUdeviceptr p)
{
	return reinterpret_cast<void *>(static_cast<uintptr_t>(p));
}

GPU_TEST(cuda_kind, device_allocation_base_size_and_id)
{
	const size_t n = 8 << 20;
	CUdeviceptr p = dev_alloc(n);
	PointerInfo info;
	std::string why;

	GPU_ASSERT((classify(ptr(p + 4096), 4096, info, &why)) == (0), "%s", why.c_str());
	GPU_ASSERT((info.kind) == (MemKind::device));
	GPU_ASSERT((info.device) == (0));
	GPU_ASSERT((info.base) == (p), "base %#llx != %#llx", (unsigned long long)info.base, (unsigned long long)p);
	GPU_ASSERT((info.size) >= (n));
	GPU_ASSERT((info.buffer_id) != (0));
	GPU_ASSERT((buffer_id(ptr(p + 100))) == (info.buffer_id));
	drv().cuMemFree(p);
}

GPU_TEST(cuda_kind, free_then_alloc_changes_buffer_id)
{
	const size_t n = 4 << 20;
	CUdeviceptr p = dev_alloc(n);
	uint64_t id1 = buffer_id(ptr(p));
	GPU_ASSERT((id1) != (0));
	drv().cuMemFree(p);
	GPU_ASSERT((buffer_id(ptr(p))) == (0), "a freed pointer must not report a buffer ID");
	PointerInfo info;
	GPU_ASSERT((classify(ptr(p), 16, info)) != (0), "a freed device pointer must not classify");
	CUdeviceptr q = dev_alloc(n);
	uint64_t id2 = buffer_id(ptr(q));
	GPU_ASSERT((id2) != (0));
	GPU_ASSERT(id1 != id2, "same ID after free + alloc (address %s): stale registrations undetectable",
		   p == q ? "reused" : "not reused");
	drv().cuMemFree(q);
}

GPU_TEST(cuda_kind, range_crossing_allocation_end_is_refused)
{
	const size_t n = 2 << 20;
	CUdeviceptr p = dev_alloc(n);
	PointerInfo info;
	std::string why;
	PointerInfo whole;
	GPU_ASSERT((classify(ptr(p), 1, whole)) == (0));
	GPU_ASSERT((classify(ptr(p + whole.size - 16), 32, info, &why)) == (-HMEMREG_EINVAL));
	GPU_ASSERT(why.find("crosses") != std::string::npos, "%s", why.c_str());
	drv().cuMemFree(p);
}

GPU_TEST(cuda_kind, host_pinned_and_managed)
{
	void *h = nullptr;
	PointerInfo info;
	std::string why;
	GPU_ASSERT((drv().cuMemAllocHost(&h, 1 << 20)) == (CUDA_SUCCESS));
	GPU_ASSERT((classify(h, 1 << 20, info)) == (0));
	GPU_ASSERT((info.kind) == (MemKind::host_pinned));
	drv().cuMemFreeHost(h);

	void *m = std::malloc(1 << 20);
	GPU_ASSERT((classify(m, 1 << 20, info)) == (0));
	GPU_ASSERT((info.kind) == (MemKind::host));
	std::free(m);

	CUdeviceptr mp = 0;
	GPU_ASSERT((drv().cuMemAllocManaged(&mp, 1 << 20, CU_MEM_ATTACH_GLOBAL)) == (CUDA_SUCCESS));
	GPU_ASSERT((classify(ptr(mp), 4096, info, &why)) == (-HMEMREG_EINVAL));
	GPU_ASSERT(why.find("managed") != std::string::npos, "%s", why.c_str());
	drv().cuMemFree(mp);
}

GPU_TEST(cuda_kind, bad_input)
{
	PointerInfo info;
	GPU_ASSERT((classify(nullptr, 16, info)) == (-HMEMREG_EINVAL));
	int x;
	GPU_ASSERT((classify(&x, 0, info)) == (-HMEMREG_EINVAL));
	GPU_ASSERT((classify(reinterpret_cast<void *>(~0ull - 8), 64, info)) == (-HMEMREG_EINVAL));
}

static std::string exporter_name(int fd)
{
	std::ifstream f("/proc/self/fdinfo/" + std::to_string(fd));
	std::string line;
	while (std::getline(f, line))
		if (line.rfind("exp_name:", 0) == 0)
			return line.substr(line.find_first_not_of(" \t", 9));
	return "";
}

GPU_TEST(cuda_dmabuf, export_cumemalloc)
{
	const size_t n = 2 << 20;
	CUdeviceptr p = dev_alloc(n);
	PointerInfo info;
	GPU_ASSERT((classify(ptr(p), n, info)) == (0));
	UniqueFd fd;
	std::string why;
	GPU_ASSERT((export_dmabuf(info, fd, &why)) == (0), "%s", why.c_str());
	GPU_ASSERT((fd.get()) >= (0));
	GPU_LOG("exporter: %s", exporter_name(fd.get()).c_str());
	GPU_ASSERT((exporter_name(fd.get())) != (""), "fd is not a dma-buf");
	fd.reset();
	drv().cuMemFree(p);
}

GPU_TEST(cuda_dmabuf, export_vmm_rdma_capable)
{
	const Driver &d = drv();
	CUmemAllocationProp prop{};
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	size_t gran = 0;
	GPU_ASSERT(d.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) ==
		   CUDA_SUCCESS);
	const size_t n = 4 * gran;
	CUmemGenericAllocationHandle h;
	GPU_ASSERT((d.cuMemCreate(&h, n, &prop, 0)) == (CUDA_SUCCESS));
	CUdeviceptr va = 0;
	GPU_ASSERT((d.cuMemAddressReserve(&va, n, gran, 0, 0)) == (CUDA_SUCCESS));
	GPU_ASSERT((d.cuMemMap(va, n, 0, h, 0)) == (CUDA_SUCCESS));
	CUmemAccessDesc acc{};
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	GPU_ASSERT((d.cuMemSetAccess(va, n, &acc, 1)) == (CUDA_SUCCESS));

	PointerInfo info;
	std::string why;
	GPU_ASSERT((classify(ptr(va + gran), 4096, info, &why)) == (0), "%s", why.c_str());
	GPU_ASSERT((info.kind) == (MemKind::device));
	GPU_LOG("VMM: base %#llx size %llu (mapped %#llx + %zu), rdma %d, id %llu",
		    (unsigned long long)info.base, (unsigned long long)info.size, (unsigned long long)va, n,
		    info.rdma_capable, (unsigned long long)info.buffer_id);
	GPU_ASSERT((info.base) == (va));
	GPU_ASSERT((info.size) == (n));
	GPU_ASSERT(info.rdma_capable);
	UniqueFd fd;
	GPU_ASSERT((export_dmabuf(info, fd, &why)) == (0), "%s", why.c_str());
	fd.reset();

	GPU_ASSERT((d.cuMemUnmap(va, n)) == (CUDA_SUCCESS));
	GPU_ASSERT((d.cuMemRelease(h)) == (CUDA_SUCCESS));
	GPU_ASSERT((d.cuMemAddressFree(va, n)) == (CUDA_SUCCESS));
}

GPU_TEST_MAIN()
